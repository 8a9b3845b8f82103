/* tilegraph/models.h - the built-in model zoo.
 *
 * Each model is a builder function over the graph API, with the input shape,
 * class count, dataset and normalisation it was made for. Models put their
 * layers in named scopes matching PyTorch module names (so checkpoints use
 * PyTorch's parameter names) and in blocks where the reference tutorials do.
 *
 *   fashion-basic   the profiling talk's Fashion-MNIST classifier
 *   mnist-pipeline  the pipelining tutorial's network, blocks B1..B4
 */
#ifndef TILEGRAPH_MODELS_H
#define TILEGRAPH_MODELS_H

#include "tilegraph/graph.h"
#include "tilegraph/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_model_spec {
    const char *name;
    const char *description;
    int channels, height, width; /* input image shape */
    int classes;
    float mean, std; /* input normalisation: (x/255 - mean) / std */
    /* x: [N, C, H, W] f32. Sets *out to the class scores (logits or log
     * probabilities: argmax is the prediction either way); when labels is
     * non-NULL also sets *loss to the model's training loss, in the block of
     * the last layer. */
    tg_status (*build)(tg_graph *g, tg_tensor *x, tg_tensor *labels, tg_tensor **out,
                       tg_tensor **loss);
} tg_model_spec;

int tg_model_count(void);
const tg_model_spec *tg_model_at(int index);
/* NULL (and a message listing the models) if there is no such model. */
const tg_model_spec *tg_model_find(const char *name);

/* A model's graph with its inputs and outputs. */
typedef struct tg_model_graph {
    tg_graph *graph;   /* owned: tg_model_graph_destroy frees it */
    tg_tensor *images; /* input [batch, C, H, W] f32 */
    tg_tensor *labels; /* input [batch] i32 (training only) */
    tg_tensor *output; /* scores [batch, classes], marked as output */
    tg_tensor *loss;   /* scalar, marked as output (training only) */
} tg_model_graph;

/* Build the model for `batch` samples. With opt non-NULL: a training graph
 * (loss, backward pass, optimizer updates); with NULL: inference. */
tg_status tg_model_graph_create(const tg_model_spec *m, int batch, const tg_optimizer *opt,
                                tg_model_graph *out);
void tg_model_graph_destroy(tg_model_graph *mg);

#ifdef __cplusplus
}
#endif
#endif
