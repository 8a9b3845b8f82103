/* ops/norm.c - batch, group and layer normalisation as separate ops for the
 * statistics and for the normalisation, so batch norm's running-statistics
 * update and the backward pass share one statistics tensor:
 *
 *   NORM_STATS(x) -> [2, G]           mean and biased variance per group
 *   NORM_APPLY(x, stats, gamma?, beta?) = (x - mean) / sqrt(var + eps) * gamma + beta
 *   RUNNING_STATS_UPDATE(running [2, C], stats [2, C])   mutates `running`
 *
 * and gradient ops, each reading what it needs:
 *   NORM_APPLY_BWD_X(dy, stats, gamma?)       dx with the statistics held constant
 *   NORM_APPLY_BWD_STATS(dy, x, stats, gamma?) -> [2, G]  d(mean), d(var)
 *   NORM_APPLY_BWD_AFFINE(dy, x, stats) -> [2, Caff]     d(gamma), d(beta)
 *   NORM_STATS_BWD(dstats, x, stats)          dx through the statistics
 * Autodiff adds the two paths into x, which gives exactly the usual
 * normalisation gradient (the gradient checks in tests/ops/test_norm.c
 * compare the whole composition with finite differences).
 *
 * Grouping (ops/norm.h: mode and its mode_arg), on x viewed as
 * [outer, G, inner] for the statistics and as [a, Caff, b] for gamma/beta:
 *   batch (0): x [N, C, ...]        stats per channel  [N, C, S]   affine [N, C, S]
 *   group (1, groups): x [N, C, ...] stats per (n, group) [1, N*groups, C/groups*S]
 *                                                                affine [N, C, S]
 *   layer (2, k): the last k dims   stats per row [1, rows, inner] affine [rows, inner, 1]
 * (S is the product of the dims after C). The other params (has_gamma,
 * has_beta, eps; RUNNING_STATS_UPDATE's momentum and count) are named in
 * ops/norm.h.
 */
#include "ops/norm.h"
#include "ops/broadcast.h"

#include "core/bf16.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

typedef struct norm_view {
    int64_t outer, G, inner; /* statistics groups */
    int64_t a, Caff, b;      /* affine parameters */
    int64_t count;           /* elements per group: outer * inner */
} norm_view;

/* The tensor whose shape defines the view: x or dy, by op. */
static const tg_tensor *shaped_input(const tg_tensor *node)
{
    return node->op == TG_OP_NORM_STATS_BWD ? node->in[1] : node->in[0];
}

static norm_view view_of_shape(const tg_node_params *p, tg_shape s)
{
    norm_view v;
    int64_t numel = tg_shape_numel(s);
    if (tg_norm_get_mode(p) == TG_NORM_LAYER) {
        int64_t inner = 1;
        for (int d = s.ndim - (int)tg_norm_get_mode_arg(p); d < s.ndim; d++)
            inner *= s.dim[d];
        v.outer = 1, v.inner = inner, v.G = inner ? numel / inner : 0;
        v.a = v.G, v.Caff = inner, v.b = 1;
    } else {
        int64_t N = s.dim[0], C = s.dim[1], S = 1;
        for (int d = 2; d < s.ndim; d++)
            S *= s.dim[d];
        v.a = N, v.Caff = C, v.b = S;
        if (tg_norm_get_mode(p) == TG_NORM_BATCH)
            v.outer = N, v.G = C, v.inner = S;
        else
            v.outer = 1, v.G = N * tg_norm_get_mode_arg(p),
            v.inner = C / tg_norm_get_mode_arg(p) * S;
    }
    v.count = v.outer * v.inner;
    return v;
}

static norm_view view_of(const tg_tensor *node)
{
    return view_of_shape(&node->p, shaped_input(node)->shape);
}

/* ---- shape rules ------------------------------------------------------------------------- */

static tg_status need_f32(const tg_tensor *t, const char *what)
{
    if (t->dtype != TG_F32)
        return tg_error(TG_ERR_DTYPE, "%s '%s' is %s; normalisation takes f32", what, t->name,
                        tg_dtype_name(t->dtype));
    return TG_OK;
}

static tg_status check_x(const tg_node_params *p, const tg_tensor *x)
{
    char s[96];
    tg_shape_str(x->shape, s, sizeof s);
    TG_TRY(need_f32(x, "x"));
    switch (tg_norm_get_mode(p)) {
    case TG_NORM_BATCH:
        if (x->shape.ndim < 2)
            return tg_error(TG_ERR_SHAPE, "batch norm needs x [N, C, ...], got %s", s);
        return TG_OK;
    case TG_NORM_GROUP:
        if (x->shape.ndim < 2)
            return tg_error(TG_ERR_SHAPE, "group norm needs x [N, C, ...], got %s", s);
        if (tg_norm_get_mode_arg(p) < 1 || x->shape.dim[1] % tg_norm_get_mode_arg(p) != 0)
            return tg_error(TG_ERR_SHAPE, "x %s: %lld channels do not split into %lld groups", s,
                            (long long)x->shape.dim[1], (long long)tg_norm_get_mode_arg(p));
        return TG_OK;
    case TG_NORM_LAYER:
        if (tg_norm_get_mode_arg(p) < 1 || tg_norm_get_mode_arg(p) > x->shape.ndim)
            return tg_error(TG_ERR_SHAPE, "x %s has no last %lld dimensions to normalise over", s,
                            (long long)tg_norm_get_mode_arg(p));
        return TG_OK;
    default:
        return tg_error(TG_ERR_INVALID_ARG, "unknown normalisation mode %lld",
                        (long long)tg_norm_get_mode(p));
    }
}

static tg_status check_same(const tg_tensor *t, tg_shape want, const char *what)
{
    TG_TRY(need_f32(t, what));
    if (!tg_shape_equal(t->shape, want)) {
        char a[96], b[96];
        return tg_error(TG_ERR_SHAPE, "%s %s must be %s", what, tg_shape_str(t->shape, a, sizeof a),
                        tg_shape_str(want, b, sizeof b));
    }
    return TG_OK;
}

/* gamma and beta: [C] for batch and group norm, the normalised dims for layer norm. */
static tg_shape affine_shape(const tg_node_params *p, tg_shape xs)
{
    if (tg_norm_get_mode(p) != TG_NORM_LAYER)
        return tg_shape1(xs.dim[1]);
    tg_shape s = tg_shape_of(0, NULL);
    for (int d = xs.ndim - (int)tg_norm_get_mode_arg(p); d < xs.ndim; d++)
        s.dim[s.ndim++] = xs.dim[d];
    return s;
}

static int n_affine(const tg_tensor *node)
{
    return (tg_norm_has_gamma(node) != 0) + (tg_norm_has_beta(node) != 0);
}

static tg_status check_affine(const tg_tensor *node, int first, bool beta_too)
{
    tg_shape want = affine_shape(&node->p, shaped_input(node)->shape);
    int k = first;
    if (tg_norm_has_gamma(node))
        TG_TRY(check_same(node->in[k++], want, "gamma"));
    if (beta_too && tg_norm_has_beta(node))
        TG_TRY(check_same(node->in[k++], want, "beta"));
    return TG_OK;
}

static tg_status infer_norm(tg_tensor *node)
{
    static const int base_inputs[] = {
        [TG_OP_NORM_STATS] = 1,           [TG_OP_NORM_STATS_BWD] = 3,
        [TG_OP_NORM_APPLY] = 2,           [TG_OP_NORM_APPLY_BWD_X] = 2,
        [TG_OP_NORM_APPLY_BWD_STATS] = 3, [TG_OP_NORM_APPLY_BWD_AFFINE] = 3,
    };
    int want = base_inputs[node->op];
    if (node->op == TG_OP_NORM_APPLY)
        want += n_affine(node);
    else if (node->op == TG_OP_NORM_APPLY_BWD_X || node->op == TG_OP_NORM_APPLY_BWD_STATS)
        want += tg_norm_has_gamma(node) != 0;
    if (node->n_in != want)
        return tg_error(TG_ERR_INVALID_ARG, "takes %d inputs, got %d", want, node->n_in);
    const tg_tensor *x = shaped_input(node);
    TG_TRY(check_x(&node->p, x));
    if (!(tg_norm_eps(node) > 0.0f) && node->op != TG_OP_NORM_STATS &&
        node->op != TG_OP_NORM_STATS_BWD)
        return tg_error(TG_ERR_INVALID_ARG, "eps %g must be positive", (double)tg_norm_eps(node));
    norm_view v = view_of(node);
    tg_shape stats = tg_shape2(2, v.G);
    node->dtype = TG_F32;
    switch (node->op) {
    case TG_OP_NORM_STATS:
        if (v.count == 0)
            return tg_error(TG_ERR_SHAPE, "normalising over no elements");
        node->shape = stats;
        return TG_OK;
    case TG_OP_NORM_STATS_BWD:
        TG_TRY(check_same(node->in[0], stats, "dstats"));
        TG_TRY(check_same(node->in[2], stats, "stats"));
        node->shape = x->shape;
        return TG_OK;
    case TG_OP_NORM_APPLY:
        TG_TRY(check_same(node->in[1], stats, "stats"));
        TG_TRY(check_affine(node, 2, true));
        node->shape = x->shape;
        return TG_OK;
    case TG_OP_NORM_APPLY_BWD_X:
        TG_TRY(check_same(node->in[1], stats, "stats"));
        TG_TRY(check_affine(node, 2, false));
        node->shape = x->shape;
        return TG_OK;
    case TG_OP_NORM_APPLY_BWD_STATS:
        TG_TRY(check_same(node->in[1], x->shape, "x"));
        TG_TRY(check_same(node->in[2], stats, "stats"));
        TG_TRY(check_affine(node, 3, false));
        node->shape = stats;
        return TG_OK;
    case TG_OP_NORM_APPLY_BWD_AFFINE:
        TG_TRY(check_same(node->in[1], x->shape, "x"));
        TG_TRY(check_same(node->in[2], stats, "stats"));
        node->shape = tg_shape2(2, v.Caff);
        return TG_OK;
    default:
        TG_UNREACHABLE_OP(node->op);
    }
}

static tg_status infer_running(tg_tensor *node)
{
    if (node->n_in != 2)
        return tg_error(TG_ERR_INVALID_ARG, "takes 2 inputs (running stats, batch stats), got %d",
                        node->n_in);
    const tg_tensor *r = node->in[0], *s = node->in[1];
    TG_TRY(need_f32(r, "running stats"));
    char a[96];
    if (r->shape.ndim != 2 || r->shape.dim[0] != 2)
        return tg_error(TG_ERR_SHAPE, "running stats '%s' %s must be [2, C]", r->name,
                        tg_shape_str(r->shape, a, sizeof a));
    TG_TRY(check_same(s, r->shape, "batch stats"));
    if (tg_norm_count(node) < 2)
        return tg_error(TG_ERR_SHAPE,
                        "expected more than 1 value per channel when training, "
                        "got %lld",
                        (long long)tg_norm_count(node));
    node->dtype = TG_F32;
    node->shape = tg_shape1(0);
    node->n_mutated = 1;
    node->role = TG_ROLE_UPDATE;
    return TG_OK;
}

static double flops_norm(const tg_tensor *node)
{
    double n = (double)tg_numel(shaped_input(node));
    switch (node->op) {
    case TG_OP_NORM_STATS:
        return 3 * n;
    case TG_OP_NORM_APPLY:
        return 2 * n + 2 * (double)n_affine(node) * n / 2;
    case TG_OP_NORM_APPLY_BWD_X:
        return 2 * n;
    case TG_OP_NORM_STATS_BWD:
    case TG_OP_NORM_APPLY_BWD_STATS:
    case TG_OP_NORM_APPLY_BWD_AFFINE:
        return 4 * n;
    default:
        TG_UNREACHABLE_OP(node->op);
    }
}

static double flops_running(const tg_tensor *node)
{
    return 6.0 * (double)tg_numel(node->in[0]);
}

/* ---- kernel arithmetic shared by the fast (float) and reference (double) paths ------------- */

/* Index helpers on the [outer, G, inner] and [a, Caff, b] views. A run is a
 * stretch of consecutive elements with one group and one affine index:
 * each (o, c) row of b elements for batch/group norm (b divides inner), and
 * for layer norm (b = 1) each row of inner elements with the affine index
 * running along it. */
static inline int64_t group_of(const norm_view *v, int64_t flat)
{
    return (flat / v->inner) % v->G;
}

/* The fast kernels: ranges of "rows" (a*Caff rows of b elements, or for
 * layer norm G rows of inner elements), one thread per range. */
typedef struct norm_job {
    const tg_tensor *node;
    norm_view v;
    const float *in[4];
    float *out;
    float eps;
} norm_job;

/* Per-group mean and rstd from stats (float kernels). */
static inline void mean_rstd(const float *stats, int64_t G, int64_t g, float eps, float *mean,
                             float *rstd)
{
    *mean = stats[g];
    *rstd = 1.0f / sqrtf(stats[G + g] + eps);
}

/* Rows: for layer norm a row is one group (inner elements, gamma along it);
 * otherwise a row is (o, c): b elements sharing group and gamma[c]. */
static bool is_layer(const tg_tensor *node)
{
    return tg_norm_mode(node) == TG_NORM_LAYER;
}

static int64_t n_rows(const tg_tensor *node, const norm_view *v)
{
    return is_layer(node) ? v->G : v->a * v->Caff;
}

static void elementwise_rows(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const norm_job *j = ctx;
    const norm_view *v = &j->v;
    const tg_tensor *node = j->node;
    bool layer = is_layer(node);
    int64_t len = layer ? v->inner : v->b;
    bool has_g = tg_norm_has_gamma(node) != 0, has_b = tg_norm_has_beta(node) != 0;
    for (int64_t r = begin; r < end; r++) {
        int64_t base = r * len;
        int64_t grp = layer ? r : group_of(v, base), c = layer ? 0 : r % v->Caff;
        float *o = j->out + base;
        switch (node->op) {
        case TG_OP_NORM_APPLY: {
            const float *x = j->in[0] + base, *st = j->in[1];
            const float *gam = has_g ? j->in[2] : NULL, *bet = has_b ? j->in[2 + has_g] : NULL;
            float mean, rstd;
            mean_rstd(st, v->G, grp, j->eps, &mean, &rstd);
            if (layer) {
                for (int64_t i = 0; i < len; i++) {
                    float y = (x[i] - mean) * rstd;
                    o[i] = y * (gam ? gam[i] : 1.0f) + (bet ? bet[i] : 0.0f);
                }
            } else {
                float s = rstd * (gam ? gam[c] : 1.0f), sh = (bet ? bet[c] : 0.0f) - mean * s;
                for (int64_t i = 0; i < len; i++)
                    o[i] = x[i] * s + sh;
            }
            break;
        }
        case TG_OP_NORM_APPLY_BWD_X: {
            const float *dy = j->in[0] + base, *st = j->in[1], *gam = has_g ? j->in[2] : NULL;
            float mean, rstd;
            mean_rstd(st, v->G, grp, j->eps, &mean, &rstd);
            if (layer)
                for (int64_t i = 0; i < len; i++)
                    o[i] = dy[i] * rstd * (gam ? gam[i] : 1.0f);
            else {
                float s = rstd * (gam ? gam[c] : 1.0f);
                for (int64_t i = 0; i < len; i++)
                    o[i] = dy[i] * s;
            }
            break;
        }
        case TG_OP_NORM_STATS_BWD: { /* dx = dmean / n + dvar * 2 (x - mean) / n */
            const float *ds = j->in[0], *x = j->in[1] + base, *st = j->in[2];
            float inv_n = 1.0f / (float)v->count, mean = st[grp];
            /* 2 / n first: 2 * d(var) alone overflows when d(var) is past half
             * of float's range (batch norm over 2 values, whose variance is
             * about eps: ResNet-101 at 16 x 16), while the product is finite */
            float a0 = ds[grp] * inv_n, a1 = ds[v->G + grp] * (2.0f * inv_n);
            for (int64_t i = 0; i < len; i++)
                o[i] = a0 + a1 * (x[i] - mean);
            break;
        }
        default:
            TG_UNREACHABLE_OP(node->op);
        }
    }
}

/* Sums over one run of contiguous elements, blocked: each block of
 * SUM_BLOCK elements is summed in 8 x 4 float lanes (GCC and clang vector
 * types, SSE2 on any x86-64), 4 values a lane, the lanes pairwise, and the
 * block's partial sum is added in double, as are the runs. The error then
 * stays that of a few float roundings whatever the run's length (a run is
 * a whole H x W plane, 12544 values at 112 x 112), where one float
 * accumulator per lane over the run grows with its length: with a large
 * mean (inputs offset from zero) that shifted the mean, and so every
 * normalised value, by many ulps. Short blocks matter too: deviations from
 * a large mean are multiples of the mean's ulp, their squares are exact,
 * and adding them to a float partial rounds one way more often than the
 * other, a bias that grows with the block (on the data of
 * tests/ops/test_norm_accuracy.c about 0.2 ulps of the variance at 4
 * values a lane, 1 ulp at 16). Plain loops here stay scalar: the compiler
 * will not reassociate a float sum by itself. */
typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));

/* elements per float partial sum: 4 a lane of 8 accumulators x 4 lanes */
enum { SUM_BLOCK = 128 };

static inline v4f load4(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline int64_t block_end(int64_t i, int64_t n, int64_t block)
{
    return n - i > block ? i + block : n;
}

/* s[0..2) += a block's 8 accumulators added pairwise, widened to double
 * (two 2-double vectors: a 4-double one is no SSE2 register). */
static inline void add_widened(v2d *s, v4f a, v4f b, v4f c, v4f d, v4f e, v4f f, v4f g, v4f h)
{
    v4f t = ((a + b) + (c + d)) + ((e + f) + (g + h));
    s[0] += (v2d){t[0], t[1]};
    s[1] += (v2d){t[2], t[3]};
}

static inline double hsum4d(const v2d *s)
{
    return (s[0][0] + s[0][1]) + (s[1][0] + s[1][1]);
}

/* x, or with sq its squared deviation from m (4 elements) */
static inline __attribute__((always_inline)) v4f term(const float *p, bool sq, v4f m)
{
    v4f v = load4(p), d = v - m;
    return sq ? d * d : v;
}

/* The sum of x[0..n), or with sq of (x - mean)^2: per block 32 elements a
 * step into the 8 accumulators (then 16 into the first 4); what the blocks
 * leave (fewer than 16) in double. */
static inline __attribute__((always_inline)) double blocked_sum(const float *x, int64_t n, bool sq,
                                                                float mean)
{
    v4f m = {mean, mean, mean, mean};
    v2d s[2] = {{0}};
    int64_t i = 0;
    while (i + 16 <= n) {
        v4f a = {0}, b = a, c = a, d = a, e = a, f = a, g = a, h = a;
        int64_t end = block_end(i, n, SUM_BLOCK);
        for (; i + 32 <= end; i += 32) {
            const float *p = x + i;
            a += term(p, sq, m), b += term(p + 4, sq, m), c += term(p + 8, sq, m);
            d += term(p + 12, sq, m), e += term(p + 16, sq, m), f += term(p + 20, sq, m);
            g += term(p + 24, sq, m), h += term(p + 28, sq, m);
        }
        if (i + 16 <= end) {
            const float *p = x + i;
            a += term(p, sq, m), b += term(p + 4, sq, m), c += term(p + 8, sq, m);
            d += term(p + 12, sq, m);
            i += 16;
        }
        add_widened(s, a, b, c, d, e, f, g, h);
    }
    double r = hsum4d(s);
    for (; i < n; i++)
        r += sq ? (double)(x[i] - mean) * (x[i] - mean) : (double)x[i];
    return r;
}

static double run_sum(const float *x, int64_t n)
{
    return blocked_sum(x, n, false, 0.0f);
}

static double run_sq_dev(const float *x, int64_t n, float mean)
{
    return blocked_sum(x, n, true, mean);
}

/* *s1 += sum g dy, *s2 += sum g dy (x - mean), with g[i] (or 1 if g is
 * NULL); blocks of SUM_BLOCK / 2 elements in 4 + 4 accumulators, 4 values
 * a lane, as above. */
static void run_dy_sums(const float *dy, const float *x, const float *g, int64_t n, float mean,
                        double *s1, double *s2)
{
    v4f m = {mean, mean, mean, mean}, z = {0};
    v2d sa[2] = {{0}}, sb[2] = {{0}};
    int64_t i = 0;
    while (i + 16 <= n) {
        v4f a0 = {0}, a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (int64_t e = block_end(i, n, SUM_BLOCK / 2); i + 16 <= e; i += 16) {
            v4f d0 = load4(dy + i), d1 = load4(dy + i + 4);
            v4f d2 = load4(dy + i + 8), d3 = load4(dy + i + 12);
            if (g) {
                d0 *= load4(g + i), d1 *= load4(g + i + 4);
                d2 *= load4(g + i + 8), d3 *= load4(g + i + 12);
            }
            a0 += d0, a1 += d1, a2 += d2, a3 += d3;
            b0 += d0 * (load4(x + i) - m), b1 += d1 * (load4(x + i + 4) - m);
            b2 += d2 * (load4(x + i + 8) - m), b3 += d3 * (load4(x + i + 12) - m);
        }
        add_widened(sa, a0, a1, a2, a3, z, z, z, z);
        add_widened(sb, b0, b1, b2, b3, z, z, z, z);
    }
    double a = hsum4d(sa), b = hsum4d(sb);
    for (; i < n; i++) {
        float d = dy[i] * (g ? g[i] : 1.0f);
        a += d;
        b += (double)d * (x[i] - mean);
    }
    *s1 += a;
    *s2 += b;
}

/* Reductions per group: NORM_STATS and NORM_APPLY_BWD_STATS. Each thread
 * owns a range of groups and walks the group's runs: outer x inner, and for
 * batch and group norm each inner part splits further into runs of b
 * elements sharing one gamma. */
static void group_reduce(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const norm_job *j = ctx;
    const norm_view *v = &j->v;
    const tg_tensor *node = j->node;
    int64_t G = v->G;
    bool layer = is_layer(node), has_g = tg_norm_has_gamma(node) != 0;
    for (int64_t grp = begin; grp < end; grp++) {
        if (node->op == TG_OP_NORM_STATS) {
            /* two passes: the mean, then squared deviations from it
             * rounded to float, corrected by the rounding's square:
             * sum (x - m')^2 / n = var + (m - m')^2 (never E[x^2] - E[x]^2,
             * which cancels when the mean is large against the spread) */
            double s = 0, ss = 0;
            for (int64_t o = 0; o < v->outer; o++)
                s += run_sum(j->in[0] + (o * G + grp) * v->inner, v->inner);
            double mean = s / (double)v->count;
            float mean_f = (float)mean;
            for (int64_t o = 0; o < v->outer; o++)
                ss += run_sq_dev(j->in[0] + (o * G + grp) * v->inner, v->inner, mean_f);
            double shift = mean - (double)mean_f;
            j->out[grp] = mean_f;
            double var = ss / (double)v->count - shift * shift;
            j->out[G + grp] = (float)(var < 0 ? 0 : var); /* NaN stays NaN */
            continue;
        }
        /* BWD_STATS: dmean = -rstd sum(dy g), dvar = -rstd^3 / 2 sum(dy g (x - mean)) */
        const float *st = j->in[2], *gam = has_g ? j->in[3] : NULL;
        float mean, rstd;
        mean_rstd(st, G, grp, j->eps, &mean, &rstd);
        double s1 = 0, s2 = 0;
        for (int64_t o = 0; o < v->outer; o++) {
            int64_t base = (o * G + grp) * v->inner;
            const float *dy = j->in[0] + base, *x = j->in[1] + base;
            if (layer || !gam) {
                run_dy_sums(dy, x, layer ? gam : NULL, v->inner, mean, &s1, &s2);
                continue;
            }
            for (int64_t i = 0; i < v->inner; i += v->b) { /* one channel per run */
                double r1 = 0, r2 = 0;
                run_dy_sums(dy + i, x + i, NULL, v->b, mean, &r1, &r2);
                float gi = gam[((base + i) / v->b) % v->Caff];
                s1 += gi * r1;
                s2 += gi * r2;
            }
        }
        j->out[grp] = (float)(-rstd * s1);
        j->out[G + grp] = (float)(-0.5 * (double)rstd * rstd * rstd * s2);
    }
}

/* NORM_APPLY_BWD_AFFINE: dgamma[c] = sum dy * xhat, dbeta[c] = sum dy, each
 * thread owning a range of affine indices c. */
static void affine_reduce(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const norm_job *j = ctx;
    const norm_view *v = &j->v;
    const float *dy = j->in[0], *x = j->in[1], *st = j->in[2];
    int64_t Caff = v->Caff;
    if (!is_layer(j->node)) { /* batch and group norm: runs of b elements per (a, c) */
        for (int64_t c = begin; c < end; c++) {
            double sg = 0, sb = 0;
            for (int64_t a = 0; a < v->a; a++) {
                int64_t base = (a * Caff + c) * v->b;
                float mean, rstd;
                mean_rstd(st, v->G, group_of(v, base), j->eps, &mean, &rstd);
                double rb = 0, rg = 0;
                run_dy_sums(dy + base, x + base, NULL, v->b, mean, &rb, &rg);
                sg += rg * rstd;
                sb += rb;
            }
            j->out[c] = (float)sg;
            j->out[Caff + c] = (float)sb;
        }
        return;
    }
    /* layer norm: rows of Caff contiguous elements, one group per row; the
     * sums down the rows (batch x sequence of them) in double, for a tile
     * of columns at a time so that the rows are still read along */
    enum { COLS = 128 };
    for (int64_t c0 = begin; c0 < end; c0 += COLS) {
        int64_t nc = end - c0 < COLS ? end - c0 : COLS;
        double sg[COLS] = {0}, sb[COLS] = {0};
        for (int64_t a = 0; a < v->a; a++) {
            float mean, rstd;
            mean_rstd(st, v->G, a, j->eps, &mean, &rstd);
            const float *dyr = dy + a * Caff + c0, *xr = x + a * Caff + c0;
            for (int64_t c = 0; c < nc; c++) {
                sg[c] += dyr[c] * (xr[c] - mean) * rstd;
                sb[c] += dyr[c];
            }
        }
        for (int64_t c = 0; c < nc; c++) {
            j->out[c0 + c] = (float)sg[c];
            j->out[Caff + c0 + c] = (float)sb[c];
        }
    }
}

/* ---- layer norm on bf16 storage, a row at a time ---------------------------------------- */

/* The longest row (normalised elements) read in place from bf16: a row,
 * gamma and beta widened on the stack. */
#define LAYER_ROW_MAX 4096

typedef struct layer_bf16_job {
    const tg_kernel_args *a;
    norm_view v;
    float eps;
    const float *gam, *bet; /* widened once, NULL where absent */
} layer_bf16_job;

/* n values of operand v stored as `type` from element `at`, into f32 `to`
 * (the operand itself where it is f32). */
static const float *widened(const void *v, tg_dtype type, int64_t at, int64_t n, float *to)
{
    if (type != TG_BF16)
        return (const float *)v + at;
    tg_bf16_widen_run((const uint16_t *)v + at, to, (size_t)n);
    return to;
}

static float load(const void *v, tg_dtype type, int64_t at)
{
    return type == TG_BF16 ? tg_bf16_widen(((const uint16_t *)v)[at]) : ((const float *)v)[at];
}

static void store(void *out, tg_dtype type, int64_t at, float value)
{
    if (type == TG_BF16)
        ((uint16_t *)out)[at] = tg_bf16_narrow(value);
    else
        ((float *)out)[at] = value;
}

/* Rows [begin, end) of a layer norm's NORM_STATS or NORM_APPLY whose
 * operands may be stored in bf16 (tg_kernel_args.in_type, out_type): each
 * row widened into the thread's stack, computed as the f32 kernels do
 * (the same bits as staging the whole tensor through f32), the result
 * rounded once as staging would. */
static void layer_bf16_rows(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const layer_bf16_job *j = ctx;
    const tg_kernel_args *a = j->a;
    int64_t len = j->v.inner, G = j->v.G;
    float row[LAYER_ROW_MAX], y[LAYER_ROW_MAX];
    for (int64_t r = begin; r < end; r++) {
        const float *x = widened(a->in[0], a->in_type[0], r * len, len, row);
        if (a->node->op == TG_OP_NORM_STATS) {
            double mean = run_sum(x, len) / (double)len;
            float mean_f = (float)mean;
            double shift = mean - (double)mean_f;
            double var = run_sq_dev(x, len, mean_f) / (double)len - shift * shift;
            store(a->out, a->out_type, r, mean_f);
            store(a->out, a->out_type, G + r, (float)(var < 0 ? 0 : var));
            continue;
        }
        float st[2] = {load(a->in[1], a->in_type[1], r), load(a->in[1], a->in_type[1], G + r)};
        float mean, rstd;
        mean_rstd(st, 1, 0, j->eps, &mean, &rstd);
        float *o = a->out_type == TG_BF16 ? y : (float *)a->out + r * len;
        for (int64_t i = 0; i < len; i++) {
            float v = (x[i] - mean) * rstd;
            o[i] = v * (j->gam ? j->gam[i] : 1.0f) + (j->bet ? j->bet[i] : 0.0f);
        }
        if (a->out_type == TG_BF16)
            tg_bf16_narrow_run(y, (uint16_t *)a->out + r * len, (size_t)len);
    }
}

static void fwd_layer_bf16(const tg_kernel_args *a)
{
    layer_bf16_job j = {.a = a, .v = view_of(a->node), .eps = tg_norm_eps(a->node)};
    float gam[LAYER_ROW_MAX], bet[LAYER_ROW_MAX];
    if (a->node->op == TG_OP_NORM_APPLY) {
        int k = 2, len = (int)j.v.inner;
        if (tg_norm_has_gamma(a->node))
            j.gam = widened(a->in[k], a->in_type[k], 0, len, gam), k++;
        if (tg_norm_has_beta(a->node))
            j.bet = widened(a->in[k], a->in_type[k], 0, len, bet);
    }
    int64_t n = tg_numel(a->node->in[0]);
    tg_par_for(a->pool, j.v.G, a->node->op == TG_OP_NORM_STATS ? 2 * n : n, layer_bf16_rows, &j);
}

bool tg_norm_reads_rows_bf16(const tg_tensor *node)
{
    return (node->op == TG_OP_NORM_STATS || node->op == TG_OP_NORM_APPLY) &&
           tg_norm_mode(node) == TG_NORM_LAYER && view_of(node).inner <= LAYER_ROW_MAX;
}

static bool any_bf16(const tg_kernel_args *a)
{
    bool any = a->out_type == TG_BF16;
    for (int k = 0; k < a->node->n_in; k++)
        any |= a->in_type[k] == TG_BF16;
    return any;
}

/* Plain NCHW; the cpu backend runs blocked operands with
 * backend/cpu/norm_blocked.c before it calls this. */
static void fwd_norm(const tg_kernel_args *a)
{
    if (any_bf16(a)) {
        fwd_layer_bf16(a);
        return;
    }
    norm_job j = {
        .node = a->node, .v = view_of(a->node), .out = a->out, .eps = tg_norm_eps(a->node)};
    for (int k = 0; k < a->node->n_in && k < 4; k++)
        j.in[k] = a->in[k];
    int64_t n = tg_numel(shaped_input(a->node));
    switch (a->node->op) {
    case TG_OP_NORM_STATS:
    case TG_OP_NORM_APPLY_BWD_STATS:
        tg_par_for(a->pool, j.v.G, 2 * n, group_reduce, &j);
        break;
    case TG_OP_NORM_APPLY_BWD_AFFINE:
        tg_par_for(a->pool, j.v.Caff, 2 * n, affine_reduce, &j);
        break;
    case TG_OP_NORM_APPLY:
    case TG_OP_NORM_APPLY_BWD_X:
    case TG_OP_NORM_STATS_BWD:
        tg_par_for(a->pool, n_rows(a->node, &j.v), n, elementwise_rows, &j);
        break;
    default:
        TG_UNREACHABLE_OP(a->node->op);
    }
}

static void fwd_running(const tg_kernel_args *a)
{
    float *run = a->in[0];
    const float *st = a->in[1];
    int64_t C = a->node->in[0]->shape.dim[1];
    double m = tg_norm_momentum(a->node), n = (double)tg_norm_count(a->node);
    for (int64_t c = 0; c < C; c++) {
        run[c] = (float)((1 - m) * run[c] + m * st[c]);
        run[C + c] = (float)((1 - m) * run[C + c] + m * st[C + c] * n / (n - 1));
    }
}

/* ---- reference kernels: one formula per element, in double ----------------------------------- */

static void ref_norm(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    norm_view v = view_of(node);
    int64_t n = tg_numel(shaped_input(node)), G = v.G;
    double eps = tg_norm_eps(node), cnt = (double)v.count;
    bool has_g = tg_norm_has_gamma(node) != 0, has_b = tg_norm_has_beta(node) != 0;
    double *out = a->out;
    int64_t n_out = tg_numel(node);
    switch (node->op) {
    case TG_OP_NORM_STATS:
    case TG_OP_NORM_APPLY_BWD_STATS:
    case TG_OP_NORM_APPLY_BWD_AFFINE:
        memset(out, 0, (size_t)n_out * sizeof(double));
        break;
    case TG_OP_NORM_APPLY:
    case TG_OP_NORM_APPLY_BWD_X:
    case TG_OP_NORM_STATS_BWD: /* every output element written once, below */
        break;
    default:
        TG_UNREACHABLE_OP(node->op);
    }
    if (node->op == TG_OP_NORM_STATS) {
        for (int64_t f = 0; f < n; f++)
            out[group_of(&v, f)] += a->in[0][f] / cnt;
        for (int64_t f = 0; f < n; f++) {
            double d = a->in[0][f] - out[group_of(&v, f)];
            out[G + group_of(&v, f)] += d * d / cnt;
        }
        return;
    }
    for (int64_t f = 0; f < n; f++) {
        int64_t grp = group_of(&v, f), c = (f / v.b) % v.Caff;
        const double *st = node->op == TG_OP_NORM_STATS_BWD ||
                                   node->op == TG_OP_NORM_APPLY_BWD_STATS ||
                                   node->op == TG_OP_NORM_APPLY_BWD_AFFINE
                               ? a->in[2]
                               : a->in[1];
        double mean = st[grp], rstd = 1.0 / sqrt(st[G + grp] + eps);
        switch (node->op) {
        case TG_OP_NORM_APPLY: {
            double y = (a->in[0][f] - mean) * rstd;
            out[f] = y * (has_g ? a->in[2][c] : 1.0) + (has_b ? a->in[2 + has_g][c] : 0.0);
            break;
        }
        case TG_OP_NORM_APPLY_BWD_X:
            out[f] = a->in[0][f] * rstd * (has_g ? a->in[2][c] : 1.0);
            break;
        case TG_OP_NORM_APPLY_BWD_STATS: {
            double d = a->in[0][f] * (has_g ? a->in[3][c] : 1.0);
            out[grp] += -rstd * d;
            out[G + grp] += -0.5 * rstd * rstd * rstd * d * (a->in[1][f] - mean);
            break;
        }
        case TG_OP_NORM_APPLY_BWD_AFFINE:
            out[c] += a->in[0][f] * (a->in[1][f] - mean) * rstd;
            out[v.Caff + c] += a->in[0][f];
            break;
        case TG_OP_NORM_STATS_BWD:
            out[f] = a->in[0][grp] / cnt + a->in[0][G + grp] * 2.0 * (a->in[1][f] - mean) / cnt;
            break;
        default:
            TG_UNREACHABLE_OP(node->op);
        }
    }
}

static void ref_running(const tg_ref_args *a)
{
    double *run = a->in[0];
    const double *st = a->in[1];
    int64_t C = a->node->in[0]->shape.dim[1];
    double m = tg_norm_momentum(a->node), n = (double)tg_norm_count(a->node);
    for (int64_t c = 0; c < C; c++) {
        run[c] = (1 - m) * run[c] + m * st[c];
        run[C + c] = (1 - m) * run[C + c] + m * st[C + c] * n / (n - 1);
    }
}

/* ---- builders and gradient rules ---------------------------------------------------------------
 */

static tg_node_params norm_params(int mode, int64_t arg, bool g, bool b, float eps)
{
    tg_node_params p = {0};
    tg_norm_set_mode(&p, mode), tg_norm_set_mode_arg(&p, arg);
    tg_norm_set_has_gamma(&p, g), tg_norm_set_has_beta(&p, b);
    tg_norm_set_eps(&p, eps);
    return p;
}

static tg_tensor *make(tg_graph *g, tg_op op, int n, tg_tensor *const *in, tg_node_params p)
{
    return tg_node_create(g, op, n, in, &p);
}

/* stats = NORM_STATS(x): dx = NORM_STATS_BWD(dstats, x, stats). */
static tg_status bwd_stats(tg_graph *g, tg_tensor *node, tg_tensor *ds, const bool *need,
                           tg_tensor **din)
{
    din[0] = make(g, TG_OP_NORM_STATS_BWD, 3, (tg_tensor *[]){ds, node->in[0], node}, node->p);
    return TG_OK;
}

/* y = NORM_APPLY(x, stats, gamma?, beta?) */
static tg_status bwd_apply(tg_graph *g, tg_tensor *node, tg_tensor *dy, const bool *need,
                           tg_tensor **din)
{
    tg_tensor *x = node->in[0], *stats = node->in[1];
    bool has_g = tg_norm_has_gamma(node) != 0, has_b = tg_norm_has_beta(node) != 0;
    tg_tensor *gamma = has_g ? node->in[2] : NULL;
    if (need[0]) {
        tg_tensor *in[3] = {dy, stats, gamma};
        din[0] = make(g, TG_OP_NORM_APPLY_BWD_X, has_g ? 3 : 2, in, node->p);
    }
    if (need[1]) {
        tg_tensor *in[4] = {dy, x, stats, gamma};
        din[1] = make(g, TG_OP_NORM_APPLY_BWD_STATS, has_g ? 4 : 3, in, node->p);
    }
    bool need_g = has_g && need[2], need_b = has_b && need[2 + has_g];
    if (need_g || need_b) {
        tg_tensor *aff =
            make(g, TG_OP_NORM_APPLY_BWD_AFFINE, 3, (tg_tensor *[]){dy, x, stats}, node->p);
        tg_shape ps = node->in[2]->shape;
        if (need_g)
            din[2] = tg_reshape(g, tg_slice(g, aff, 0, 0, 1), ps);
        if (need_b)
            din[2 + has_g] = tg_reshape(g, tg_slice(g, aff, 0, 1, 2), ps);
    }
    return TG_OK;
}

static tg_tensor *normalise(tg_graph *g, tg_tensor *x, tg_tensor *stats, tg_tensor *gamma,
                            tg_tensor *beta, tg_node_params p)
{
    tg_tensor *in[4] = {x, stats};
    int n = 2;
    if (gamma)
        in[n++] = gamma;
    if (beta)
        in[n++] = beta;
    return make(g, TG_OP_NORM_APPLY, n, in, p);
}

tg_tensor *tg_batch_norm(tg_graph *g, tg_tensor *x, tg_tensor *gamma, tg_tensor *beta,
                         tg_tensor *running_stats, float eps)
{
    return tg_batch_norm_ex(g, x, gamma, beta, running_stats, eps, 0.1f);
}

tg_tensor *tg_batch_norm_ex(tg_graph *g, tg_tensor *x, tg_tensor *gamma, tg_tensor *beta,
                            tg_tensor *running_stats, float eps, float momentum)
{
    if (!(momentum >= 0 && momentum <= 1))
        return tg_graph_fail(g, TG_ERR_INVALID_ARG,
                             "batch_norm: momentum %g is outside [0, 1] (PyTorch's convention: "
                             "the weight of the new statistics, 0.1 by default)",
                             (double)momentum);
    tg_node_params p = norm_params(TG_NORM_BATCH, 0, gamma != NULL, beta != NULL, eps);
    if (!g || !x)
        return make(g, TG_OP_NORM_STATS, 1, &x, p); /* records the missing input */
    if (!tg_graph_training(g) && running_stats)
        return normalise(g, x, running_stats, gamma, beta, p);
    tg_tensor *stats = make(g, TG_OP_NORM_STATS, 1, &x, p);
    if (stats && running_stats) {
        tg_node_params up = {0};
        tg_norm_set_momentum(&up, momentum);
        tg_norm_set_count(&up, view_of_shape(&p, x->shape).count);
        tg_node_create(g, TG_OP_RUNNING_STATS_UPDATE, 2, (tg_tensor *[]){running_stats, stats},
                       &up);
    }
    return normalise(g, x, stats, gamma, beta, p);
}

tg_tensor *tg_group_norm(tg_graph *g, tg_tensor *x, int groups, tg_tensor *gamma, tg_tensor *beta,
                         float eps)
{
    tg_node_params p = norm_params(TG_NORM_GROUP, groups, gamma != NULL, beta != NULL, eps);
    tg_tensor *stats = make(g, TG_OP_NORM_STATS, 1, &x, p);
    return normalise(g, x, stats, gamma, beta, p);
}

tg_tensor *tg_layer_norm(tg_graph *g, tg_tensor *x, int norm_dims, tg_tensor *gamma,
                         tg_tensor *beta, float eps)
{
    tg_node_params p = norm_params(TG_NORM_LAYER, norm_dims, gamma != NULL, beta != NULL, eps);
    tg_tensor *stats = make(g, TG_OP_NORM_STATS, 1, &x, p);
    return normalise(g, x, stats, gamma, beta, p);
}

/* Batch norm over a 4-D x (mode TG_NORM_BATCH) has blocked kernels
 * (backend/cpu/norm_blocked.c), which read and write bf16-stored operands as they
 * are; group and layer norm, and batch norm of other ranks, run NCHW, and
 * layer norm's forward ops read bf16 in place a row at a time
 * (layer_bf16_rows). */
static bool is_batch_norm_4d(const tg_tensor *node)
{
    const tg_tensor *x = node->op == TG_OP_NORM_STATS_BWD ? node->in[1] : node->in[0];
    return tg_norm_mode(node) == TG_NORM_BATCH && x->shape.ndim == 4;
}

static tg_op_layout norm_layout(const tg_tensor *node, int n_threads, bool inference)
{
    (void)n_threads, (void)inference;
    return is_batch_norm_4d(node) ? TG_LAYOUT_TIED : TG_LAYOUT_PLAIN;
}

static bool norm_reads_bf16(const tg_tensor *node, bool blocked)
{
    return (blocked && is_batch_norm_4d(node)) || (!blocked && tg_norm_reads_rows_bf16(node));
}

const tg_op_def tg_opdef_NORM_STATS = {.infer = infer_norm,
                                       .flops = flops_norm,
                                       .reference = ref_norm,
                                       .backward = bwd_stats,
                                       .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_NORM_STATS = {
    .forward = fwd_norm, .layout = norm_layout, .reads_bf16 = norm_reads_bf16};
const tg_op_def tg_opdef_NORM_STATS_BWD = {
    .infer = infer_norm, .flops = flops_norm, .reference = ref_norm, .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_NORM_STATS_BWD = {
    .forward = fwd_norm, .layout = norm_layout, .reads_bf16 = norm_reads_bf16};
const tg_op_def tg_opdef_NORM_APPLY = {.infer = infer_norm,
                                       .flops = flops_norm,
                                       .reference = ref_norm,
                                       .backward = bwd_apply,
                                       .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_NORM_APPLY = {
    .forward = fwd_norm, .layout = norm_layout, .reads_bf16 = norm_reads_bf16};
const tg_op_def tg_opdef_NORM_APPLY_BWD_X = {
    .infer = infer_norm, .flops = flops_norm, .reference = ref_norm, .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_NORM_APPLY_BWD_X = {
    .forward = fwd_norm, .layout = norm_layout, .reads_bf16 = norm_reads_bf16};
const tg_op_def tg_opdef_NORM_APPLY_BWD_STATS = {
    .infer = infer_norm, .flops = flops_norm, .reference = ref_norm, .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_NORM_APPLY_BWD_STATS = {
    .forward = fwd_norm, .layout = norm_layout, .reads_bf16 = norm_reads_bf16};
const tg_op_def tg_opdef_NORM_APPLY_BWD_AFFINE = {
    .infer = infer_norm, .flops = flops_norm, .reference = ref_norm, .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_NORM_APPLY_BWD_AFFINE = {
    .forward = fwd_norm, .layout = norm_layout, .reads_bf16 = norm_reads_bf16};
const tg_op_def tg_opdef_RUNNING_STATS_UPDATE = {.infer = infer_running,
                                                 .flops = flops_running,
                                                 .reference = ref_running,
                                                 .memory = TG_OP_OWN_STORAGE};
const tg_kernel_def tg_cpu_kernel_RUNNING_STATS_UPDATE = {.forward = fwd_running};
