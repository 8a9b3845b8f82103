/* compile/parallel_phases.c - ParallelIPU phased execution: the phases
 * alternate over two devices (even phases on device 0, odd ones on device
 * 1, compile/placement.c), so while one device computes its phase the
 * other can stream in the next one's weights (docs/memory-locations.md).
 *
 * A device's forward pass then holds phases 0, 2, 4... and its backward
 * pass the same phases from the last; between two of them the other
 * device runs its phase. The passes stay what they are everywhere else
 * (one range of steps each, one memory-plan timeline, one I/O-thread
 * pass), so the memory plan, the streamed copies and the profile need
 * nothing new: this file only (1) orders each pass's steps by phase, so
 * that every phase is one run of consecutive steps, a "segment", and (2)
 * puts the transfers between the segments: a value leaves its sender
 * before the step that begins the sender's next segment (send_at) and is
 * waited for before the step that begins the receiver's segment that
 * first reads it (recv_at), both inside the pass; the step carries
 * exchange_before so the engine looks only there.
 *
 * Deadlock-free by construction, and checked: order every segment of one
 * micro-batch globally (forward phases 0..n-1, then backward phases
 * n-1..0). Each device runs its segments in that order, and every value a
 * segment waits for comes from a segment strictly before it, so the
 * earliest unfinished segment can always run. A value that would flow the
 * other way is refused with its name.
 */
#include "compile/program.h"

#include "core/alloc.h"
#include "core/error.h"

#include <string.h>

bool tg_program_parallel_phases(const tg_program *p)
{
    return p->n_phases > 0 && p->phase_of && p->config.pipeline.phased_type &&
           strcmp(p->config.pipeline.phased_type, "ParallelIPU") == 0;
}

static int phase_at(const tg_program *p, const tg_device_program *dp, tg_phase ph, int k)
{
    return p->phase_of[dp->steps[ph][k].node];
}

/* The segment's key in its pass: forward phases ascending, backward
 * phases descending. */
static int segment_key(const tg_program *p, tg_phase ph, int phase)
{
    return ph == TG_PHASE_BACKWARD ? p->n_phases - 1 - phase : phase;
}

/* The segment's place among every segment of one micro-batch. */
static int global_position(const tg_program *p, tg_phase ph, int phase)
{
    return ph == TG_PHASE_FORWARD ? phase : p->n_phases + segment_key(p, ph, phase);
}

/* Stable counting sort of one pass by segment key. */
static tg_status sort_pass(tg_program *p, tg_device_program *dp, tg_phase ph)
{
    int n = dp->n_steps[ph], keys = p->n_phases;
    tg_step *sorted = tg_malloc(((size_t)n + 1) * sizeof *sorted);
    if (!sorted)
        return tg_error(TG_ERR_NOMEM, "compile: out of memory");
    int at = 0;
    for (int key = 0; key < keys; key++)
        for (int k = 0; k < n; k++)
            if (segment_key(p, ph, phase_at(p, dp, ph, k)) == key)
                sorted[at++] = dp->steps[ph][k];
    if (at != n) {
        tg_free(sorted);
        return tg_error(TG_ERR_INTERNAL, "compile: a step of the %s pass has no phase",
                        ph == TG_PHASE_FORWARD ? "forward" : "backward");
    }
    memcpy(dp->steps[ph], sorted, (size_t)n * sizeof *sorted);
    tg_free(sorted);
    return TG_OK;
}

/* Every step of the pass reads what the pass writes only after it is
 * written: the sort moved no reader before its writer. */
static tg_status check_pass(const tg_program *p, int d, tg_phase ph, int *writer)
{
    const tg_device_program *dp = &p->devices[d];
    for (int b = 0; b < p->n_buffers; b++)
        writer[b] = -1;
    for (int k = 0; k < dp->n_steps[ph]; k++) {
        int out = dp->steps[ph][k].out;
        if (out >= 0 && writer[out] < 0)
            writer[out] = k;
    }
    for (int k = 0; k < dp->n_steps[ph]; k++) {
        const tg_step *st = &dp->steps[ph][k];
        const tg_tensor *t = p->graph->nodes[st->node];
        for (int i = 0; i < t->n_in; i++) {
            int b = st->in[i];
            if (b < 0 || writer[b] <= k)
                continue;
            const tg_step *w = &dp->steps[ph][writer[b]];
            return tg_error(TG_ERR_CONFIG,
                            "phasedExecutionType ParallelIPU: on device %d, '%s' (phase %d) reads "
                            "'%s' (phase %d), which the %s pass runs after it; put the two in "
                            "one phase, or use SingleIPU",
                            d, t->name, p->phase_of[st->node], p->graph->nodes[w->node]->name,
                            p->phase_of[w->node], ph == TG_PHASE_FORWARD ? "forward" : "backward");
        }
    }
    return TG_OK;
}

tg_status tg_parallel_phases_order(tg_program *p)
{
    if (!tg_program_parallel_phases(p))
        return TG_OK;
    int *writer = tg_malloc(((size_t)p->n_buffers + 1) * sizeof *writer);
    if (!writer)
        return tg_error(TG_ERR_NOMEM, "compile: out of memory");
    tg_status s = TG_OK;
    for (int d = 0; s == TG_OK && d < p->n_devices; d++)
        for (int ph = TG_PHASE_FORWARD; s == TG_OK && ph <= TG_PHASE_BACKWARD; ph++) {
            s = sort_pass(p, &p->devices[d], (tg_phase)ph);
            if (s == TG_OK)
                s = check_pass(p, d, (tg_phase)ph, writer);
        }
    tg_free(writer);
    return s;
}

/* The first step of the segment that holds step k. */
static int segment_start(const tg_program *p, const tg_device_program *dp, tg_phase ph, int k)
{
    int phase = phase_at(p, dp, ph, k);
    while (k > 0 && phase_at(p, dp, ph, k - 1) == phase)
        k--;
    return k;
}

/* The step after the segment of `phase` in the pass (n_steps when it is
 * the last); -1 when the pass has no step of that phase. */
static int segment_end(const tg_program *p, const tg_device_program *dp, tg_phase ph, int phase)
{
    int end = -1;
    for (int k = 0; k < dp->n_steps[ph]; k++)
        if (phase_at(p, dp, ph, k) == phase)
            end = k + 1;
    return end;
}

/* The first step of the receiver's pass `use` that reads the transfer's
 * value; -1 for none. */
static int first_reader(const tg_program *p, const tg_transfer *tr, tg_phase use)
{
    const tg_device_program *dp = &p->devices[tr->dst_device];
    for (int k = 0; k < dp->n_steps[use]; k++) {
        const tg_step *st = &dp->steps[use][k];
        for (int i = 0; i < p->graph->nodes[st->node]->n_in; i++)
            if (st->in[i] == tr->dst_buffer)
                return k;
    }
    return -1;
}

/* An offloaded value is sent from its host copy (runtime/exchange.c): the
 * sender's pass must have stored it there before it sends it, which it
 * does after the pass's last step that reads it. A value a later phase of
 * the same device still reads would leave before it is stored. */
static tg_status check_stored_before_sent(const tg_program *p, const tg_transfer *tr)
{
    const tg_device_program *dp = &p->devices[tr->src_device];
    if (tr->send_at < 0 || !p->buffers[tr->src_buffer].offloaded)
        return TG_OK;
    for (int k = tr->send_at; k < dp->n_steps[tr->phase]; k++) {
        const tg_step *st = &dp->steps[tr->phase][k];
        for (int i = st->n_stream_in; i < st->n_stream_in + st->n_stream_out; i++) {
            const tg_stream_op *op = &dp->streams[tr->phase][st->stream_at + i];
            if (op->kind == TG_STREAM_COPY && op->home == tr->src_buffer)
                return tg_error(TG_ERR_CONFIG,
                                "phasedExecutionType ParallelIPU: '%s' goes to device %d after "
                                "phase %d, but it is kept in streaming memory and phase %d on "
                                "device %d still reads it, so it is stored after it is sent: "
                                "keep activations on chip (TensorLocations.activation.onChip), "
                                "or use SingleIPU",
                                p->graph->nodes[tr->node]->name, tr->dst_device,
                                p->phase_of[tr->node], p->phase_of[st->node], tr->src_device);
        }
    }
    return TG_OK;
}

static const char *pass_name(tg_phase ph)
{
    return ph == TG_PHASE_FORWARD ? "forward" : "backward";
}

/* Where transfer tr moves inside the passes; refused when its reader's
 * segment runs before its sender's. */
static tg_status place_transfer(tg_program *p, tg_transfer *tr)
{
    const tg_tensor *value = p->graph->nodes[tr->node];
    tg_device_program *src = &p->devices[tr->src_device], *dst = &p->devices[tr->dst_device];
    int made = p->phase_of[tr->node];
    int end = segment_end(p, src, tr->phase, made);
    if (end < 0)
        return tg_error(TG_ERR_INTERNAL,
                        "compile: '%s' is sent from device %d, which has no step "
                        "of its phase %d",
                        value->name, tr->src_device, made);
    tr->send_at = end < src->n_steps[tr->phase] ? end : -1;
    if (tr->send_at >= 0)
        src->steps[tr->phase][tr->send_at].exchange_before = true;
    TG_TRY(check_stored_before_sent(p, tr));
    for (int use = TG_PHASE_FORWARD; use <= TG_PHASE_BACKWARD; use++) {
        int k = first_reader(p, tr, (tg_phase)use);
        if (k < 0)
            continue;
        int reader = phase_at(p, dst, (tg_phase)use, k);
        if (global_position(p, (tg_phase)use, reader) <= global_position(p, tr->phase, made))
            return tg_error(TG_ERR_CONFIG,
                            "phasedExecutionType ParallelIPU: '%s' is made by phase %d's %s pass "
                            "on device %d and read by phase %d's %s pass on device %d, which runs "
                            "first; put the two in one phase, or use SingleIPU",
                            value->name, made, pass_name(tr->phase), tr->src_device, reader,
                            pass_name((tg_phase)use), tr->dst_device);
        tr->recv_at[use] = segment_start(p, dst, (tg_phase)use, k);
        dst->steps[use][tr->recv_at[use]].exchange_before = true;
    }
    return TG_OK;
}

tg_status tg_parallel_phases_exchange(tg_program *p)
{
    if (!tg_program_parallel_phases(p))
        return TG_OK;
    if (tg_pipe_schedule_splits(&p->schedule))
        return tg_error(TG_ERR_INTERNAL, "compile: ParallelIPU with a split backward");
    for (int t = 0; t < p->n_transfers; t++)
        TG_TRY(place_transfer(p, &p->transfers[t]));
    return TG_OK;
}
