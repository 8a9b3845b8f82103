/* tests/ops/test_unreachable.c - an op's rules and kernels, given a node of an
 * op they have no case for, abort naming the op (TG_UNREACHABLE_OP, ops/op.h)
 * instead of computing their last case or leaving the output unwritten: the
 * FLOPs of a loss, a softmax and a normalisation, the shape of a convolution,
 * the fast and reference kernels of the unary ops. Each call runs in a child
 * process that must die by SIGABRT with "unreachable: op N (name)" on stderr.
 * TG_TEST_LABELS: quick */
#include "backend/backend.h"
#include "tg_test.h"

#include "ops/conv.h"
#include "ops/op.h"

#include <string.h>

typedef struct fake {
    tg_tensor node, x, w;
    float in[4], out[4];
    double din[4], dout[4];
} fake;

/* node: a 1-D node of 4 elements of op `op` with two 4-D inputs */
static void fake_init(fake *f, tg_op op)
{
    memset(f, 0, sizeof *f);
    int64_t d4[4] = {1, 1, 2, 2};
    f->x.shape = f->w.shape = tg_shape_of(4, d4);
    f->x.dtype = f->w.dtype = f->node.dtype = TG_F32;
    f->node.op = op;
    f->node.shape = tg_shape1(4);
    f->node.n_in = 2;
    f->node.in[0] = &f->x;
    f->node.in[1] = &f->w;
}

typedef struct call {
    tg_op def; /* whose def's rule or kernel is called */
    tg_op op;  /* on a node of this op */
} call;

static void call_flops(void *ctx)
{
    const call *c = ctx;
    fake f;
    fake_init(&f, c->op);
    tg_op_get(c->def)->flops(&f.node);
}

static void call_forward(void *ctx)
{
    const call *c = ctx;
    fake f;
    fake_init(&f, c->op);
    tg_kernel_args a = {.node = &f.node, .in = {f.in, f.in}, .out = f.out, .out_type = TG_F32};
    a.in_type[0] = a.in_type[1] = TG_F32;
    tg_backend_cpu.kernel(c->def)->forward(&a);
}

static void call_reference(void *ctx)
{
    const call *c = ctx;
    fake f;
    fake_init(&f, c->op);
    tg_ref_args a = {.node = &f.node, .in = {f.din, f.din}, .out = f.dout};
    tg_op_get(c->def)->reference(&a);
}

static void call_conv_geom(void *ctx)
{
    const call *c = ctx;
    fake f;
    fake_init(&f, c->op);
    (void)tg_conv_geom_of(&f.node);
}

/* "unreachable: op N (name)" for op */
static const char *expect_op(tg_op op, char *buf, size_t cap)
{
    snprintf(buf, cap, "unreachable: op %d (%s)", (int)op, tg_op_name(op));
    return buf;
}

/* The FLOPs of families whose last case was a default. */
static void test_flops_abort(void)
{
    char want[96];
    tg_op defs[] = {TG_OP_CROSS_ENTROPY, TG_OP_SOFTMAX, TG_OP_NORM_APPLY, TG_OP_RELU};
    for (size_t k = 0; k < sizeof defs / sizeof defs[0]; k++) {
        call c = {defs[k], TG_OP_MATMUL};
        TG_CHECK_ABORTS(call_flops, &c, expect_op(TG_OP_MATMUL, want, sizeof want));
    }
    /* a value outside tg_op altogether: named "?" */
    call c = {TG_OP_SOFTMAX, (tg_op)(TG_OP_COUNT + 7)};
    TG_CHECK_ABORTS(call_flops, &c, expect_op(c.op, want, sizeof want));
}

/* The unary fast kernel's default was `break`, leaving the output unwritten. */
static void test_unary_kernels_abort(void)
{
    char want[96];
    call c = {TG_OP_RELU, TG_OP_MATMUL};
    TG_CHECK_ABORTS(call_forward, &c, expect_op(TG_OP_MATMUL, want, sizeof want));
    TG_CHECK_ABORTS(call_reference, &c, expect_op(TG_OP_MATMUL, want, sizeof want));
    /* ...and the ops it does handle still run (no abort on valid input) */
    fake f;
    fake_init(&f, TG_OP_NEG);
    f.in[0] = 1, f.in[1] = -2, f.in[2] = 3, f.in[3] = 0;
    tg_kernel_args a = {.node = &f.node, .in = {f.in}, .out = f.out, .out_type = TG_F32};
    f.node.n_in = 1;
    tg_backend_cpu.kernel(TG_OP_NEG)->forward(&a);
    TG_CHECK(f.out[0] == -1 && f.out[1] == 2 && f.out[2] == -3 && f.out[3] == 0);
}

/* The convolution's geometry took any other op for the weight gradient. */
static void test_conv_geom_aborts(void)
{
    char want[96];
    call c = {TG_OP_CONV2D, TG_OP_RELU};
    TG_CHECK_ABORTS(call_conv_geom, &c, expect_op(TG_OP_RELU, want, sizeof want));
}

int main(void)
{
    TG_RUN(test_flops_abort);
    TG_RUN(test_unary_kernels_abort);
    TG_RUN(test_conv_geom_aborts);
    return tg_test_finish();
}
