/* bench/bench_matmul.c - GFLOP/s of the products a BERT-base layer's
 * training step makes, on one thread: OpenBLAS sgemm (backend/cpu/blas.h) against
 * oneDNN's matmul primitive in f32 and with bf16 operands (f32 result),
 * measured in the same run. This is the ceiling of bench_bert: the encoder
 * spends most of its step in these products, so its ratio to PyTorch (whose
 * products are the same OpenBLAS) and bf16's speed-up over f32 are bounded
 * by what these figures allow. The oneDNN implementation name is printed
 * (on AVX2 without AVX-512 bf16 falls back to a reference kernel).
 *
 * A first line gives the core's f32 FMA peak (AVX2), the ceiling of both.
 * One JSON line per shape: {"bench":"matmul","shape":...,"openblas":...,
 * "dnnl_f32":...,"dnnl_bf16":...,"impl_f32":...,"impl_bf16":...}: the best
 * GFLOP/s of single runs that alternate between the three kernels (-1:
 * oneDNN has no such kernel), so that the load of a shared machine, which
 * varies from one moment to the next, falls on all three alike.
 *
 * Usage: bench_matmul [seconds per case, default 0.5]
 */
#include "bench_util.h"
#include "backend/cpu/blas.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/simd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mm_case {
    const char *name;
    int batch, M, N, K;
    bool ta, tb;
} mm_case;

static double min_seconds = 0.5;

static float *random_buf(size_t n)
{
    float *p = malloc(n * sizeof(float));
    uint32_t r = 7;
    for (size_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        p[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

/* One run of the case on OpenBLAS (every batch element), in seconds. */
static double openblas_once(const mm_case *c, const float *A, const float *B, float *C)
{
    double t0 = bench_now();
    for (int b = 0; b < c->batch; b++)
        tg_sgemm(c->ta, c->tb, c->M, c->N, c->K, 1.0f, A + (size_t)b * c->M * c->K,
                 c->ta ? c->M : c->K, B + (size_t)b * c->K * c->N, c->tb ? c->K : c->N, 0.0f,
                 C + (size_t)b * c->M * c->N, c->N);
    return bench_now() - t0;
}

/* oneDNN's matmul of a case, made once. */
typedef struct dnnl_mm {
    dnnl_primitive_t prim;
    dnnl_memory_t m[3];
    dnnl_stream_t stream;
    void *a16, *b16;
} dnnl_mm;

/* Makes oneDNN's matmul of the case with operands in `dt` (bf16 operands
 * converted once, as a planned kernel would keep them); false when oneDNN
 * has none. *impl names the implementation. */
static bool dnnl_make(dnnl_mm *d, const mm_case *c, dnnl_data_type_t dt, const float *A,
                      const float *B, float *C, const char **impl)
{
    memset(d, 0, sizeof *d);
    tg_status ts;
    dnnl_engine_t eng = tg_dnnl_engine(&ts);
    int64_t bt = c->batch, M = c->M, N = c->N, K = c->K;
    dnnl_dims_t ad = {bt, M, K}, bd = {bt, K, N}, cd = {bt, M, N};
    dnnl_dims_t as = {M * K, c->ta ? 1 : K, c->ta ? M : 1};
    dnnl_dims_t bs = {K * N, c->tb ? 1 : N, c->tb ? K : 1};
    dnnl_dims_t cs = {M * N, N, 1};
    dnnl_memory_desc_t amd, bmd, cmd;
    dnnl_memory_desc_init_by_strides(&amd, 3, ad, dt, as);
    dnnl_memory_desc_init_by_strides(&bmd, 3, bd, dt, bs);
    dnnl_memory_desc_init_by_strides(&cmd, 3, cd, dnnl_f32, cs);
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    tg_dnnl_threads(1);
    *impl = "none";
    if (dnnl_matmul_desc_init(&md, &amd, &bmd, NULL, &cmd) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL) != dnnl_success)
        return false;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, impl);
    dnnl_primitive_create(&d->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    void *a = (void *)A, *b = (void *)B;
    if (dt == dnnl_bf16) {
        size_t na = (size_t)bt * M * K, nb = (size_t)bt * K * N;
        uint16_t *a16 = malloc(na * 2), *b16 = malloc(nb * 2);
        for (size_t i = 0; i < na; i++)
            memcpy(&a16[i], (const char *)&A[i] + 2, 2);
        for (size_t i = 0; i < nb; i++)
            memcpy(&b16[i], (const char *)&B[i] + 2, 2);
        a = d->a16 = a16, b = d->b16 = b16;
    }
    dnnl_memory_create(&d->m[0], &amd, eng, a);
    dnnl_memory_create(&d->m[1], &bmd, eng, b);
    dnnl_memory_create(&d->m[2], &cmd, eng, C);
    dnnl_stream_create(&d->stream, eng, dnnl_stream_default_flags);
    return true;
}

static double dnnl_once(const dnnl_mm *d)
{
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, d->m[0]}, {DNNL_ARG_WEIGHTS, d->m[1]}, {DNNL_ARG_DST, d->m[2]}};
    double t0 = bench_now();
    dnnl_primitive_execute(d->prim, d->stream, 3, args);
    dnnl_stream_wait(d->stream);
    return bench_now() - t0;
}

static void dnnl_free(dnnl_mm *d)
{
    if (!d->prim)
        return;
    dnnl_stream_destroy(d->stream);
    for (int k = 0; k < 3; k++)
        dnnl_memory_destroy(d->m[k]);
    dnnl_primitive_destroy(d->prim);
    free(d->a16);
    free(d->b16);
}

#if defined(__x86_64__)
#include <immintrin.h>

/* The core's f32 FMA peak: 10 independent accumulators in registers (two
 * FMA pipes of four-cycle latency need at least eight), best of short runs. */
__attribute__((target("avx2,fma"))) static double fma_peak_gflops(void)
{
    double best = 0;
    for (int run = 0; run < 20; run++) {
        const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
        __m256 c0 = _mm256_set1_ps(0), c1 = _mm256_set1_ps(1), c2 = _mm256_set1_ps(2),
               c3 = _mm256_set1_ps(3), c4 = _mm256_set1_ps(4), c5 = _mm256_set1_ps(5),
               c6 = _mm256_set1_ps(6), c7 = _mm256_set1_ps(7), c8 = _mm256_set1_ps(8),
               c9 = _mm256_set1_ps(9);
        const long iters = 2000000;
        double t0 = bench_now();
        for (long k = 0; k < iters; k++) {
            c0 = _mm256_fmadd_ps(c0, m, a), c1 = _mm256_fmadd_ps(c1, m, a);
            c2 = _mm256_fmadd_ps(c2, m, a), c3 = _mm256_fmadd_ps(c3, m, a);
            c4 = _mm256_fmadd_ps(c4, m, a), c5 = _mm256_fmadd_ps(c5, m, a);
            c6 = _mm256_fmadd_ps(c6, m, a), c7 = _mm256_fmadd_ps(c7, m, a);
            c8 = _mm256_fmadd_ps(c8, m, a), c9 = _mm256_fmadd_ps(c9, m, a);
        }
        double t = bench_now() - t0;
        __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                                 _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
        s = _mm256_add_ps(s, _mm256_add_ps(c8, c9));
        float sink[8];
        _mm256_storeu_ps(sink, s);
        double g = (double)iters * 10 * 16 / t / 1e9 + (sink[0] == 12345.0f);
        best = g > best ? g : best;
    }
    return best;
}
#endif

int main(int argc, char **argv)
{
    int usage = bench_usage(argc, argv, 1,
                            "usage: bench_matmul [seconds per case]\nGFLOP/s of BERT-base's "
                            "training products on one thread: OpenBLAS sgemm, oneDNN matmul f32 "
                            "and bf16. One JSON line per shape.\n");
    if (usage >= 0)
        return usage;
    if (argc > 1)
        min_seconds = atof(argv[1]);
    bench_passive_omp(argv);
#if defined(__x86_64__)
    if (tg_simd_level_get() >= TG_SIMD_AVX2)
        printf("{\"bench\":\"fma_peak\",\"threads\":1,\"gflops\":%.1f,\"load_average\":%.2f}\n",
               fma_peak_gflops(), bench_load_average());
#endif
    static const mm_case cases[] = {
        {"qkvo_fwd x w^T", 1, 1024, 768, 768, false, true},
        {"ffn1_fwd x w^T", 1, 1024, 3072, 768, false, true},
        {"ffn2_fwd x w^T", 1, 1024, 768, 3072, false, true},
        {"ffn1_dx dy w", 1, 1024, 768, 3072, false, false},
        {"ffn1_dw dy^T x", 1, 3072, 768, 1024, true, false},
        {"scores q k^T", 96, 128, 128, 64, false, true},
        {"context p v", 96, 128, 64, 128, false, false},
        {"context_dp dy v^T", 96, 128, 128, 64, false, true},
        {"context_dv p^T dy", 96, 128, 64, 128, true, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const mm_case *c = &cases[i];
        size_t na = (size_t)c->batch * c->M * c->K, nb = (size_t)c->batch * c->K * c->N;
        float *A = random_buf(na), *B = random_buf(nb);
        float *C = malloc((size_t)c->batch * c->M * c->N * sizeof(float));
        const char *i32 = "", *i16 = "";
        dnnl_mm d32, d16;
        bool has32 = dnnl_make(&d32, c, dnnl_f32, A, B, C, &i32);
        bool has16 = dnnl_make(&d16, c, dnnl_bf16, A, B, C, &i16);
        /* alternate single runs and keep each one's best: on a shared
         * machine the best run is the one least disturbed */
        double best[3] = {1e30, 1e30, 1e30}, t0 = bench_now();
        int rounds = 0;
        do {
            double t = openblas_once(c, A, B, C);
            best[0] = t < best[0] ? t : best[0];
            t = has32 ? dnnl_once(&d32) : 1e30;
            best[1] = t < best[1] ? t : best[1];
            t = has16 ? dnnl_once(&d16) : 1e30;
            best[2] = t < best[2] ? t : best[2];
            rounds++;
        } while (bench_now() - t0 < min_seconds || rounds < 3);
        double flops = 2.0 * c->batch * c->M * c->N * c->K;
        double ob = flops / best[0] / 1e9, d32g = has32 ? flops / best[1] / 1e9 : -1,
               d16g = has16 ? flops / best[2] / 1e9 : -1;
        dnnl_free(&d32);
        dnnl_free(&d16);
        printf("{\"bench\":\"matmul\",\"shape\":\"%s %dx(%dx%dx%d)\",\"threads\":1,"
               "\"openblas\":%.1f,\"dnnl_f32\":%.1f,\"dnnl_bf16\":%.1f,\"impl_f32\":\"%s\","
               "\"impl_bf16\":\"%s\",\"isa\":\"%s\",\"load_average\":%.2f}\n",
               c->name, c->batch, c->M, c->N, c->K, ob, d32g, d16g, i32, i16, tg_dnnl_isa_name(),
               bench_load_average());
        fflush(stdout);
        free(A);
        free(B);
        free(C);
    }
    return 0;
}
