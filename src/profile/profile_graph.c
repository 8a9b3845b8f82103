/* profile/profile_graph.c - the graph profile's tables: what was planned
 * (meta and options, devices and their memory, ops with their FLOPs and
 * predicted times, tensors, the program tree, liveness, tiles), written once
 * when the profile is opened; and the rows added to them afterwards (meta,
 * remedies). The file itself: profile.c.
 */
#include "profile/profile_internal.h"

#include "compile/cost.h"
#include "compile/simulate.h"

#include "compile/placement.h"
#include "core/alloc.h"
#include "core/error.h"
#include "backend/cpu/dnnl_util.h"
#include "ops/op.h"
#include "target/tiled.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#ifndef TG_VERSION
#define TG_VERSION "0"
#endif

static tg_status write_meta(tg_profile *pf)
{
    const tg_program *p = pf->program;
    const tg_config *c = &p->config;
    sqlite3_stmt *st = pf_prepare(pf, "INSERT INTO meta VALUES(?, ?)");
    if (!st)
        return pf_db_error(pf, "prepare");
    char created[64], buf[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n_ops = 0, n_steps = 0;
    for (int d = 0; d < p->n_devices; d++)
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            n_steps += p->devices[d].n_steps[ph];
    for (int i = 0; i < p->graph->n_nodes; i++)
        n_ops += p->device_of[i] >= 0 && p->graph->nodes[i]->n_in > 0;
    struct {
        const char *k;
        const char *v;
        int64_t i;
    } rows[] = {
        {"schema_version", NULL, TG_PROFILE_SCHEMA_VERSION},
        {"tilegraph_version", TG_VERSION, 0},
        {"created", created, 0},
        {"program", p->training ? "training" : "inference", 0},
        {"target", c->target.name, 0},
        {"devices", NULL, p->n_devices},
        {"replicas", NULL, p->replicas},
        {"micro_batches", NULL, p->micro_batches},
        {"iterations", NULL, p->iterations},
        {"schedule", tg_schedule_name(p->schedule.kind), 0},
        {"strategy", c->pipeline.strategy, 0},
        {"threads_per_device", NULL, p->n_threads},
        {"cores_allowed", NULL, p->cpu.allowed}, /* the cores this process could use */
        {"cores_free", NULL, p->cpu.free},       /* of which free at compile time */
        {"memory_per_device", NULL, c->memory.per_device},
        {"stages_auto", p->auto_stages, 0}, /* the split --stages/--split auto chose */
        {"ops", NULL, n_ops},
        {"tensors", NULL, p->n_buffers},
        {"steps", NULL, n_steps},
        {"transfers", NULL, p->n_transfers},
        {"arena_bytes", NULL, (int64_t)p->arena_bytes},
        {"flops_per_run", NULL, (int64_t)p->flops},
        {"onednn_isa", tg_dnnl_isa_name(), 0},
        {"trace_clock",
         p->tile_plan ? "cycles (the cycle model's timeline; start_ns and end_ns "
                        "are those cycles at the target's clock)"
                      : "ns (measured, wall clock)",
         0},
    };
    tg_status s = TG_OK;
    for (size_t i = 0; s == TG_OK && i < sizeof rows / sizeof rows[0]; i++) {
        const char *v = rows[i].v;
        if (!v) {
            snprintf(buf, sizeof buf, "%lld", (long long)rows[i].i);
            v = buf;
        }
        s = pf_insert(pf, st, "ss", rows[i].k, v);
    }
    /* every option with its value, for reproducing the run */
    for (int i = 0; s == TG_OK && i < tg_options_count(); i++) {
        char key[160];
        snprintf(key, sizeof key, "option.%s", tg_options_key(i));
        s = pf_insert(pf, st, "ss", key, tg_config_text(c, i));
    }
    sqlite3_finalize(st);
    return s;
}

tg_status tg_profile_set_meta(tg_profile *pf, const char *key, const char *value)
{
    sqlite3_stmt *st = pf_prepare(pf, "INSERT OR REPLACE INTO meta VALUES(?, ?)");
    if (!st)
        return pf_db_error(pf, "prepare");
    tg_status s = pf_insert(pf, st, "ss", key, value);
    sqlite3_finalize(st);
    return s;
}

static tg_status write_devices(tg_profile *pf)
{
    const tg_program *p = pf->program;
    sqlite3_stmt *dev = pf_prepare(pf, "INSERT INTO devices VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
    sqlite3_stmt *mem = pf_prepare(pf, "INSERT INTO memory VALUES(?, ?, ?)");
    tg_status s = dev && mem ? TG_OK : pf_db_error(pf, "prepare");
    for (int d = 0; s == TG_OK && d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        s = pf_insert(pf, dev, "iiiiiddd", (int64_t)d, (int64_t)dp->arena_bytes,
                      (int64_t)dp->stash_depth, (int64_t)dp->scratch_peak, (int64_t)p->n_threads,
                      dp->flops[0], dp->flops[1], dp->flops[2]);
        for (int r = TG_REGION_PARAM; s == TG_OK && r < TG_REGION_COUNT; r++)
            s = pf_insert(pf, mem, "isi", (int64_t)d, tg_region_name((tg_region)r),
                          (int64_t)dp->region_bytes[r]);
        if (s == TG_OK)
            s = pf_insert(pf, mem, "isi", (int64_t)d, "kernel scratch (peak)",
                          (int64_t)dp->scratch_peak);
        if (s == TG_OK)
            s = pf_insert(pf, mem, "isi", (int64_t)d, "offloaded to host",
                          (int64_t)dp->offloaded_bytes);
        if (s == TG_OK)
            s = pf_insert(pf, mem, "isi", (int64_t)d, TG_WEIGHT_CACHE_CATEGORY,
                          (int64_t)tg_program_kept_bytes(p, d));
    }
    sqlite3_finalize(dev);
    sqlite3_finalize(mem);
    return s;
}

/* The cost model the program would be planned with (compile/cost.h), on
 * the program's threads, with its kernels timed; *have false when there is
 * none (the column stays NULL). Out of memory is an error. The caller frees
 * it: tg_cost_model_free. */
static tg_status cost_model(const tg_program *p, tg_cost_model *m, bool *have)
{
    *have = false;
    if (tg_cost_model_from_config(&p->config, p->n_devices, m) != TG_OK)
        return TG_OK;
    if (!m->tiled && tg_cost_rates_get(p->n_threads, &m->rates) != TG_OK)
        return TG_OK;
    bool *placed = m->tiled ? NULL : tg_calloc((size_t)p->graph->n_nodes + 1, sizeof(bool));
    if (!m->tiled && !placed)
        return tg_error(TG_ERR_NOMEM, "profile: out of memory");
    for (int i = 0; placed && i < p->graph->n_nodes; i++)
        placed[i] = p->device_of[i] >= 0;
    tg_status s = placed ? tg_cost_model_time_kernels(m, p->graph, placed) : TG_OK;
    tg_free(placed);
    if (s != TG_OK)
        tg_cost_model_free(m);
    *have = s == TG_OK;
    return s;
}

static tg_status write_ops(tg_profile *pf, bool flops)
{
    const tg_program *p = pf->program;
    const tg_graph *g = p->graph;
    tg_cost_model cost;
    bool predicted;
    TG_TRY(cost_model(p, &cost, &predicted));
    sqlite3_stmt *st =
        pf_prepare(pf, "INSERT INTO ops(id, name, type, block, device, phase, flops, "
                       "bytes_in, bytes_out, forward_of, predicted_ns, kernel) "
                       "VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
    tg_status s = st ? TG_OK : pf_db_error(pf, "prepare");
    for (int i = 0; s == TG_OK && i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (p->device_of[i] < 0 || t->n_in == 0)
            continue;
        const tg_op_def *def = tg_op_get(t->op);
        int64_t in_bytes = 0;
        for (int k = 0; k < t->n_in; k++)
            in_bytes += (int64_t)tg_program_node_bytes(p, t->in[k]);
        const char *block =
            t->block >= 0 && t->block < g->n_blocks ? g->blocks[t->block].name : NULL;
        const char *phase = (t->flags & TG_NODE_OPTIMIZER)  ? "update"
                            : (t->flags & TG_NODE_BACKWARD) ? "backward"
                                                            : "forward";
        const char *kernel = p->plans[i].kernel[0] ? p->plans[i].kernel : NULL;
        s = pf_insert(pf, st, "isssisdddids", (int64_t)i, t->name, tg_op_name(t->op), block,
                      (int64_t)p->device_of[i], phase,
                      flops && def && def->flops ? def->flops(t) : 0.0, (double)in_bytes,
                      (double)tg_program_node_bytes(p, t),
                      t->forward_of ? (int64_t)t->forward_of->id : (int64_t)-1,
                      predicted ? tg_cost_node_seconds(&cost, t) * 1e9 : NAN, kernel);
    }
    sqlite3_finalize(st);
    tg_cost_model_free(&cost);
    /* the data flow between ops (through leaves and aliases too): the operations graph */
    st = pf_prepare(pf, "INSERT OR IGNORE INTO op_edges VALUES(?, ?)");
    if (s == TG_OK && !st)
        s = pf_db_error(pf, "prepare");
    for (int i = 0; s == TG_OK && i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (p->device_of[i] < 0 || t->n_in == 0)
            continue;
        for (int k = 0; s == TG_OK && k < t->n_in; k++) {
            const tg_tensor *x = t->in[k];
            while (x->flags & TG_NODE_ALIAS) /* a reshape is a view of its input */
                x = x->in[0];
            if (x->n_in > 0 && p->device_of[x->id] >= 0)
                s = pf_insert(pf, st, "ii", (int64_t)x->id, (int64_t)i);
        }
    }
    sqlite3_finalize(st);
    return s;
}

/* Each device's stage cost from its steps' predicted times and the copies
 * it sends (compile/simulate.h); false when there is no cost model. */
static bool stage_costs(const tg_program *p, const tg_cost_model *cost, tg_stage_cost *c)
{
    for (int d = 0; d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            for (int k = 0; k < dp->n_steps[ph]; k++) {
                double sec = tg_cost_node_seconds(cost, p->graph->nodes[dp->steps[ph][k].node]);
                if (ph == TG_PHASE_UPDATE)
                    c[d].update += sec;
                else if (ph == TG_PHASE_FORWARD)
                    c[d].time[TG_SIM_FORWARD] += sec;
                else /* B, then (split) W */
                    c[d].time[k < dp->input_grad_steps ? TG_SIM_BACKWARD : TG_SIM_WEIGHT] += sec;
            }
    }
    for (int k = 0; k < p->n_transfers; k++) {
        const tg_transfer *t = &p->transfers[k];
        double sec = tg_cost_copy_seconds(cost, (double)p->buffers[t->src_buffer].bytes);
        if (t->phase == TG_PHASE_FORWARD)
            c[t->src_device].send_forward += sec;
        else if (t->phase == TG_PHASE_BACKWARD)
            c[t->src_device].send_backward += sec;
    }
    return true;
}

/* The schedule's timeline for one weight update as the cost model predicts
 * it (the simulator's), beside which the analysers draw the measured one. */
static tg_status write_predicted(tg_profile *pf)
{
    const tg_program *p = pf->program;
    tg_cost_model cost;
    bool have;
    TG_TRY(cost_model(p, &cost, &have));
    if (!have)
        return TG_OK; /* no model: the table stays empty */
    tg_stage_cost *c = tg_calloc((size_t)p->n_devices + 1, sizeof *c);
    bool costed = c && stage_costs(p, &cost, c);
    tg_cost_model_free(&cost);
    if (!c)
        return tg_error(TG_ERR_NOMEM, "profile: out of memory");
    tg_sim_result r;
    tg_status s = TG_OK;
    if (!costed || (s = tg_schedule_simulate_costs(&p->schedule, c, &r)) != TG_OK) {
        tg_free(c);
        /* a schedule the simulator cannot take leaves the table empty; a
         * simulation cut short by memory would leave it so silently */
        return s == TG_ERR_NOMEM ? s : TG_OK;
    }
    sqlite3_stmt *st = pf_prepare(pf, "INSERT INTO predicted_trace VALUES(?,?,?,?,?)");
    if (!st)
        s = pf_db_error(pf, "prepare");
    for (int d = 0; s == TG_OK && d < p->n_devices; d++) {
        double last = 0;
        for (int k = 0; s == TG_OK && k < p->schedule.n_ops[d]; k++) {
            tg_pipe_op op = p->schedule.ops[d][k];
            size_t at = ((size_t)d * r.micro_batches + op.micro_batch) * TG_SIM_KIND_COUNT +
                        (size_t)op.pass; /* tg_sim_kind follows tg_pipe_pass */
            s = pf_insert(pf, st, "isidd", (int64_t)d, tg_pipe_pass_name(op.pass),
                          (int64_t)op.micro_batch, r.op_start[at] * 1e9, r.op_end[at] * 1e9);
            last = r.op_end[at] > last ? r.op_end[at] : last;
        }
        if (s == TG_OK && p->training)
            s = pf_insert(pf, st, "isidd", (int64_t)d, "update", (int64_t)-1, last * 1e9,
                          r.finish_time[d] * 1e9);
    }
    sqlite3_finalize(st);
    tg_sim_result_free(&r);
    tg_free(c);
    return s;
}

static tg_status write_tensors(tg_profile *pf)
{
    const tg_program *p = pf->program;
    const tg_graph *g = p->graph;
    sqlite3_stmt *st = pf_prepare(pf, "INSERT INTO tensors VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)");
    tg_status s = st ? TG_OK : pf_db_error(pf, "prepare");
    for (int i = 0; s == TG_OK && i < p->n_buffers; i++) {
        const tg_buffer *b = &p->buffers[i];
        const tg_tensor *t = g->nodes[b->node];
        char shape[96];
        tg_shape_str(t->shape, shape, sizeof shape);
        bool always = b->region != TG_REGION_ACTIVATION;
        s = pf_insert(pf, st, "iissssiiiiiii", (int64_t)i, (int64_t)b->node, t->name,
                      tg_region_name(b->region), tg_dtype_name(b->dtype), shape, (int64_t)b->bytes,
                      (int64_t)b->slots, (int64_t)b->device, (int64_t)b->offset, (int64_t)b->first,
                      (int64_t)b->last, (int64_t)always);
    }
    sqlite3_finalize(st);
    return s;
}

/* The copies device d sends before step `at` of pass ph (tg_transfer
 * send_at; -1: after the pass), as steps of the pass `parent`. */
static tg_status insert_copies(tg_profile *pf, sqlite3_stmt *st, int64_t *id, int64_t parent, int d,
                               tg_phase ph, int at, int *k)
{
    const tg_program *p = pf->program;
    char name[256];
    tg_status s = TG_OK;
    for (int t = 0; s == TG_OK && t < p->n_transfers; t++) {
        const tg_transfer *tr = &p->transfers[t];
        if (tr->src_device != d || tr->phase != ph || tr->send_at != at)
            continue;
        snprintf(name, sizeof name, "copy %s to device %d", p->graph->nodes[tr->node]->name,
                 tr->dst_device);
        s = pf_insert(pf, st, "iiisssii", (*id)++, parent, (int64_t)d, "copy", pf_phase_names[ph],
                      name, (int64_t)tr->node, (int64_t)(*k)++);
    }
    return s;
}

/* The program tree of each device: device -> repeat(iterations) -> phases
 * -> steps, with copies, host streams, accumulation and all-reduce as steps
 * of their own. */
static tg_status write_program_tree(tg_profile *pf)
{
    const tg_program *p = pf->program;
    const tg_graph *g = p->graph;
    sqlite3_stmt *st = pf_prepare(pf, "INSERT INTO steps VALUES(?,?,?,?,?,?,?,?)");
    sqlite3_stmt *sch = pf_prepare(pf, "INSERT INTO schedule VALUES(?,?,?,?)");
    tg_status s = st && sch ? TG_OK : pf_db_error(pf, "prepare");
    int64_t id = 0;
    char name[256];
    for (int d = 0; s == TG_OK && d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        int64_t root = id++, loop = id++;
        snprintf(name, sizeof name, "device %d", d);
        s = pf_insert(pf, st, "inisssni", root, (int64_t)d, "program", NULL, name, (int64_t)0);
        snprintf(name, sizeof name, "repeat %d device iterations", p->iterations);
        if (s == TG_OK)
            s = pf_insert(pf, st, "iiisssni", loop, root, (int64_t)d, "repeat", NULL, name,
                          (int64_t)0);
        int position = 0;
        for (int ph = 0; s == TG_OK && ph < TG_PHASE_COUNT; ph++) {
            if (ph != TG_PHASE_FORWARD && !p->training)
                break;
            if (ph == TG_PHASE_UPDATE && p->replicas > 1) {
                snprintf(name, sizeof name, "all-reduce %d accumulators over %d replicas",
                         dp->n_accumulators, p->replicas);
                s = pf_insert(pf, st, "iiisssni", id++, loop, (int64_t)d, "all_reduce", "update",
                              name, (int64_t)position++);
            }
            int64_t phase_id = id++;
            snprintf(name, sizeof name, "%s pass%s", pf_phase_names[ph],
                     ph == TG_PHASE_UPDATE ? "" : " (each micro-batch)");
            if (s == TG_OK)
                s = pf_insert(pf, st, "iiisssni", phase_id, loop, (int64_t)d, "phase",
                              pf_phase_names[ph], name, (int64_t)position++);
            int k = 0;
            if (ph == TG_PHASE_FORWARD && dp->n_inputs && s == TG_OK)
                s = pf_insert(pf, st, "iiisssni", id++, phase_id, (int64_t)d, "stream_in",
                              pf_phase_names[ph], "stream inputs from the host", (int64_t)k++);
            for (int i = 0; s == TG_OK && i < dp->n_steps[ph]; i++) {
                const tg_tensor *t = g->nodes[dp->steps[ph][i].node];
                if (dp->steps[ph][i].exchange_before) /* ParallelIPU: copies inside the pass */
                    s = insert_copies(pf, st, &id, phase_id, d, (tg_phase)ph, i, &k);
                if (s == TG_OK)
                    s = pf_insert(pf, st, "iiisssii", id++, phase_id, (int64_t)d, "execute",
                                  pf_phase_names[ph], t->name, (int64_t)t->id, (int64_t)k++);
            }
            if (ph == TG_PHASE_FORWARD && dp->n_outputs && s == TG_OK)
                s = pf_insert(pf, st, "iiisssni", id++, phase_id, (int64_t)d, "stream_out",
                              pf_phase_names[ph], "stream outputs to the host", (int64_t)k++);
            if (ph == TG_PHASE_BACKWARD && dp->n_accumulators && s == TG_OK)
                s = pf_insert(pf, st, "iiisssni", id++, phase_id, (int64_t)d, "accumulate",
                              pf_phase_names[ph], "add gradients into the accumulators",
                              (int64_t)k++);
            if (s == TG_OK)
                s = insert_copies(pf, st, &id, phase_id, d, (tg_phase)ph, -1, &k);
        }
        const tg_pipe_schedule *sc = &p->schedule;
        for (int k = 0; s == TG_OK && k < sc->n_ops[d]; k++)
            s = pf_insert(pf, sch, "iiis", (int64_t)d, (int64_t)k,
                          (int64_t)sc->ops[d][k].micro_batch,
                          tg_pipe_pass_name(sc->ops[d][k].pass));
    }
    sqlite3_finalize(st);
    sqlite3_finalize(sch);
    return s;
}

static tg_status write_liveness(tg_profile *pf)
{
    const tg_program *p = pf->program;
    const tg_graph *g = p->graph;
    sqlite3_stmt *st = pf_prepare(pf, "INSERT INTO liveness VALUES(?,?,?,?,?)");
    tg_status s = st ? TG_OK : pf_db_error(pf, "prepare");
    for (int d = 0; s == TG_OK && d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        int n = 0;
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            n += dp->n_steps[ph];
        int64_t *live = tg_calloc((size_t)n + 2, sizeof(int64_t));
        if (!live) {
            s = tg_error(TG_ERR_NOMEM, "profile: out of memory");
            break;
        }
        int64_t always = 0;
        for (int i = 0; i < p->n_buffers; i++) {
            const tg_buffer *b = &p->buffers[i];
            if (b->device != d)
                continue;
            if (b->region != TG_REGION_ACTIVATION) {
                always += (int64_t)(b->stride * (size_t)b->slots);
                continue;
            }
            for (int k = b->first < 0 ? 0 : b->first; k <= b->last && k < n; k++)
                live[k] += (int64_t)b->bytes;
        }
        int k = 0;
        for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
            for (int i = 0; i < dp->n_steps[ph]; i++, k++) {
                const tg_step *stp = &dp->steps[ph][i];
                live[k] += (int64_t)stp->scratch_bytes;
                if (s == TG_OK)
                    s = pf_insert(pf, st, "iisii", (int64_t)d, (int64_t)k,
                                  g->nodes[stp->node]->name, live[k], always);
            }
        tg_free(live);
    }
    sqlite3_finalize(st);
    return s;
}

/* Tiled targets: every tile's bytes by category, each tensor's tile span,
 * and the target's numbers in meta. */
static tg_status write_tiles(tg_profile *pf)
{
    const tg_program *p = pf->program;
    const tg_tile_plan *tp = p->tile_plan;
    if (!tp)
        return TG_OK;
    sqlite3_stmt *meta = pf_prepare(pf, "INSERT INTO meta VALUES(?, ?)");
    sqlite3_stmt *st = pf_prepare(pf, "INSERT INTO tiles VALUES(?,?,?,?)");
    sqlite3_stmt *sp = pf_prepare(pf, "INSERT INTO tile_spans VALUES(?,?,?,?)");
    tg_status s = meta && st && sp ? TG_OK : pf_db_error(pf, "prepare");
    char buf[64];
    int64_t sets = 0, vertices = 0, edges = 0;
    for (int d = 0; d < tp->n_devices; d++) {
        sets += tp->devices[d].compute_sets;
        vertices += tp->devices[d].vertices;
        edges += tp->devices[d].edges;
    }
    struct {
        const char *k;
        int64_t v;
    } rows[] = {
        {"compute_sets", sets},
        {"vertices", vertices},
        {"edges", edges},
        {"tiles_per_device", tp->target.tiles},
        {"memory_per_tile", tp->target.tile_memory},
        {"workers_per_tile", tp->target.workers},
        {"clock_hz", (int64_t)tp->target.clock_hz},
    };
    for (size_t i = 0; s == TG_OK && i < sizeof rows / sizeof rows[0]; i++) {
        snprintf(buf, sizeof buf, "%lld", (long long)rows[i].v);
        s = pf_insert(pf, meta, "ss", rows[i].k, buf);
    }
    for (int d = 0; s == TG_OK && d < tp->n_devices; d++)
        for (int t = 0; s == TG_OK && t < tp->target.tiles; t++)
            for (int c = 0; s == TG_OK && c < TG_TILE_CAT_COUNT; c++) {
                int64_t b = tp->devices[d].bytes[t * TG_TILE_CAT_COUNT + c];
                if (b)
                    s = pf_insert(pf, st, "iisi", (int64_t)d, (int64_t)t,
                                  tg_tile_cat_name((tg_tile_cat)c), b);
            }
    sqlite3_stmt *vt =
        s == TG_OK ? pf_prepare(pf, "INSERT INTO vertex_types VALUES(?,?,?,?,?)") : NULL;
    if (s == TG_OK && !vt)
        s = pf_db_error(pf, "prepare");
    for (int d = 0; s == TG_OK && d < tp->n_devices; d++)
        for (int op = 0; s == TG_OK && op < TG_OP_COUNT; op++) {
            const int64_t *row = &tp->devices[d].vertex_types[op * 3];
            if (row[0] || row[2])
                s = pf_insert(pf, vt, "isiii", (int64_t)d, tg_op_name((tg_op)op), row[0], row[1],
                              row[2]);
        }
    sqlite3_finalize(vt);
    for (int i = 0; s == TG_OK && i < p->n_buffers; i++)
        s = pf_insert(pf, sp, "iiii", (int64_t)i, (int64_t)tp->span[i].start,
                      (int64_t)tp->span[i].used, tp->span[i].chunk);
    sqlite3_finalize(meta);
    sqlite3_finalize(st);
    sqlite3_finalize(sp);
    return s;
}

/* The graph profile's tables, inside the transaction tg_profile_open began. */
tg_status pf_write_graph(tg_profile *pf)
{
    tg_status s = write_meta(pf);
    if (s == TG_OK)
        s = write_devices(pf);
    if (s == TG_OK)
        s = write_ops(pf, pf->program->config.report.flops);
    if (s == TG_OK)
        s = write_predicted(pf);
    if (s == TG_OK)
        s = write_tensors(pf);
    if (s == TG_OK)
        s = write_program_tree(pf);
    if (s == TG_OK)
        s = write_liveness(pf);
    if (s == TG_OK)
        s = write_tiles(pf);
    return s;
}

tg_status tg_profile_add_remedy(tg_profile *pf, const char *what, int64_t need, int64_t after,
                                int64_t capacity, const char *outcome)
{
    sqlite3_stmt *st = pf_prepare(pf, after >= 0 ? "INSERT INTO remedies(remedy, need_bytes, "
                                                   "after_bytes, capacity_bytes, outcome) "
                                                   "VALUES(?, ?, ?, ?, ?)"
                                                 : "INSERT INTO remedies(remedy, need_bytes, "
                                                   "after_bytes, capacity_bytes, outcome) "
                                                   "VALUES(?, ?, NULL, ?, ?)");
    if (!st)
        return pf_db_error(pf, "prepare");
    tg_status s = after >= 0 ? pf_insert(pf, st, "siiis", what, need, after, capacity, outcome)
                             : pf_insert(pf, st, "siis", what, need, capacity, outcome);
    sqlite3_finalize(st);
    return s;
}
