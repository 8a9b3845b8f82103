/* fuzz/fuzz_options.c - libFuzzer target for the option strings: --options
 * JSON files, TILEGRAPH_ENGINE_OPTIONS / POPLAR_ENGINE_OPTIONS and
 * --engine-option KEY=VALUE.
 *
 * The first byte picks the reader; the rest is its text. Any input must be
 * taken or refused with a message, never crash. What the engine-option
 * reader takes must hold engine options only (the training options it
 * refuses are what W1 of issue 17 was about), and a refused input must
 * change nothing.
 */
#include "core/alloc.h"
#include "core/error.h"
#include "tilegraph/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every option of o has its default, except engine options when `engine`. */
static int only_engine_changed(const tg_options *o, const tg_options *before, int engine)
{
    for (int i = 0; i < tg_options_count(); i++) {
        const char *k = tg_options_key(i);
        if (engine && tg_options_is_engine(k))
            continue;
        if (strcmp(tg_options_get_string(o, k), tg_options_get_string(before, k)) != 0)
            return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1 << 16))
        return 0;
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    tg_options *o = tg_options_create(), *before = tg_options_create();
    if (!o || !before)
        abort();
    tg_error_clear();
    tg_status s;
    switch (data[0] % 3) {
    case 0:
        s = tg_options_set_json(o, text, "fuzz.json");
        break;
    case 1:
        s = tg_options_set_engine_json(o, text, "TILEGRAPH_ENGINE_OPTIONS");
        if (!only_engine_changed(o, before, 1)) {
            fprintf(stderr, "engine options set a training option: %s\n", text);
            abort();
        }
        break;
    default: {
        char *eq = strchr(text, '=');
        if (eq)
            *eq = '\0';
        s = tg_options_set(o, text, eq ? eq + 1 : NULL);
        break;
    }
    }
    if (s != TG_OK && tg_error_message()[0] == '\0')
        abort(); /* a refusal must say why */
    if (s != TG_OK && data[0] % 3 == 1 && !only_engine_changed(o, before, 0))
        abort(); /* a refused engine-option text changes nothing */
    tg_options_destroy(o);
    tg_options_destroy(before);
    free(text);
    return 0;
}
