/* onnx/onnx_names.c - a small open-addressing map from names to ints.
 *
 * The loader and the builder look names up once per node input; a hash keeps
 * that linear in the model's size (ResNet-50 must import in well under a
 * second). Keys are borrowed, never copied: they live in the model.
 */
#include "onnx/onnx_internal.h"

#include "core/alloc.h"

#include <string.h>

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

bool tg_onnx_names_init(tg_onnx_names *s, size_t n)
{
    s->cap = 16;
    while (s->cap < 2 * n + 16)
        s->cap *= 2;
    s->keys = tg_calloc(s->cap, sizeof *s->keys);
    s->vals = tg_calloc(s->cap, sizeof *s->vals);
    return s->keys && s->vals;
}

void tg_onnx_names_free(tg_onnx_names *s)
{
    tg_free(s->keys);
    tg_free(s->vals);
}

/* The slot of `key`: either holding it or empty. */
static size_t names_slot(const tg_onnx_names *s, const char *key)
{
    size_t i = hash_name(key) & (s->cap - 1);
    while (s->keys[i] && strcmp(s->keys[i], key) != 0)
        i = (i + 1) & (s->cap - 1);
    return i;
}

void tg_onnx_names_put(tg_onnx_names *s, const char *key, int val)
{
    size_t i = names_slot(s, key);
    s->keys[i] = key;
    s->vals[i] = val;
}

int tg_onnx_names_get(const tg_onnx_names *s, const char *key)
{
    size_t i = names_slot(s, key);
    return s->keys[i] ? s->vals[i] : -1;
}
