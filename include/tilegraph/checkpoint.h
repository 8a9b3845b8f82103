/* tilegraph/checkpoint.h - saving and restoring a session's weights and
 * optimizer state as a safetensors file.
 *
 * Tensor names are the graph's names with '/' turned into '.', so a model
 * whose scopes follow PyTorch module names writes PyTorch's state_dict keys
 * ("layer1.conv.weight"); optimizer state follows as
 * "layer1.conv.weight.exp_avg". The metadata records the tilegraph version,
 * the model name and the update counter. Files are written atomically: a
 * crash or a full disk mid-write leaves the previous file intact.
 */
#ifndef TILEGRAPH_CHECKPOINT_H
#define TILEGRAPH_CHECKPOINT_H

#include "tilegraph/export.h"

#include "tilegraph/session.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write every parameter and state tensor of `s`; `model` names the model. */
TG_API tg_status tg_checkpoint_save(const tg_session *s, const char *path, const char *model);

/* Load into `s` every parameter (required) and state tensor (optional: a
 * checkpoint without optimizer state restores the weights only). Fails
 * naming the file and the tensor on a missing parameter, a shape or dtype
 * mismatch, or a corrupt file; on failure nothing in `s` is changed. If
 * `model` is non-NULL and the file records another model, that is an error. */
TG_API tg_status tg_checkpoint_load(tg_session *s, const char *path, const char *model);

#ifdef __cplusplus
}
#endif
#endif
