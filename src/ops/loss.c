/* ops/loss.c - losses, each the mean over the batch as a scalar (ndim 0):
 *   CROSS_ENTROPY(logits [N, C], labels i32 [N])  fused log-softmax + NLL,
 *                                                 PyTorch's CrossEntropyLoss
 *   NLL_LOSS(log_probs [N, C], labels i32 [N])    -mean(log_probs[n, label_n])
 *   MSE_LOSS(a, b)                                mean((a - b)^2), equal shapes
 * and their backward ops:
 *   CROSS_ENTROPY_BWD(dloss, logits, labels) = (softmax(logits) - onehot) * dloss / N
 *   NLL_LOSS_BWD(dloss, labels), p.i[0] = C  = -onehot * dloss / N
 *   MSE_LOSS_BWD(dloss, a, b)                = 2 (a - b) * dloss / numel
 *
 * Labels out of [0, C): a kernel cannot return an error, and clamping or
 * skipping the sample would train silently on wrong data. Instead that
 * sample's loss is NaN, so the mean is NaN and the engine's NaN check stops
 * the run naming the loss; its gradient row is NaN too. (PyTorch raises.)
 *
 * The forward kernels split the batch over the pool and add per-thread
 * partial sums (in double, in `scratch`) at the end.
 */
#include "ops/broadcast.h"

#include "core/error.h"

#include <math.h>
#include <string.h>

/* ---- shape rules ------------------------------------------------------------------ */

static tg_status expect(const tg_tensor *node, int k, tg_dtype dt, const char *what)
{
    const tg_tensor *x = node->in[k];
    if (x->dtype != dt)
        return tg_error(TG_ERR_DTYPE, "%s '%s' is %s, expected %s", what, x->name,
                        tg_dtype_name(x->dtype), tg_dtype_name(dt));
    return TG_OK;
}

/* (scores [N, C], labels [N]) starting at input k. */
static tg_status check_scores_labels(const tg_tensor *node, int k, const char *what)
{
    const tg_tensor *x = node->in[k], *l = node->in[k + 1];
    char a[96], b[96];
    TG_TRY(expect(node, k, TG_F32, what));
    TG_TRY(expect(node, k + 1, TG_I32, "labels"));
    if (x->shape.ndim != 2 || x->shape.dim[1] < 1)
        return tg_error(TG_ERR_SHAPE, "%s %s must be [N, C] with C >= 1", what,
                        tg_shape_str(x->shape, a, sizeof a));
    if (l->shape.ndim != 1 || l->shape.dim[0] != x->shape.dim[0])
        return tg_error(TG_ERR_SHAPE, "labels %s do not match %s %s (expected [%lld])",
                        tg_shape_str(l->shape, a, sizeof a), what,
                        tg_shape_str(x->shape, b, sizeof b), (long long)x->shape.dim[0]);
    return TG_OK;
}

static tg_status check_dloss(const tg_tensor *node)
{
    TG_TRY(expect(node, 0, TG_F32, "dloss"));
    if (tg_numel(node->in[0]) != 1) {
        char a[96];
        return tg_error(TG_ERR_SHAPE, "dloss %s must be a scalar",
                        tg_shape_str(node->in[0]->shape, a, sizeof a));
    }
    return TG_OK;
}

static tg_status check_same(const tg_tensor *node, int k)
{
    const tg_tensor *a = node->in[k], *b = node->in[k + 1];
    TG_TRY(expect(node, k, TG_F32, "input"));
    TG_TRY(expect(node, k + 1, TG_F32, "target"));
    if (!tg_shape_equal(a->shape, b->shape)) {
        char sa[96], sb[96];
        return tg_error(TG_ERR_SHAPE, "input %s and target %s differ in shape (no broadcasting)",
                        tg_shape_str(a->shape, sa, sizeof sa),
                        tg_shape_str(b->shape, sb, sizeof sb));
    }
    return TG_OK;
}

static tg_status infer_loss(tg_tensor *node)
{
    int want = 2, have = node->n_in;
    if (node->op == TG_OP_CROSS_ENTROPY_BWD || node->op == TG_OP_MSE_LOSS_BWD)
        want = 3;
    if (have != want)
        return tg_error(TG_ERR_INVALID_ARG, "takes %d inputs, got %d", want, have);
    node->dtype = TG_F32;
    switch (node->op) {
    case TG_OP_CROSS_ENTROPY:
        TG_TRY(check_scores_labels(node, 0, "logits"));
        node->shape = tg_shape_of(0, NULL);
        return TG_OK;
    case TG_OP_NLL_LOSS:
        TG_TRY(check_scores_labels(node, 0, "log_probs"));
        node->shape = tg_shape_of(0, NULL);
        return TG_OK;
    case TG_OP_MSE_LOSS:
        TG_TRY(check_same(node, 0));
        node->shape = tg_shape_of(0, NULL);
        return TG_OK;
    case TG_OP_CROSS_ENTROPY_BWD:
        TG_TRY(check_dloss(node));
        TG_TRY(check_scores_labels(node, 1, "logits"));
        node->shape = node->in[1]->shape;
        return TG_OK;
    case TG_OP_NLL_LOSS_BWD:
        TG_TRY(check_dloss(node));
        TG_TRY(expect(node, 1, TG_I32, "labels"));
        if (node->in[1]->shape.ndim != 1 || node->p.i[0] < 1)
            return tg_error(TG_ERR_SHAPE, "labels must be [N] and classes (%lld) at least 1",
                            (long long)node->p.i[0]);
        node->shape = tg_shape2(node->in[1]->shape.dim[0], node->p.i[0]);
        return TG_OK;
    default: /* MSE_LOSS_BWD */
        TG_TRY(check_dloss(node));
        TG_TRY(check_same(node, 1));
        node->shape = node->in[1]->shape;
        return TG_OK;
    }
}

static double flops(const tg_tensor *node)
{
    const tg_tensor *x = node->op == TG_OP_CROSS_ENTROPY_BWD || node->op == TG_OP_MSE_LOSS_BWD
                             ? node->in[1]
                             : node->in[0];
    double n = (double)tg_numel(x);
    switch (node->op) {
    case TG_OP_CROSS_ENTROPY:
        return 7 * n; /* max, sub, exp (4), sum */
    case TG_OP_CROSS_ENTROPY_BWD:
        return 9 * n;
    case TG_OP_NLL_LOSS:
        return (double)x->shape.dim[0];
    case TG_OP_NLL_LOSS_BWD:
        return (double)tg_numel(node);
    case TG_OP_MSE_LOSS:
        return 3 * n;
    default:
        return 3 * n;
    }
}

static size_t scratch_partials(const tg_tensor *node, int n_threads)
{
    return (size_t)(n_threads > 0 ? n_threads : 1) * sizeof(double);
}

/* ---- fast kernels ---------------------------------------------------------------------- */

typedef struct loss_job {
    const tg_tensor *node;
    const float *x, *y; /* scores or a; b (MSE) */
    const int32_t *labels;
    float *out;
    float dscale; /* backward: dloss / N (or 2 dloss / numel) */
    int64_t C;
    double *part; /* forward: one partial sum per thread */
} loss_job;

/* log(sum(exp(row))) with the row's maximum taken out first. */
static double logsumexp_f32(const float *row, int64_t C)
{
    float m = row[0];
    for (int64_t c = 1; c < C; c++)
        m = row[c] > m ? row[c] : m;
    double s = 0;
    for (int64_t c = 0; c < C; c++)
        s += expf(row[c] - m);
    return m + log(s);
}

static void loss_fwd_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const loss_job *j = ctx;
    double acc = 0;
    switch (j->node->op) {
    case TG_OP_CROSS_ENTROPY:
    case TG_OP_NLL_LOSS:
        for (int64_t n = begin; n < end; n++) {
            const float *row = j->x + n * j->C;
            int32_t l = j->labels[n];
            if (l < 0 || l >= j->C) {
                acc += NAN;
                continue;
            }
            acc -= row[l];
            if (j->node->op == TG_OP_CROSS_ENTROPY)
                acc += logsumexp_f32(row, j->C);
        }
        break;
    default: /* MSE over flat elements */
        for (int64_t k = begin; k < end; k++) {
            double d = (double)j->x[k] - j->y[k];
            acc += d * d;
        }
        break;
    }
    j->part[t] = acc;
}

static void fwd_loss(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    const tg_tensor *x = node->in[0];
    loss_job j = {.node = node, .x = a->in[0], .y = a->in[1], .labels = a->in[1]};
    int64_t units, count;
    if (node->op == TG_OP_MSE_LOSS) {
        units = count = tg_numel(x);
    } else {
        j.C = x->shape.dim[1];
        units = count = x->shape.dim[0];
    }
    int T = tg_pool_threads(a->pool);
    double one = 0;
    /* partial sums live in scratch; without enough of it, run on one thread */
    bool par = a->scratch && a->scratch_bytes >= (size_t)T * sizeof(double);
    j.part = par ? a->scratch : &one;
    double total = 0;
    if (par) {
        memset(j.part, 0, (size_t)T * sizeof(double));
        tg_par_for(a->pool, units, tg_numel(x), loss_fwd_range, &j);
        for (int t = 0; t < T; t++)
            total += j.part[t];
    } else if (units > 0) {
        loss_fwd_range(&j, 0, units, 0);
        total = one;
    }
    /* the mean of an empty batch is NaN, as in PyTorch */
    *(float *)a->out = (float)(total / (double)count);
}

static void loss_bwd_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const loss_job *j = ctx;
    int64_t C = j->C;
    switch (j->node->op) {
    case TG_OP_CROSS_ENTROPY_BWD:
        for (int64_t n = begin; n < end; n++) {
            const float *row = j->x + n * C;
            float *o = j->out + n * C;
            int32_t l = j->labels[n];
            float m = row[0];
            for (int64_t c = 1; c < C; c++)
                m = row[c] > m ? row[c] : m;
            double s = 0;
            for (int64_t c = 0; c < C; c++) {
                o[c] = expf(row[c] - m);
                s += o[c];
            }
            float k = (float)(j->dscale / s);
            bool bad = l < 0 || l >= C;
            for (int64_t c = 0; c < C; c++)
                o[c] = bad ? NAN : o[c] * k;
            if (!bad)
                o[l] -= j->dscale;
        }
        break;
    case TG_OP_NLL_LOSS_BWD:
        for (int64_t n = begin; n < end; n++) {
            float *o = j->out + n * C;
            int32_t l = j->labels[n];
            bool bad = l < 0 || l >= C;
            for (int64_t c = 0; c < C; c++)
                o[c] = bad ? NAN : 0.0f;
            if (!bad)
                o[l] = -j->dscale;
        }
        break;
    default: /* MSE_LOSS_BWD over flat elements */
        for (int64_t k = begin; k < end; k++)
            j->out[k] = (j->x[k] - j->y[k]) * j->dscale;
        break;
    }
}

static void bwd_kernel(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    double dloss = *(const float *)a->in[0];
    loss_job j = {.node = node, .out = a->out};
    int64_t units;
    if (node->op == TG_OP_MSE_LOSS_BWD) {
        j.x = a->in[1];
        j.y = a->in[2];
        units = tg_numel(node);
        j.dscale = (float)(2.0 * dloss / (double)units);
    } else {
        j.x = node->op == TG_OP_CROSS_ENTROPY_BWD ? a->in[1] : NULL;
        j.labels = node->op == TG_OP_CROSS_ENTROPY_BWD ? a->in[2] : a->in[1];
        j.C = node->shape.dim[1];
        units = node->shape.dim[0];
        j.dscale = (float)(dloss / (double)units);
    }
    tg_par_for(a->pool, units, tg_numel(node), loss_bwd_range, &j);
}

/* ---- reference kernels ------------------------------------------------------------------ */

static bool bad_label(double l, int64_t C)
{
    return !(l >= 0 && l < (double)C);
}

static void ref_fwd(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    const tg_tensor *x = node->in[0];
    double total = 0;
    int64_t count;
    if (node->op == TG_OP_MSE_LOSS) {
        count = tg_numel(x);
        for (int64_t k = 0; k < count; k++)
            total += (a->in[0][k] - a->in[1][k]) * (a->in[0][k] - a->in[1][k]);
    } else {
        int64_t N = x->shape.dim[0], C = x->shape.dim[1];
        count = N;
        for (int64_t n = 0; n < N; n++) {
            const double *row = a->in[0] + n * C;
            double l = a->in[1][n];
            if (bad_label(l, C)) {
                total += NAN;
                continue;
            }
            total -= row[(int64_t)l];
            if (node->op == TG_OP_CROSS_ENTROPY) {
                double m = row[0], s = 0;
                for (int64_t c = 1; c < C; c++)
                    m = fmax(m, row[c]);
                for (int64_t c = 0; c < C; c++)
                    s += exp(row[c] - m);
                total += m + log(s);
            }
        }
    }
    a->out[0] = total / (double)count;
}

static void ref_bwd(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    double dloss = a->in[0][0];
    if (node->op == TG_OP_MSE_LOSS_BWD) {
        int64_t n = tg_numel(node);
        for (int64_t k = 0; k < n; k++)
            a->out[k] = 2.0 * (a->in[1][k] - a->in[2][k]) * dloss / (double)n;
        return;
    }
    int64_t N = node->shape.dim[0], C = node->shape.dim[1];
    const double *labels = node->op == TG_OP_CROSS_ENTROPY_BWD ? a->in[2] : a->in[1];
    for (int64_t n = 0; n < N; n++) {
        double *o = a->out + n * C;
        bool bad = bad_label(labels[n], C);
        if (node->op == TG_OP_CROSS_ENTROPY_BWD) {
            const double *row = a->in[1] + n * C;
            double m = row[0], s = 0;
            for (int64_t c = 1; c < C; c++)
                m = fmax(m, row[c]);
            for (int64_t c = 0; c < C; c++)
                s += exp(row[c] - m);
            for (int64_t c = 0; c < C; c++)
                o[c] = exp(row[c] - m) / s * dloss / (double)N;
        } else {
            for (int64_t c = 0; c < C; c++)
                o[c] = 0;
        }
        for (int64_t c = 0; c < C; c++)
            if (bad)
                o[c] = NAN;
        if (!bad)
            o[(int64_t)labels[n]] -= dloss / (double)N;
    }
}

/* ---- builders --------------------------------------------------------------------------- */

tg_tensor *tg_cross_entropy(tg_graph *g, tg_tensor *logits, tg_tensor *labels)
{
    return tg_node_create(g, TG_OP_CROSS_ENTROPY, 2, (tg_tensor *[]){logits, labels}, NULL);
}

tg_tensor *tg_nll_loss(tg_graph *g, tg_tensor *log_probs, tg_tensor *labels)
{
    return tg_node_create(g, TG_OP_NLL_LOSS, 2, (tg_tensor *[]){log_probs, labels}, NULL);
}

tg_tensor *tg_mse_loss(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return tg_node_create(g, TG_OP_MSE_LOSS, 2, (tg_tensor *[]){a, b}, NULL);
}

static tg_tensor *nll_bwd(tg_graph *g, tg_tensor *dloss, tg_tensor *labels, int64_t C)
{
    tg_node_params p = {0};
    p.i[0] = C;
    return tg_node_create(g, TG_OP_NLL_LOSS_BWD, 2, (tg_tensor *[]){dloss, labels}, &p);
}

/* ---- gradient rules ----------------------------------------------------------------------- */

static tg_status bwd_cross_entropy(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                                   tg_tensor **din)
{
    din[0] = tg_node_create(g, TG_OP_CROSS_ENTROPY_BWD, 3,
                            (tg_tensor *[]){dout, node->in[0], node->in[1]}, NULL);
    return TG_OK;
}

static tg_status bwd_nll(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    din[0] = nll_bwd(g, dout, node->in[1], node->in[0]->shape.dim[1]);
    return TG_OK;
}

static tg_status bwd_mse(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                         tg_tensor **din)
{
    tg_tensor *d = tg_node_create(g, TG_OP_MSE_LOSS_BWD, 3,
                                  (tg_tensor *[]){dout, node->in[0], node->in[1]}, NULL);
    if (need[0])
        din[0] = d;
    if (need[1])
        din[1] = tg_scale(g, d, -1.0f, 0.0f);
    return TG_OK;
}

/* The backward ops are linear in dloss: their adjoint in dloss is
 * sum(g * op(1, ...)), a scalar of dloss's shape. */
static tg_tensor *adjoint_dloss(tg_graph *g, tg_tensor *node, tg_tensor *dout)
{
    tg_tensor *dl = node->in[0];
    tg_tensor *in[3] = {tg_constant(g, dl->shape, 1.0f), node->in[1],
                        node->n_in > 2 ? node->in[2] : NULL};
    tg_tensor *unit = tg_node_create(g, node->op, node->n_in, in, &node->p);
    return tg_sum_to(g, tg_mul(g, dout, unit), dl->shape);
}

/* In the logits, cross_entropy_bwd moves like softmax: the adjoint is
 * softmax_bwd(g, softmax(logits)) * dloss / N. */
static tg_status bwd_cross_entropy_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout,
                                       const bool *need, tg_tensor **din)
{
    tg_tensor *dl = node->in[0], *logits = node->in[1];
    if (need[0])
        din[0] = adjoint_dloss(g, node, dout);
    if (need[1]) {
        tg_node_params p = {0};
        p.i[0] = 1;
        tg_tensor *sm = tg_softmax(g, logits, 1);
        tg_tensor *j = tg_node_create(g, TG_OP_SOFTMAX_BWD, 2, (tg_tensor *[]){dout, sm}, &p);
        din[1] = tg_scale(g, tg_mul(g, j, dl), 1.0f / (float)logits->shape.dim[0], 0.0f);
    }
    return TG_OK;
}

static tg_status bwd_nll_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    din[0] = adjoint_dloss(g, node, dout);
    return TG_OK;
}

/* 2 (a - b) dloss / n: in a it is g * 2 dloss / n, in b the negative. */
static tg_status bwd_mse_bwd(tg_graph *g, tg_tensor *node, tg_tensor *dout, const bool *need,
                             tg_tensor **din)
{
    if (need[0])
        din[0] = adjoint_dloss(g, node, dout);
    if (need[1] || need[2]) {
        float k = 2.0f / (float)tg_numel(node);
        tg_tensor *da = tg_scale(g, tg_mul(g, dout, node->in[0]), k, 0.0f);
        if (need[1])
            din[1] = da;
        if (need[2])
            din[2] = tg_scale(g, da, -1.0f, 0.0f);
    }
    return TG_OK;
}

#define LOSS_DEF(E, NAME, SCRATCH, FWD, REF, BWD)                                                  \
    const tg_op_def tg_opdef_##E = {NAME, infer_loss, flops, SCRATCH, FWD, REF, BWD}

LOSS_DEF(CROSS_ENTROPY, "cross_entropy", scratch_partials, fwd_loss, ref_fwd, bwd_cross_entropy);
LOSS_DEF(NLL_LOSS, "nll_loss", scratch_partials, fwd_loss, ref_fwd, bwd_nll);
LOSS_DEF(MSE_LOSS, "mse_loss", scratch_partials, fwd_loss, ref_fwd, bwd_mse);
LOSS_DEF(CROSS_ENTROPY_BWD, "cross_entropy_bwd", NULL, bwd_kernel, ref_bwd, bwd_cross_entropy_bwd);
LOSS_DEF(NLL_LOSS_BWD, "nll_loss_bwd", NULL, bwd_kernel, ref_bwd, bwd_nll_bwd);
LOSS_DEF(MSE_LOSS_BWD, "mse_loss_bwd", NULL, bwd_kernel, ref_bwd, bwd_mse_bwd);
