/* compile/fuse.c - an inference program's convolution computes the batch
 * norm after it, a residual add after that, and the ReLU after that, in
 * one oneDNN primitive.
 *
 * In inference batch norm is an affine map per channel with constant
 * coefficients (running statistics, gamma, beta), so conv + BN is one
 * convolution with each output channel's weights scaled by
 * gamma / sqrt(var + eps) and bias (b - mean) * scale + beta. The kernel
 * folds them when the host has written the weights (backend/cpu/weight_cache.h,
 * with the reorder it does anyway), never at a run, and never into the
 * user's weights: checkpoints and reads see them as written. A residual
 * added after the norm (a ResNet block's) is a binary post-op reading the
 * other operand where it lies, and a ReLU after the norm or the add is an
 * eltwise post-op. The fused nodes get no step
 * and no buffer: they are the convolution's buffer, so the memory plan
 * loses two activations per block and the run two passes over them.
 *
 * Only where nothing else could see the difference: the program has no
 * backward (nothing else reads the convolution's own output or the norm's),
 * one device, f32 storage (bf16: activations only, no fold), no off-chip or sharded tensors, the
 * convolution planned with oneDNN, and the three values in one layout. `tilegraph check` compares
 * the last fused value with the three reference kernels chained on the convolution's inputs
 * (runtime/verify.c).
 *
 * An executable file (and the program instance 0 sends the other MPI
 * instances, which is one) holds fused_into and fused_tail. The loader
 * does not take them on trust: it makes the decisions again with the same
 * pass (tg_fuse_decide, from the graph, the options and this machine's
 * kernels) and refuses a file whose decisions differ, and links the steps
 * again and refuses one whose steps differ (tg_fuse_check_loaded). So a
 * new kind of fusion added to the pass is stored and checked with no
 * change to the file format.
 */
#include "backend/backend.h"
#include "compile/layout.h"
#include "compile/program.h"

#include "core/alloc.h"
#include "core/error.h"
#include "core/process.h"
#include "ops/conv.h"
#include "ops/norm.h"
#include "ops/op.h"
#include "ops/unary.h"

#include <stdio.h>
#include <string.h>

/* Whether p may fuse at all (the file's comment says why each). */
static bool program_fuses(const tg_program *p)
{
    const tg_config *c = &p->config;
    if (p->training || p->n_devices != 1 || !p->plan_kernels || !tg_process_fuse_inference())
        return false;
    /* bf16 models fuse activations only (folds_norms) */
    if (p->precision.model != TG_F32 && p->precision.model != TG_BF16)
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

/* Whether a batch norm may be folded: the fold (backend/cpu/conv_dnnl_run.c's
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

/* next's input that is not t, when next reads t once of two inputs. */
static const tg_tensor *other_input(const tg_tensor *next, const tg_tensor *t)
{
    if (next->n_in != 2 || next->in[0] == next->in[1])
        return NULL;
    return next->in[0] == t ? next->in[1] : next->in[1] == t ? next->in[0] : NULL;
}

/* Whether `add` adds a residual to mid, the value convolution c computes so
 * far (a ResNet block's conv + BN before its ReLU): mid's only reader, no
 * output, the other operand computed before c (the schedule runs nodes in
 * id order, compile/schedule.c: it is there when c's step runs, and that
 * step reading it keeps it alive) of the same shape, all three stored
 * alike in the blocked layout (the primitive's binary post-op reads the
 * residual laid out as its output, which then needs no reorder). */
static bool adds_residual(const tg_program *p, const int *readers, const tg_tensor *c,
                          const tg_tensor *mid, const tg_tensor *add)
{
    const tg_tensor *r = add && add->op == TG_OP_ADD ? other_input(add, mid) : NULL;
    return r && r->id < c->id && readers[mid->id] == 1 && !(mid->flags & TG_NODE_OUTPUT) &&
           tg_shape_equal(mid->shape, add->shape) && tg_shape_equal(r->shape, add->shape) &&
           stored_alike(p, mid, add) && stored_alike(p, mid, r) &&
           (p->layout[mid->id] & TG_LAYOUT_BLOCKED);
}

/* The node before m in convolution c's chain: a residual add's operand
 * computed from c (the other was computed before c); x * hard_sigmoid(x)'s
 * sigmoid; else m's first input. */
static const tg_tensor *chain_prev(const tg_tensor *m, const tg_tensor *c)
{
    if (m->op == TG_OP_ADD)
        return m->in[0]->id >= c->id ? m->in[0] : m->in[1];
    return m->op == TG_OP_MUL ? swish_sigmoid(m) : m->in[0];
}

/* The last node of the chain convolution c computes: the batch norm after
 * it if there is one, then a residual add, then an activation if one
 * follows; c itself when nothing follows that it could compute. An ONNX
 * file exported in eval mode has its batch norms folded already: there the
 * chain is the convolution, the add and the activation. */
static const tg_tensor *chain_tail(const tg_program *p, const int *readers, const int *reader,
                                   const tg_tensor *c)
{
    const tg_graph *g = p->graph;
    const tg_tensor *mid = c, *next = reader[c->id] >= 0 ? g->nodes[reader[c->id]] : NULL;
    if (follows(p, readers, c, next) && is_inference_norm(next) && folds_norms(p))
        mid = next;
    next = reader[mid->id] >= 0 ? g->nodes[reader[mid->id]] : NULL;
    if (adds_residual(p, readers, c, mid, next)) {
        mid = next;
        next = reader[mid->id] >= 0 ? g->nodes[reader[mid->id]] : NULL;
        /* oneDNN applies hard swish and hard sigmoid after the add too,
         * but no model has them there: ReLU only, kept simple */
        return next && next->op == TG_OP_RELU && follows(p, readers, mid, next) ? next : mid;
    }
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

/* Convolution c computes the chain from it to tail (nothing when tail is c). */
static void keep_chain(tg_program *p, const tg_tensor *c, const tg_tensor *tail)
{
    if (tail == c)
        return;
    p->fused_tail[c->id] = tail->id;
    p->fused_into[tail->id] = c->id;
    for (const tg_tensor *m = chain_prev(tail, c); m != c; m = chain_prev(m, c))
        p->fused_into[m->id] = c->id;
}

/* oneDNN implements a binary post-op only for some of its kernels, and
 * which ones depends on the CPU (on an AVX2-only machine, not for a
 * strided 1x1 convolution on blocked operands), so the plan hook is asked,
 * as the plan will ask it, with the same options, rather than assumed. */
bool tg_fuse_plan_takes(const tg_program *p, const tg_tensor *c)
{
    const tg_op_planner *def = tg_node_planner(c);
    if (!def || !p->plan_kernels)
        return true;
    tg_plan_opts po;
    bool fused, mm_fused, blocked;
    tg_program_node_plan_opts(p, c, &po, &fused, &mm_fused, &blocked);
    tg_kernel_plan plan = {0};
    tg_status s = def->plan(c, &po, &plan);
    if (plan.state)
        def->plan_free(plan.state);
    tg_error_clear();
    return s == TG_OK;
}

tg_status tg_fuse_decide(tg_program *p, const bool *needed)
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
        keep_chain(p, c, tail);
        if (tg_fuse_conv_add(p, c) && !tg_fuse_plan_takes(p, c)) {
            /* the chain up to the node before the add, the add and the
             * activation after it unfused */
            const tg_tensor *add = tg_fuse_conv_add(p, c);
            for (const tg_tensor *m = tail; m != c; m = chain_prev(m, c))
                p->fused_into[m->id] = -1;
            p->fused_tail[c->id] = -1;
            keep_chain(p, c, chain_prev(add, c));
        }
    }
    tg_fuse_matmul(p, needed, readers, reader);
    tg_free(readers);
    tg_free(reader);
    return TG_OK;
}

/* Every node whose buffer is a fused node's, moved to the buffer of the
 * node computing it, in one pass in graph order. A fused node m's own
 * buffer (make_homes gave it one) holds nothing: bytes 0, not stored, and
 * moved[] says where it went. A node after m that make_homes gave m's
 * buffer (a view of it: a flatten, a reshape; or any node sharing it) takes
 * the new one: whatever shares a buffer comes after the node that made it,
 * so one pass sees each dropped buffer before its sharers (a view of a
 * view of a fused value included: make_homes gave it the same buffer). */
static tg_status rehome(tg_program *p)
{
    const tg_graph *g = p->graph;
    int *moved = tg_malloc(((size_t)p->n_buffers + 1) * sizeof(int));
    if (!moved)
        return tg_error(TG_ERR_NOMEM, "compile: out of memory fusing the inference program");
    for (int b = 0; b < p->n_buffers; b++)
        moved[b] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        int b = p->home[i];
        if (b >= 0 && moved[b] >= 0)
            b = p->home[i] = moved[b];
        if (p->fused_into[i] >= 0) {
            /* the head is before i and already where it stays */
            int to = p->home[p->fused_into[i]];
            if (b >= 0 && b != to) {
                p->buffers[b].region = TG_REGION_NONE;
                p->buffers[b].bytes = p->buffers[b].stride = 0;
                moved[b] = to;
            }
            p->home[i] = to;
        }
    }
    tg_free(moved);
    return TG_OK;
}

tg_status tg_fuse_inference(tg_program *p, const bool *needed)
{
    TG_TRY(tg_fuse_decide(p, needed));
    if (!p->fused_into)
        return TG_OK;
    int n = p->graph->n_nodes;
    TG_TRY(rehome(p));
    /* the conv's buffer ends the step holding the last fused value: host
     * outputs and the memory report name that */
    for (int i = 0; i < n; i++)
        if (p->fused_tail[i] >= 0 && p->home[i] >= 0)
            p->buffers[p->home[i]].node = p->fused_tail[i];
    return TG_OK;
}

/* What convolution conv's chain holds (any may be NULL), walked back from
 * its tail: the batch norm, the residual add and the activation. */
static bool conv_chain(const tg_program *p, const tg_tensor *conv, const tg_tensor **norm,
                       const tg_tensor **add, const tg_tensor **act)
{
    *norm = *add = *act = NULL;
    if (!p->fused_tail || p->fused_tail[conv->id] < 0 || conv->op != TG_OP_CONV2D)
        return false;
    const tg_tensor *tail = p->graph->nodes[p->fused_tail[conv->id]];
    if (tail->op != TG_OP_NORM_APPLY && tail->op != TG_OP_ADD)
        *act = tail;
    for (const tg_tensor *m = tail; m != conv; m = chain_prev(m, conv))
        if (m->op == TG_OP_NORM_APPLY)
            *norm = m;
        else if (m->op == TG_OP_ADD)
            *add = m;
    return true;
}

void tg_fuse_link(tg_program *p)
{
    if (!p->fused_tail)
        return;
    tg_device_program *dp = &p->devices[0];
    for (int s = 0; s < dp->n_steps[TG_PHASE_FORWARD]; s++) {
        tg_step *st = &dp->steps[TG_PHASE_FORWARD][s];
        tg_fuse_matmul_link(p, st);
        const tg_tensor *conv = p->graph->nodes[st->node], *bn, *add, *act;
        if (!conv_chain(p, conv, &bn, &add, &act))
            continue;
        st->fused = true;
        /* the residual: the add's operand not computed by the chain */
        st->in[TG_FUSE_IN_RESIDUAL] =
            add ? p->home[chain_prev(add, conv) == add->in[0] ? add->in[1]->id : add->in[0]->id]
                : -1;
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
    const tg_tensor *add;
    return conv_chain(p, conv, norm, &add, act);
}

const tg_tensor *tg_fuse_conv_add(const tg_program *p, const tg_tensor *conv)
{
    const tg_tensor *norm, *add, *act;
    conv_chain(p, conv, &norm, &add, &act);
    return add;
}

static int fused_at(const int *a, int i)
{
    return a ? a[i] : -1;
}

int tg_fuse_value_node(const tg_program *p, int id)
{
    int into = fused_at(p->fused_into, id);
    int tail = fused_at(p->fused_tail, into >= 0 ? into : id);
    return tail >= 0 ? tail : id;
}

/* The first node whose decisions differ between the file's (into, tail)
 * and the pass's (in p), or -1. */
static int first_difference(const tg_program *p, const int *into, const int *tail)
{
    for (int i = 0; i < p->graph->n_nodes; i++)
        if (fused_at(into, i) != fused_at(p->fused_into, i) ||
            fused_at(tail, i) != fused_at(p->fused_tail, i))
            return i;
    return -1;
}

/* The pass's decisions for loaded p (its graph, options, layout and this
 * machine's kernels) in p's fused_into and fused_tail; the file's are
 * returned in *into and *tail (the caller frees them). */
static tg_status decide_again(tg_program *p, int **into, int **tail)
{
    int *order = NULL, n_order = 0;
    *into = p->fused_into, *tail = p->fused_tail;
    p->fused_into = p->fused_tail = NULL;
    TG_TRY(tg_schedule(p->graph, &order, &n_order));
    bool *needed = tg_calloc((size_t)p->graph->n_nodes + 1, sizeof(bool));
    for (int k = 0; needed && k < n_order; k++)
        needed[order[k]] = true;
    tg_free(order);
    if (!needed)
        return tg_error(TG_ERR_NOMEM, "out of memory checking the fused plan");
    tg_status s = tg_fuse_decide(p, needed);
    tg_free(needed);
    return s;
}

static const char *fused_role(const int *into, const int *tail, int i)
{
    return fused_at(into, i) >= 0   ? "fused into another node"
           : fused_at(tail, i) >= 0 ? "a convolution or product computing the nodes after it"
                                    : "not fused";
}

/* Every step is marked fused exactly when its node computes others; the
 * steps linked again by the pass are the file's, byte for byte. */
static tg_status check_steps_linked(tg_program *p)
{
    for (int d = 0; d < p->n_devices; d++)
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            for (int s = 0; s < p->devices[d].n_steps[ph]; s++) {
                const tg_step *st = &p->devices[d].steps[ph][s];
                if (st->fused != (ph == TG_PHASE_FORWARD && fused_at(p->fused_tail, st->node) >= 0))
                    return tg_error(TG_ERR_FORMAT, "step %d of device %d ('%s') is %s", s, d,
                                    p->graph->nodes[st->node]->name,
                                    st->fused ? "marked fused, but computes no other node"
                                              : "not marked fused, but computes other nodes");
            }
    if (!p->fused_tail)
        return TG_OK;
    tg_device_program *dp = &p->devices[0];
    size_t bytes = (size_t)dp->n_steps[TG_PHASE_FORWARD] * sizeof(tg_step);
    tg_step *saved = tg_malloc(bytes + 1);
    if (!saved)
        return tg_error(TG_ERR_NOMEM, "out of memory checking the fused plan");
    memcpy(saved, dp->steps[TG_PHASE_FORWARD], bytes);
    tg_fuse_link(p);
    int bad = -1;
    for (int s = 0; s < dp->n_steps[TG_PHASE_FORWARD] && bad < 0; s++)
        if (memcmp(&saved[s], &dp->steps[TG_PHASE_FORWARD][s], sizeof *saved) != 0)
            bad = s;
    tg_free(saved);
    if (bad >= 0)
        return tg_error(TG_ERR_FORMAT,
                        "step %d ('%s') reads other inputs (a norm's statistics, gamma or beta, "
                        "a bias or a residual) than the nodes fused into it",
                        bad, p->graph->nodes[dp->steps[TG_PHASE_FORWARD][bad].node]->name);
    return TG_OK;
}

tg_status tg_fuse_check_loaded(tg_program *p)
{
    int *into = NULL, *tail = NULL;
    tg_status s = decide_again(p, &into, &tail);
    int bad = s == TG_OK ? first_difference(p, into, tail) : -1;
    char file_role[64], here_role[64];
    if (bad >= 0) {
        snprintf(file_role, sizeof file_role, "%s", fused_role(into, tail, bad));
        snprintf(here_role, sizeof here_role, "%s", fused_role(p->fused_into, p->fused_tail, bad));
    }
    tg_free(into);
    tg_free(tail);
    TG_TRY(s);
    if (bad >= 0)
        return tg_error(TG_ERR_FORMAT,
                        "its fused plan is not the one this build makes: '%s' is %s in the file, "
                        "%s here (made with other kernels or on another machine, or altered)",
                        p->graph->nodes[bad]->name, file_role, here_role);
    return check_steps_linked(p);
}
