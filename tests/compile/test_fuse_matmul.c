/* tests/compile/test_fuse_matmul.c - an inference program's matmuls keep
 * their constant weights packed and compute the bias add, GELU and
 * residual add after them (compile/fuse_matmul.c, backend/cpu/matmul_dnnl.c):
 * random chains of transformer-like dense layers (matmul or bias-less
 * linear, bias on either side of the add or none, GELU erf/tanh, ReLU
 * (never fused) or none, a residual (an input or an earlier layer's value, on either side)
 * or none; a view of the result read by the next layer) give what the
 * unfused program gives within f32 rounding, at 1
 * and 2 threads; `check` compares every fused value with the chained
 * reference kernels and finds a fault put into one; a product read
 * elsewhere fuses nothing, a residual computed after the product is not
 * fused; a bf16 inference program's products read bf16 in place. the packed weights follow the
 * host's writes; a product whose rows 2 threads do not divide (batch 1) runs
 * in parts of its columns and gives what one thread gives, in f32 and bf16.
 * TG_TEST_LABELS: threads */
#include "tg_fuse_test.h"

#include "compile/program.h"
#include "core/alloc.h"
#include "core/process.h"
#include "core/rng.h"
#include "backend/cpu/dnnl_util.h"
#include "ops/op.h"
#include "runtime/session_internal.h"
#include "runtime/verify.h"
#include "tilegraph/session.h"
#include "tilegraph/verify.h"

#include <math.h>
#include <string.h>

#define MAX_LAYERS 4

typedef struct chain {
    tg_graph *g;
    tg_tensor *x, *r, *y, *mm0, *w0;
    bool r_read; /* r is some layer's residual */
    int n_layers;
    int64_t out_numel;
} chain;

static int below(tg_rng *r, int n)
{
    return (int)tg_rng_below(r, (uint64_t)n);
}

static tg_tensor *param(tg_graph *g, const char *what, int l, tg_shape s, int fan_in)
{
    char name[32];
    snprintf(name, sizeof name, "%s%d", what, l);
    return tg_param(g, name, s, (tg_init){TG_INIT_FAN_IN_UNIFORM, fan_in, 0});
}

/* One dense layer on h [B, S, K] to [B, S, N], with what follows it drawn
 * from r; a residual of [B, S, N] from the values made so far (vals). */
static tg_tensor *layer(chain *c, tg_rng *r, tg_tensor *h, int l, int N, tg_tensor **vals,
                        int n_vals)
{
    tg_graph *g = c->g;
    tg_shape hs = tg_tensor_shape(h);
    int K = (int)hs.dim[hs.ndim - 1];
    bool linear = below(r, 3) == 0;
    tg_tensor *w = param(g, "w", l, linear ? tg_shape2(N, K) : tg_shape2(K, N), K);
    tg_tensor *y = linear ? tg_linear(g, h, w, NULL) : tg_matmul(g, h, w, false, false);
    if (l == 0)
        c->mm0 = y, c->w0 = w;
    if (below(r, 4)) {
        tg_tensor *b = param(g, "b", l, tg_shape1(N), 4);
        y = below(r, 2) ? tg_add(g, y, b) : tg_add(g, b, y);
    }
    int act = below(r, 4);
    y = act == 1 ? tg_gelu(g, y) : act == 2 ? tg_gelu_tanh(g, y) : act == 3 ? tg_relu(g, y) : y;
    tg_tensor *res = NULL;
    /* newest first, past the layer's own input: a value whose other
     * readers are done before this product */
    for (int k = n_vals - 2; k >= 0 && !res; k--)
        if (tg_tensor_shape(vals[k]).dim[2] == N && below(r, 2))
            res = vals[k];
    c->r_read |= res == c->r;
    if (res)
        y = below(r, 2) ? tg_add(g, y, res) : tg_add(g, res, y);
    return y;
}

static chain build(tg_rng *r, bool training)
{
    chain c = {.g = tg_graph_create()};
    tg_graph_set_training(c.g, training);
    static const int widths[] = {8, 16, 24, 48, 64};
    int B = 1 + below(r, 3), S = 1 + below(r, 9), D = widths[below(r, 5)];
    c.x = tg_input(c.g, "x", TG_F32, tg_shape3(B, S, D));
    c.r = tg_input(c.g, "r", TG_F32, tg_shape3(B, S, D));
    tg_tensor *vals[MAX_LAYERS + 2] = {c.x, c.r}, *h = c.x;
    int n_vals = 2;
    c.n_layers = 1 + below(r, MAX_LAYERS);
    for (int l = 0; l < c.n_layers; l++) {
        int N = below(r, 2) ? D : widths[below(r, 5)];
        /* an op of its own between a residual and the product adding it:
         * its buffer must not be the residual's (the memory plan keeps the
         * residual live up to the fused step) */
        if (l > 0 && below(r, 2))
            h = tg_add(c.g, h, h);
        h = layer(&c, r, h, l, N, vals, n_vals);
        vals[n_vals++] = h;
        /* a view of the fused value (the attention's reshape to heads)
         * read by the next layer: the same buffer */
        if (below(r, 3) == 0 && l + 1 < c.n_layers)
            h = tg_reshape(c.g, tg_reshape(c.g, h, tg_shape2(B * S, N)), tg_shape3(B, S, N));
    }
    c.y = h;
    TG_CHECK_OK(tg_graph_status(c.g));
    c.out_numel = h ? tg_numel(h) : 0;
    tg_tensor_mark_output(h);
    return c;
}

static tg_session *open_session(chain *c, int threads, bool fuse)
{
    return tg_fuse_test_open(c->g, threads, fuse);
}

static void write_random(tg_session *s, tg_tensor *t, tg_rng *r, float scale)
{
    int64_t n = tg_numel(t);
    float *v = tg_malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; v && i < n; i++)
        v[i] = (float)(scale * (2 * tg_rng_uniform(r) - 1));
    TG_CHECK_OK(tg_session_write(s, t, v, (size_t)n * sizeof(float)));
    tg_free(v);
}

/* x and r drawn from seed, a run, y into out. */
static void run(tg_session *s, const chain *c, uint64_t seed, float *out)
{
    tg_rng r;
    tg_rng_seed(&r, seed);
    write_random(s, c->x, &r, 1);
    if (c->r_read)
        write_random(s, c->r, &r, 1);
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, c->y, out, (size_t)c->out_numel * sizeof(float)));
}

/* The checker's rows on s's next run: every fused row checked, none beyond
 * (or, with a fault in the first product, a row beyond). */
static void check_rows(tg_session *s, const chain *c, bool fault, const char *label)
{
    float *out = tg_malloc((size_t)c->out_numel * sizeof(float));
    TG_CHECK_OK(tg_session_verify_next_run(s));
    tg_verify_test_fault_node = fault ? tg_tensor_id(c->mm0) : -1;
    tg_verify_test_fault_from = 0;
    run(s, c, 7, out);
    tg_verify_test_fault_node = -1;
    tg_fuse_test_rows(s, "fused: matmul", fault, label);
    tg_free(out);
}

static void test_random_chains_match_unfused(void)
{
    tg_rng r;
    tg_rng_seed(&r, 42);
    int graphs = 24, fused_total = 0;
    double worst = 0;
    for (int k = 0; k < graphs; k++) {
        chain c = build(&r, false);
        int threads = 1 + k % 2;
        tg_session *f = open_session(&c, threads, true), *u = open_session(&c, threads, false);
        float *yf = tg_malloc((size_t)c.out_numel * sizeof(float));
        float *yu = tg_malloc((size_t)c.out_numel * sizeof(float));
        run(f, &c, 1 + (uint64_t)k, yf);
        run(u, &c, 1 + (uint64_t)k, yu);
        TG_CHECK(tg_fuse_test_chains(u) == 0);
        fused_total += tg_fuse_test_chains(f);
        double d = tg_fuse_test_difference(yf, yu, c.out_numel);
        worst = fmax(worst, d);
        char label[64];
        snprintf(label, sizeof label, "random chain %d (%d threads)", k, threads);
        if (!(d <= 1e-5))
            tg_test_fail(__FILE__, __LINE__, "%s: fused %.3g from unfused", label, d);
        check_rows(f, &c, false, label);
        if (k < 4)
            check_rows(f, &c, true, label);
        tg_free(yf), tg_free(yu);
        tg_session_destroy(f), tg_session_destroy(u);
        tg_graph_destroy(c.g);
    }
    printf("  %d random chains, %d fused matmuls, worst difference from unfused %.3g\n", graphs,
           fused_total, worst);
    TG_CHECK(fused_total >= graphs / 2);
}

/* Writing the weights again repacks them: the next run is a fresh
 * session's. */
static void test_packing_follows_writes(void)
{
    tg_rng r;
    tg_rng_seed(&r, 5);
    chain c = build(&r, false);
    tg_session *s = open_session(&c, 1, true);
    float *a = tg_malloc((size_t)c.out_numel * sizeof(float));
    float *b = tg_malloc((size_t)c.out_numel * sizeof(float));
    run(s, &c, 1, a);
    tg_rng w;
    tg_rng_seed(&w, 77);
    write_random(s, c.w0, &w, 0.5f);
    run(s, &c, 2, a);
    tg_session *f = open_session(&c, 1, true);
    tg_rng_seed(&w, 77);
    write_random(f, c.w0, &w, 0.5f);
    run(f, &c, 2, b);
    TG_CHECK(memcmp(a, b, (size_t)c.out_numel * sizeof(float)) == 0);
    tg_free(a), tg_free(b);
    tg_session_destroy(f), tg_session_destroy(s);
    tg_graph_destroy(c.g);
}

/* The product read by another op too, or an output: nothing fused; the
 * residual computed after the product: the residual add not fused. (A
 * training program never fuses: compile/fuse.c's program_fuses, which
 * tests/compile/test_fuse.c covers.) */
static void test_nothing_fused_where_seen(void)
{
    for (int variant = 0; variant < 3; variant++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape3(2, 4, 16));
        tg_tensor *w = param(g, "w", 0, tg_shape2(16, 16), 16);
        tg_tensor *b = param(g, "b", 0, tg_shape1(16), 4);
        tg_tensor *y = tg_matmul(g, x, w, false, false);
        tg_tensor *late = variant == 2 ? tg_relu(g, x) : x; /* made after y */
        tg_tensor *z = tg_add(g, tg_gelu(g, tg_add(g, y, b)), late);
        if (variant == 0)
            z = tg_add(g, z, y); /* y read twice */
        if (variant == 1)
            tg_tensor_mark_output(y);
        tg_tensor_mark_output(z); /* variant 2: the bias and GELU fuse, the residual not */
        TG_CHECK_OK(tg_graph_status(g));
        tg_options *o = tg_options_create();
        tg_session *s = NULL;
        TG_CHECK_OK(tg_session_create(g, o, &s));
        if (s && variant == 2) {
            const tg_program *p = tg_session_program(s);
            TG_CHECK(p->fused_tail && p->fused_tail[tg_tensor_id(y)] == tg_tensor_id(z->in[0]));
        } else if (s && tg_fuse_test_chains(s) != 0) {
            tg_test_fail(__FILE__, __LINE__, "variant %d fused", variant);
        }
        tg_session_destroy(s);
        tg_options_destroy(o);
        tg_graph_destroy(g);
    }
}

/* g's 32.bf16 session at `threads` threads (0: the
 * process's cores), fused or not. */
static tg_session *open_bf16(tg_graph *g, int threads, bool fuse)
{
    tg_process_set_fuse_inference(fuse);
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "precision", "32.bf16"));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", threads));
    TG_CHECK_OK(tg_options_set_int(o, "randomSeed", 9));
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(g, o, &s));
    tg_options_destroy(o);
    tg_process_set_fuse_inference(1);
    return s;
}

/* A bf16 inference program (precision 32.bf16) on a CPU with bf16
 * arithmetic: its products read their bf16 operands in place (no staged
 * f32 copies), stay within bf16 rounding of the f32 program, and `check`
 * finds every row within tolerance. Without bf16 arithmetic (AVX2) they
 * are staged as before. */
static void test_bf16_operands_in_place(void)
{
    tg_rng r;
    tg_rng_seed(&r, 11);
    bool has_bf16 = tg_dnnl_isa() >= dnnl_cpu_isa_avx512_core_bf16;
    int in_place = 0;
    for (int k = 0; k < 6; k++) {
        chain c = build(&r, false);
        tg_session *f = open_session(&c, 1, true), *h = open_bf16(c.g, 0, true);
        const tg_program *p = tg_session_program(h);
        for (int i = 0; i < p->graph->n_nodes; i++) {
            const tg_tensor *t = p->graph->nodes[i];
            if (t->op == TG_OP_MATMUL || t->op == TG_OP_LINEAR)
                in_place += p->plans[i].native_storage;
        }
        float *yf = tg_malloc((size_t)c.out_numel * sizeof(float));
        float *yh = tg_malloc((size_t)c.out_numel * sizeof(float));
        run(f, &c, 3, yf);
        run(h, &c, 3, yh);
        double d = tg_fuse_test_difference(yh, yf, c.out_numel);
        if (!(d <= 0.05))
            tg_test_fail(__FILE__, __LINE__, "chain %d: bf16 %.3g from f32", k, d);
        TG_CHECK_OK(tg_session_verify_next_run(h));
        run(h, &c, 4, yh);
        const tg_verify_report *rep = tg_session_verify_report(h);
        for (int i = 0; rep && i < tg_verify_rows(rep); i++)
            if (tg_verify_row_at(rep, i)->verdict == TG_VERIFY_BEYOND)
                tg_test_fail(__FILE__, __LINE__, "chain %d: %s beyond tolerance", k,
                             tg_verify_row_at(rep, i)->name);
        tg_free(yf), tg_free(yh);
        tg_session_destroy(f), tg_session_destroy(h);
        tg_graph_destroy(c.g);
    }
    /* the first layer reads the f32 input x: staged */
    printf("  %d products read bf16 in place (the CPU %s bf16 arithmetic)\n", in_place,
           has_bf16 ? "has" : "has no");
    TG_CHECK(has_bf16 ? in_place > 0 : in_place == 0);
}

/* The fused products of s whose kernel reads bf16 in place; -1 when a
 * fused one does not (it would read a bf16 bias or residual as f32). */
static int fused_in_place(tg_session *s)
{
    const tg_program *p = tg_session_program(s);
    int n = 0;
    for (int i = 0; p->fused_tail && i < p->graph->n_nodes; i++) {
        if (p->fused_tail[i] < 0 || p->storage[i] != TG_BF16)
            continue;
        if (!p->plans[i].native_storage) {
            printf("  %s: %s\n", p->graph->nodes[i]->name, p->plans[i].kernel);
            return -1;
        }
        n++;
    }
    return n;
}

/* s's program written as an executable file and loaded again: the file
 * carries the fused chains (the loader makes them again and compares) and
 * the loaded plans read bf16 in place. */
static void check_file_carries(tg_session *s, const char *label)
{
    const tg_program *p = tg_session_program(s);
    void *data = NULL;
    size_t len = 0;
    tg_program *back = NULL;
    TG_CHECK_OK(tg_executable_serialize(p, &data, &len));
    tg_status st = tg_executable_parse(p->graph, &p->config, data, len, "bf16.tgx", &back);
    if (st != TG_OK || !back || !back->fused_tail) {
        tg_test_fail(__FILE__, __LINE__, "%s: the file refused or unfused: %s", label,
                     st != TG_OK ? tg_error_message() : "no fused chains");
    } else {
        for (int i = 0; i < p->graph->n_nodes; i++)
            if (back->fused_tail[i] != p->fused_tail[i] ||
                back->fused_into[i] != p->fused_into[i] ||
                (p->fused_tail[i] >= 0 &&
                 back->plans[i].native_storage != p->plans[i].native_storage))
                tg_test_fail(__FILE__, __LINE__, "%s: node %d's fusion differs in the file", label,
                             i);
    }
    tg_program_destroy(back);
    tg_free(data);
}

/* A bf16 inference program on a CPU with bf16 arithmetic fuses its chains
 * as f32 does: the bias, GELU and residual read in bf16 by the product's
 * primitive, the chain rounded once. Within bf16 rounding of the unfused
 * bf16 program and of f32, `check` passes every fused row and finds a
 * fault put into a product; the executable file carries the chains.
 * Without bf16 arithmetic nothing stored in bf16 fuses. */
static void test_bf16_chains_fused(void)
{
    tg_rng r;
    tg_rng_seed(&r, 23);
    bool has_bf16 = tg_dnnl_isa() >= dnnl_cpu_isa_avx512_core_bf16;
    int fused = 0;
    double worst = 0;
    for (int k = 0; k < 10; k++) {
        chain c = build(&r, false);
        int threads = 1 + k % 2;
        tg_session *f = open_bf16(c.g, threads, true), *u = open_bf16(c.g, threads, false);
        tg_session *ref = open_session(&c, 1, false);
        int n = fused_in_place(f);
        char label[64];
        snprintf(label, sizeof label, "bf16 chain %d (%d threads)", k, threads);
        if (n < 0 || (!has_bf16 && n > 0))
            tg_test_fail(__FILE__, __LINE__, "%s: a fused product not reading bf16 in place",
                         label);
        fused += n > 0 ? n : 0;
        float *yf = tg_malloc((size_t)c.out_numel * sizeof(float));
        float *yu = tg_malloc((size_t)c.out_numel * sizeof(float));
        float *y32 = tg_malloc((size_t)c.out_numel * sizeof(float));
        run(f, &c, 5 + (uint64_t)k, yf);
        run(u, &c, 5 + (uint64_t)k, yu);
        run(ref, &c, 5 + (uint64_t)k, y32);
        double d = tg_fuse_test_difference(yf, yu, c.out_numel);
        double d32 = tg_fuse_test_difference(yf, y32, c.out_numel);
        worst = fmax(worst, d);
        if (!(d <= 0.05) || !(d32 <= 0.05))
            tg_test_fail(__FILE__, __LINE__, "%s: fused %.3g from unfused bf16, %.3g from f32",
                         label, d, d32);
        check_rows(f, &c, false, label);
        if (k < 3)
            check_rows(f, &c, true, label);
        if (n > 0)
            check_file_carries(f, label);
        tg_free(yf), tg_free(yu), tg_free(y32);
        tg_session_destroy(f), tg_session_destroy(u), tg_session_destroy(ref);
        tg_graph_destroy(c.g);
    }
    printf("  %d bf16 products fused (the CPU %s bf16 arithmetic), worst difference from "
           "unfused bf16 %.3g\n",
           fused, has_bf16 ? "has" : "has no", worst);
    TG_CHECK(has_bf16 ? fused >= 3 : fused == 0);
}

/* A NaN in the input reaches the output through a fused chain (the
 * engine's check then names the loss it reaches): GELU is fused and keeps
 * it; a ReLU after the product is not fused (oneDNN's would turn it to 0). */
static void test_nan_passes(void)
{
    for (int relu = 0; relu < 2; relu++) {
        tg_graph *g = tg_graph_create();
        tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape3(2, 4, 16));
        tg_tensor *w = param(g, "w", 0, tg_shape2(16, 8), 16);
        tg_tensor *b = param(g, "b", 0, tg_shape1(8), 4);
        tg_tensor *y = tg_matmul(g, x, w, false, false), *a = tg_add(g, y, b);
        tg_tensor *z = relu ? tg_relu(g, a) : tg_gelu(g, a);
        tg_tensor_mark_output(z);
        TG_CHECK_OK(tg_graph_status(g));
        tg_session *s = tg_fuse_test_open(g, 1, true);
        const tg_program *p = tg_session_program(s);
        TG_CHECK(p->fused_tail && p->fused_tail[tg_tensor_id(y)] == tg_tensor_id(relu ? a : z));
        float xv[2 * 4 * 16], out[2 * 4 * 8];
        for (int i = 0; i < 2 * 4 * 16; i++)
            xv[i] = i == 3 ? NAN : 0.25f;
        TG_CHECK_OK(tg_session_write(s, x, xv, sizeof xv));
        TG_CHECK_OK(tg_session_run(s));
        TG_CHECK_OK(tg_session_read(s, z, out, sizeof out));
        for (int c = 0; c < 8; c++)
            if (!isnan(out[c]))
                tg_test_fail(__FILE__, __LINE__, "%s: column %d of the NaN row is %g",
                             relu ? "relu" : "gelu", c, out[c]);
        TG_CHECK(!isnan(out[8]));
        tg_session_destroy(s);
        tg_graph_destroy(g);
    }
}

/* Attention's scores, softmax(q k^T / c + mask) v, the heads merged back:
 * the product computes the
 * division by the scalar and the mask's add (broadcast over the heads:
 * [B, 1, 1, S], [1, 1, 1, S] or [B, 1, S, S], a leaf or computed; on
 * either side of the add) as post-ops, at batch 1 and 2 on 1 and 2 threads
 * (parts by heads, by samples), and p v writes the merge's layout through
 * its output's strides. The same values as unfused within f32
 * rounding; `check` passes every fused row and finds a fault put into the
 * product; a 32.bf16 program's scores fuse reading bf16 in place, within
 * bf16 rounding of f32, every row within tolerance. */
typedef struct scores_case {
    int B, H, S, d, mask_kind, threads;
    bool computed_mask, mask_first, bf16;
} scores_case;

typedef struct scores_graph {
    tg_graph *g;
    tg_tensor *q, *k, *v, *m, *mm, *add, *pv, *y;
} scores_graph;

static scores_graph scores_build(const scores_case *c)
{
    scores_graph sg = {.g = tg_graph_create()};
    tg_graph *g = sg.g;
    tg_shape qs = tg_shape4(c->B, c->H, c->S, c->d);
    tg_shape ms = c->mask_kind == 0   ? tg_shape4(c->B, 1, 1, c->S)
                  : c->mask_kind == 1 ? tg_shape4(1, 1, 1, c->S)
                                      : tg_shape4(c->B, 1, c->S, c->S);
    sg.q = tg_input(g, "q", TG_F32, qs);
    sg.k = tg_input(g, "k", TG_F32, qs);
    sg.m = tg_input(g, "mask", TG_F32, ms);
    sg.v = tg_input(g, "v", TG_F32, qs);
    tg_tensor *q = sg.q, *k = sg.k, *m = sg.m, *v = sg.v;
    if (c->bf16) /* activations (stored in bf16), not f32 inputs */
        q = tg_add(g, q, q), k = tg_add(g, k, k), v = tg_add(g, v, v);
    if (c->computed_mask)
        m = tg_add(g, m, m);
    sg.mm = tg_matmul(g, q, k, false, true);
    tg_tensor *sc = tg_div(g, sg.mm, tg_constant(g, tg_shape1(1), sqrtf((float)c->d)));
    sg.add = c->mask_first ? tg_add(g, m, sc) : tg_add(g, sc, m);
    /* p v, its heads merged back: [B, H, S, d] -> [B, S, H, d] */
    sg.pv = tg_matmul(g, tg_softmax(g, sg.add, -1), v, false, false);
    sg.y = tg_transpose(g, sg.pv, (int[]){0, 2, 1, 3});
    tg_tensor_mark_output(sg.y);
    TG_CHECK_OK(tg_graph_status(g));
    return sg;
}

static void scores_run(tg_session *s, const scores_graph *sg, float *out)
{
    tg_rng r;
    tg_rng_seed(&r, 3);
    write_random(s, sg->q, &r, 2);
    write_random(s, sg->k, &r, 2);
    write_random(s, sg->v, &r, 1);
    int64_t n = tg_numel(sg->m);
    float *m = tg_malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; m && i < n; i++)
        m[i] = tg_rng_uniform(&r) < 0.25 ? -50.0f : 0.0f; /* (the bf16 fault: +256) */
    TG_CHECK_OK(tg_session_write(s, sg->m, m, (size_t)n * sizeof(float)));
    tg_free(m);
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, sg->y, out, (size_t)tg_numel(sg->y) * sizeof(float)));
}

static void check_scores(const scores_case *c, const char *label)
{
    scores_graph sg = scores_build(c);
    tg_session *f =
        c->bf16 ? open_bf16(sg.g, c->threads, true) : tg_fuse_test_open(sg.g, c->threads, true);
    tg_session *u = tg_fuse_test_open(sg.g, c->threads, false);
    const tg_program *p = tg_session_program(f);
    if (!p || !p->fused_tail || p->fused_tail[tg_tensor_id(sg.mm)] != tg_tensor_id(sg.add))
        tg_test_fail(__FILE__, __LINE__, "%s: the division and the mask not fused", label);
    else if (p->fused_tail[tg_tensor_id(sg.pv)] != tg_tensor_id(sg.y))
        tg_test_fail(__FILE__, __LINE__, "%s: the heads' merge not fused", label);
    else if (c->bf16 && !p->plans[tg_tensor_id(sg.mm)].native_storage)
        tg_test_fail(__FILE__, __LINE__, "%s: not reading bf16 in place", label);
    int64_t n = tg_numel(sg.y);
    float *yf = tg_malloc((size_t)n * sizeof(float)), *yu = tg_malloc((size_t)n * sizeof(float));
    scores_run(f, &sg, yf);
    scores_run(u, &sg, yu);
    double d = tg_fuse_test_difference(yf, yu, n);
    if (!(d <= (c->bf16 ? 0.05 : 1e-6)))
        tg_test_fail(__FILE__, __LINE__, "%s: fused %.3g from unfused f32", label, d);
    for (int fault = 0; fault <= 1; fault++) {
        TG_CHECK_OK(tg_session_verify_next_run(f));
        tg_verify_test_fault_node = fault ? tg_tensor_id(sg.mm) : -1;
        tg_verify_test_fault_from = 0;
        scores_run(f, &sg, yf);
        tg_verify_test_fault_node = -1;
        tg_fuse_test_rows(f, "fused: matmul", fault, label);
    }
    tg_free(yf), tg_free(yu);
    tg_session_destroy(f), tg_session_destroy(u);
    tg_graph_destroy(sg.g);
}

static void test_scores_fused(void)
{
    bool has_bf16 = tg_dnnl_isa() >= dnnl_cpu_isa_avx512_core_bf16;
    int k = 0;
    for (int B = 1; B <= 2; B++)
        for (int threads = 1; threads <= 2; threads++)
            for (int kind = 0; kind < 3; kind++, k++) {
                scores_case c = {B,       4,          8 + 3 * kind, 16,   kind,
                                 threads, k % 2 == 1, k % 3 == 2,   false};
                char label[96];
                snprintf(label, sizeof label, "scores B %d, mask kind %d, %d threads%s%s", B, kind,
                         threads, c.computed_mask ? ", mask computed" : "",
                         c.mask_first ? ", mask first" : "");
                check_scores(&c, label);
                if (has_bf16 && kind == 0) {
                    c.bf16 = true;
                    strcat(label, ", 32.bf16");
                    check_scores(&c, label);
                }
            }
}

/* A classifier at batch 1: rows that 2 threads do not divide, so the
 * products run in parts of their output columns (matmul_dnnl.c's
 * col_parts), each with its own slice of the packed weights, bias and
 * residual: 40 -> 72 (bias add, GELU, residual; parts of 32 and 40
 * columns) -> 51 (the linear's own bias; 32 and 19: odd). */
#define CLS_OUT 51
typedef struct cls_graph {
    tg_graph *g;
    tg_tensor *x, *r, *y;
} cls_graph;

static cls_graph cls_build(void)
{
    cls_graph c = {.g = tg_graph_create()};
    tg_graph_set_training(c.g, false);
    c.x = tg_input(c.g, "x", TG_F32, tg_shape2(1, 40));
    c.r = tg_input(c.g, "r", TG_F32, tg_shape2(1, 72));
    tg_tensor *w0 = param(c.g, "w", 0, tg_shape2(72, 40), 40);
    tg_tensor *b0 = param(c.g, "b", 0, tg_shape1(72), 4);
    tg_tensor *h = tg_gelu(c.g, tg_add(c.g, tg_linear(c.g, c.x, w0, NULL), b0));
    h = tg_add(c.g, h, c.r);
    tg_tensor *w1 = param(c.g, "w", 1, tg_shape2(CLS_OUT, 72), 72);
    tg_tensor *b1 = param(c.g, "b", 1, tg_shape1(CLS_OUT), 4);
    c.y = tg_linear(c.g, h, w1, b1);
    tg_tensor_mark_output(c.y);
    TG_CHECK_OK(tg_graph_status(c.g));
    return c;
}

static void cls_run(tg_session *s, const cls_graph *c, float out[CLS_OUT])
{
    tg_rng r;
    tg_rng_seed(&r, 5);
    write_random(s, c->x, &r, 1);
    write_random(s, c->r, &r, 1);
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, c->y, out, CLS_OUT * sizeof(float)));
}

/* The products of s planned in column parts. */
static int column_parts(tg_session *s)
{
    const tg_program *p = tg_session_program(s);
    int n = 0;
    for (int i = 0; i < p->graph->n_nodes; i++)
        n += strstr(p->plans[i].kernel, "columns in 2 parts") != NULL;
    return n;
}

static void test_columns_split(void)
{
    bool has_bf16 = tg_dnnl_isa() >= dnnl_cpu_isa_avx512_core_bf16;
    for (int bf16 = 0; bf16 <= has_bf16; bf16++) {
        cls_graph c = cls_build();
        tg_session *one = bf16 ? open_bf16(c.g, 1, true) : tg_fuse_test_open(c.g, 1, true);
        tg_session *two = bf16 ? open_bf16(c.g, 2, true) : tg_fuse_test_open(c.g, 2, true);
        const char *label = bf16 ? "classifier, 32.bf16" : "classifier, f32";
        TG_CHECK(column_parts(one) == 0);
        if (column_parts(two) != 2)
            tg_test_fail(__FILE__, __LINE__, "%s: %d products in column parts, want 2", label,
                         column_parts(two));
        float y1[CLS_OUT], y2[CLS_OUT];
        cls_run(one, &c, y1);
        cls_run(two, &c, y2);
        double d = tg_fuse_test_difference(y2, y1, CLS_OUT);
        printf("  %s: 2 threads (column parts) %.3g from 1\n", label, d);
        if (!(d <= (bf16 ? 1e-2 : 1e-5)))
            tg_test_fail(__FILE__, __LINE__, "%s: column parts %.3g from one thread's", label, d);
        TG_CHECK_OK(tg_session_verify_next_run(two));
        cls_run(two, &c, y2);
        const tg_verify_report *rep = tg_session_verify_report(two);
        TG_CHECK(rep != NULL && tg_verify_rows(rep) > 0);
        for (int i = 0; rep && i < tg_verify_rows(rep); i++)
            if (tg_verify_row_at(rep, i)->verdict == TG_VERIFY_BEYOND)
                tg_test_fail(__FILE__, __LINE__, "%s: %s beyond tolerance", label,
                             tg_verify_row_at(rep, i)->name);
        tg_session_destroy(one), tg_session_destroy(two);
        tg_graph_destroy(c.g);
    }
}

int main(void)
{
    TG_RUN(test_random_chains_match_unfused);
    TG_RUN(test_packing_follows_writes);
    TG_RUN(test_nothing_fused_where_seen);
    TG_RUN(test_bf16_operands_in_place);
    TG_RUN(test_bf16_chains_fused);
    TG_RUN(test_nan_passes);
    TG_RUN(test_scores_fused);
    TG_RUN(test_columns_split);
    return tg_test_finish();
}
