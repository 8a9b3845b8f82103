/* backend/cpu/loss_kernels.c - the cpu backend's kernels for the losses
 * (ops/loss.c is what they are): rows over the device's pool, the loss and
 * the weights summed per thread in double into scratch and added in thread
 * order. */
#include "backend/backend.h"
#include "ops/broadcast.h" /* tg_par_for */
#include "ops/loss.h"

#include <math.h>
#include <string.h>

/* Two partial sums per thread: the loss and the weights (mean's denominator). */
static size_t scratch_partials(const tg_tensor *node, int n_threads)
{
    (void)node;
    return (size_t)(n_threads > 0 ? n_threads : 1) * 2 * sizeof(double);
}

typedef struct loss_job {
    const tg_tensor *node;
    tg_loss_rows g;
    const float *x, *y; /* scores or a; b (MSE) */
    const int32_t *li;  /* labels: i32 ... */
    const float *lf;    /* ... or f32 */
    const float *w;     /* class weights or NULL */
    const float *dl;    /* backward, reduction none: dloss per row */
    float *out;
    double dscale; /* backward: dloss / sum(w) (mean), dloss (sum), 2 dloss / numel (MSE) */
    double *part;  /* forward: two partial sums per thread */
} loss_job;

static int64_t job_class(const loss_job *j, int64_t r)
{
    return tg_loss_row_class(&j->g, j->li ? (double)j->li[r] : (double)j->lf[r]);
}

/* log(sum(exp(row))) over C values D apart, with the row's maximum taken out first. */
static double logsumexp_f32(const float *row, int64_t C, int64_t D)
{
    float m = row[0];
    for (int64_t c = 1; c < C; c++)
        m = row[c * D] > m ? row[c * D] : m;
    double s = 0;
    for (int64_t c = 0; c < C; c++)
        s += expf(row[c * D] - m);
    return m + log(s);
}

static void loss_fwd_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const loss_job *j = ctx;
    double acc = 0, wacc = 0;
    if (j->node->op == TG_OP_MSE_LOSS) {
        for (int64_t k = begin; k < end; k++) {
            double d = (double)j->x[k] - j->y[k];
            acc += d * d;
        }
        j->part[2 * t] = acc;
        return;
    }
    int64_t C = j->g.C, D = j->g.D;
    for (int64_t r = begin; r < end; r++) {
        int64_t cls = job_class(j, r);
        double w = tg_loss_row_weight(cls, j->w, NULL), v = 0;
        if (cls == TG_LOSS_ROW_BAD) {
            v = NAN;
        } else if (cls >= 0) {
            const float *row = j->x + (r / D) * C * D + r % D;
            v = -row[cls * D];
            if (j->node->op == TG_OP_CROSS_ENTROPY)
                v += logsumexp_f32(row, C, D);
            v *= w;
        }
        if (j->g.red == TG_LOSS_NONE)
            j->out[r] = (float)v;
        acc += v;
        wacc += w;
    }
    j->part[2 * t] = acc;
    j->part[2 * t + 1] = wacc;
}

static void fwd_loss(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    const tg_tensor *x = node->in[0];
    loss_job j = {.node = node, .x = a->in[0], .y = a->in[1], .out = a->out};
    int64_t units;
    if (node->op == TG_OP_MSE_LOSS) {
        units = tg_numel(x);
    } else {
        j.g = tg_loss_rows_of(node);
        units = j.g.R;
        if (node->in[1]->dtype == TG_I32)
            j.li = a->in[1];
        else
            j.lf = a->in[1];
        j.w = node->n_in > 2 ? a->in[2] : NULL;
    }
    int T = tg_pool_threads(a->pool);
    double one[2] = {0, 0};
    /* partial sums live in scratch; without enough of it, run on one thread */
    bool par = a->scratch && a->scratch_bytes >= (size_t)T * 2 * sizeof(double);
    j.part = par ? a->scratch : one;
    double total = 0, wsum = 0;
    if (par) {
        memset(j.part, 0, (size_t)T * 2 * sizeof(double));
        tg_par_for(a->pool, units, tg_numel(x), loss_fwd_range, &j);
    } else if (units > 0) {
        loss_fwd_range(&j, 0, units, 0);
    }
    for (int t = 0; t < (par ? T : 1); t++) {
        total += j.part[2 * t];
        wsum += j.part[2 * t + 1];
    }
    if (node->op == TG_OP_MSE_LOSS) /* the mean of an empty batch is NaN, as in PyTorch */
        *(float *)a->out = (float)(total / (double)units);
    else if (j.g.red == TG_LOSS_MEAN) /* over no weight: 0, not PyTorch's NaN (above) */
        *(float *)a->out = wsum != 0 ? (float)(total / wsum) : 0.0f;
    else if (j.g.red == TG_LOSS_SUM)
        *(float *)a->out = (float)total;
}

static void loss_bwd_range(void *ctx, int64_t begin, int64_t end, int t)
{
    (void)t;
    const loss_job *j = ctx;
    if (j->node->op == TG_OP_MSE_LOSS_BWD) {
        float k = (float)j->dscale;
        for (int64_t q = begin; q < end; q++)
            j->out[q] = (j->x[q] - j->y[q]) * k;
        return;
    }
    int64_t C = j->g.C, D = j->g.D;
    bool ce = j->node->op == TG_OP_CROSS_ENTROPY_BWD;
    for (int64_t r = begin; r < end; r++) {
        int64_t cls = job_class(j, r), at = (r / D) * C * D + r % D;
        float *o = j->out + at;
        double s = (j->dl ? (double)j->dl[r] : j->dscale) * tg_loss_row_weight(cls, j->w, NULL);
        if (cls < 0) { /* ignored: no gradient; bad: NaN */
            float v = cls == TG_LOSS_ROW_BAD ? NAN : 0.0f;
            for (int64_t c = 0; c < C; c++)
                o[c * D] = v;
            continue;
        }
        if (!ce) {
            for (int64_t c = 0; c < C; c++)
                o[c * D] = 0.0f;
            o[cls * D] = (float)-s;
            continue;
        }
        const float *row = j->x + at;
        float m = row[0];
        for (int64_t c = 1; c < C; c++)
            m = row[c * D] > m ? row[c * D] : m;
        double sum = 0;
        for (int64_t c = 0; c < C; c++) {
            o[c * D] = expf(row[c * D] - m);
            sum += o[c * D];
        }
        float k = (float)(s / sum);
        for (int64_t c = 0; c < C; c++)
            o[c * D] *= k;
        o[cls * D] -= (float)s;
    }
}

static void bwd_kernel(const tg_kernel_args *a)
{
    const tg_tensor *node = a->node;
    loss_job j = {.node = node, .out = a->out};
    int64_t units;
    if (node->op == TG_OP_MSE_LOSS_BWD) {
        j.x = a->in[1];
        j.y = a->in[2];
        units = tg_numel(node);
        j.dscale = 2.0 * *(const float *)a->in[0] / (double)units;
    } else {
        bool ce = node->op == TG_OP_CROSS_ENTROPY_BWD;
        int kl = ce ? 2 : 1;
        j.g = tg_loss_rows_of(node);
        j.x = ce ? a->in[1] : NULL;
        if (node->in[kl]->dtype == TG_I32)
            j.li = a->in[kl];
        else
            j.lf = a->in[kl];
        j.w = node->n_in > kl + 1 ? a->in[kl + 1] : NULL;
        units = j.g.R;
        if (j.g.red == TG_LOSS_NONE)
            j.dl = a->in[0];
        else
            j.dscale = tg_loss_mean_scale(
                *(const float *)a->in[0],
                j.g.red == TG_LOSS_MEAN ? tg_loss_weight_sum(&j.g, j.li, j.lf, j.w, NULL, NULL)
                                        : 1.0);
    }
    tg_par_for(a->pool, units, tg_numel(node), loss_bwd_range, &j);
}

#define LOSS_KERNEL(E, SCRATCH, FWD)                                                               \
    const tg_kernel_def tg_cpu_kernel_##E = {.scratch = SCRATCH, .forward = FWD}

LOSS_KERNEL(CROSS_ENTROPY, scratch_partials, fwd_loss);
LOSS_KERNEL(NLL_LOSS, scratch_partials, fwd_loss);
LOSS_KERNEL(MSE_LOSS, scratch_partials, fwd_loss);
LOSS_KERNEL(CROSS_ENTROPY_BWD, NULL, bwd_kernel);
LOSS_KERNEL(NLL_LOSS_BWD, NULL, bwd_kernel);
LOSS_KERNEL(MSE_LOSS_BWD, NULL, bwd_kernel);
