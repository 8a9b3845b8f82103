/* backend/cpu/conv_wgrad_mm.c - a convolution's weight gradient over a small output
 * map as one matrix product (oneDNN's matmul) over the whole batch.
 *
 * dW[K][C R S] = dyT[K][P] . col[P][C R S], P = N * OH * OW. On maps of at
 * most 4 pixels (ResNet-50's layer4 at 64x64 images) oneDNN's convolution
 * kernels split their work by pixels and reach 35-95 GFLOP/s (f32 and
 * bf16); a matmul of the same sums runs at 90-110 in f32 and about 200 in
 * bf16 (brgemm), since its inner dimension is the whole batch's pixels.
 *
 * dy is reordered (in the multiply type) into [K][N][OH][OW], which is dyT;
 * x into [C][N][H][W], from which im2col writes col transposed,
 * [C][R][S][N][OH][OW] (a 1x1 kernel with stride 1 and no padding reads x's
 * copy as it is). The product is cut into `parts` bands of K rows, one per
 * device thread, each a one-thread primitive with its own scratchpad; the
 * reorders run on the calling thread, the im2col over the pool. Every
 * buffer is in the node's planned scratch.
 */
#include "backend/cpu/conv_wgrad_mm.h"
#include "ops/broadcast.h"
#include "backend/cpu/dnnl_util.h"

#include "core/alloc.h"

#include <stdio.h>
#include <string.h>

struct tg_wgrad_mm {
    tg_conv_geom g;
    int parts;                   /* bands of K rows, one primitive run each */
    dnnl_primitive_t prim;       /* one band's product */
    dnnl_primitive_t reorder[2]; /* dy -> dyT, x -> xT */
    dnnl_memory_desc_t user[2], inner[2], reorder_scratch[2];
    dnnl_memory_desc_t a_md, b_md, c_md, scratch_md; /* a band's */
    size_t esz;                                      /* bytes of a multiplied element */
    size_t out_esz;                                  /* of the gradient as stored */
    bool im2col;                                     /* else col is xT itself */
    size_t off_dyt, off_xt, off_col, off_rs, off_sp, sp_bytes;
};

bool tg_wgrad_mm_applies(const tg_conv_geom *g)
{
    return g->G == 1 && g->OH * g->OW <= 4;
}

/* dims {N, C, H, W} stored as [C][N][H][W] */
static dnnl_status_t channel_major_md(dnnl_memory_desc_t *md, const dnnl_dims_t d,
                                      dnnl_data_type_t dt)
{
    dnnl_dims_t st = {d[2] * d[3], d[0] * d[2] * d[3], d[3], 1};
    return dnnl_memory_desc_init_by_strides(md, 4, d, dt, st);
}

static dnnl_data_type_t dnnl_type(tg_dtype t)
{
    return t == TG_BF16 ? dnnl_bf16 : dnnl_f32;
}

/* The reorder of operand k (0: dy, 1: x) from its stored layout into the
 * channel-major copy. */
static dnnl_status_t make_reorder(tg_wgrad_mm *m, int k, const dnnl_dims_t dims,
                                  const tg_plan_opts *o, dnnl_data_type_t mul, dnnl_engine_t eng,
                                  const_dnnl_primitive_attr_t attr)
{
    dnnl_data_type_t st = dnnl_type(o->in_storage[k]);
    dnnl_status_t s = o->in_blocked[k]
                          ? dnnl_memory_desc_init_by_tag(&m->user[k], 4, dims, st, dnnl_nChw16c)
                          : tg_dnnl_plain_md(&m->user[k], 4, dims, st);
    if (s == dnnl_success)
        s = channel_major_md(&m->inner[k], dims, mul);
    if (s == dnnl_success)
        s = tg_dnnl_reorder_create(&m->user[k], &m->inner[k], eng, attr, &m->reorder[k],
                                   &m->reorder_scratch[k]);
    return s;
}

/* One band's product: A = dyT rows [K/parts][P], B = col as [P][CRS]
 * (stored [CRS][P]), C = the gradient's rows [K/parts][CRS]. */
static dnnl_status_t make_product(tg_wgrad_mm *m, const tg_plan_opts *o, dnnl_data_type_t mul,
                                  dnnl_engine_t eng, const_dnnl_primitive_attr_t attr,
                                  const char **impl)
{
    const tg_conv_geom *g = &m->g;
    int64_t P = g->N * g->OH * g->OW, crs = g->C * g->R * g->S, rows = g->K / m->parts;
    dnnl_dims_t ad = {rows, P}, bd = {P, crs}, cd = {rows, crs};
    dnnl_dims_t as = {P, 1}, bs = {1, P}, cs = {crs, 1};
    dnnl_status_t s = dnnl_memory_desc_init_by_strides(&m->a_md, 2, ad, mul, as);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_strides(&m->b_md, 2, bd, mul, bs);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_strides(&m->c_md, 2, cd, dnnl_type(o->out_storage), cs);
    dnnl_matmul_desc_t d;
    if (s == dnnl_success)
        s = dnnl_matmul_desc_init(&d, &m->a_md, &m->b_md, NULL, &m->c_md);
    dnnl_primitive_desc_t pd = NULL;
    tg_dnnl_threads(1);
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(&pd, &d, attr, eng, NULL);
    if (s != dnnl_success)
        return s;
    m->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, impl);
    s = dnnl_primitive_create(&m->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

/* Offsets of the copies, col, the reorders' scratchpad and the bands'
 * scratchpads in the planned scratch; returns its size. */
static size_t lay_out(tg_wgrad_mm *m)
{
    const tg_conv_geom *g = &m->g;
    size_t off = 0;
    m->off_dyt = off;
    off += tg_conv_align(dnnl_memory_desc_get_size(&m->inner[0]));
    m->off_xt = off;
    off += tg_conv_align(dnnl_memory_desc_get_size(&m->inner[1]));
    m->off_col = m->off_xt;
    if (m->im2col) {
        m->off_col = off;
        off += tg_conv_align((size_t)(g->C * g->R * g->S * g->N * g->OH * g->OW) * m->esz);
    }
    size_t r0 = dnnl_memory_desc_get_size(&m->reorder_scratch[0]);
    size_t r1 = dnnl_memory_desc_get_size(&m->reorder_scratch[1]);
    m->off_rs = off;
    off += tg_conv_align(r0 > r1 ? r0 : r1);
    m->off_sp = off;
    m->sp_bytes = tg_conv_align(dnnl_memory_desc_get_size(&m->scratch_md));
    return off + m->sp_bytes * (size_t)m->parts;
}

static tg_status create(tg_wgrad_mm *m, const tg_plan_opts *o, tg_kernel_plan *plan)
{
    tg_status ts;
    dnnl_engine_t eng = tg_dnnl_engine(&ts);
    if (!eng)
        return ts;
    const tg_conv_geom *g = &m->g;
    dnnl_data_type_t mul = o->compute == TG_BF16 ? dnnl_bf16 : dnnl_f32;
    m->esz = mul == dnnl_bf16 ? 2 : 4;
    m->out_esz = o->out_storage == TG_BF16 ? 2 : 4;
    m->parts = o->n_threads > 1 && g->K % o->n_threads == 0 ? o->n_threads : 1;
    m->im2col = !(g->R == 1 && g->S == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0);
    dnnl_dims_t y = {g->N, g->K, g->OH, g->OW}, x = {g->N, g->C, g->H, g->W};
    dnnl_primitive_attr_t attr;
    TG_TRY(tg_dnnl_check(dnnl_primitive_attr_create(&attr), "weight-gradient attributes"));
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success)
        s = make_reorder(m, 0, y, o, mul, eng, attr);
    if (s == dnnl_success)
        s = make_reorder(m, 1, x, o, mul, eng, attr);
    const char *impl = "?";
    if (s == dnnl_success)
        s = make_product(m, o, mul, eng, attr, &impl);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return tg_dnnl_check(s, "creating the weight-gradient matmul");
    plan->scratch = lay_out(m);
    plan->native_storage = true;
    bool blocked = o->in_blocked[0] || o->in_blocked[1];
    snprintf(plan->kernel, sizeof plan->kernel, "oneDNN matmul %s%s over %s%s", impl,
             mul == dnnl_bf16 ? " (bf16)" : "", m->im2col ? "im2col" : "x",
             blocked ? ", nChw16c" : "");
    return TG_OK;
}

tg_status tg_wgrad_mm_create(const tg_tensor *node, const tg_plan_opts *o, tg_kernel_plan *plan,
                             tg_wgrad_mm **out)
{
    for (int k = 0; k < 2; k++)
        if (o->in_storage[k] != TG_F32 && o->in_storage[k] != TG_BF16)
            return TG_ERR_UNSUPPORTED;
    if (o->out_storage != TG_F32 && o->out_storage != TG_BF16)
        return TG_ERR_UNSUPPORTED;
    tg_wgrad_mm *m = tg_calloc(1, sizeof *m);
    if (!m)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory planning its weight gradient", node->name);
    m->g = tg_conv_geom_of(node);
    tg_status s = create(m, o, plan);
    if (s != TG_OK) {
        tg_wgrad_mm_free(m);
        return s;
    }
    *out = m;
    return TG_OK;
}

void tg_wgrad_mm_free(tg_wgrad_mm *m)
{
    if (!m)
        return;
    if (m->prim)
        dnnl_primitive_destroy(m->prim);
    for (int k = 0; k < 2; k++)
        if (m->reorder[k])
            dnnl_primitive_destroy(m->reorder[k]);
    tg_free(m);
}

#define RUN_WHAT "running the weight-gradient matmul"

static dnnl_memory_t mem(const dnnl_memory_desc_t *md, void *ptr)
{
    return tg_dnnl_memory(md, ptr, RUN_WHAT);
}

static void exec(dnnl_primitive_t prim, int n, dnnl_exec_arg_t *args)
{
    tg_status ts;
    dnnl_stream_t stream = NULL;
    dnnl_status_t s = dnnl_stream_create(&stream, tg_dnnl_engine(&ts), dnnl_stream_default_flags);
    if (s == dnnl_success)
        s = dnnl_primitive_execute(prim, stream, n, args);
    if (s == dnnl_success)
        s = dnnl_stream_wait(stream);
    if (stream)
        dnnl_stream_destroy(stream);
    if (s != dnnl_success)
        tg_dnnl_run_failed(s, RUN_WHAT);
    for (int i = 0; i < n; i++)
        if (args[i].memory)
            dnnl_memory_destroy(args[i].memory);
}

static void run_reorder(const tg_wgrad_mm *m, int k, const void *src, unsigned char *scratch)
{
    size_t to = k == 0 ? m->off_dyt : m->off_xt;
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_FROM, mem(&m->user[k], (void *)src)},
        {DNNL_ARG_TO, mem(&m->inner[k], scratch + to)},
        {DNNL_ARG_SCRATCHPAD, mem(&m->reorder_scratch[k], scratch + m->off_rs)}};
    exec(m->reorder[k], args[2].memory ? 3 : 2, args);
}

typedef struct run_job {
    const tg_wgrad_mm *m;
    unsigned char *scratch;
    void *out;
} run_job;

/* col[(c, r, s)][(n, oy, ox)] = xT[c][n][iy][ix], zero where (iy, ix) is padding */
#define IM2COL_ROWS(T)                                                                             \
    do {                                                                                           \
        const T *xt = (const T *)(j->scratch + m->off_xt);                                         \
        T *col = (T *)(j->scratch + m->off_col);                                                   \
        for (int64_t row = begin; row < end; row++) {                                              \
            int64_t c = row / (g->R * g->S), r = row / g->S % g->R, s = row % g->S;                \
            T *dst = col + row * g->N * g->OH * g->OW;                                             \
            for (int64_t n = 0; n < g->N; n++)                                                     \
                for (int64_t oy = 0; oy < g->OH; oy++)                                             \
                    for (int64_t ox = 0; ox < g->OW; ox++) {                                       \
                        int64_t iy = oy * g->sh - g->ph + r * g->dh;                               \
                        int64_t ix = ox * g->sw - g->pw + s * g->dw;                               \
                        bool in = iy >= 0 && iy < g->H && ix >= 0 && ix < g->W;                    \
                        *dst++ = in ? xt[((c * g->N + n) * g->H + iy) * g->W + ix] : (T)0;         \
                    }                                                                              \
        }                                                                                          \
    } while (0)

static void im2col_rows(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const run_job *j = ctx;
    const tg_wgrad_mm *m = j->m;
    const tg_conv_geom *g = &m->g;
    if (m->esz == 2)
        IM2COL_ROWS(uint16_t);
    else
        IM2COL_ROWS(float);
}

/* Band p of the product: rows [p K/parts, (p + 1) K/parts) of dW. */
static void band(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const run_job *j = ctx;
    const tg_wgrad_mm *m = j->m;
    const tg_conv_geom *g = &m->g;
    int64_t rows = g->K / m->parts, P = g->N * g->OH * g->OW, crs = g->C * g->R * g->S;
    tg_dnnl_threads(1);
    for (int64_t p = begin; p < end; p++) {
        unsigned char *a = j->scratch + m->off_dyt + (size_t)(p * rows * P) * m->esz;
        unsigned char *c = (unsigned char *)j->out + (size_t)(p * rows * crs) * m->out_esz;
        dnnl_exec_arg_t args[4] = {
            {DNNL_ARG_SRC, mem(&m->a_md, a)},
            {DNNL_ARG_WEIGHTS, mem(&m->b_md, j->scratch + m->off_col)},
            {DNNL_ARG_DST, mem(&m->c_md, c)},
            {DNNL_ARG_SCRATCHPAD,
             mem(&m->scratch_md, j->scratch + m->off_sp + (size_t)p * m->sp_bytes)}};
        exec(m->prim, args[3].memory ? 4 : 3, args);
    }
}

void tg_wgrad_mm_run(const tg_wgrad_mm *m, const tg_kernel_args *a)
{
    tg_dnnl_threads(1);
    unsigned char *scratch = a->scratch;
    run_reorder(m, 0, a->in[0], scratch);
    run_reorder(m, 1, a->in[1], scratch);
    run_job j = {m, scratch, a->out};
    const tg_conv_geom *g = &m->g;
    int64_t rows = g->C * g->R * g->S;
    if (m->im2col)
        tg_par_for(a->pool, rows, rows * g->N * g->OH * g->OW, im2col_rows, &j);
    if (a->pool && m->parts > 1)
        tg_pool_for(a->pool, m->parts, band, &j);
    else
        band(&j, 0, m->parts, 0);
}
