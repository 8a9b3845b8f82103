/* ops/broadcast.h - NumPy broadcasting, strided iteration and sum
 * reductions, shared by the elementwise op families (binary.c, shape.c,
 * softmax.c, loss.c) and usable by any op that needs "the gradient of a
 * broadcast" (tg_sum_to) or "a broadcast" (tg_expand).
 *
 * Broadcasting aligns shapes on the right; a dimension of 1 (or a missing
 * leading dimension) stretches to the other's size: [4, 1, 3] with [5, 1]
 * gives [4, 5, 3]. Every tensor is contiguous row-major, so a broadcast
 * input is read through per-dimension element strides that are 0 on the
 * stretched dimensions.
 */
#ifndef TG_OPS_BROADCAST_H
#define TG_OPS_BROADCAST_H

#include "ops/op.h"

#include <stdbool.h>

/* Below this many elements of work an op runs on the calling thread: waking
 * the pool costs more than such a loop. */
#define TG_PARALLEL_MIN 32768

/* fn over [0, n) on the pool if `work` (elements touched) reaches
 * TG_PARALLEL_MIN, else on the caller. */
void tg_par_for(tg_pool *pool, int64_t n, int64_t work, tg_pool_fn fn, void *ctx);

/* The broadcast of a and b into *out; on failure sets the message
 * "cannot broadcast [3, 4] with [5]" and returns TG_ERR_SHAPE. */
tg_status tg_broadcast_shape(tg_shape a, tg_shape b, tg_shape *out);
/* True if `from` broadcasts to exactly `to` (to has at least from's dims). */
bool tg_broadcasts_to(tg_shape from, tg_shape to);
/* `s` padded on the left with 1s to `ndim` dimensions (ndim >= s.ndim). */
tg_shape tg_shape_pad_left(tg_shape s, int ndim);

/* A shape stored in node params: i[at] = ndim, i[at+1 .. at+ndim] = dims. */
void tg_params_put_shape(tg_node_params *p, int at, tg_shape s);
tg_shape tg_params_get_shape(const tg_node_params *p, int at);
/* Validate a shape read from params (ndim and dims in range). */
tg_status tg_params_check_shape(const tg_node_params *p, int at);

/* Up to two inputs seen broadcast to an output shape, with adjacent
 * dimensions merged wherever every input stays regular across them: a
 * same-shape op becomes one dimension, a bias add [N, K] + [K] two. */
typedef struct tg_bcast {
    int ndim;                       /* >= 1 */
    int64_t dim[TG_MAX_DIMS];       /* merged output dims */
    int64_t stride[2][TG_MAX_DIMS]; /* element strides per input, 0 = stretched */
} tg_bcast;

void tg_bcast_init(tg_bcast *bc, tg_shape out, int n_in, const tg_shape *in);
/* Element offsets of each input for output flat index `flat`. */
void tg_bcast_offsets(const tg_bcast *bc, int64_t flat, int64_t off[2]);

/* Plain reference: offset of the element of `in` (broadcast to `out`) read
 * at output flat index `flat`. One division per dimension; for reference
 * kernels only. */
int64_t tg_bcast_ref_offset(tg_shape out, tg_shape in, int64_t flat);

/* Sum `in` (shape in_shape) down to `keep`: keep has in_shape's ndim with
 * 1 on every summed axis. The output is contiguous in keep's layout. */
void tg_sum_f32(tg_pool *pool, tg_shape in_shape, tg_shape keep, const float *in, float *out);
void tg_sum_ref(tg_shape in_shape, tg_shape keep, const double *in, double *out);

/* Internal builder (defined in binary.c): sum x down to `shape` (the
 * gradient of broadcasting x's shape-`shape` source); x itself when the
 * shapes are already equal. Its twin tg_expand, the broadcast up, is public
 * (tilegraph/graph.h). */
tg_tensor *tg_sum_to(tg_graph *g, tg_tensor *x, tg_shape shape);

#endif
