/* fuzz/fuzz_safetensors.c - libFuzzer target for the safetensors reader and
 * writer.
 *
 * Any input must load or fail with a message. What loads must be
 * self-consistent (every tensor's bytes inside the data, sizes matching
 * shapes), findable by name, and must round-trip: encoded again by the writer
 * and parsed, it holds the same tensors, bytes and metadata.
 */
#include "core/alloc.h"
#include "core/error.h"
#include "data/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tg_safetensors *st = NULL;
    tg_status s = tg_safetensors_parse(data, size, "fuzz", &st);
    if (s != TG_OK) {
        if (st || tg_error_message()[0] == '\0')
            abort();
        return 0;
    }
    size_t n = tg_safetensors_count(st), nm = tg_safetensors_metadata_count(st);
    tg_st_tensor *list = calloc(n ? n : 1, sizeof *list);
    tg_st_meta *meta = calloc(nm ? nm : 1, sizeof *meta);
    if (!list || !meta)
        abort();
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++) {
        const tg_st_tensor *t = tg_safetensors_tensor(st, i);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= (uint64_t)t->shape[d];
        if (numel * tg_st_dtype_size(t->dtype) != t->nbytes ||
            tg_safetensors_find(st, t->name) != t)
            abort();
        for (size_t k = 0; k < t->nbytes; k++)
            sum += ((const unsigned char *)t->data)[k];
        list[i] = *t;
    }
    for (size_t i = 0; i < nm; i++)
        meta[i] = *tg_safetensors_metadata_at(st, i);
    void *buf = NULL;
    size_t len = 0;
    if (tg_safetensors_encode(list, n, meta, nm, &buf, &len) != TG_OK) {
        fprintf(stderr, "re-encoding failed: %s\n", tg_error_message());
        abort();
    }
    tg_safetensors *again = NULL;
    if (tg_safetensors_parse(buf, len, "round trip", &again) != TG_OK) {
        fprintf(stderr, "round trip failed: %s\n", tg_error_message());
        abort();
    }
    if (tg_safetensors_count(again) != n || tg_safetensors_metadata_count(again) != nm)
        abort();
    for (size_t i = 0; i < n; i++) {
        const tg_st_tensor *a = &list[i], *b = tg_safetensors_find(again, a->name);
        if (!b || b->dtype != a->dtype || b->ndim != a->ndim || b->nbytes != a->nbytes ||
            memcmp(b->shape, a->shape, sizeof a->shape) != 0 ||
            (a->nbytes && memcmp(a->data, b->data, a->nbytes) != 0))
            abort();
    }
    for (size_t i = 0; i < nm; i++) {
        const char *v = tg_safetensors_metadata(again, meta[i].key);
        if (!v || strcmp(v, meta[i].value) != 0)
            abort();
    }
    tg_safetensors_destroy(again);
    tg_free(buf);
    free(list);
    free(meta);
    tg_safetensors_destroy(st);
    return sum == 0xFFFFFFFFu; /* keep the read loop */
}
