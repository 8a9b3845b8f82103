/* ops/optim.c - the optimizer update ops, SGD_UPDATE and ADAM_UPDATE.
 *
 *     SGD_UPDATE(param, [momentum_buffer,] grad)
 *     ADAM_UPDATE(param, exp_avg, exp_avg_sq, grad)      (Adam, AdamW, LAMB)
 *
 * They rewrite their first n_in - 1 inputs in place and output nothing. The
 * settings are in the node params (graph/optim_params.h); the learning rate of
 * an update comes from the schedule at the session's step (updates done so
 * far), and Adam's bias correction uses t = step + 1. The arithmetic follows
 * torch.optim's single-tensor code, in the same order:
 *
 *   SGD:   d = g + wd*p
 *          buf = step == 0 ? d : momentum*buf + (1 - dampening)*d
 *          d = nesterov ? d + momentum*buf : buf            (with momentum)
 *          p = p - lr*d
 *   Adam:  g = g + wd*p                  (AdamW instead: p = p*(1 - lr*wd))
 *          m = b1*m + (1 - b1)*g;  v = b2*v + (1 - b2)*g*g
 *          p = p - (lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps),  bc = 1 - b^t
 *          (bias_correction off: bc = 1, PopTorch's meaning)
 *   LAMB:  m, v as Adam (no L2 term);  r = (m/bc1) / (sqrt(v)/sqrt(bc2) + eps) + wd*p
 *          trust = ||p|| / ||r||  (||p|| clipped to max_weight_norm; 1 if a norm is 0)
 *          p = p - lr*trust*r
 *
 * LAMB's two norms are reductions over the whole tensor, so its kernel makes
 * two passes: the moments and the norms' partial sums per block of
 * LAMB_BLOCK elements (in double, into the op's planned scratch when the
 * blocks run on several threads), then the step. The blocks' sums are added
 * in block order, so the result does not depend on the number of threads.
 * The direction r is recomputed in the second pass rather than stored: it
 * costs a square root per element but no tensor-sized scratch.
 *
 * As in PyTorch, the per-update scalars (lr, bias corrections) are computed
 * in double and the element loops run in f32. The fast kernels are plain
 * loops over contiguous memory, one per case, so the compiler vectorises
 * them; large tensors are split over the device's threads. SGD, Adam and
 * AdamW also read and write operands stored in bf16 in place, with the
 * bits of staging them through f32 ("operands stored in bf16" in
 * backend/cpu/optim_kernels.c).
 */
#include "ops/optim.h"

#include "core/error.h"

#include <math.h>

/* ---- shape rule ------------------------------------------------------------------ */

static tg_status infer_update(tg_tensor *node, tg_op op)
{
    tg_optimizer o = tg_optim_params_get(&node->p);
    bool sgd = op == TG_OP_SGD_UPDATE;
    if (sgd ? o.kind != TG_OPT_SGD : o.kind == TG_OPT_SGD)
        return tg_error(TG_ERR_INVALID_ARG, "params are for optimizer '%s', not for this op",
                        tg_optimizer_name(o.kind));
    TG_TRY(tg_optimizer_validate(&o));
    int want = sgd ? (o.momentum != 0 ? 3 : 2) : 4;
    if (node->n_in != want)
        return tg_error(TG_ERR_INVALID_ARG, "takes %d inputs, got %d", want, node->n_in);
    static const char *const sgd_what[] = {"parameter", "momentum buffer", "gradient"};
    static const char *const sgd0_what[] = {"parameter", "gradient"};
    static const char *const adam_what[] = {"parameter", "exp_avg", "exp_avg_sq", "gradient"};
    const char *const *what = !sgd ? adam_what : want == 3 ? sgd_what : sgd0_what;
    const tg_tensor *param = node->in[0];
    for (int k = 0; k < node->n_in; k++) {
        const tg_tensor *x = node->in[k];
        if (x->dtype != TG_F32)
            return tg_error(TG_ERR_DTYPE, "%s '%s' of parameter '%s' is %s; updates take f32",
                            what[k], x->name, param->name, tg_dtype_name(x->dtype));
        if (!tg_shape_equal(x->shape, param->shape)) {
            char a[96], b[96];
            return tg_error(TG_ERR_SHAPE, "parameter '%s' is %s but its %s '%s' is %s", param->name,
                            tg_shape_str(param->shape, a, sizeof a), what[k], x->name,
                            tg_shape_str(x->shape, b, sizeof b));
        }
    }
    node->dtype = TG_F32;
    node->shape = tg_shape1(0);
    node->n_mutated = node->n_in - 1;
    return TG_OK;
}

static tg_status infer_sgd(tg_tensor *node)
{
    return infer_update(node, TG_OP_SGD_UPDATE);
}
static tg_status infer_adam(tg_tensor *node)
{
    return infer_update(node, TG_OP_ADAM_UPDATE);
}

/* Per element: weight decay 2, momentum 3, nesterov 2, the step 2. */
static double flops_sgd(const tg_tensor *node)
{
    tg_optimizer o = tg_optim_params_get(&node->p);
    double per =
        2 + (o.weight_decay != 0 ? 2 : 0) + (o.momentum != 0 ? 3 : 0) + (o.nesterov ? 2 : 0);
    return per * (double)tg_numel(node->in[0]);
}

/* Per element: decay 2, moments 3 + 4, sqrt, divide, add eps, divide, step 2;
 * LAMB also squares and sums p and r (4) and recomputes r for its step (5). */
static double flops_adam(const tg_tensor *node)
{
    tg_optimizer o = tg_optim_params_get(&node->p);
    double lamb = o.kind == TG_OPT_LAMB ? 9.0 : 0.0;
    return (13.0 + lamb + (o.weight_decay != 0 ? 2 : 0)) * (double)tg_numel(node->in[0]);
}

/* ---- per-update scalars, shared with the kernels (ops/optim.h) ---------------------- */

tg_adam_scalars tg_adam_prepare(const tg_optimizer *o, int64_t step)
{
    tg_adam_scalars s;
    double t = (double)(step < 0 ? 1 : step + 1);
    s.lr = tg_lr_at(&o->lr, step);
    bool w = o->kind == TG_OPT_ADAMW;
    s.l2 = o->kind == TG_OPT_ADAM ? o->weight_decay : 0.0; /* LAMB decays inside r */
    s.shrink = w ? 1.0 - s.lr * o->weight_decay : 1.0;
    bool bc = o->bias_correction;
    s.bc1 = bc ? 1.0 - pow((double)o->beta1, t) : 1.0;
    s.step_size = s.lr / s.bc1;
    s.bc2_sqrt = bc ? sqrt(1.0 - pow((double)o->beta2, t)) : 1.0;
    return s;
}

/* ||p|| / ||r|| from the sums of squares, ||p|| clipped to max_weight_norm
 * (0 or inf: no clip); 1 when either norm is 0, as PopTorch. */
double tg_lamb_trust(double sum_p, double sum_r, float max_weight_norm)
{
    double wn = sqrt(sum_p), rn = sqrt(sum_r);
    if (max_weight_norm > 0 && isfinite(max_weight_norm) && wn > max_weight_norm)
        wn = max_weight_norm;
    return wn == 0 || rn == 0 ? 1.0 : wn / rn;
}

/* ---- reference kernels -------------------------------------------------------------- */

static void ref_sgd(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_optimizer o = tg_optim_params_get(&node->p);
    bool has_buf = node->n_in == 3;
    double *p = a->in[0], *buf = has_buf ? a->in[1] : NULL;
    const double *g = a->in[has_buf ? 2 : 1];
    double lr = tg_lr_at(&o.lr, a->step), wd = o.weight_decay, mom = o.momentum;
    double damp = o.dampening;
    int64_t n = tg_numel(node->in[0]);
    for (int64_t i = 0; i < n; i++) {
        double d = g[i];
        if (wd != 0)
            d += wd * p[i];
        if (buf) {
            buf[i] = a->step <= 0 ? d : mom * buf[i] + (1 - damp) * d;
            d = o.nesterov ? d + mom * buf[i] : buf[i];
        }
        p[i] -= lr * d;
    }
}

static void ref_lamb(const tg_ref_args *a, const tg_optimizer *o, const tg_adam_scalars *s)
{
    double *p = a->in[0], *m = a->in[1], *v = a->in[2];
    const double *g = a->in[3];
    double b1 = o->beta1, b2 = o->beta2, eps = o->eps, wd = o->weight_decay;
    int64_t n = tg_numel(a->node->in[0]);
    double sum_p = 0, sum_r = 0;
    for (int64_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        double r = m[i] / s->bc1 / (sqrt(v[i]) / s->bc2_sqrt + eps) + wd * p[i];
        sum_p += p[i] * p[i];
        sum_r += r * r;
    }
    double step = s->lr * tg_lamb_trust(sum_p, sum_r, o->max_weight_norm);
    for (int64_t i = 0; i < n; i++)
        p[i] -= step * (m[i] / s->bc1 / (sqrt(v[i]) / s->bc2_sqrt + eps) + wd * p[i]);
}

static void ref_adam(const tg_ref_args *a)
{
    const tg_tensor *node = a->node;
    tg_optimizer o = tg_optim_params_get(&node->p);
    tg_adam_scalars s = tg_adam_prepare(&o, a->step);
    if (o.kind == TG_OPT_LAMB) {
        ref_lamb(a, &o, &s);
        return;
    }
    double *p = a->in[0], *m = a->in[1], *v = a->in[2];
    const double *g = a->in[3];
    double b1 = o.beta1, b2 = o.beta2, eps = o.eps;
    int64_t n = tg_numel(node->in[0]);
    for (int64_t i = 0; i < n; i++) {
        double gi = g[i];
        if (o.kind == TG_OPT_ADAMW)
            p[i] *= s.shrink;
        else if (s.l2 != 0)
            gi += s.l2 * p[i];
        m[i] = b1 * m[i] + (1 - b1) * gi;
        v[i] = b2 * v[i] + (1 - b2) * gi * gi;
        p[i] -= s.step_size * m[i] / (sqrt(v[i]) / s.bc2_sqrt + eps);
    }
}

/* No backward: updates come after the backward pass and output nothing. */
const tg_op_def tg_opdef_SGD_UPDATE = {
    .infer = infer_sgd, .flops = flops_sgd, .reference = ref_sgd, .memory = TG_OP_OWN_STORAGE};

const tg_op_def tg_opdef_ADAM_UPDATE = {
    .infer = infer_adam, .flops = flops_adam, .reference = ref_adam, .memory = TG_OP_OWN_STORAGE};
