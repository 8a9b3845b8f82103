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

#include "core/error.h"

#include <math.h>
#include <string.h>

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
    tg_shape want = affine_shape(&node->p, tg_norm_shaped_input(node)->shape);
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
    const tg_tensor *x = tg_norm_shaped_input(node);
    TG_TRY(check_x(&node->p, x));
    if (!(tg_norm_eps(node) > 0.0f) && node->op != TG_OP_NORM_STATS &&
        node->op != TG_OP_NORM_STATS_BWD)
        return tg_error(TG_ERR_INVALID_ARG, "eps %g must be positive", (double)tg_norm_eps(node));
    tg_norm_view v = tg_norm_view_of(node);
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
    double n = (double)tg_numel(tg_norm_shaped_input(node));
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

tg_norm_fold tg_norm_fold_channel(const tg_tensor *bn, const float *stats, int64_t n,
                                  const float *gamma, const float *beta, int64_t c, double b)
{
    double scale = (gamma ? gamma[c] : 1.0) / sqrt((double)stats[n + c] + tg_norm_eps(bn));
    return (tg_norm_fold){scale, (b - stats[c]) * scale + (beta ? beta[c] : 0.0)};
}

bool tg_norm_reads_rows_bf16(const tg_tensor *node)
{
    return (node->op == TG_OP_NORM_STATS || node->op == TG_OP_NORM_APPLY) &&
           tg_norm_mode(node) == TG_NORM_LAYER &&
           tg_norm_view_of(node).inner <= TG_NORM_LAYER_ROW_MAX;
}

/* ---- reference kernels: one formula per element, in double ----------------------------------- */

static void ref_norm(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_norm_view v = tg_norm_view_of(node);
    int64_t n = tg_numel(tg_norm_shaped_input(node)), G = v.G;
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
            out[tg_norm_group_of(&v, f)] += a->in[0][f] / cnt;
        for (int64_t f = 0; f < n; f++) {
            double d = a->in[0][f] - out[tg_norm_group_of(&v, f)];
            out[G + tg_norm_group_of(&v, f)] += d * d / cnt;
        }
        return;
    }
    for (int64_t f = 0; f < n; f++) {
        int64_t grp = tg_norm_group_of(&v, f), c = (f / v.b) % v.Caff;
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
        tg_norm_set_count(&up, tg_norm_view_of_shape(&p, x->shape).count);
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

const tg_op_def tg_opdef_NORM_STATS = {.infer = infer_norm,
                                       .flops = flops_norm,
                                       .reference = ref_norm,
                                       .backward = bwd_stats,
                                       .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_NORM_STATS_BWD = {
    .infer = infer_norm, .flops = flops_norm, .reference = ref_norm, .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_NORM_APPLY = {.infer = infer_norm,
                                       .flops = flops_norm,
                                       .reference = ref_norm,
                                       .backward = bwd_apply,
                                       .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_NORM_APPLY_BWD_X = {
    .infer = infer_norm, .flops = flops_norm, .reference = ref_norm, .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_NORM_APPLY_BWD_STATS = {
    .infer = infer_norm, .flops = flops_norm, .reference = ref_norm, .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_NORM_APPLY_BWD_AFFINE = {
    .infer = infer_norm, .flops = flops_norm, .reference = ref_norm, .memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_RUNNING_STATS_UPDATE = {.infer = infer_running,
                                                 .flops = flops_running,
                                                 .reference = ref_running,
                                                 .memory = TG_OP_OWN_STORAGE};
