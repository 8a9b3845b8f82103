/* fuzz/fuzz_json.c - libFuzzer target for the JSON reader and writer.
 *
 * Any input must parse or fail with a message. What parses must survive a
 * round trip: written back with tg_json_writer and parsed again, it is the
 * same tree (this also fuzzes the writer's escaping and number printing).
 */
#include "core/alloc.h"
#include "core/arena.h"
#include "core/json.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tg_arena *arena = tg_arena_create(0);
    if (!arena)
        return 0;
    tg_json *v = NULL;
    tg_json_limits lim = {64, 1 << 20};
    tg_status s = tg_json_parse_ex(arena, (const char *)data, size, "fuzz", lim, &v);
    if (s != TG_OK) {
        if (v != NULL || tg_error_message()[0] == '\0')
            abort(); /* a failure must say why and return nothing */
    } else {
        tg_json_writer w;
        tg_json_writer_init(&w);
        tg_json_value(&w, v);
        char *text = NULL;
        size_t len = 0;
        if (tg_json_writer_finish(&w, &text, &len) != TG_OK) {
            fprintf(stderr, "writer failed: %s\n", tg_error_message());
            abort();
        }
        tg_json *again = NULL;
        if (tg_json_parse_ex(arena, text, len, "round trip", lim, &again) != TG_OK) {
            fprintf(stderr, "round trip failed to parse: %s\n%s\n", tg_error_message(), text);
            abort();
        }
        if (!tg_json_equal(v, again)) {
            fprintf(stderr, "round trip changed the value:\n%s\n", text);
            abort();
        }
        tg_free(text);
        tg_json_writer_free(&w);
    }
    tg_arena_destroy(arena);
    return 0;
}
