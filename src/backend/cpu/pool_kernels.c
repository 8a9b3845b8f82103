/* backend/cpu/pool_kernels.c - the cpu backend's 2-D pooling kernels
 * (ops/pool.c is what they are): max and average, forward and gradient,
 * split over the device's threads by (sample, channel) planes, and their
 * blocked (nChw16c) variants, which give the same bits. */
#include "backend/backend.h"
#include "backend/cpu/blocked.h"
#include "core/bf16.h"
#include "core/clones.h"
#include "ops/pool.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
/* 16-float vectors pass only between always-inlined functions (core/clones.h) */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

/* ---- max ----------------------------------------------------------------------- */

typedef struct {
    const tg_kernel_args *a;
    tg_pool_geom g;
} pool_job;

/* The flat index (within a plane) of the first maximum of window (oy, ox). */
static inline int64_t window_argmax(const float *x, const tg_pool_geom *g, int64_t oy, int64_t ox)
{
    int64_t best = -1;
    float bv = -INFINITY;
    for (int ky = 0; ky < g->kh; ky++) {
        int64_t iy = oy * g->sh - g->pt + ky * g->dh;
        if (iy < 0 || iy >= g->ih)
            continue;
        for (int kx = 0; kx < g->kw; kx++) {
            int64_t ix = ox * g->sw - g->pl + kx * g->dw;
            if (ix < 0 || ix >= g->iw)
                continue;
            float v = x[iy * g->iw + ix];
            if (best < 0 || v > bv || (v != v && bv == bv)) { /* NaN wins, as in PyTorch */
                best = iy * g->iw + ix;
                bv = v;
            }
        }
    }
    return best;
}

/* 2x2 windows, stride 2, no padding or dilation, every window inside the
 * input (ceil_mode can add a last window that is not). */
static bool is_plain_2x2(const tg_pool_geom *g)
{
    return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->pt == 0 && g->pl == 0 &&
           g->pb == 0 && g->pr == 0 && g->dh == 1 && g->dw == 1 && 2 * g->oh <= g->ih &&
           2 * g->ow <= g->iw;
}

/* The outputs ox of a row whose tap kx reads inside the input:
 * [*lo, *hi). Taps outside are the padding, which max pooling skips. */
static void tap_columns(const tg_pool_geom *g, int kx, int64_t *lo, int64_t *hi)
{
    int64_t off = (int64_t)kx * g->dw - g->pl; /* ix = ox * sw + off */
    int64_t a = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    int64_t b = g->iw - 1 - off < 0 ? -1 : (g->iw - 1 - off) / g->sw;
    *lo = a;
    *hi = b + 1 < g->ow ? b + 1 : g->ow;
    if (*hi < *lo)
        *hi = *lo;
}

/* One tap over the outputs [lo, hi) of a row, `lanes` contiguous values a
 * pixel (1 in NCHW, a 16-channel block's in nChw16c): per lane the running
 * maximum takes the tap where it is larger, or NaN while the maximum is
 * not. */
TG_VEC_INLINE void max_tap(float *best, const float *row, int64_t lo, int64_t hi, int64_t sw,
                           int lanes)
{
    for (int64_t ox = lo; ox < hi; ox++) {
        const float *v = row + ox * sw * lanes;
        float *m = best + ox * lanes;
        for (int l = 0; l < lanes; l++)
            m[l] = (v[l] > m[l] || (v[l] != v[l] && m[l] == m[l])) ? v[l] : m[l];
    }
}

/* Max pooling of one plane (lanes 1) or one 16-channel block (lanes 16)
 * row by row and tap by tap (the window's taps in row-major order, as
 * window_argmax): each output row starts at -inf in y and for each tap its
 * valid outputs take the larger value, a loop over contiguous outputs that
 * the compiler vectorises. A tap replaces the running value when it is
 * larger, or NaN while the running value is not, so every window gets
 * window_argmax's value bit for bit (the first maximum; NaN wins; a
 * window's first tap replaces -inf, or is -inf itself) without per-window
 * bounds checks (ResNet's 3x3/2 pool, blocked: 3.5-4.5 ms against
 * onnxruntime's 1.1-1.3 at batch 8 with them). */
TG_VEC_INLINE void max_fwd_rows(const float *x, float *y, const tg_pool_geom *g, int lanes)
{
    for (int64_t oy = 0; oy < g->oh; oy++) {
        float *best = y + oy * g->ow * lanes;
        for (int64_t i = 0; i < g->ow * lanes; i++)
            best[i] = -INFINITY;
        for (int ky = 0; ky < g->kh; ky++) {
            int64_t iy = oy * g->sh - g->pt + (int64_t)ky * g->dh;
            if (iy < 0 || iy >= g->ih)
                continue;
            const float *row = x + iy * g->iw * lanes;
            for (int kx = 0; kx < g->kw; kx++) {
                int64_t lo, hi, off = (int64_t)kx * g->dw - g->pl;
                tap_columns(g, kx, &lo, &hi);
                if (g->sw == 2) /* the stride as a constant: a vectorised loop */
                    max_tap(best, row + off * lanes, lo, hi, 2, lanes);
                else
                    max_tap(best, row + off * lanes, lo, hi, g->sw, lanes);
            }
        }
    }
}

/* Rows up to this many outputs go through max_bwd_rows' row buffers. */
enum { MAX_ROW = 2048 };

TG_WIDE_KERNEL static void max_fwd_planes(void *ctx, int64_t begin, int64_t end, int t)
{
    const pool_job *j = ctx;
    const tg_pool_geom *g = &j->g;
    const float *x = j->a->in[0];
    float *y = j->a->out;
    bool plain = is_plain_2x2(g);
    for (int64_t pl = begin; pl < end; pl++) {
        const float *xp = x + pl * g->ih * g->iw;
        float *yp = y + pl * g->oh * g->ow;
        if (!plain) {
            max_fwd_rows(xp, yp, g, 1);
            continue;
        }
        for (int64_t oy = 0; oy < g->oh; oy++) { /* the common 2x2/2 case: no bounds checks */
            const float *r0 = xp + 2 * oy * g->iw, *r1 = r0 + g->iw;
            for (int64_t ox = 0; ox < g->ow; ox++) {
                float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
                float m = b > a ? b : a;
                m = c > m ? c : m;
                m = d > m ? d : m;
                yp[oy * g->ow + ox] = ((a != a) | (b != b) | (c != c) | (d != d)) ? NAN : m;
            }
        }
    }
    (void)t;
}

/* One 2x2 window of the gradient: dy to the first maximum in row-major
 * order (as window_argmax), 0 to the other three. Masks on the bits, not
 * branches: the winner is random and a branch on it mispredicts. */
TG_VEC_INLINE void max_bwd_2x2(const float *r0, const float *r1, float v, float *d0, float *d1)
{
    float a = r0[0], b = r0[1], c = r1[0], d = r1[1];
    uint32_t pa = (uint32_t)((a >= b) & (a >= c) & (a >= d));
    uint32_t pb = (uint32_t)(!pa & (b >= c) & (b >= d));
    uint32_t pc = (uint32_t)(!pa & !pb & (c >= d));
    uint32_t pd = !pa & !pb & !pc;
    uint32_t bits, out[4];
    memcpy(&bits, &v, sizeof bits);
    out[0] = bits & (0u - pa);
    out[1] = bits & (0u - pb);
    out[2] = bits & (0u - pc);
    out[3] = bits & (0u - pd);
    memcpy(d0, out, 2 * sizeof *d0);
    memcpy(d1, out + 2, 2 * sizeof *d1);
}

/* The gradient of one plane for overlapping or padded windows: per output
 * row, the first maximum of every window found tap by tap as in
 * max_fwd_rows (value and flat index), then dy added at those indices in
 * output order, the order of the per-window loop it replaces. */
static void max_bwd_rows(const float *xp, const float *dyp, float *dxp, const tg_pool_geom *g,
                         float *best, int32_t *arg)
{
    for (int64_t k = 0; k < g->ih * g->iw; k++)
        dxp[k] = 0.0f;
    for (int64_t oy = 0; oy < g->oh; oy++) {
        for (int64_t ox = 0; ox < g->ow; ox++) {
            best[ox] = -INFINITY;
            arg[ox] = -1;
        }
        for (int ky = 0; ky < g->kh; ky++) {
            int64_t iy = oy * g->sh - g->pt + (int64_t)ky * g->dh;
            if (iy < 0 || iy >= g->ih)
                continue;
            const float *row = xp + iy * g->iw;
            for (int kx = 0; kx < g->kw; kx++) {
                int64_t lo, hi, off = (int64_t)kx * g->dw - g->pl;
                tap_columns(g, kx, &lo, &hi);
                for (int64_t ox = lo; ox < hi; ox++) {
                    float v = row[ox * g->sw + off], m = best[ox];
                    bool take = arg[ox] < 0 || v > m || (v != v && m == m);
                    best[ox] = take ? v : m;
                    arg[ox] = take ? (int32_t)(iy * g->iw + ox * g->sw + off) : arg[ox];
                }
            }
        }
        const float *dyr = dyp + oy * g->ow;
        for (int64_t ox = 0; ox < g->ow; ox++)
            dxp[arg[ox]] += dyr[ox];
    }
}

TG_WIDE_KERNEL static void max_bwd_planes(void *ctx, int64_t begin, int64_t end, int t)
{
    const pool_job *j = ctx;
    const tg_pool_geom *g = &j->g;
    const float *dy = j->a->in[0], *x = j->a->in[1];
    float *dx = j->a->out;
    float best[MAX_ROW];
    int32_t arg[MAX_ROW];
    for (int64_t pl = begin; pl < end; pl++) {
        const float *xp = x + pl * g->ih * g->iw, *dyp = dy + pl * g->oh * g->ow;
        float *dxp = dx + pl * g->ih * g->iw;
        if (is_plain_2x2(g)) {
            /* Windows do not overlap: every covered element is written once,
             * branch-free (the winner gets dy, the others 0), and only the odd
             * last row or column outside every window is cleared. */
            for (int64_t oy = 0; oy < g->oh; oy++) {
                const float *r0 = xp + 2 * oy * g->iw, *r1 = r0 + g->iw;
                float *d0 = dxp + 2 * oy * g->iw, *d1 = d0 + g->iw;
                const float *dyr = dyp + oy * g->ow;
                for (int64_t ox = 0; ox < g->ow; ox++)
                    max_bwd_2x2(r0 + 2 * ox, r1 + 2 * ox, dyr[ox], d0 + 2 * ox, d1 + 2 * ox);
                for (int64_t ix = 2 * g->ow; ix < g->iw; ix++)
                    d0[ix] = d1[ix] = 0.0f;
            }
            for (int64_t k = 2 * g->oh * g->iw; k < g->ih * g->iw; k++)
                dxp[k] = 0.0f;
            continue;
        }
        if (g->ow <= MAX_ROW && g->ih * g->iw <= INT32_MAX) {
            max_bwd_rows(xp, dyp, dxp, g, best, arg);
            continue;
        }
        for (int64_t k = 0; k < g->ih * g->iw; k++)
            dxp[k] = 0.0f;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++)
                dxp[window_argmax(xp, g, oy, ox)] += dyp[oy * g->ow + ox];
    }
    (void)t;
}

/* ---- average ------------------------------------------------------------------------ */

/* The means of `count` (at most 16) whole planes of n floats, side by
 * side: each plane summed in the order the blocked kernel sums it (so the
 * two layouts agree to the bit), 16 independent running sums where one
 * waited an add's latency per element. mobilenet_v3_large's squeeze-excite
 * pools in NCHW (channels that are no whole blocks) took 17-65 us each
 * plane by plane at batch 1 against onnxruntime's 4-11
 * (docs/performance.md). */
static void plane_means(const float *p, int64_t n, int count, float inv, float *mean)
{
    float acc[16] = {0};
    for (int64_t i = 0; i < n; i++)
        for (int l = 0; l < count; l++)
            acc[l] += p[l * n + i];
    for (int l = 0; l < count; l++)
        mean[l] = acc[l] * inv;
}

/* Whether every output of an average pool is the mean of its whole plane
 * (a global pool); *inv is then 1 / the count. */
static bool whole_plane(const tg_pool_geom *g, float *inv)
{
    int64_t y0, y1, x0, x1;
    if (g->oh != 1 || g->ow != 1)
        return false;
    *inv = 1.0f / (float)tg_pool_window_bounds(g, 0, 0, &y0, &y1, &x0, &x1);
    return y0 == 0 && y1 == g->ih && x0 == 0 && x1 == g->iw;
}

static void avg_planes(void *ctx, int64_t begin, int64_t end, int t)
{
    const pool_job *j = ctx;
    const tg_pool_geom *g = &j->g;
    bool bwd = j->a->node->op == TG_OP_AVGPOOL2D_BWD;
    const float *src = j->a->in[0];
    float *dst = j->a->out;
    int64_t in_plane = g->ih * g->iw, out_plane = g->oh * g->ow;
    float whole_inv;
    if (!bwd && whole_plane(g, &whole_inv)) {
        for (int64_t pl = begin; pl < end; pl += 16)
            plane_means(src + pl * in_plane, in_plane, end - pl < 16 ? (int)(end - pl) : 16,
                        whole_inv, dst + pl);
        return;
    }
    for (int64_t pl = begin; pl < end; pl++) {
        /* forward: x plane -> y plane; backward: dy plane -> dx plane */
        const float *sp = src + pl * (bwd ? out_plane : in_plane);
        float *dp = dst + pl * (bwd ? in_plane : out_plane);
        if (bwd)
            for (int64_t k = 0; k < in_plane; k++)
                dp[k] = 0.0f;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t y0, y1, x0, x1;
                float inv = 1.0f / (float)tg_pool_window_bounds(g, oy, ox, &y0, &y1, &x0, &x1);
                float acc = 0.0f, v = bwd ? sp[oy * g->ow + ox] * inv : 0.0f;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) {
                        if (bwd)
                            dp[iy * g->iw + ix] += v;
                        else
                            acc += sp[iy * g->iw + ix];
                    }
                if (!bwd)
                    dp[oy * g->ow + ox] = acc * inv;
            }
    }
    (void)t;
}

/* ---- the blocked layout (backend/cpu/blocked.h) ---------------------------------------------- */

/* On nChw16c a "plane" is a block of 16 channels of one sample: each pixel
 * one vector of 16 lanes, so a window's taps are vector maxima or sums. The
 * arithmetic per lane is the NCHW kernels' (first maximum, NaN wins; the
 * same divisors), so both layouts give the same bits. */
#define LANES TG_CHANNEL_BLOCK

/* Per lane: the first maximum of window (oy, ox) in best[] and the pixel
 * (iy * iw + ix) it came from, for the gradient. Loops over the 16 lanes,
 * which the compiler turns into vector compares and blends. */
static void window_max_lanes(const float *xb, const tg_pool_geom *g, int64_t oy, int64_t ox,
                             float *best, int32_t *arg)
{
    bool first = true;
    for (int ky = 0; ky < g->kh; ky++) {
        int64_t iy = oy * g->sh - g->pt + (int64_t)ky * g->dh;
        if (iy < 0 || iy >= g->ih)
            continue;
        for (int kx = 0; kx < g->kw; kx++) {
            int64_t ix = ox * g->sw - g->pl + (int64_t)kx * g->dw;
            if (ix < 0 || ix >= g->iw)
                continue;
            const float *v = xb + (iy * g->iw + ix) * LANES;
            int32_t at = (int32_t)(iy * g->iw + ix);
            if (first) {
                memcpy(best, v, LANES * sizeof *best);
                for (int l = 0; l < LANES; l++)
                    arg[l] = at;
                first = false;
                continue;
            }
            for (int l = 0; l < LANES; l++) {
                int take = (v[l] > best[l]) | ((v[l] != v[l]) & (best[l] == best[l]));
                best[l] = take ? v[l] : best[l];
                arg[l] = take ? at : arg[l];
            }
        }
    }
}

TG_WIDE_KERNEL static void max_blocked(void *ctx, int64_t begin, int64_t end, int t)
{
    const pool_job *j = ctx;
    const tg_pool_geom *g = &j->g;
    int64_t in_px = g->ih * g->iw, out_px = g->oh * g->ow;
    (void)t;
    if (j->a->node->op != TG_OP_MAXPOOL2D_BWD) {
        for (int64_t b = begin; b < end; b++)
            max_fwd_rows((const float *)j->a->in[0] + b * in_px * LANES,
                         (float *)j->a->out + b * out_px * LANES, g, LANES);
        return;
    }
    /* the gradient: dy to each lane's first maximum */
    const float *x = j->a->in[1], *dy = j->a->in[0];
    float *out = j->a->out;
    for (int64_t b = begin; b < end; b++) {
        const float *xb = x + b * in_px * LANES;
        float *dxb = out + b * in_px * LANES;
        memset(dxb, 0, (size_t)in_px * LANES * sizeof(float));
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t o = (b * out_px + oy * g->ow + ox) * LANES;
                int32_t arg[LANES];
                float best[LANES];
                window_max_lanes(xb, g, oy, ox, best, arg);
                for (int l = 0; l < LANES; l++)
                    dxb[(int64_t)arg[l] * LANES + l] += dy[o + l];
            }
    }
}

/* The sum of window (oy, ox) of block xb (element offset), per lane in the
 * order of the NCHW kernel (rows, then columns), each pixel read in its
 * storage (in_bf16 a constant where avg_fwd_loop passes one). */
TG_VEC_INLINE tg_f32x16 window_sum(const void *x, bool in_bf16, int64_t xb, const tg_pool_geom *g,
                                   int64_t y0, int64_t y1, int64_t x0, int64_t x1,
                                   tg_bf16x16_ops cv)
{
    tg_f32x16 acc = {0};
    for (int64_t iy = y0; iy < y1; iy++)
        for (int64_t ix = x0; ix < x1; ix++)
            acc += tg_x16_load(cv, x, in_bf16, xb + (iy * g->iw + ix) * LANES);
    return acc;
}

/* The average pool's forward on blocks [begin, end), x and y in f32 or
 * bf16 as the engine stores them (tg_kernel_args.in_type, out_type): read
 * in place, summed in f32, rounded once. Staged, mobilenet_v3_large's
 * squeeze-excite pools took 0.14-0.83 ms each in bf16 against 0.07-0.43 in
 * f32 (batch 32, 1 thread): the whole map was widened into a copy first. */
TG_VEC_INLINE void avg_fwd_loop(const pool_job *j, int64_t begin, int64_t end, tg_bf16x16_ops cv)
{
    const tg_pool_geom *g = &j->g;
    bool in_bf16 = j->a->in_type[0] == TG_BF16, out_bf16 = j->a->out_type == TG_BF16;
    int64_t in_px = g->ih * g->iw, out_px = g->oh * g->ow;
    for (int64_t b = begin; b < end; b++)
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t y0, y1, x0, x1, xb = b * in_px * LANES;
                float inv = 1.0f / (float)tg_pool_window_bounds(g, oy, ox, &y0, &y1, &x0, &x1);
                tg_f32x16 acc = in_bf16 ? window_sum(j->a->in[0], true, xb, g, y0, y1, x0, x1, cv)
                                        : window_sum(j->a->in[0], false, xb, g, y0, y1, x0, x1, cv);
                tg_x16_store(cv, j->a->out, out_bf16, (b * out_px + oy * g->ow + ox) * LANES,
                             acc * inv);
            }
}

TG_BF16_POOL_FNS(avg_fwd_blocks, avg_fwd_loop, TG_BF16X16_GENERIC, TG_BF16X16_HW)

/* The average pool's gradient: each dy spread over its window. */
TG_WIDE_KERNEL static void avg_bwd_blocked(void *ctx, int64_t begin, int64_t end, int t)
{
    const pool_job *j = ctx;
    const tg_pool_geom *g = &j->g;
    const float *src = j->a->in[0];
    float *dst = j->a->out;
    int64_t in_px = g->ih * g->iw, out_px = g->oh * g->ow;
    for (int64_t b = begin; b < end; b++) {
        const float *sb = src + b * out_px * LANES;
        float *db = dst + b * in_px * LANES;
        memset(db, 0, (size_t)in_px * LANES * sizeof(float));
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t y0, y1, x0, x1;
                float inv = 1.0f / (float)tg_pool_window_bounds(g, oy, ox, &y0, &y1, &x0, &x1);
                float v[LANES];
                const float *so = sb + (oy * g->ow + ox) * LANES;
                for (int l = 0; l < LANES; l++)
                    v[l] = so[l] * inv;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++)
                        for (int l = 0; l < LANES; l++)
                            db[(iy * g->iw + ix) * LANES + l] += v[l];
            }
    }
    (void)t;
}

bool tg_pool_blocked_run(const tg_kernel_args *a)
{
    if (!a->blocked)
        return false;
    pool_job j = {
        a, tg_pool_geom_of(a->node, tg_pool_input_shape(a->node), tg_pool_output_shape(a->node))};
    tg_op op = a->node->op;
    bool is_max = op == TG_OP_MAXPOOL2D || op == TG_OP_MAXPOOL2D_BWD;
    tg_pool_fn fn = is_max                      ? max_blocked
                    : op == TG_OP_AVGPOOL2D_BWD ? avg_bwd_blocked
                                                : TG_BF16_POOL_FN(avg_fwd_blocks);
    tg_pool_for(a->pool, j.g.planes / LANES, fn, &j);
    return true;
}

/* Every pooling kernel splits the work by (sample, channel) planes. */
static void run_planes(const tg_kernel_args *a, tg_pool_fn fn)
{
    pool_job j = {
        a, tg_pool_geom_of(a->node, tg_pool_input_shape(a->node), tg_pool_output_shape(a->node))};
    tg_pool_for(a->pool, j.g.planes, fn, &j);
}

static void fwd_maxpool(const tg_kernel_args *a)
{
    if (!tg_pool_blocked_run(a))
        run_planes(a, max_fwd_planes);
}
static void fwd_maxpool_bwd(const tg_kernel_args *a)
{
    if (!tg_pool_blocked_run(a))
        run_planes(a, max_bwd_planes);
}
static void fwd_avgpool(const tg_kernel_args *a)
{
    if (!tg_pool_blocked_run(a))
        run_planes(a, avg_planes);
}

const tg_kernel_def tg_cpu_kernel_MAXPOOL2D = {.forward = fwd_maxpool};
const tg_kernel_def tg_cpu_kernel_MAXPOOL2D_BWD = {.forward = fwd_maxpool_bwd};
/* The blocked forward reads and writes bf16 in place (avg_fwd_loop). */
static bool avgpool_reads_bf16(const tg_tensor *node, bool blocked)
{
    return blocked && node->op == TG_OP_AVGPOOL2D;
}

const tg_kernel_def tg_cpu_kernel_AVGPOOL2D = {.forward = fwd_avgpool,
                                               .reads_bf16 = avgpool_reads_bf16};
const tg_kernel_def tg_cpu_kernel_AVGPOOL2D_BWD = {.forward = fwd_avgpool};
