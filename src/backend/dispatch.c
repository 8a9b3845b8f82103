/* backend/dispatch.c - what the compiler and the engine ask of a backend
 * (backend/backend.h): its kernel for a node, or the op's reference kernel
 * run through doubles where it has none. */
#include "backend/backend.h"

#include "backend/cpu/blocked.h"
#include "core/check.h"
#include "core/convert.h"

static const tg_backend *host_backend = &tg_backend_cpu;

const tg_backend *tg_backend_host(void)
{
    return host_backend;
}

void tg_backend_use_host(const tg_backend *b)
{
    host_backend = b ? b : &tg_backend_cpu;
}

const tg_kernel_def *tg_backend_kernel(const tg_backend *b, const tg_tensor *node)
{
    const tg_kernel_def *k = b->kernel(node->op);
    if (!k || (b->supports_op && !b->supports_op(node)))
        return NULL;
    return k;
}

static const tg_kernel_def *host_kernel(const tg_tensor *node)
{
    return tg_backend_kernel(tg_backend_host(), node);
}

const tg_op_planner *tg_op_planner_get(tg_op op)
{
    const tg_kernel_def *k = tg_backend_host()->kernel(op);
    return k ? k->planner : NULL;
}

const tg_op_planner *tg_node_planner(const tg_tensor *node)
{
    const tg_kernel_def *k = host_kernel(node);
    return k && k->forward ? k->planner : NULL;
}

tg_op_layout tg_op_layout_of(const tg_tensor *node, int n_threads, bool inference)
{
    const tg_op_def *def = tg_op_get(node->op);
    const tg_kernel_def *k = host_kernel(node);
    if (!def || !k)
        return TG_LAYOUT_PLAIN; /* the reference kernel reads NCHW */
    if (k->layout)
        return k->layout(node, n_threads, inference);
    bool per_channel = inference && k->per_channel_blocked && tg_op_per_channel_full(node) >= 0;
    return tg_op_is_elementwise(node) || per_channel ? TG_LAYOUT_TIED : TG_LAYOUT_PLAIN;
}

bool tg_blocked_kernel_exists(const tg_tensor *node)
{
    return tg_op_layout_of(node, 1, false) == TG_LAYOUT_TIED;
}

bool tg_op_reads_bf16(const tg_tensor *node, bool blocked)
{
    const tg_kernel_def *k = host_kernel(node);
    return k && k->reads_bf16 && k->reads_bf16(node, blocked);
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
    const tg_kernel_def *k = host_kernel(node);
    if (!k || !k->forward)
        return reference_scratch(node);
    return k->scratch ? k->scratch(node, n_threads) : 0;
}

bool tg_op_has_kernel(tg_op op)
{
    const tg_op_def *def = tg_op_get(op);
    const tg_kernel_def *k = tg_backend_host()->kernel(op);
    return def && ((k && k->forward) || def->reference);
}

/* An operand's doubles: the kernels' operand types are f32, i32 and u8
 * (half-precision operands arrive staged through f32, so a half type here
 * would read f32 bytes as halves). */
static void operand_to_double(const void *src, tg_dtype dt, double *dst, int64_t n)
{
    if (dt == TG_F16 || dt == TG_BF16)
        TG_UNREACHABLE("kernel operand dtype", dt);
    tg_convert_to_double(src, dt, dst, (size_t)n);
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
        operand_to_double(a->in[k], t->in[k]->dtype, r.in[k], tg_numel(t->in[k]));
        s += ref_align((size_t)tg_numel(t->in[k]) * sizeof(double));
    }
    r.out = (double *)s;
    def->reference(&r);
    for (int k = 0; k < t->n_mutated; k++)
        tg_convert_from_double(r.in[k], a->in[k], t->in[k]->dtype, (size_t)tg_numel(t->in[k]));
    if (a->out && tg_numel(t) > 0)
        tg_convert_from_double(r.out, a->out, t->dtype, (size_t)tg_numel(t));
}

void tg_op_forward(const tg_kernel_args *a)
{
    const tg_op_def *def = tg_op_get(a->node->op);
    const tg_kernel_def *k = host_kernel(a->node);
    TG_ASSERT(def && ((k && k->forward) || def->reference));
    if (k && k->forward)
        k->forward(a);
    else
        forward_by_reference(def, a);
}
