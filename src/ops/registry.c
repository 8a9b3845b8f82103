/* ops/registry.c - the table of op definitions, indexed by tg_op, and the
 * questions every pass asks of it (tg_op_is_elementwise, tg_op_layout_of,
 * tg_op_reads_bf16): each is answered from the op's own tg_op_def. */
#include "backend/cpu/blocked.h"
#include "core/error.h"

#define TG_OP_DECLARE(e, name, family) extern const tg_op_def tg_opdef_##e;
TG_OP_LIST(TG_OP_DECLARE)
#undef TG_OP_DECLARE

static const tg_op_def *const op_table[TG_OP_COUNT] = {
#define TG_OP_ENTRY(e, name, family) [TG_OP_##e] = &tg_opdef_##e,
    TG_OP_LIST(TG_OP_ENTRY)
#undef TG_OP_ENTRY
};
/* Every enum value has a def: the extern above makes a missing tg_opdef_<E>
 * a link error, and the table spans the enum (tests/ops/test_registry.c
 * checks each def's contents). */
_Static_assert(sizeof op_table / sizeof op_table[0] == TG_OP_COUNT,
               "the op table spans tg_op (graph/op_list.h)");

const tg_op_def *tg_op_get(tg_op op)
{
    return (unsigned)op < TG_OP_COUNT ? op_table[op] : NULL;
}

const char *tg_op_name(tg_op op)
{
    static const char *const names[TG_OP_COUNT] = {
#define TG_OP_NAME(e, name, family) [TG_OP_##e] = name,
        TG_OP_LIST(TG_OP_NAME)
#undef TG_OP_NAME
    };
    return (unsigned)op < TG_OP_COUNT ? names[op] : "?";
}

tg_infer_rule tg_op_infer_rule(tg_op op)
{
    const tg_op_def *def = tg_op_get(op);
    return def ? def->infer : NULL;
}

tg_backward_rule tg_op_backward_rule(tg_op op)
{
    const tg_op_def *def = tg_op_get(op);
    return def ? def->backward : NULL;
}

const tg_op_planner *tg_op_planner_get(tg_op op)
{
    const tg_op_def *def = tg_op_get(op);
    return def ? def->planner : NULL;
}

bool tg_op_aliases_input(tg_op op)
{
    const tg_op_def *def = tg_op_get(op);
    return def && def->memory == TG_OP_VIEWS_INPUT;
}

tg_op_layout tg_op_layout_of(const tg_tensor *node, int n_threads, bool inference)
{
    const tg_op_def *def = tg_op_get(node->op);
    if (!def)
        return TG_LAYOUT_PLAIN;
    if (def->layout)
        return def->layout(node, n_threads, inference);
    return (def->flags & TG_OPF_BLOCKED) || tg_op_is_elementwise(node) ? TG_LAYOUT_TIED
                                                                       : TG_LAYOUT_PLAIN;
}

bool tg_blocked_kernel_exists(const tg_tensor *node)
{
    return tg_op_layout_of(node, 1, false) == TG_LAYOUT_TIED;
}

tg_status tg_op_infer_elementwise_grad(tg_tensor *node, const char *inputs, const char *operand)
{
    if (node->n_in != 2)
        return tg_error(TG_ERR_INVALID_ARG, "takes 2 inputs (dy and %s), got %d", inputs,
                        node->n_in);
    for (int k = 0; k < 2; k++)
        if (node->in[k]->dtype != TG_F32)
            return tg_error(TG_ERR_DTYPE, "input %d ('%s') is %s; this op takes f32", k,
                            node->in[k]->name, tg_dtype_name(node->in[k]->dtype));
    if (!tg_shape_equal(node->in[0]->shape, node->in[1]->shape)) {
        char a[96], b[96];
        return tg_error(TG_ERR_SHAPE, "dy %s and %s %s differ in shape",
                        tg_shape_str(node->in[0]->shape, a, sizeof a), operand,
                        tg_shape_str(node->in[1]->shape, b, sizeof b));
    }
    node->dtype = TG_F32;
    node->shape = node->in[0]->shape;
    return TG_OK;
}

bool tg_op_is_elementwise(const tg_tensor *node)
{
    const tg_op_def *def = tg_op_get(node->op);
    if (!def || !(def->flags & TG_OPF_ELEMENTWISE) || node->n_in > TG_ELEMENTWISE_MAX_INPUTS)
        return false;
    for (int k = 0; k < node->n_in; k++)
        if (!tg_shape_equal(node->in[k]->shape, node->shape))
            return false;
    return true;
}

bool tg_op_reads_bf16(const tg_tensor *node, bool blocked)
{
    const tg_op_def *def = tg_op_get(node->op);
    if (!def)
        return false;
    if (def->reads_bf16)
        return def->reads_bf16(node, blocked);
    return tg_elementwise_bf16_supported(node);
}

bool tg_elementwise_bf16_supported(const tg_tensor *node)
{
    const tg_op_def *def = tg_op_get(node->op);
    return def && (def->flags & TG_OPF_BF16_NATIVE) && tg_op_is_elementwise(node);
}

/* Each operand's doubles on a cache line of their own. */
static size_t ref_align(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

/* The doubles an op run by its reference kernel converts its operands into
 * (tg_op_forward): each input, then the output, aligned apart. */
static size_t reference_scratch(const tg_tensor *node)
{
    size_t bytes = 0;
    for (int k = 0; k < node->n_in; k++)
        bytes += ref_align((size_t)tg_numel(node->in[k]) * sizeof(double));
    return bytes + ref_align((size_t)tg_numel(node) * sizeof(double));
}

size_t tg_op_scratch(const tg_tensor *node, int n_threads)
{
    const tg_op_def *def = tg_op_get(node->op);
    if (!def)
        return 0;
    if (!def->forward)
        return reference_scratch(node);
    return def->scratch ? def->scratch(node, n_threads) : 0;
}

bool tg_op_has_kernel(tg_op op)
{
    const tg_op_def *def = tg_op_get(op);
    return def && (def->forward || def->reference);
}

/* n elements of type dt at src as doubles (the kernel's operand types:
 * f32, i32 or u8; half-precision operands arrive staged through f32). */
static void to_double(const void *src, tg_dtype dt, double *dst, int64_t n)
{
    switch (dt) {
    case TG_F32:
        for (int64_t i = 0; i < n; i++)
            dst[i] = ((const float *)src)[i];
        return;
    case TG_I32:
        for (int64_t i = 0; i < n; i++)
            dst[i] = ((const int32_t *)src)[i];
        return;
    case TG_U8:
        for (int64_t i = 0; i < n; i++)
            dst[i] = ((const uint8_t *)src)[i];
        return;
    case TG_F16:
    case TG_BF16:
    case TG_DTYPE_COUNT:
        break;
    }
    TG_UNREACHABLE("kernel operand dtype", dt);
}

static void from_double(const double *src, void *dst, tg_dtype dt, int64_t n)
{
    switch (dt) {
    case TG_F32:
        for (int64_t i = 0; i < n; i++)
            ((float *)dst)[i] = (float)src[i];
        return;
    case TG_I32:
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)dst)[i] = (int32_t)src[i];
        return;
    case TG_U8:
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = (uint8_t)src[i];
        return;
    case TG_F16:
    case TG_BF16:
    case TG_DTYPE_COUNT:
        break;
    }
    TG_UNREACHABLE("kernel operand dtype", dt);
}

/* An op defined with only its reference kernel, run as a kernel: its
 * operands converted to doubles in the scratch (reference_scratch), the
 * reference run, its output (or, for an update, its mutated inputs)
 * converted back. One thread; the plain NCHW layout and f32 staging its
 * def's silence gives it are what the reference reads. */
static void forward_by_reference(const tg_op_def *def, const tg_kernel_args *a)
{
    const tg_tensor *t = a->node;
    TG_ASSERT(a->scratch_bytes >= reference_scratch(t));
    unsigned char *s = a->scratch;
    tg_ref_args r = {.node = t, .step = a->step, .seed = a->seed, .stream = a->stream};
    for (int k = 0; k < t->n_in; k++) {
        r.in[k] = (double *)s;
        to_double(a->in[k], t->in[k]->dtype, r.in[k], tg_numel(t->in[k]));
        s += ref_align((size_t)tg_numel(t->in[k]) * sizeof(double));
    }
    r.out = (double *)s;
    def->reference(&r);
    for (int k = 0; k < t->n_mutated; k++)
        from_double(r.in[k], a->in[k], t->in[k]->dtype, tg_numel(t->in[k]));
    if (a->out && tg_numel(t) > 0)
        from_double(r.out, a->out, t->dtype, tg_numel(t));
}

void tg_op_forward(const tg_kernel_args *a)
{
    const tg_op_def *def = tg_op_get(a->node->op);
    TG_ASSERT(def && (def->forward || def->reference));
    if (def->forward)
        def->forward(a);
    else
        forward_by_reference(def, a);
}
