/* compile/layout.c - the blocked-layout pass (compile/layout.h): groups of
 * tensors that must share a layout, found with a union-find over the
 * operands of the ops that tie them. */
#include "backend/backend.h"
#include "compile/layout.h"

#include "core/alloc.h"
#include "core/error.h"
#include "backend/cpu/blocked.h"
#include "ops/conv.h"
#include "ops/unary.h"

#include <stdlib.h>
#include <string.h>

/* How an op relates to the layout of its 4-D operands. The default is
 * OP_PLAIN: an op the pass does not know to handle nChw16c (and every node
 * that reinterprets its input's bytes, such as a reshape or flatten, which
 * has no step of its own) keeps its operands in NCHW. */
typedef enum op_kind {
    OP_PLAIN, /* reads and writes NCHW only, or views the bytes as NCHW */
    OP_CONV,  /* a oneDNN convolution: each operand in either layout */
    OP_TIED,  /* a kernel with a blocked variant: all operands in one layout */
} op_kind;

typedef struct layout_pass {
    const tg_program *p;
    int *parent;  /* union-find over node ids */
    bool *bad;    /* per node, then per root: cannot be blocked */
    bool *wanted; /* per node, then per root: a convolution reads or writes it */
} layout_pass;

bool tg_layout_test_ignore_views = false;

static bool is_4d(const tg_tensor *t)
{
    return t->shape.ndim == 4;
}

/* A 1x1 map with whole channel blocks: the same bytes in both layouts. */
static bool is_neutral(const tg_tensor *t)
{
    return is_4d(t) && t->shape.dim[2] * t->shape.dim[3] == 1 &&
           t->shape.dim[1] % TG_CHANNEL_BLOCK == 0;
}

static bool is_step(const tg_program *p, const tg_tensor *t)
{
    return p->device_of[t->id] >= 0 && t->n_in > 0 && !(t->flags & TG_NODE_ALIAS);
}

/* A 4-D value whose channels are no whole blocks: blocked, its last block
 * is padded (tg_layout_padded). */
static bool is_partial(const tg_tensor *t)
{
    return is_4d(t) && t->shape.dim[1] % TG_CHANNEL_BLOCK != 0;
}

/* Whether the program may pad: an inference program on one device (a
 * padded value is never sent to another) with f32 or bf16 storage, which
 * oneDNN's convolutions read and write as they are. */
static bool may_pad(const tg_program *p, const tg_tensor *t)
{
    tg_dtype d = p->storage ? p->storage[t->id] : t->dtype;
    return !p->training && p->n_devices == 1 && (d == TG_F32 || d == TG_BF16);
}

/* A value the pass may keep blocked as far as the value itself goes: an
 * activation computed by a step, not read by the host, with whole channel
 * blocks or (may_pad) a padded last one. */
static bool may_block(const tg_program *p, const tg_tensor *t)
{
    return is_4d(t) && (!is_partial(t) || may_pad(p, t)) && is_step(p, t) &&
           t->role == TG_ROLE_ACTIVATION && !(t->flags & TG_NODE_OUTPUT) && p->home[t->id] >= 0;
}

/* Whether a tied op may run on a padded operand: with its shapes padded
 * (the engine's view, runtime/engine_passes.c) it computes the padding's
 * channels from the padding alone, per element or per channel, and a
 * finite padding stays finite (the zeros oneDNN writes there, or what
 * these ops make of them). A convolution reading it multiplies the padding
 * by zero weights; the reorder out and the checker skip it. */
static bool padding_safe(const tg_tensor *t)
{
    /* a list, not a switch over ops: every other op is unsafe (a switch
     * over ops ends in an abort, scripts/check_switches.py) */
    static const tg_op safe[] = {TG_OP_ADD,        TG_OP_SUB,  TG_OP_MUL,     TG_OP_RELU,
                                 TG_OP_LEAKY_RELU, TG_OP_CLIP, TG_OP_SIGMOID, TG_OP_TANH,
                                 TG_OP_NEG,        TG_OP_ABS,  TG_OP_SCALE,   TG_OP_AVGPOOL2D,
                                 TG_OP_MAXPOOL2D};
    for (size_t i = 0; i < sizeof safe / sizeof *safe; i++)
        if (t->op == safe[i])
            return true;
    return t->op == TG_OP_ACTIVATION && (tg_is_hard_swish(t) || tg_is_hard_sigmoid(t));
}

/* Whether a convolution reads and writes its storage as it is (f32 or
 * bf16 everywhere: conv_dnnl.c's storage_types), so that no staging
 * copies a padded operand by its logical size. */
static bool conv_native(const tg_program *p, const tg_tensor *t)
{
    bool ok = may_pad(p, t);
    for (int k = 0; k < t->n_in; k++)
        ok &= may_pad(p, t->in[k]);
    return ok;
}

/* What the op's definition says of its layout (tg_op_layout_of): an op that
 * says nothing is plain. */
static op_kind kind_of(const tg_program *p, const tg_tensor *t)
{
    if (!is_step(p, t)) /* an alias views its input's bytes in NCHW order */
        return OP_PLAIN;
    switch (tg_op_layout_of(t, p->plan_threads, !p->training)) {
    case TG_LAYOUT_OWN:
        return OP_CONV;
    case TG_LAYOUT_TIED:
        return OP_TIED;
    default:
        return OP_PLAIN;
    }
}

static int find(int *parent, int x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static void unite(int *parent, int a, int b)
{
    a = find(parent, a), b = find(parent, b);
    if (a != b)
        parent[a < b ? b : a] = a < b ? a : b;
}

/* Record what op t asks of its 4-D operands (inputs and its own value). */
static void visit_op(layout_pass *lp, const tg_tensor *t)
{
    op_kind kind = kind_of(lp->p, t);
    int first = -1;
    for (int k = -1; k < t->n_in; k++) {
        const tg_tensor *v = k < 0 ? t : t->in[k];
        if (!is_4d(v) || is_neutral(v))
            continue;
        if (is_partial(v) && !(kind == OP_CONV ? conv_native(lp->p, t) : padding_safe(t)))
            lp->bad[v->id] = true;
        if (kind == OP_PLAIN)
            lp->bad[v->id] = true;
        else if (kind == OP_CONV)
            lp->wanted[v->id] = true;
        else if (first < 0)
            first = v->id;
        else
            unite(lp->parent, first, v->id);
    }
}

static void run_pass(layout_pass *lp, uint8_t *layout)
{
    const tg_program *p = lp->p;
    const tg_graph *g = p->graph;
    int n = g->n_nodes;
    for (int i = 0; i < n; i++)
        lp->parent[i] = i;
    for (int i = 0; i < n; i++) {
        const tg_tensor *t = g->nodes[i];
        /* steps, and the views no step runs (they read NCHW) */
        if (is_step(p, t) || (t->n_in > 0 && !tg_layout_test_ignore_views))
            visit_op(lp, t);
        if (is_4d(t) && !is_neutral(t) && !may_block(p, t))
            lp->bad[i] = true;
    }
    for (int i = 0; i < n; i++) {
        int r = find(lp->parent, i);
        lp->bad[r] |= lp->bad[i];
        lp->wanted[r] |= lp->wanted[i];
    }
    for (int i = 0; i < n; i++) {
        const tg_tensor *t = g->nodes[i];
        int r = find(lp->parent, i);
        if (is_4d(t) && !is_neutral(t) && !lp->bad[r] && lp->wanted[r])
            layout[i] |= TG_LAYOUT_BLOCKED;
    }
    /* a tied op runs blocked when its operands are (they agree: one group) */
    for (int i = 0; i < n; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!is_step(p, t) || kind_of(p, t) != OP_TIED)
            continue;
        for (int k = -1; k < t->n_in; k++) {
            const tg_tensor *v = k < 0 ? t : t->in[k];
            if (layout[v->id] & TG_LAYOUT_BLOCKED)
                layout[i] |= TG_LAYOUT_OP_BLOCKED;
        }
    }
}

static bool layout_off(void)
{
    const char *e = getenv("TG_LAYOUT");
    return e && strcmp(e, "plain") == 0;
}

tg_status tg_layout_assign(tg_program *p)
{
    int n = p->graph->n_nodes;
    tg_free(p->layout);
    p->layout = tg_calloc((size_t)n + 1, 1);
    if (!p->layout)
        return tg_error(TG_ERR_NOMEM, "compile: out of memory");
    if (!p->plan_kernels || layout_off())
        return TG_OK;
    layout_pass lp = {p, tg_malloc(((size_t)n + 1) * sizeof(int)), tg_calloc((size_t)n + 1, 1),
                      tg_calloc((size_t)n + 1, 1)};
    tg_status s = TG_OK;
    if (lp.parent && lp.bad && lp.wanted)
        run_pass(&lp, p->layout);
    else
        s = tg_error(TG_ERR_NOMEM, "compile: out of memory");
    tg_free(lp.parent);
    tg_free(lp.bad);
    tg_free(lp.wanted);
    return s;
}

bool tg_layout_reads_blocked(const tg_program *p, const tg_tensor *t)
{
    return (p->layout && (p->layout[t->id] & TG_LAYOUT_BLOCKED)) ||
           (p->plan_kernels && p->layout && is_neutral(t) && !layout_off());
}

void tg_layout_counts(const tg_program *p, int *tensors, int *ops)
{
    *tensors = *ops = 0;
    for (int i = 0; p->layout && i < p->graph->n_nodes; i++) {
        *tensors += (p->layout[i] & TG_LAYOUT_BLOCKED) != 0;
        *ops += (p->layout[i] & TG_LAYOUT_OP_BLOCKED) != 0;
    }
}

bool tg_layout_padded(const tg_program *p, const tg_tensor *t)
{
    return p->layout && (p->layout[t->id] & TG_LAYOUT_BLOCKED) && is_partial(t);
}

tg_shape tg_layout_stored_shape(const tg_program *p, const tg_tensor *t)
{
    tg_shape s = t->shape;
    if (tg_layout_padded(p, t))
        s.dim[1] = tg_channel_blocks(s.dim[1]) * TG_CHANNEL_BLOCK;
    return s;
}

tg_status tg_layout_size_buffers(tg_program *p, bool loaded)
{
    for (int i = 0; p->layout && i < p->graph->n_nodes; i++) {
        const tg_tensor *t = p->graph->nodes[i];
        int b = p->home[i];
        /* loaded: every buffer of its own value, padded or not as the pass
         * says (compile/executable_check.c accepts either size) */
        if (b < 0 || !is_partial(t) || (!tg_layout_padded(p, t) && !loaded) ||
            p->buffers[b].node != i || p->buffers[b].sharded || p->buffers[b].bytes == 0)
            continue;
        tg_buffer *buf = &p->buffers[b];
        size_t bytes =
            (size_t)tg_shape_numel(tg_layout_stored_shape(p, t)) * tg_dtype_size(buf->dtype);
        if (loaded && buf->bytes != bytes)
            return tg_error(TG_ERR_FORMAT,
                            "executable: '%s' takes %zu bytes in the layout this machine "
                            "plans (channels padded to whole blocks or not), the file's "
                            "buffer %zu: the file is stale, compile again",
                            t->name, bytes, buf->bytes);
        if (!loaded && buf->bytes < bytes)
            buf->bytes = buf->stride = bytes;
    }
    return TG_OK;
}
