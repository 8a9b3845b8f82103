/* compile/fuse_matmul.c - an inference program's matmul computes the bias
 * add, the activation and the residual add after it in one oneDNN primitive.
 *
 * A transformer's dense layers are MATMUL [.., K] x W [K, N], then ADD of a
 * bias [N], then GELU (the feed-forward's first) or ADD of the block's input
 * (the residual, before LayerNorm). Run as steps, each of those is one more
 * pass over the product; oneDNN applies them to the product's tile while it
 * is in registers: the bias as the primitive's bias, the activation as an
 * eltwise post-op, the residual as a binary add post-op reading the other
 * operand where it lies (no copy, and its buffer is not reused as the
 * output). The fused nodes get no step and no buffer: they are the matmul's
 * buffer, which ends the step holding the last one's value.
 *
 * Only for a product whose weights the plan keeps packed
 * (tg_matmul_dnnl_packs: an inference program's constant B in a 2-D product
 * of rows, planned with oneDNN), in a program that fuses at all
 * (compile/fuse.c's conditions: no backward, one device, f32 or bf16, no
 * file), and where nothing else could see the difference: each fused value
 * but the last has one reader, the next one, and is no output; every value
 * of the chain and the residual have the product's shape and are stored
 * as the product, in the plain layout; the residual is computed before the
 * product (the schedule runs nodes in id order, compile/schedule.c).
 *
 * bf16 (a 32.bf16 or bf16 program): values stored in bf16 fuse only where
 * the product reads its bf16 operands in place (tg_matmul_dnnl_reads_bf16:
 * a CPU with bf16 arithmetic), so that the primitive reads the bias and
 * the residual as stored and writes the last value in bf16; the chain is
 * then rounded to bf16 once, from oneDNN's f32 accumulators, where the
 * steps rounded each of the product, the bias add, GELU and the residual
 * add (within the bf16 tolerance `tilegraph check` uses). Without bf16
 * arithmetic (AVX2) such products are staged through f32 and fuse nothing.
 * `tilegraph check` compares the last fused value with the reference kernels
 * chained on the product's inputs (runtime/verify.c).
 *
 * Attention's scores, q k^T (a batched 4-D product, no weights), compute
 * the division by sqrt(d) and the mask's add after them the same way: a
 * binary div post-op by the scalar (x / c, the step's f32 value) and a
 * binary add post-op reading the mask [B or 1, 1, 1 or M, N] broadcast over
 * the heads; the divisor a leaf of one element, the mask computed before
 * the product. A batched product followed by the transpose that merges its
 * heads back ([B, H, M, N] -> [B, M, H, N], p v before the output dense
 * layer) writes the transpose's layout through its output's strides. oneDNN is asked whether it
 * takes the chain (the plan hook, with the plan's own options) before it is kept. Two passes over
 * the scores ([B, 12, 128, 128] per layer) go; in bf16 they were staged.
 *
 * The state this adds to tg_program is fused_into/fused_tail only (as for
 * the convolutions): which ops a chain holds is read back from them
 * (tg_fuse_matmul_opts), and its step's extra inputs are the bias at
 * in[TG_FUSE_IN_STATS] and the residual at in[TG_FUSE_IN_STATS + 1].
 */
#include "compile/layout.h"
#include "compile/program.h"

#include "backend/cpu/matmul_dnnl.h"
#include "ops/op.h"
#include "ops/shape.h"

/* next's input that is not t, when next reads t once of two inputs. */
static const tg_tensor *other_input(const tg_tensor *next, const tg_tensor *t)
{
    if (next->n_in != 2 || next->in[0] == next->in[1])
        return NULL;
    return next->in[0] == t ? next->in[1] : next->in[1] == t ? next->in[0] : NULL;
}

static tg_dtype stored(const tg_program *p, const tg_tensor *t)
{
    return p->storage ? p->storage[t->id] : t->dtype;
}

/* An f32 value stored as the product head, in the plain layout. */
static bool plain_as(const tg_program *p, const tg_tensor *t, const tg_tensor *head)
{
    return t->dtype == TG_F32 && stored(p, t) == stored(p, head) &&
           !(p->layout && (p->layout[t->id] & TG_LAYOUT_BLOCKED));
}

/* Whether next may be computed by the step that computes t: t's only
 * reader, t no output, of t's shape, both plain and stored as head. */
static bool joins(const tg_program *p, const int *readers, const tg_tensor *head,
                  const tg_tensor *t, const tg_tensor *next)
{
    return next && readers[t->id] == 1 && !(t->flags & TG_NODE_OUTPUT) &&
           tg_shape_equal(t->shape, next->shape) && plain_as(p, t, head) && plain_as(p, next, head);
}

/* A bias of the product: a leaf [N], stored in f32, or in bf16 when the
 * product's values are (it then reads its operands in place). */
static bool is_bias(const tg_program *p, const tg_tensor *b, const tg_tensor *head)
{
    int64_t N = head->shape.dim[head->shape.ndim - 1];
    return b && b->n_in == 0 && b->op != TG_OP_INPUT && b->dtype == TG_F32 && b->shape.ndim == 1 &&
           b->shape.dim[0] == N && (stored(p, b) == TG_F32 || stored(p, b) == stored(p, head));
}

/* A residual of the product: computed before it, of its shape, stored as it. */
static bool is_residual(const tg_program *p, const tg_tensor *r, const tg_tensor *head)
{
    return r && r->id < head->id && tg_shape_equal(r->shape, head->shape) && plain_as(p, r, head);
}

/* GELU only: oneDNN's ReLU post-op turns NaN into 0 (a max), where the
 * project's ReLU passes NaN on (a NaN input must reach the loss and be
 * reported: tests/runtime/test_session.c); its GELU keeps NaN. */
static bool is_activation(const tg_tensor *t, const tg_tensor *prev)
{
    return t->op == TG_OP_GELU && t->n_in == 1 && t->in[0] == prev;
}

/* A product whose packed plan computes a chain: its values stored in f32,
 * or in bf16 read in place. */
static bool head_fuses(const tg_program *p, const tg_tensor *t)
{
    if ((t->op != TG_OP_MATMUL && t->op != TG_OP_LINEAR) || t->shape.ndim < 2 ||
        t->dtype != TG_F32 || (p->layout && (p->layout[t->id] & TG_LAYOUT_BLOCKED)))
        return false;
    tg_plan_opts o;
    tg_program_plan_opts(p, t, &o);
    o.inference = true;
    if (stored(p, t) != TG_F32 && !(stored(p, t) == TG_BF16 && tg_matmul_dnnl_reads_bf16(&o)))
        return false;
    return tg_matmul_dnnl_packs(t, &o);
}

/* The chain after head: bias add (when head has none), GELU, residual
 * add, each optional, in that order (oneDNN's: bias, then post-ops). */
static const tg_tensor *chain_tail(const tg_program *p, const int *readers, const int *reader,
                                   const tg_tensor *head)
{
    const tg_graph *g = p->graph;
    const tg_tensor *t = head, *next;
#define NEXT(x) (reader[(x)->id] >= 0 ? g->nodes[reader[(x)->id]] : NULL)
    bool has_bias = head->op == TG_OP_LINEAR && head->n_in == 3;
    next = NEXT(t);
    if (!has_bias && joins(p, readers, head, t, next) && next->op == TG_OP_ADD &&
        is_bias(p, other_input(next, t), head))
        t = next, next = NEXT(t);
    if (joins(p, readers, head, t, next) && is_activation(next, t))
        t = next, next = NEXT(t);
    if (joins(p, readers, head, t, next) && next->op == TG_OP_ADD &&
        is_residual(p, other_input(next, t), head))
        t = next;
#undef NEXT
    return t;
}

/* The divisor of attention's scores: a leaf of one element, stored in f32
 * or as the product head. */
static bool is_scale(const tg_program *p, const tg_tensor *next, const tg_tensor *t,
                     const tg_tensor *head)
{
    const tg_tensor *c =
        next->op == TG_OP_DIV && next->n_in == 2 && next->in[0] == t && next->in[1] != t
            ? next->in[1]
            : NULL;
    return c && c->n_in == 0 && c->op != TG_OP_INPUT && c->dtype == TG_F32 && tg_numel(c) == 1 &&
           (stored(p, c) == TG_F32 || stored(p, c) == stored(p, head));
}

/* A mask added to attention's scores: a leaf or computed before them, f32
 * stored in f32 or as they are, plain, in a shape their 4-D product
 * broadcasts (matmul_dnnl.c). */
static bool is_mask(const tg_program *p, const tg_tensor *m, const tg_tensor *head)
{
    return m && (m->n_in == 0 || m->id < head->id) && m->dtype == TG_F32 &&
           (stored(p, m) == TG_F32 || stored(p, m) == stored(p, head)) &&
           !(p->layout && (p->layout[m->id] & TG_LAYOUT_BLOCKED)) &&
           !tg_shape_equal(m->shape, head->shape) &&
           tg_matmul_dnnl_scores(head, m, p->plan_threads);
}

/* A product of attention's scores: batched 4-D, no constant operand, its
 * values stored in f32 or in bf16 read in place. */
static bool scores_head(const tg_program *p, const tg_tensor *t)
{
    if (t->op != TG_OP_MATMUL || t->dtype != TG_F32 || t->shape.ndim != 4 ||
        (p->layout && (p->layout[t->id] & TG_LAYOUT_BLOCKED)) ||
        !tg_matmul_dnnl_scores(t, NULL, p->plan_threads))
        return false;
    tg_plan_opts o;
    tg_program_plan_opts(p, t, &o);
    o.inference = true;
    return stored(p, t) == TG_F32 || (stored(p, t) == TG_BF16 && tg_matmul_dnnl_reads_bf16(&o));
}

/* The transpose merging a batched product's heads back, [B, H, M, N] ->
 * [B, M, H, N], as t's only reader, stored as head, plain. */
static bool merges_heads(const tg_program *p, const int *readers, const tg_tensor *head,
                         const tg_tensor *t, const tg_tensor *next)
{
    if (!next || next->op != TG_OP_TRANSPOSE || next->n_in != 1 || next->in[0] != t ||
        readers[t->id] != 1 || (t->flags & TG_NODE_OUTPUT) || t->shape.ndim != 4 ||
        !plain_as(p, t, head) || !plain_as(p, next, head))
        return false;
    static const int perm[4] = {0, 2, 1, 3};
    for (int d = 0; d < 4; d++)
        if (tg_transpose_perm(next, d) != perm[d])
            return false;
    return true;
}

/* The scores' chain: division by a scalar, then a mask's add, then the
 * heads merged back (p v's product), each optional. */
static const tg_tensor *scores_tail(const tg_program *p, const int *readers, const int *reader,
                                    const tg_tensor *head)
{
    const tg_graph *g = p->graph;
    const tg_tensor *t = head, *next;
#define NEXT(x) (reader[(x)->id] >= 0 ? g->nodes[reader[(x)->id]] : NULL)
    next = NEXT(t);
    if (joins(p, readers, head, t, next) && is_scale(p, next, t, head))
        t = next, next = NEXT(t);
    if (joins(p, readers, head, t, next) && next->op == TG_OP_ADD &&
        is_mask(p, other_input(next, t), head))
        t = next, next = NEXT(t);
    if (merges_heads(p, readers, head, t, next))
        t = next;
#undef NEXT
    return t;
}

void tg_fuse_matmul(tg_program *p, const bool *needed, const int *readers, const int *reader)
{
    const tg_graph *g = p->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *head = g->nodes[i];
        if (!needed[i] || p->fused_into[i] >= 0)
            continue;
        bool scores = !head_fuses(p, head);
        if (scores && !scores_head(p, head))
            continue;
        const tg_tensor *tail =
            scores ? scores_tail(p, readers, reader, head) : chain_tail(p, readers, reader, head);
        if (tail == head)
            continue;
        /* each next node is its predecessor's sole reader */
        for (const tg_tensor *m = head; m != tail;) {
            m = g->nodes[reader[m->id]];
            p->fused_into[m->id] = head->id;
        }
        p->fused_tail[head->id] = tail->id;
        if (scores && !tg_fuse_plan_takes(p, head)) {
            for (const tg_tensor *m = head; m != tail;) {
                m = g->nodes[reader[m->id]];
                p->fused_into[m->id] = -1;
            }
            p->fused_tail[head->id] = -1;
        }
    }
}

/* The chain's nodes after head, in order, into out[] (at most 3). */
static int chain_of(const tg_program *p, const tg_tensor *head, const tg_tensor **out)
{
    int n = 0, tail = p->fused_tail[head->id];
    for (int i = head->id + 1; i <= tail && n < 3; i++)
        if (p->fused_into[i] == head->id)
            out[n++] = p->graph->nodes[i];
    return n;
}

bool tg_fuse_matmul_opts(const tg_program *p, const tg_tensor *head, struct tg_plan_opts *o,
                         const tg_tensor **bias, const tg_tensor **residual)
{
    *bias = *residual = NULL;
    if (!p->fused_tail || p->fused_tail[head->id] < 0 ||
        (head->op != TG_OP_MATMUL && head->op != TG_OP_LINEAR))
        return false;
    const tg_tensor *chain[3], *prev = head;
    int n = chain_of(p, head, chain);
    for (int k = 0; k < n; prev = chain[k++]) {
        const tg_tensor *m = chain[k], *other = other_input(m, prev);
        if (m->op == TG_OP_DIV)
            *bias = o->mm_scale = other; /* only in the scores' chain */
        else if (m->op == TG_OP_TRANSPOSE)
            o->mm_heads_out = true;
        else if (is_activation(m, prev))
            o->mm_act = m;
        else if (m->op == TG_OP_ADD && !o->mm_act && !*bias && is_bias(p, other, head))
            *bias = other, o->mm_bias = true;
        else
            *residual = other, o->mm_residual = true;
    }
    /* a residual of another shape is the scores' mask, broadcast */
    if (*residual && !tg_shape_equal((*residual)->shape, head->shape))
        o->mm_mask = *residual;
    return true;
}

void tg_fuse_matmul_link(tg_program *p, tg_step *st)
{
    tg_plan_opts o = {0};
    const tg_tensor *bias, *residual;
    if (!tg_fuse_matmul_opts(p, p->graph->nodes[st->node], &o, &bias, &residual))
        return;
    st->fused = true;
    st->in[TG_FUSE_IN_STATS] = bias ? p->home[bias->id] : -1;
    st->in[TG_FUSE_IN_STATS + 1] = residual ? p->home[residual->id] : -1;
    st->in[TG_FUSE_IN_STATS + 2] = st->in[TG_FUSE_IN_RESIDUAL] = -1;
}
