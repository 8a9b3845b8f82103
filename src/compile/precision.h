/* compile/precision.h - which storage type every value gets.
 *
 * The graph is built and differentiated in f32; the precision options decide
 * how each value is *stored* (tutorials' --precision INPUT.MODEL): host-stream
 * inputs in the input type, weights, activations and gradients in the model
 * type, gradient accumulators and the optimizer's moments in their own types.
 * Scalars (losses), constants, integer values and running statistics stay as
 * built. Kernels compute in f32: the engine converts a step's half-precision
 * inputs into f32 staging buffers (planned as part of the step's scratch) and
 * rounds its output back, so storage and bandwidth halve while every sum is
 * still accumulated in f32.
 */
#ifndef TG_COMPILE_PRECISION_H
#define TG_COMPILE_PRECISION_H

#include "graph/node.h"
#include "core/config.h"

typedef enum tg_loss_scaling {
    TG_LOSS_SCALING_NONE,
    TG_LOSS_SCALING_STATIC,
    TG_LOSS_SCALING_DYNAMIC,
} tg_loss_scaling;

typedef struct tg_precision {
    tg_dtype input, model;    /* host-stream inputs; weights, activations, gradients */
    tg_dtype accum;           /* gradient accumulators */
    tg_dtype first_moment;    /* Adam exp_avg, SGD momentum buffer */
    tg_dtype second_moment;   /* Adam exp_avg_sq */
    bool stochastic_rounding; /* for the weight update's writes of half values (auto resolved) */
    tg_loss_scaling loss_scaling;
    float loss_scale;    /* static factor, or the dynamic one's start */
    int growth_interval; /* dynamic: double the scale after this many good updates */
} tg_precision;

/* Read precision, lossScaling*, accumType, *MomentumAccumType and
 * Precision.enableStochasticRounding. */
tg_status tg_precision_read(const tg_config *c, tg_precision *out);

/* pr as one line into buf (cap bytes, truncated), e.g. "bf16.bf16
 * (accumulators bf16, moments f32 f32), half updates rounded
 * stochastically, no loss scaling"; returns buf. */
const char *tg_precision_describe(const tg_precision *pr, char *buf, size_t cap);

/* True when anything is stored in half precision or the loss is scaled: the
 * engine then checks gradients for overflow before each update. */
bool tg_precision_checks_overflow(const tg_precision *pr);

/* Fill storage[id] for every node of g. */
void tg_precision_assign(const tg_graph *g, const tg_precision *pr, tg_dtype *storage);

#endif
