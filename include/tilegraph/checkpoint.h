/* tilegraph/checkpoint.h - saving and restoring a session's weights and
 * optimizer state as a safetensors file.
 *
 * Tensor names are the graph's names with '/' turned into '.', so a model
 * whose scopes follow PyTorch module names writes PyTorch's state_dict keys
 * ("layer1.conv.weight"); optimizer state follows as
 * "layer1.conv.weight.exp_avg". A batch norm's running statistics, one [2, C]
 * state tensor in the graph, are written as PyTorch's buffers
 * "<module>.running_mean", "<module>.running_var" and
 * "<module>.num_batches_tracked" (the updates done), so the weights load into
 * the PyTorch module with load_state_dict; loading takes either form. The metadata records the
 * tilegraph version, the model name and the update counter. Files are written atomically: a crash
 * or a full disk mid-write leaves the previous file intact.
 */
#ifndef TILEGRAPH_CHECKPOINT_H
#define TILEGRAPH_CHECKPOINT_H

#include "tilegraph/export.h"

#include "tilegraph/session.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write every parameter and state tensor of `s`; `model` names the model.
 * The metadata also holds the engine state a resumed run needs (the update
 * counter, the loss scale and its counters). */
TG_API tg_status tg_checkpoint_save(const tg_session *s, const char *path, const char *model);

/* The same with extra metadata: kv holds n_pairs (key, value) string pairs,
 * kv[2i] and kv[2i+1] (the command's loader position, for --resume). */
#define TG_CHECKPOINT_MAX_META 8
TG_API tg_status tg_checkpoint_save_meta(const tg_session *s, const char *path, const char *model,
                                         const char *const *kv, size_t n_pairs);

/* One metadata value of a checkpoint file, into buf[0..cap). */
TG_API tg_status tg_checkpoint_read_meta(const char *path, const char *key, char *buf, size_t cap);

/* Load into `s` every parameter (required) and state tensor (optional: a
 * checkpoint without optimizer state restores the weights only). Fails
 * naming the file and the tensor on a missing parameter, a shape or dtype
 * mismatch, or a corrupt file; on failure nothing in `s` is changed. If
 * `model` is non-NULL and the file records another model, that is an error.
 * A float tensor holding NaN or infinity is refused (TG_ERR_NUMERIC, naming
 * it); the metadata integers must be plain non-negative integers. */
TG_API tg_status tg_checkpoint_load(tg_session *s, const char *path, const char *model);

/* Flags of tg_checkpoint_load_ex. */
#define TG_CHECKPOINT_ALLOW_NON_FINITE 1u /* load NaN/infinite values anyway */
/* Load the model's values only (parameters, batch-norm running statistics),
 * not the optimizer's state nor the update counter and loss-scale state: the
 * optimizer starts afresh, as a new PyTorch optimizer over loaded weights
 * does (a checkpoint continued under another optimizer or precision). */
#define TG_CHECKPOINT_WEIGHTS_ONLY 2u
TG_API tg_status tg_checkpoint_load_ex(tg_session *s, const char *path, const char *model,
                                       unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
