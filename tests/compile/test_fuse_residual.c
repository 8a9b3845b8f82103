/* tests/compile/test_fuse_residual.c - an inference program's convolution
 * computes the residual add after its batch norm, and the ReLU after that,
 * in one oneDNN primitive (compile/fuse.c): ResNet's basic blocks (the
 * identity added after the second convolution's norm, or a downsampling
 * convolution's norm added, in either order; with norms or as an ONNX file
 * exported in eval mode has them, folded into a bias) give what the unfused
 * program gives, in f32 and in bf16, at 1 and 2 threads (batch 1: parts of
 * the output channels, 32 split evenly and 48 in channel parts of whole
 * 16-channel blocks; batch 2: parts of the batch); `check` compares each
 * fused value with the chained reference kernels and finds a fault put into
 * one; an executable file keeps the fusion.
 * TG_TEST_LABELS: threads isa */
#include "tg_fuse_test.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "core/isa.h"
#include "core/rng.h"
#include "backend/cpu/dnnl_util.h"
#include "ops/op.h"
#include "runtime/verify.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#define MAX_NORMS 8

typedef struct block_net {
    tg_graph *g;
    tg_tensor *x, *y, *first_conv;
    tg_tensor *stats[MAX_NORMS];
    int n_stats;
    int64_t out_numel;
} block_net;

/* How a block is written. */
typedef struct shape_of_block {
    bool norms;      /* batch norms, or biases (an eval-mode ONNX export) */
    bool downsample; /* the residual through a strided 1x1 conv (+ norm) */
    bool swap;       /* Add(residual, h) rather than Add(h, residual) */
    bool relu;       /* a ReLU after the add */
    int batch;
    int width; /* the block's channels: 48 at batch 1 splits them unevenly (channel parts) */
} shape_of_block;

static tg_tensor *conv_layer(block_net *n, tg_tensor *h, const char *name, int K, int R, int stride,
                             bool norm)
{
    char w_name[32], extra[32];
    int C = (int)tg_tensor_shape(h).dim[1];
    snprintf(w_name, sizeof w_name, "%s.w", name);
    tg_tensor *w = tg_param(n->g, w_name, tg_shape4(K, C, R, R),
                            (tg_init){TG_INIT_FAN_IN_UNIFORM, C * R * R, 0});
    tg_tensor *b = NULL;
    if (!norm) {
        snprintf(extra, sizeof extra, "%s.b", name);
        b = tg_param(n->g, extra, tg_shape1(K), (tg_init){TG_INIT_FAN_IN_UNIFORM, 4, 0});
    }
    tg_conv2d_params p = {stride, stride, R / 2, R / 2, 1, 1, 1};
    h = tg_conv2d(n->g, h, w, b, p);
    if (!n->first_conv)
        n->first_conv = h;
    if (!norm)
        return h;
    snprintf(extra, sizeof extra, "%s.stats", name);
    tg_tensor *st = tg_state(n->g, extra, tg_shape2(2, K), (tg_init){TG_INIT_NORM_STATS, 0, 0});
    n->stats[n->n_stats++] = st;
    return tg_batch_norm(n->g, h, NULL, NULL, st, 1e-5f);
}

/* stem (conv + norm + ReLU: the block's input, in the blocked layout), then
 * a block of three convolutions, then a last conv + ReLU reading the
 * block's output. */
static block_net build(const shape_of_block *b)
{
    block_net n = {.g = tg_graph_create()};
    tg_graph_set_training(n.g, false);
    n.x = tg_input(n.g, "x", TG_F32, tg_shape4(b->batch, 16, 8, 8));
    int w = b->width;
    tg_tensor *r = tg_relu(n.g, conv_layer(&n, n.x, "stem", w, 3, 1, b->norms));
    tg_tensor *h = tg_relu(n.g, conv_layer(&n, r, "c1", w, 3, b->downsample ? 2 : 1, b->norms));
    /* one more between: the memory plan must keep r's buffer to c2 (its
     * last reader is now c2's step), not give it to this one's output */
    h = tg_relu(n.g, conv_layer(&n, h, "c1b", w, 3, 1, b->norms));
    h = conv_layer(&n, h, "c2", w, 3, 1, b->norms);
    if (b->downsample) /* created after c2, as torchvision's block does */
        r = conv_layer(&n, r, "down", w, 1, 2, b->norms);
    h = b->swap ? tg_add(n.g, r, h) : tg_add(n.g, h, r);
    if (b->relu)
        h = tg_relu(n.g, h);
    n.y = tg_relu(n.g, conv_layer(&n, h, "last", 16, 1, 1, b->norms));
    TG_CHECK_OK(tg_graph_status(n.g));
    n.out_numel = n.y ? tg_numel(n.y) : 0;
    tg_tensor_mark_output(n.y);
    return n;
}

static tg_session *open_with(block_net *n, int threads, bool fuse, const char *precision,
                             const char *exe)
{
    return tg_fuse_test_open_with(n->g, threads, fuse, precision, exe);
}

/* Running statistics away from (0, 1), then x, then a run; y into out. */
static void run(tg_session *s, const block_net *n, uint64_t seed, float *out)
{
    tg_rng r;
    tg_rng_seed(&r, seed);
    for (int l = 0; l < n->n_stats; l++) {
        int64_t K = tg_tensor_shape(n->stats[l]).dim[1];
        float st[2 * 64]; /* up to 64 channels */
        for (int64_t k = 0; k < K; k++) {
            st[k] = (float)(tg_rng_uniform(&r) - 0.5);
            st[K + k] = (float)(0.05 + 2 * tg_rng_uniform(&r));
        }
        TG_CHECK_OK(tg_session_write(s, n->stats[l], st, (size_t)(2 * K) * sizeof(float)));
    }
    tg_fuse_test_run_x(s, &r, n->x, n->y, out);
}

/* The convolutions of s's program computing a residual add, each planned
 * with oneDNN's jit kernels (not its reference implementation). */
static int residual_convs(tg_session *s, const char *label)
{
    const tg_program *p = tg_session_program(s);
    int k = 0;
    for (int i = 0; i < p->graph->n_nodes; i++) {
        if (p->graph->nodes[i]->op != TG_OP_CONV2D || !tg_fuse_conv_add(p, p->graph->nodes[i]))
            continue;
        const char *kernel = p->plans[i].kernel;
        if (strncmp(kernel, "oneDNN jit", 10) != 0 && strncmp(kernel, "oneDNN brg", 10) != 0)
            tg_test_fail(__FILE__, __LINE__, "%s: kernel '%s'", label, kernel);
        k++;
    }
    return k;
}

/* The checker on s's next run: every fused row within tolerance, or with a
 * fault put into the first convolution, a row beyond. */
static void check_rows(tg_session *s, const block_net *n, bool fault, const char *label)
{
    float *out = tg_malloc((size_t)n->out_numel * sizeof(float));
    TG_CHECK_OK(tg_session_verify_next_run(s));
    tg_verify_test_fault_node = fault ? tg_tensor_id(n->first_conv) : -1;
    tg_verify_test_fault_from = 0;
    run(s, n, 7, out);
    tg_verify_test_fault_node = -1;
    tg_fuse_test_rows(s, "fused", fault, label);
    tg_free(out);
}

/* Every way of writing the block, at batch 1 and 2 (1 and 2 threads), in
 * `precision`: fused within `bound` of unfused, one residual add fused per
 * block, the checker agreeing. */
static void blocks_match_unfused(const char *precision, double bound, bool faults)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    double worst = 0;
    int cases = 0;
    for (int v = 0; v < 48; v++) {
        /* 32 channels at batch 1 and 2, then 48 at batch 1: 3 blocks of 16
         * over 2 threads, the convolutions in channel parts, each adding its
         * own channels of the residual */
        shape_of_block b = {v & 1, v & 2, v & 4, v & 8, 1 + ((v >> 4) & 1), v < 32 ? 32 : 48};
        if (v >= 32)
            b.batch = 1;
        if (precision && b.norms) /* a bf16 model folds no norm: nothing to add into */
            continue;
        block_net n = build(&b);
        /* batch 1 on 2 threads splits the output channels, batch 2 the batch */
        for (int threads = 1; threads <= 2; threads++) {
            char label[96];
            snprintf(
                label, sizeof label,
                "%s block %d (norms %d down %d swap %d relu %d, %d channels) batch %d, %d threads",
                precision ? precision : "f32", v, b.norms, b.downsample, b.swap, b.relu, b.width,
                b.batch, threads);
            tg_session *f = open_with(&n, threads, true, precision, NULL);
            tg_session *u = open_with(&n, threads, false, precision, NULL);
            if (!f || !u) {
                tg_session_destroy(f), tg_session_destroy(u);
                continue;
            }
            size_t bytes = (size_t)n.out_numel * sizeof(float);
            float *yf = tg_malloc(bytes), *yu = tg_malloc(bytes);
            run(f, &n, 1 + (uint64_t)v, yf);
            run(u, &n, 1 + (uint64_t)v, yu);
            /* oneDNN's AVX-512 kernels take the add as a post-op; its
             * AVX2 ones (TILEGRAPH_ISA=avx2) on these blocked operands do
             * not, and fusion asks before it keeps the add: unfused there,
             * the same values */
            int want = tg_isa_get() >= TG_ISA_AVX512 ? 1 : 0;
            if (residual_convs(f, label) != want)
                tg_test_fail(__FILE__, __LINE__, "%s: %d residual adds fused, not %d", label,
                             residual_convs(f, label), want);
            double d = tg_fuse_test_difference(yf, yu, n.out_numel);
            worst = fmax(worst, d);
            if (!(d <= bound))
                tg_test_fail(__FILE__, __LINE__, "%s: fused %.3g from unfused", label, d);
            check_rows(f, &n, false, label);
            if (faults && (v & 3) == 3)
                check_rows(f, &n, true, label);
            cases++;
            tg_free(yf), tg_free(yu);
            tg_session_destroy(f), tg_session_destroy(u);
        }
        tg_graph_destroy(n.g);
    }
    printf("  %s: %d blocks, worst difference from unfused %.3g\n", precision ? precision : "f32",
           cases, worst);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

static void test_f32_blocks_match_unfused(void)
{
    blocks_match_unfused(NULL, 2e-6, true);
}

/* bf16 (32.bf16): the residual read in bf16, the sum rounded once. */
static void test_bf16_blocks_match_unfused(void)
{
    blocks_match_unfused("32.bf16", 3e-2, false);
}

/* An executable file holds the residual fusion: written, then loaded, the
 * same fusion and the same bytes as a program compiled afresh. */
static void test_executable_file_keeps_residual(void)
{
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true);
    char exe[64];
    snprintf(exe, sizeof exe, "/tmp/test_fuse_residual.%d.tgx", (int)getpid());
    unlink(exe);
    shape_of_block b = {true, true, false, true, 2, 32};
    block_net n = build(&b);
    tg_session *fresh = open_with(&n, 2, true, NULL, NULL);
    tg_session *written = open_with(&n, 2, true, NULL, exe);
    tg_session *loaded = open_with(&n, 2, true, NULL, exe);
    TG_CHECK(fresh && written && loaded);
    if (fresh && written && loaded) {
        TG_CHECK(strstr(tg_session_cache(loaded), "hit") != NULL);
        TG_CHECK(residual_convs(loaded, "loaded") == (tg_isa_get() >= TG_ISA_AVX512 ? 1 : 0));
        size_t bytes = (size_t)n.out_numel * sizeof(float);
        float *a = tg_malloc(bytes), *c = tg_malloc(bytes);
        run(fresh, &n, 3, a);
        run(loaded, &n, 3, c);
        TG_CHECK(memcmp(a, c, bytes) == 0);
        check_rows(loaded, &n, false, "loaded from the file");
        tg_free(a), tg_free(c);
    }
    tg_session_destroy(fresh), tg_session_destroy(written), tg_session_destroy(loaded);
    tg_graph_destroy(n.g);
    unlink(exe);
    tg_dnnl_force_mode(TG_DNNL_AUTO, false);
}

int main(void)
{
    TG_RUN(test_f32_blocks_match_unfused);
    TG_RUN(test_bf16_blocks_match_unfused);
    TG_RUN(test_executable_file_keeps_residual);
    return tg_test_finish();
}
