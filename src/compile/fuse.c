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
 * one device, f32 storage (bf16: activations only, no fold), no off-chip or sharded tensors, no
 * executable file and no MPI instances (the file, which instance 0 also sends the others, holds
 * steps, not this plan), the convolution planned with oneDNN, and the three values in one layout.
 * `tilegraph check` compares the last fused value with the three reference kernels chained on the
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
#include "ops/unary.h"

/* Whether p may fuse at all (the file's comment says why each). */
static bool program_fuses(const tg_program *p)
{
    const tg_config *c = &p->config;
    if (p->training || p->n_devices != 1 || !p->plan_kernels || !tg_process_fuse_inference())
        return false;
    /* bf16 models fuse activations only (folds_norms) */
    if (p->precision.model != TG_F32 && p->precision.model != TG_BF16)
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

/* Whether a and b are stored alike, in f32 or bf16 (the fused value is
 * rounded once, from oneDNN's f32 accumulators, where the unfused chain
 * rounded each step's), in one layout. */
static bool stored_alike(const tg_program *p, const tg_tensor *a, const tg_tensor *b)
{
    tg_dtype s = p->storage[a->id];
    return (s == TG_F32 || s == TG_BF16) && p->storage[b->id] == s && p->layout &&
           (p->layout[a->id] & TG_LAYOUT_BLOCKED) == (p->layout[b->id] & TG_LAYOUT_BLOCKED);
}

/* Whether `next` may be computed by the step that computes `t`: its only
 * reader, reading it as its first input, not an output, of one shape,
 * stored alike. */
static bool follows(const tg_program *p, const int *readers, const tg_tensor *t,
                    const tg_tensor *next)
{
    return next && readers[t->id] == 1 && next->in[0] == t && !(t->flags & TG_NODE_OUTPUT) &&
           tg_shape_equal(t->shape, next->shape) && stored_alike(p, t, next);
}

/* Whether a batch norm may be folded: the fold (ops/conv_dnnl_run.c's
 * fold_into) reads and writes f32 weights, so not in a bf16 model. */
static bool folds_norms(const tg_program *p)
{
    return p->precision.model == TG_F32 && p->precision.input == TG_F32;
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

/* An activation oneDNN computes as an eltwise post-op of the convolution:
 * ReLU, hard swish, hard sigmoid (conv_dnnl.c's post_ops). */
static bool is_post_act(const tg_tensor *n)
{
    return n->op == TG_OP_RELU || tg_is_hard_swish(n) || tg_is_hard_sigmoid(n);
}

/* The value x * hard_sigmoid(x) is hard swish (alpha 1/6, beta 1/2, as
 * PyTorch's export writes hardswish before opset 14): m a Mul of the same
 * shape reading mid and a hard sigmoid of mid that only m reads, mid read
 * by those two alone. */
static bool is_swish_mul(const tg_program *p, const int *readers, const tg_tensor *mid,
                         const tg_tensor *m)
{
    if (!m || m->op != TG_OP_MUL || m->n_in != 2 || readers[mid->id] != 2)
        return false;
    const tg_tensor *hs = m->in[0] == mid ? m->in[1] : m->in[1] == mid ? m->in[0] : NULL;
    return hs && hs != mid && tg_is_hard_sigmoid(hs) && hs->in[0] == mid &&
           tg_act_a(hs) == 1.0f / 6.0f && tg_act_b(hs) == 0.5f && readers[hs->id] == 1 &&
           !(hs->flags & TG_NODE_OUTPUT) && !(mid->flags & TG_NODE_OUTPUT) &&
           tg_shape_equal(mid->shape, m->shape) && tg_shape_equal(mid->shape, hs->shape) &&
           stored_alike(p, mid, m) && stored_alike(p, mid, hs);
}

/* The hard sigmoid of a fused x * hard_sigmoid(x) (is_swish_mul). */
static const tg_tensor *swish_sigmoid(const tg_tensor *m)
{
    return tg_is_hard_sigmoid(m->in[0]) && m->in[0]->in[0] == m->in[1] ? m->in[0] : m->in[1];
}

/* The last node of the chain convolution c computes: the batch norm after
 * it if there is one, then an activation if one follows; c itself when
 * nothing follows that it could compute. An ONNX file exported in eval
 * mode has its batch norms folded already: there the chain is the
 * convolution and its activation. */
static const tg_tensor *chain_tail(const tg_program *p, const int *readers, const int *reader,
                                   const tg_tensor *c)
{
    const tg_graph *g = p->graph;
    const tg_tensor *mid = c, *next = reader[c->id] >= 0 ? g->nodes[reader[c->id]] : NULL;
    if (follows(p, readers, c, next) && is_inference_norm(next) && folds_norms(p))
        mid = next;
    next = reader[mid->id] >= 0 ? g->nodes[reader[mid->id]] : NULL;
    if (is_swish_mul(p, readers, mid, next))
        return next;
    return next && is_post_act(next) && follows(p, readers, mid, next) ? next : mid;
}

static bool conv_fuses(const tg_program *p, const tg_tensor *c)
{
    if (c->op != TG_OP_CONV2D || !is_leaf_value(c->in[1]) ||
        (c->n_in == 3 && !is_leaf_value(c->in[2])))
        return false;
    return tg_conv_dnnl_chosen(c, p->plan_threads, true);
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

/* The fused node m is the buffer of the node before it: the buffer
 * make_homes gave it holds nothing (bytes 0, not stored), and the views of
 * m (a flatten, a reshape: make_homes gave them m's buffer) move with it. */
static void drop_home(tg_program *p, const tg_tensor *m)
{
    int b = p->home[m->id], to = p->home[m->in[0]->id];
    if (b >= 0) {
        p->buffers[b].region = TG_REGION_NONE;
        p->buffers[b].bytes = p->buffers[b].stride = 0;
        for (int i = 0; i < p->graph->n_nodes; i++)
            if (p->home[i] == b)
                p->home[i] = to;
    }
    p->home[m->id] = to;
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
        const tg_tensor *tail = chain_tail(p, readers, reader, c);
        if (tail == c)
            continue;
        p->fused_tail[c->id] = tail->id;
        p->fused_into[tail->id] = c->id;
        /* back along first inputs; from x * hard_sigmoid(x), its sigmoid's */
        const tg_tensor *m = tail->op == TG_OP_MUL ? swish_sigmoid(tail) : tail->in[0];
        for (; m != c; m = m->in[0])
            p->fused_into[m->id] = c->id;
    }
    tg_free(readers);
    tg_free(reader);
    /* homes in graph order: a ReLU's home is its norm's, already the conv's */
    for (int i = 0; i < n; i++)
        if (p->fused_into[i] >= 0)
            drop_home(p, g->nodes[i]);
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
        const tg_tensor *bn, *act;
        if (!tg_fuse_chain(p, p->graph->nodes[st->node], &bn, &act))
            continue;
        st->fused = true;
        if (!bn)
            continue;
        for (int k = 0; k < 3; k++)
            st->in[TG_FUSE_IN_STATS + k] = k + 1 < bn->n_in ? p->home[bn->in[k + 1]->id] : -1;
        /* without gamma, beta is the norm's third input */
        if (bn->n_in == 3 && !tg_norm_has_gamma(bn))
            st->in[TG_FUSE_IN_STATS + 1] = -1,
                                      st->in[TG_FUSE_IN_STATS + 2] = p->home[bn->in[2]->id];
    }
}

bool tg_fuse_chain(const tg_program *p, const tg_tensor *conv, const tg_tensor **norm,
                   const tg_tensor **act)
{
    *norm = *act = NULL;
    if (!p->fused_tail || p->fused_tail[conv->id] < 0)
        return false;
    const tg_tensor *tail = p->graph->nodes[p->fused_tail[conv->id]];
    *act = tail->op == TG_OP_NORM_APPLY ? NULL : tail;
    /* x * hard_sigmoid(x): x is the sigmoid's input */
    const tg_tensor *before = !*act                   ? tail
                              : tail->op == TG_OP_MUL ? swish_sigmoid(tail)->in[0]
                                                      : tail->in[0];
    *norm = before != conv ? before : NULL;
    return true;
}
