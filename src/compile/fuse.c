/* compile/fuse.c - an inference program's convolution computes the batch
 * norm after it, and the ReLU after that, in one oneDNN primitive.
 *
 * In inference batch norm is an affine map per channel with constant
 * coefficients (running statistics, gamma, beta), so conv + BN is one
 * convolution with each output channel's weights scaled by
 * gamma / sqrt(var + eps) and bias (b - mean) * scale + beta. The kernel
 * folds them when the host has written the weights (ops/weight_cache.h,
 * with the reorder it does anyway), never at a run, and never into the
 * user's weights: checkpoints and reads see them as written. A ReLU after
 * the norm is the primitive's eltwise post-op. The fused nodes get no step
 * and no buffer: they are the convolution's buffer, so the memory plan
 * loses two activations per block and the run two passes over them.
 *
 * Only where nothing else could see the difference: the program has no
 * backward (nothing else reads the convolution's own output or the norm's),
 * one device, f32 storage, no off-chip or sharded tensors, no executable
 * file and no MPI instances (the file, which instance 0 also sends the
 * others, holds steps, not this plan), the convolution planned with
 * oneDNN, and the three values in one layout. `tilegraph check` compares
 * the last fused value with the three reference kernels chained on the
 * convolution's inputs (runtime/verify.c).
 */
#include "compile/layout.h"
#include "compile/program.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/process.h"
#include "ops/conv.h"
#include "ops/norm.h"
#include "ops/op.h"

/* Whether p may fuse at all (the file's comment says why each). */
static bool program_fuses(const tg_program *p)
{
    const tg_config *c = &p->config;
    if (p->training || p->n_devices != 1 || !p->plan_kernels || !tg_process_fuse_inference())
        return false;
    if (p->precision.model != TG_F32 || p->precision.input != TG_F32)
        return false;
    /* an executable file, or MPI instances (instance 0 compiles and sends
     * the others its program as the file's bytes) */
    if (c->executable.cache_dir[0] || c->executable.file[0] || c->distributed.instances > 1)
        return false;
    for (int k = 0; k < TG_TENSOR_KINDS; k++)
        if (c->memory.location[k].off_chip || c->memory.location[k].sharded)
            return false;
    return true;
}

static bool is_leaf_value(const tg_tensor *t)
{
    return t && t->n_in == 0 && t->op != TG_OP_INPUT;
}

/* Whether `next` may be computed by the step that computes `t`: its only
 * reader, reading it as its first input, not an output, of one shape, in
 * one layout, stored in f32. */
static bool follows(const tg_program *p, const int *readers, const tg_tensor *t,
                    const tg_tensor *next)
{
    return next && readers[t->id] == 1 && next->in[0] == t && !(t->flags & TG_NODE_OUTPUT) &&
           tg_shape_equal(t->shape, next->shape) && p->storage[t->id] == TG_F32 &&
           p->storage[next->id] == TG_F32 && p->layout &&
           (p->layout[t->id] & TG_LAYOUT_BLOCKED) == (p->layout[next->id] & TG_LAYOUT_BLOCKED);
}

/* The batch norm on running statistics (leaves) over a 4-D value. */
static bool is_inference_norm(const tg_tensor *n)
{
    if (n->op != TG_OP_NORM_APPLY || tg_norm_mode(n) != TG_NORM_BATCH || n->shape.ndim != 4)
        return false;
    for (int k = 1; k < n->n_in; k++)
        if (!is_leaf_value(n->in[k]) || n->in[k]->dtype != TG_F32)
            return false;
    return true;
}

static bool conv_fuses(const tg_program *p, const tg_tensor *c)
{
    if (c->op != TG_OP_CONV2D || !is_leaf_value(c->in[1]) ||
        (c->n_in == 3 && !is_leaf_value(c->in[2])))
        return false;
    return tg_conv_dnnl_chosen(c, p->plan_threads);
}

/* The sole reader of each node among the needed ones (-1: none or several),
 * with the count of readings in readers[]. */
static void find_readers(const tg_program *p, const bool *needed, int *readers, int *reader)
{
    const tg_graph *g = p->graph;
    for (int i = 0; i < g->n_nodes; i++)
        readers[i] = 0, reader[i] = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; needed[i] && k < g->nodes[i]->n_in; k++) {
            int in = g->nodes[i]->in[k]->id;
            readers[in]++;
            reader[in] = i;
        }
}

/* The fused node m is the buffer of the node computing it: the buffer
 * make_homes gave it holds nothing (bytes 0, not stored). */
static void drop_home(tg_program *p, const tg_tensor *m)
{
    int b = p->home[m->id];
    if (b >= 0) {
        p->buffers[b].region = TG_REGION_NONE;
        p->buffers[b].bytes = p->buffers[b].stride = 0;
    }
    p->home[m->id] = p->home[p->fused_into[m->id]];
}

tg_status tg_fuse_inference(tg_program *p, const bool *needed)
{
    const tg_graph *g = p->graph;
    if (!program_fuses(p))
        return TG_OK;
    int n = g->n_nodes;
    int *readers = tg_malloc(((size_t)n + 1) * sizeof(int));
    int *reader = tg_malloc(((size_t)n + 1) * sizeof(int));
    p->fused_into = tg_malloc(((size_t)n + 1) * sizeof(int));
    p->fused_tail = tg_malloc(((size_t)n + 1) * sizeof(int));
    if (!readers || !reader || !p->fused_into || !p->fused_tail) {
        tg_free(readers), tg_free(reader);
        return tg_error(TG_ERR_NOMEM, "compile: out of memory fusing the inference program");
    }
    for (int i = 0; i < n; i++)
        p->fused_into[i] = p->fused_tail[i] = -1;
    find_readers(p, needed, readers, reader);
    for (int i = 0; i < n; i++) {
        const tg_tensor *c = g->nodes[i];
        if (!needed[i] || !conv_fuses(p, c))
            continue;
        const tg_tensor *bn = reader[i] >= 0 ? g->nodes[reader[i]] : NULL;
        if (!follows(p, readers, c, bn) || !is_inference_norm(bn))
            continue;
        const tg_tensor *tail = bn, *r = reader[bn->id] >= 0 ? g->nodes[reader[bn->id]] : NULL;
        if (r && r->op == TG_OP_RELU && follows(p, readers, bn, r))
            tail = r;
        for (const tg_tensor *m = tail; m != c; m = m->in[0])
            p->fused_into[m->id] = c->id;
        p->fused_tail[c->id] = tail->id;
    }
    tg_fuse_matmul(p, needed, readers, reader);
    tg_free(readers);
    tg_free(reader);
    /* homes in graph order: a ReLU's home is its norm's, already the conv's */
    for (int i = 0; i < n; i++)
        if (p->fused_into[i] >= 0)
            drop_home(p, g->nodes[i]);
    /* a view of a fused value (a reshape after a matmul's bias add) is the
     * computing node's buffer too: make_homes gave it the dropped one */
    for (int i = 0; i < n; i++)
        if (needed[i] && (g->nodes[i]->flags & TG_NODE_ALIAS))
            p->home[i] = p->home[g->nodes[i]->in[0]->id];
    /* the conv's buffer ends the step holding the last fused value: host
     * outputs and the memory report name that */
    for (int i = 0; i < n; i++)
        if (p->fused_tail[i] >= 0 && p->home[i] >= 0)
            p->buffers[p->home[i]].node = p->fused_tail[i];
    return TG_OK;
}

void tg_fuse_link(tg_program *p)
{
    if (!p->fused_tail)
        return;
    tg_device_program *dp = &p->devices[0];
    for (int s = 0; s < dp->n_steps[TG_PHASE_FORWARD]; s++) {
        tg_step *st = &dp->steps[TG_PHASE_FORWARD][s];
        tg_fuse_matmul_link(p, st);
        bool relu;
        const tg_tensor *bn = tg_fuse_norm_of(p, p->graph->nodes[st->node], &relu);
        if (!bn)
            continue;
        st->fused = true;
        for (int k = 0; k < 3; k++)
            st->in[TG_FUSE_IN_STATS + k] = k + 1 < bn->n_in ? p->home[bn->in[k + 1]->id] : -1;
        /* without gamma, beta is the norm's third input */
        if (bn->n_in == 3 && !tg_norm_has_gamma(bn))
            st->in[TG_FUSE_IN_STATS + 1] = -1,
                                      st->in[TG_FUSE_IN_STATS + 2] = p->home[bn->in[2]->id];
    }
}

const tg_tensor *tg_fuse_norm_of(const tg_program *p, const tg_tensor *conv, bool *relu)
{
    *relu = false;
    if (!p->fused_tail || p->fused_tail[conv->id] < 0 || conv->op != TG_OP_CONV2D)
        return NULL;
    const tg_tensor *tail = p->graph->nodes[p->fused_tail[conv->id]];
    *relu = tail->op == TG_OP_RELU;
    return *relu ? tail->in[0] : tail;
}
