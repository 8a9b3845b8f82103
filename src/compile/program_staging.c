/* compile/program_staging.c - the staging plans: which steps read or write
 * their operands in a storage type (bf16) natively, and which stage them
 * through an f32 copy (whole or in chunks). Split from compile/program.c,
 * whose compile() plans it after the memory locations.
 */
#include "backend/backend.h"
#include "compile/program.h"
#include "compile/program_internal.h"
#include "compile/layout.h"
#include "core/check.h"
#include "core/process.h"

#include "ops/norm.h"
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

/* Whether operand v, stored in buffer b, is one a kernel reading bf16 can
 * take: an f32 value stored in f32 or bf16, or an i32 one (a gather's
 * indices) stored as it is. */
static bool native_operand(const tg_program *p, const tg_tensor *v, int b)
{
    tg_dtype dt = b >= 0 ? p->buffers[b].dtype : v->dtype;
    return (v->dtype == TG_F32 && (dt == TG_F32 || dt == TG_BF16)) ||
           (v->dtype == TG_I32 && dt == TG_I32);
}

size_t tg_step_native_scratch(const tg_tensor *t)
{
    /* a gather reads its rows in place (ops/gather.c), layer norm its rows
     * on the stack (ops/norm.c) */
    if (tg_op_update_reads_bf16(t) || t->op == TG_OP_GATHER || tg_norm_reads_rows_bf16(t))
        return 0;
    size_t bytes = t->shape.ndim == 4 ? 0 : tg_align((size_t)tg_numel(t) * sizeof(float));
    for (int k = 0; k < t->n_in; k++)
        if (t->in[k]->shape.ndim != 4)
            bytes += tg_align((size_t)tg_numel(t->in[k]) * sizeof(float));
    return bytes;
}

/* ReLU, its gradient and add read bf16 only with every operand in it. */
static bool all_bf16(const tg_program *p, const tg_step *st, const tg_tensor *t)
{
    bool all = st->out >= 0 && p->buffers[st->out].dtype == TG_BF16;
    for (int k = 0; k < t->n_in; k++)
        all &= st->in[k] >= 0 && p->buffers[st->in[k]].dtype == TG_BF16;
    return all;
}

/* A weight update reads bf16 itself when it has an operand in bf16 (in
 * f32 with loss scaling it stays staged: only its gradient is copied). */
static bool some_bf16(const tg_program *p, const tg_step *st, const tg_tensor *t)
{
    bool some = false;
    for (int k = 0; k < t->n_in; k++)
        some |= st->in[k] >= 0 && p->buffers[st->in[k]].dtype == TG_BF16;
    return some;
}

bool tg_step_reads_native(const tg_program *p, const tg_step *st)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    bool blocked = p->layout && (p->layout[t->id] & TG_LAYOUT_OP_BLOCKED);
    if (tg_process_whole_staging() || !tg_op_reads_bf16(t, blocked) ||
        !native_operand(p, t, st->out))
        return false;
    if (tg_elementwise_bf16_supported(t))
        return all_bf16(p, st, t);
    if (tg_op_update_reads_bf16(t) && !some_bf16(p, st, t))
        return false;
    for (int k = 0; k < t->n_in; k++)
        if (!native_operand(p, t->in[k], st->in[k]))
            return false;
    return true;
}

bool tg_step_stages_input(const tg_program *p, const tg_step *st, int k)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    int b = st->in[k];
    if (b < 0)
        return false;
    if ((p->plans && p->plans[st->node].native_storage) || tg_step_reads_native(p, st))
        return false;
    return p->buffers[b].dtype != t->in[k]->dtype ||
           (k == t->n_in - 1 && tg_step_unscales_gradient(p, st));
}

bool tg_step_unscales_gradient(const tg_program *p, const tg_step *st)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    int b = st->in[t->n_in - 1];
    if (!tg_is_weight_update(t) || b < 0)
        return false;
    return p->buffers[b].dtype != t->in[t->n_in - 1]->dtype ||
           p->precision.loss_scaling != TG_LOSS_SCALING_NONE;
}

bool tg_step_stages_output(const tg_program *p, const tg_step *st)
{
    if ((p->plans && p->plans[st->node].native_storage) || tg_step_reads_native(p, st))
        return false;
    return st->out >= 0 && p->buffers[st->out].dtype != p->graph->nodes[st->node]->dtype;
}

bool tg_step_stages_in_chunks(const tg_tensor *t)
{
    if (tg_process_whole_staging())
        return false;
    if (tg_is_weight_update(t))
        return tg_op_update_is_elementwise(t) && t->n_in <= TG_ELEMENTWISE_MAX_INPUTS + 1;
    return tg_op_is_elementwise(t) && t->n_mutated == 0;
}

static int64_t stored_numel(const tg_program *p, const tg_tensor *t)
{
    return tg_shape_numel(tg_layout_stored_shape(p, t));
}

/* Add one step's f32 staging to its scratch (none for chunks: they live on
 * the stack of the thread converting them). */
static void stage_step(const tg_program *p, tg_step *st)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    if (tg_step_reads_native(p, st)) {
        st->staged = false;
        st->scratch_bytes = tg_align(st->kernel_scratch) + tg_step_native_scratch(t);
        return;
    }
    if (tg_step_stages_in_chunks(t)) {
        bool in = false;
        for (int k = 0; k < t->n_in; k++)
            in |= tg_step_stages_input(p, st, k);
        st->staged = in || tg_step_stages_output(p, st);
        return;
    }
    /* a padded blocked operand is staged whole (runtime/engine_passes.c) */
    size_t extra = 0;
    for (int k = 0; k < t->n_in; k++)
        if (tg_step_stages_input(p, st, k))
            extra += tg_align((size_t)stored_numel(p, t->in[k]) * sizeof(float));
    if (tg_step_stages_output(p, st))
        extra += tg_align((size_t)stored_numel(p, t) * sizeof(float));
    st->staged = extra > 0;
    if (st->staged)
        st->scratch_bytes = tg_align(st->kernel_scratch) + extra;
}

/* A kernel planned for its operands' storage types finds them in buffers
 * of those types; where a buffer holds another (none is known to), the node
 * falls back to the own kernels, staged through f32 as every other op. */
static bool native_storage_holds(const tg_program *p, const tg_step *st)
{
    const tg_tensor *t = p->graph->nodes[st->node];
    bool same = st->out < 0 || p->buffers[st->out].dtype == p->storage[t->id];
    for (int k = 0; k < t->n_in; k++)
        same &= st->in[k] < 0 || p->buffers[st->in[k]].dtype == p->storage[t->in[k]->id];
    return same;
}

static void drop_native_plan(tg_program *p, const tg_tensor *t)
{
    /* A fused product computes its chain (bias, GELU, residual) only in its
     * native-storage plan: the plain kernel it would fall back to computes
     * the product alone, and the fused nodes have no steps of their own.
     * Fusion decides on the same storage this checks, so this cannot happen
     * unless the two disagree: stop rather than skip the chain silently. */
    if (p->fused_tail && p->fused_tail[t->id] >= 0)
        TG_UNREACHABLE("staging drops the in-place plan of a fused node", t->id);
    tg_kernel_plan *kp = &p->plans[t->id];
    tg_op_planner_get(t->op)->plan_free(kp->state);
    kp->state = NULL;
    kp->native_storage = false;
    snprintf(kp->kernel, sizeof kp->kernel, "own (operands not in their planned types)");
}

/* Each step's f32 staging in its scratch, before the memory plan: first the
 * native-storage plans checked over every step of their node (a recomputed
 * node has two), then the staging of what is not native. */
void tg_program_plan_staging(tg_program *p)
{
    for (int pass = 0; pass < 2; pass++)
        for (int d = 0; d < p->n_devices; d++)
            for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
                for (int s = 0; s < p->devices[d].n_steps[ph]; s++) {
                    tg_step *st = &p->devices[d].steps[ph][s];
                    const tg_tensor *t = p->graph->nodes[st->node];
                    tg_kernel_plan *kp = &p->plans[t->id];
                    if (pass == 0 && kp->native_storage && !native_storage_holds(p, st))
                        drop_native_plan(p, t);
                    if (pass == 0)
                        continue;
                    if (!kp->state && strncmp(kp->kernel, "own (operands", 13) == 0)
                        st->kernel_scratch = st->scratch_bytes = tg_program_own_scratch(p, t);
                    stage_step(p, st);
                }
}
