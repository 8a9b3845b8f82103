/* backend/cpu/weight_cache.c - reordered constant weights kept between runs
 * (weight_cache.h says when they are valid and who may use them). */
#include "backend/cpu/weight_cache.h"

#include "core/alloc.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct entry {
    const void *source;
    uint64_t version;
    void *buf;
    struct entry *next; /* entries never move: a thread keeps using its own */
} entry;

struct tg_weight_cache {
    size_t bytes;
    pthread_mutex_t lock;
    entry *first;
    _Atomic int64_t fills;
};

tg_weight_cache *tg_weight_cache_create(size_t bytes)
{
    tg_weight_cache *c = tg_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->bytes = bytes;
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void tg_weight_cache_destroy(tg_weight_cache *c)
{
    if (!c)
        return;
    for (entry *e = c->first, *next; e; e = next) {
        next = e->next;
        tg_free(e->buf);
        tg_free(e);
    }
    pthread_mutex_destroy(&c->lock);
    tg_free(c);
}

/* The entry of source, made if new; NULL when out of memory. */
static entry *entry_of(tg_weight_cache *c, const void *source)
{
    pthread_mutex_lock(&c->lock);
    entry *e = c->first;
    while (e && e->source != source)
        e = e->next;
    if (!e && (e = tg_calloc(1, sizeof *e)) != NULL) {
        if ((e->buf = tg_malloc_aligned(c->bytes ? c->bytes : 1)) != NULL) {
            tg_advise_huge_pages(e->buf, c->bytes);
            e->source = source;
            e->next = c->first;
            c->first = e;
        } else {
            tg_free(e);
            e = NULL;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return e;
}

void *tg_weight_cache_get(tg_weight_cache *c, const void *source, uint64_t version, bool *fill)
{
    *fill = false;
    entry *e = c && version ? entry_of(c, source) : NULL;
    if (!e)
        return NULL;
    if (e->version != version) {
        *fill = true;
        e->version = version;
        atomic_fetch_add(&c->fills, 1);
    }
    return e->buf;
}

int64_t tg_weight_cache_fills(const tg_weight_cache *c)
{
    return c ? atomic_load(&((tg_weight_cache *)c)->fills) : 0;
}
