/* models/onnx_model.h - the model source for ONNX files (internal to the
 * model layer): tg_model_open makes the spec, tg_model_graph_create_ex
 * builds it with this. */
#ifndef TG_MODELS_ONNX_MODEL_H
#define TG_MODELS_ONNX_MODEL_H

#include "tilegraph/models.h"

/* Import m->onnx onto images x; *out: the logits [N, classes]; with loss
 * non-NULL also the training loss (m->loss) against labels. */
tg_status tg_model_onnx_build(const tg_model_spec *m, tg_graph *g, tg_tensor *x, tg_tensor *labels,
                              tg_tensor **out, tg_tensor **loss);

#endif
