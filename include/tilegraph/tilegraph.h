/* tilegraph/tilegraph.h - the whole public API in one include.
 *
 *     #include <tilegraph/tilegraph.h>
 *     cc prog.c $(pkg-config --cflags --libs tilegraph)
 *
 * status.h   status codes and the per-thread error message
 * dtype.h    element types (f32, f16, bf16, u8, i32) and conversions
 * shape.h    tensor shapes
 * graph.h    building a graph: inputs, parameters, ops, blocks, autodiff
 * nn.h       PyTorch-style layers (parameters plus the op)
 * optim.h    optimizers and learning-rate schedules
 * options.h  session options by PopTorch's names
 * session.h  compiling and running a graph on its devices
 * program.h  a compiled program without a session: will it fit, save it, its figures
 * plan.h     what `tilegraph compile` shows of one: the plan, predictions, what-if remedies
 * analyse.h  a profile's views (the Graph Analyser), compared, the HTML report page
 * predict.h  predicted stage splits and pipeline schedules (the cost model)
 * checkpoint.h  safetensors checkpoints with PyTorch's parameter names
 * models.h   the built-in model zoo
 * data.h     data sets (MNIST, Fashion-MNIST, CIFAR-10, synthetic) and the batch loader
 * trace.h    host-side tracing and the Chrome-trace export
 * devices.h  the host and the targets this machine offers
 * monitor.h  the tilegraph processes running on this host
 * verify.h   one run checked tensor by tensor against the reference
 * evaluate.h a model's accuracy, loss and IoU on a test set (tg_evaluate)
 * See docs/README.md for where each part is described.
 */
#ifndef TILEGRAPH_TILEGRAPH_H
#define TILEGRAPH_TILEGRAPH_H

#include "tilegraph/analyse.h"
#include "tilegraph/checkpoint.h"
#include "tilegraph/data.h"
#include "tilegraph/devices.h"
#include "tilegraph/dist.h"
#include "tilegraph/dtype.h"
#include "tilegraph/evaluate.h"
#include "tilegraph/files.h"
#include "tilegraph/graph.h"
#include "tilegraph/models.h"
#include "tilegraph/monitor.h"
#include "tilegraph/nn.h"
#include "tilegraph/onnx.h"
#include "tilegraph/optim.h"
#include "tilegraph/options.h"
#include "tilegraph/plan.h"
#include "tilegraph/predict.h"
#include "tilegraph/program.h"
#include "tilegraph/session.h"
#include "tilegraph/shape.h"
#include "tilegraph/status.h"
#include "tilegraph/trace.h"
#include "tilegraph/verify.h"

#endif
