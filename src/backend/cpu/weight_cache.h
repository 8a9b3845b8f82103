/* backend/cpu/weight_cache.h - what a planned kernel derives from constant weights
 * (oneDNN's reordered weights), kept from one run to the next while the
 * host has not written the weights again.
 *
 * An inference program never changes its weights: only the host does
 * (tg_session_write, a checkpoint, tg_session_copy_weights), and each such
 * write gives the session a new weights version (tg_kernel_args
 * .weights_version, never the same number twice in the process). A kernel
 * asks its node's cache for the buffer of a source pointer (one per replica
 * and device: each has its own arena) and refills it only when the version
 * differs from the one the buffer was made for. Training programs pass
 * version 0, which never hits: their weights change at every update.
 *
 * Thread-safe: the replicas' device threads run the same node at once, each
 * with its own source pointer; the lock guards the list, an entry is only
 * ever used by the thread that runs its source's node. The buffers are heap
 * memory beside the arena (one copy of the weights in the kernel's layout),
 * freed with the program's kernel plans. */
#ifndef TG_BACKEND_CPU_WEIGHT_CACHE_H
#define TG_BACKEND_CPU_WEIGHT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_weight_cache tg_weight_cache;

/* A cache of buffers of `bytes` each; NULL when out of memory. */
tg_weight_cache *tg_weight_cache_create(size_t bytes);
void tg_weight_cache_destroy(tg_weight_cache *c);

/* The buffer kept for `source` (64-byte aligned); *fill is true when it does
 * not hold what `version` of the weights gives (new, or written since), and
 * the caller must fill it now; it is then marked as holding `version`.
 * NULL for version 0 or when out of memory: derive into scratch as usual. */
void *tg_weight_cache_get(tg_weight_cache *c, const void *source, uint64_t version, bool *fill);

/* Refills done so far (tests: the weights are reordered once per version). */
int64_t tg_weight_cache_fills(const tg_weight_cache *c);

#endif
