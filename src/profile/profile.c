/* profile/profile.c - writing the graph and execution profile to SQLite.
 *
 * Everything is written inside transactions with prepared statements; the
 * graph profile once at compile time, the execution events after each
 * recorded run. The schema is versioned (meta.schema_version) and documented
 * in docs/profile-format.md.
 */
#include "profile/profile.h"

#include "compile/cost.h"
#include "compile/simulate.h"

#include "compile/placement.h"
#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "tilegraph/files.h"
#include "ops/dnnl_util.h"
#include "core/pool.h"
#include "ops/op.h"
#include "target/tiled.h"
#include "tilegraph/trace.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef TG_VERSION
#define TG_VERSION "0"
#endif

struct tg_profile {
    sqlite3 *db;
    char path[1024];   /* the final name; the database is written under af.tmp */
    tg_atomic_file af; /* renamed over `path` only by a successful close */
    int lock_fd;       /* DIR/<kind>/.profile.lock, held (fcntl) while writing */
    const tg_program *program;
    /* counters per host step, written at close: one small row each, so
     * recording them costs an array append */
    char counter_names[TG_PROFILE_MAX_COUNTERS][48];
    int n_counter_names;
    struct counter_row {
        int64_t step;
        int name;
        double value;
    } * counters;
    int64_t n_counters, cap_counters;
};

static const char *const schema =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE devices(device INTEGER PRIMARY KEY, arena_bytes INTEGER, stash_depth INTEGER,"
    " scratch_peak INTEGER, threads INTEGER, flops_forward REAL, flops_backward REAL,"
    " flops_update REAL);"
    "CREATE TABLE memory(device INTEGER, category TEXT, bytes INTEGER,"
    " PRIMARY KEY(device, category));"
    "CREATE TABLE ops(id INTEGER PRIMARY KEY, name TEXT, type TEXT, block TEXT, device INTEGER,"
    " phase TEXT, flops REAL, bytes_in INTEGER, bytes_out INTEGER, forward_of INTEGER,"
    " calls INTEGER DEFAULT 0, total_ns INTEGER DEFAULT 0, predicted_ns REAL, kernel TEXT);"
    "CREATE TABLE op_edges(producer INTEGER, consumer INTEGER, PRIMARY KEY(producer, consumer));"
    "CREATE TABLE tensors(id INTEGER PRIMARY KEY, node INTEGER, name TEXT, category TEXT,"
    " dtype TEXT, shape TEXT, bytes INTEGER, slots INTEGER, device INTEGER, offset INTEGER,"
    " first_step INTEGER, last_step INTEGER, always_live INTEGER);"
    "CREATE TABLE steps(id INTEGER PRIMARY KEY, parent INTEGER, device INTEGER, kind TEXT,"
    " phase TEXT, name TEXT, op INTEGER, position INTEGER);"
    "CREATE TABLE schedule(device INTEGER, position INTEGER, micro_batch INTEGER, phase TEXT,"
    " PRIMARY KEY(device, position));"
    "CREATE TABLE liveness(device INTEGER, step INTEGER, name TEXT, live_bytes INTEGER,"
    " always_live_bytes INTEGER, PRIMARY KEY(device, step));"
    "CREATE TABLE trace(run INTEGER, replica INTEGER, device INTEGER, kind TEXT, phase TEXT,"
    " iteration INTEGER, micro_batch INTEGER, peer INTEGER, start_ns INTEGER, end_ns INTEGER,"
    " bytes INTEGER, flops REAL, start_cycles INTEGER, end_cycles INTEGER);"
    "CREATE INDEX trace_by_device ON trace(device, replica, start_ns);"
    "CREATE TABLE tiles(device INTEGER, tile INTEGER, category TEXT, bytes INTEGER,"
    " PRIMARY KEY(device, tile, category));"
    "CREATE TABLE tile_spans(tensor INTEGER PRIMARY KEY, tile_start INTEGER, tiles INTEGER,"
    " bytes_per_tile INTEGER);"
    "CREATE TABLE host_trace(thread TEXT, channel TEXT, kind TEXT, name TEXT, start_ns INTEGER,"
    " end_ns INTEGER, depth INTEGER, link INTEGER, value REAL);"
    "CREATE TABLE predicted_trace(device INTEGER, phase TEXT, micro_batch INTEGER,"
    " start_ns REAL, end_ns REAL);"

    /* added later: a profile from an older tilegraph lacks these */
    "CREATE TABLE remedies(id INTEGER PRIMARY KEY, remedy TEXT, need_bytes INTEGER,"
    " after_bytes INTEGER, capacity_bytes INTEGER, outcome TEXT);"
    "CREATE TABLE counters(step INTEGER, name TEXT, value REAL, PRIMARY KEY(step, name));"
    "CREATE TABLE histograms(run INTEGER, tensor TEXT, kind TEXT, elements INTEGER, min REAL,"
    " max REAL, mean REAL, std REAL, zeros INTEGER, non_finite INTEGER, bins TEXT,"
    " PRIMARY KEY(run, tensor, kind));"
    "CREATE TABLE vertex_types(device INTEGER, type TEXT, vertices INTEGER, state_bytes INTEGER,"
    " code_bytes INTEGER, PRIMARY KEY(device, type));";

static const char *const phase_names[TG_PHASE_COUNT] = {"forward", "backward", "update"};

static tg_status db_error(const tg_profile *pf, const char *what)
{
    return tg_error(TG_ERR_IO, "profile %s: %s: %s", pf->path, what,
                    pf->db ? sqlite3_errmsg(pf->db) : "cannot open");
}

static tg_status exec(tg_profile *pf, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(pf->db, sql, NULL, NULL, &err) != SQLITE_OK) {
        tg_status s = tg_error(TG_ERR_IO, "profile %s: %s", pf->path, err ? err : "error");
        sqlite3_free(err);
        return s;
    }
    return TG_OK;
}

/* Prepare, bind by a format string ("i" int64, "d" double, "s" text, "n"
 * null), step, finalize. */
static tg_status insert(tg_profile *pf, sqlite3_stmt *st, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    sqlite3_reset(st);
    for (int i = 0; types[i]; i++) {
        switch (types[i]) {
        case 'i':
            sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
            break;
        case 'd':
            sqlite3_bind_double(st, i + 1, va_arg(ap, double));
            break;
        case 's': {
            const char *v = va_arg(ap, const char *);
            if (v)
                sqlite3_bind_text(st, i + 1, v, -1, SQLITE_TRANSIENT);
            else
                sqlite3_bind_null(st, i + 1);
            break;
        }
        default:
            sqlite3_bind_null(st, i + 1);
        }
    }
    va_end(ap);
    return sqlite3_step(st) == SQLITE_DONE ? TG_OK : db_error(pf, "insert");
}

static sqlite3_stmt *prepare(tg_profile *pf, const char *sql)
{
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(pf->db, sql, -1, &st, NULL);
    return st;
}

/* ---- graph profile ----------------------------------------------------------------- */

static tg_status write_meta(tg_profile *pf)
{
    const tg_program *p = pf->program;
    const tg_config *c = &p->config;
    sqlite3_stmt *st = prepare(pf, "INSERT INTO meta VALUES(?, ?)");
    if (!st)
        return db_error(pf, "prepare");
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
        s = insert(pf, st, "ss", rows[i].k, v);
    }
    /* every option with its value, for reproducing the run */
    for (int i = 0; s == TG_OK && i < tg_options_count(); i++) {
        char key[160];
        snprintf(key, sizeof key, "option.%s", tg_options_key(i));
        s = insert(pf, st, "ss", key, tg_config_text(c, i));
    }
    sqlite3_finalize(st);
    return s;
}

tg_status tg_profile_set_meta(tg_profile *pf, const char *key, const char *value)
{
    sqlite3_stmt *st = prepare(pf, "INSERT OR REPLACE INTO meta VALUES(?, ?)");
    if (!st)
        return db_error(pf, "prepare");
    tg_status s = insert(pf, st, "ss", key, value);
    sqlite3_finalize(st);
    return s;
}

static tg_status write_devices(tg_profile *pf)
{
    const tg_program *p = pf->program;
    sqlite3_stmt *dev = prepare(pf, "INSERT INTO devices VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
    sqlite3_stmt *mem = prepare(pf, "INSERT INTO memory VALUES(?, ?, ?)");
    tg_status s = dev && mem ? TG_OK : db_error(pf, "prepare");
    for (int d = 0; s == TG_OK && d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        s = insert(pf, dev, "iiiiiddd", (int64_t)d, (int64_t)dp->arena_bytes,
                   (int64_t)dp->stash_depth, (int64_t)dp->scratch_peak, (int64_t)p->n_threads,
                   dp->flops[0], dp->flops[1], dp->flops[2]);
        for (int r = TG_REGION_PARAM; s == TG_OK && r < TG_REGION_COUNT; r++)
            s = insert(pf, mem, "isi", (int64_t)d, tg_region_name((tg_region)r),
                       (int64_t)dp->region_bytes[r]);
        if (s == TG_OK)
            s = insert(pf, mem, "isi", (int64_t)d, "kernel scratch (peak)",
                       (int64_t)dp->scratch_peak);
        if (s == TG_OK)
            s = insert(pf, mem, "isi", (int64_t)d, "offloaded to host",
                       (int64_t)dp->offloaded_bytes);
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
    sqlite3_stmt *st = prepare(pf, "INSERT INTO ops(id, name, type, block, device, phase, flops, "
                                   "bytes_in, bytes_out, forward_of, predicted_ns, kernel) "
                                   "VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
    tg_status s = st ? TG_OK : db_error(pf, "prepare");
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
        s = insert(pf, st, "isssisdddids", (int64_t)i, t->name, tg_op_name(t->op), block,
                   (int64_t)p->device_of[i], phase,
                   flops && def && def->flops ? def->flops(t) : 0.0, (double)in_bytes,
                   (double)tg_program_node_bytes(p, t),
                   t->forward_of ? (int64_t)t->forward_of->id : (int64_t)-1,
                   predicted ? tg_cost_node_seconds(&cost, t) * 1e9 : NAN, kernel);
    }
    sqlite3_finalize(st);
    tg_cost_model_free(&cost);
    /* the data flow between ops (through leaves and aliases too): the operations graph */
    st = prepare(pf, "INSERT OR IGNORE INTO op_edges VALUES(?, ?)");
    if (s == TG_OK && !st)
        s = db_error(pf, "prepare");
    for (int i = 0; s == TG_OK && i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (p->device_of[i] < 0 || t->n_in == 0)
            continue;
        for (int k = 0; s == TG_OK && k < t->n_in; k++) {
            const tg_tensor *x = t->in[k];
            while (x->flags & TG_NODE_ALIAS) /* a reshape is a view of its input */
                x = x->in[0];
            if (x->n_in > 0 && p->device_of[x->id] >= 0)
                s = insert(pf, st, "ii", (int64_t)x->id, (int64_t)i);
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
    sqlite3_stmt *st = prepare(pf, "INSERT INTO predicted_trace VALUES(?,?,?,?,?)");
    if (!st)
        s = db_error(pf, "prepare");
    for (int d = 0; s == TG_OK && d < p->n_devices; d++) {
        double last = 0;
        for (int k = 0; s == TG_OK && k < p->schedule.n_ops[d]; k++) {
            tg_pipe_op op = p->schedule.ops[d][k];
            size_t at = ((size_t)d * r.micro_batches + op.micro_batch) * TG_SIM_KIND_COUNT +
                        (size_t)op.pass; /* tg_sim_kind follows tg_pipe_pass */
            s = insert(pf, st, "isidd", (int64_t)d, tg_pipe_pass_name(op.pass),
                       (int64_t)op.micro_batch, r.op_start[at] * 1e9, r.op_end[at] * 1e9);
            last = r.op_end[at] > last ? r.op_end[at] : last;
        }
        if (s == TG_OK && p->training)
            s = insert(pf, st, "isidd", (int64_t)d, "update", (int64_t)-1, last * 1e9,
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
    sqlite3_stmt *st = prepare(pf, "INSERT INTO tensors VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)");
    tg_status s = st ? TG_OK : db_error(pf, "prepare");
    for (int i = 0; s == TG_OK && i < p->n_buffers; i++) {
        const tg_buffer *b = &p->buffers[i];
        const tg_tensor *t = g->nodes[b->node];
        char shape[96];
        tg_shape_str(t->shape, shape, sizeof shape);
        bool always = b->region != TG_REGION_ACTIVATION;
        s = insert(pf, st, "iissssiiiiiii", (int64_t)i, (int64_t)b->node, t->name,
                   tg_region_name(b->region), tg_dtype_name(b->dtype), shape, (int64_t)b->bytes,
                   (int64_t)b->slots, (int64_t)b->device, (int64_t)b->offset, (int64_t)b->first,
                   (int64_t)b->last, (int64_t)always);
    }
    sqlite3_finalize(st);
    return s;
}

/* The program tree of each device: device -> repeat(iterations) -> phases
 * -> steps, with copies, host streams, accumulation and all-reduce as steps
 * of their own. */
static tg_status write_program_tree(tg_profile *pf)
{
    const tg_program *p = pf->program;
    const tg_graph *g = p->graph;
    sqlite3_stmt *st = prepare(pf, "INSERT INTO steps VALUES(?,?,?,?,?,?,?,?)");
    sqlite3_stmt *sch = prepare(pf, "INSERT INTO schedule VALUES(?,?,?,?)");
    tg_status s = st && sch ? TG_OK : db_error(pf, "prepare");
    int64_t id = 0;
    char name[256];
    for (int d = 0; s == TG_OK && d < p->n_devices; d++) {
        const tg_device_program *dp = &p->devices[d];
        int64_t root = id++, loop = id++;
        snprintf(name, sizeof name, "device %d", d);
        s = insert(pf, st, "inisssni", root, (int64_t)d, "program", NULL, name, (int64_t)0);
        snprintf(name, sizeof name, "repeat %d device iterations", p->iterations);
        if (s == TG_OK)
            s = insert(pf, st, "iiisssni", loop, root, (int64_t)d, "repeat", NULL, name,
                       (int64_t)0);
        int position = 0;
        for (int ph = 0; s == TG_OK && ph < TG_PHASE_COUNT; ph++) {
            if (ph != TG_PHASE_FORWARD && !p->training)
                break;
            if (ph == TG_PHASE_UPDATE && p->replicas > 1) {
                snprintf(name, sizeof name, "all-reduce %d accumulators over %d replicas",
                         dp->n_accumulators, p->replicas);
                s = insert(pf, st, "iiisssni", id++, loop, (int64_t)d, "all_reduce", "update", name,
                           (int64_t)position++);
            }
            int64_t phase_id = id++;
            snprintf(name, sizeof name, "%s pass%s", phase_names[ph],
                     ph == TG_PHASE_UPDATE ? "" : " (each micro-batch)");
            if (s == TG_OK)
                s = insert(pf, st, "iiisssni", phase_id, loop, (int64_t)d, "phase", phase_names[ph],
                           name, (int64_t)position++);
            int k = 0;
            if (ph == TG_PHASE_FORWARD && dp->n_inputs && s == TG_OK)
                s = insert(pf, st, "iiisssni", id++, phase_id, (int64_t)d, "stream_in",
                           phase_names[ph], "stream inputs from the host", (int64_t)k++);
            for (int i = 0; s == TG_OK && i < dp->n_steps[ph]; i++) {
                const tg_tensor *t = g->nodes[dp->steps[ph][i].node];
                s = insert(pf, st, "iiisssii", id++, phase_id, (int64_t)d, "execute",
                           phase_names[ph], t->name, (int64_t)t->id, (int64_t)k++);
            }
            if (ph == TG_PHASE_FORWARD && dp->n_outputs && s == TG_OK)
                s = insert(pf, st, "iiisssni", id++, phase_id, (int64_t)d, "stream_out",
                           phase_names[ph], "stream outputs to the host", (int64_t)k++);
            if (ph == TG_PHASE_BACKWARD && dp->n_accumulators && s == TG_OK)
                s = insert(pf, st, "iiisssni", id++, phase_id, (int64_t)d, "accumulate",
                           phase_names[ph], "add gradients into the accumulators", (int64_t)k++);
            for (int t = 0; s == TG_OK && t < p->n_transfers; t++) {
                const tg_transfer *tr = &p->transfers[t];
                if (tr->src_device != d || (int)tr->phase != ph)
                    continue;
                snprintf(name, sizeof name, "copy %s to device %d", g->nodes[tr->node]->name,
                         tr->dst_device);
                s = insert(pf, st, "iiisssii", id++, phase_id, (int64_t)d, "copy", phase_names[ph],
                           name, (int64_t)tr->node, (int64_t)k++);
            }
        }
        const tg_pipe_schedule *sc = &p->schedule;
        for (int k = 0; s == TG_OK && k < sc->n_ops[d]; k++)
            s = insert(pf, sch, "iiis", (int64_t)d, (int64_t)k, (int64_t)sc->ops[d][k].micro_batch,
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
    sqlite3_stmt *st = prepare(pf, "INSERT INTO liveness VALUES(?,?,?,?,?)");
    tg_status s = st ? TG_OK : db_error(pf, "prepare");
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
                    s = insert(pf, st, "iisii", (int64_t)d, (int64_t)k, g->nodes[stp->node]->name,
                               live[k], always);
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
    sqlite3_stmt *meta = prepare(pf, "INSERT INTO meta VALUES(?, ?)");
    sqlite3_stmt *st = prepare(pf, "INSERT INTO tiles VALUES(?,?,?,?)");
    sqlite3_stmt *sp = prepare(pf, "INSERT INTO tile_spans VALUES(?,?,?,?)");
    tg_status s = meta && st && sp ? TG_OK : db_error(pf, "prepare");
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
        s = insert(pf, meta, "ss", rows[i].k, buf);
    }
    for (int d = 0; s == TG_OK && d < tp->n_devices; d++)
        for (int t = 0; s == TG_OK && t < tp->target.tiles; t++)
            for (int c = 0; s == TG_OK && c < TG_TILE_CAT_COUNT; c++) {
                int64_t b = tp->devices[d].bytes[t * TG_TILE_CAT_COUNT + c];
                if (b)
                    s = insert(pf, st, "iisi", (int64_t)d, (int64_t)t,
                               tg_tile_cat_name((tg_tile_cat)c), b);
            }
    sqlite3_stmt *vt =
        s == TG_OK ? prepare(pf, "INSERT INTO vertex_types VALUES(?,?,?,?,?)") : NULL;
    if (s == TG_OK && !vt)
        s = db_error(pf, "prepare");
    for (int d = 0; s == TG_OK && d < tp->n_devices; d++)
        for (int op = 0; s == TG_OK && op < TG_OP_COUNT; op++) {
            const int64_t *row = &tp->devices[d].vertex_types[op * 3];
            if (row[0] || row[2])
                s = insert(pf, vt, "isiii", (int64_t)d, tg_op_name((tg_op)op), row[0], row[1],
                           row[2]);
        }
    sqlite3_finalize(vt);
    for (int i = 0; s == TG_OK && i < p->n_buffers; i++)
        s = insert(pf, sp, "iiii", (int64_t)i, (int64_t)tp->span[i].start,
                   (int64_t)tp->span[i].used, tp->span[i].chunk);
    sqlite3_finalize(meta);
    sqlite3_finalize(st);
    sqlite3_finalize(sp);
    return s;
}

static tg_status make_dirs(const char *path)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return tg_error(TG_ERR_IO, "profile: cannot create directory '%s': %s", buf,
                            strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return tg_error(TG_ERR_IO, "profile: cannot create directory '%s': %s", buf,
                        strerror(errno));
    return TG_OK;
}

/* Two runs writing one profile directory would replace each other's files
 * (once leaving one run's training profile beside another's inference
 * profile). The directory is locked while its profile is written: an fcntl
 * lock, so it goes away with the process however it ends. The lock file
 * holds the owner's pid for the message. */
static tg_status lock_dir(tg_profile *pf, const char *sub)
{
    char lock[1100];
    snprintf(lock, sizeof lock, "%s/.profile.lock", sub);
    char owner[32];
    if (tg_file_lock(lock, &pf->lock_fd, owner) == TG_OK)
        return TG_OK;
    if (!owner[0])
        return tg_error_prefix(TG_ERR_IO, "profile");
    return tg_error(TG_ERR_IO,
                    "profile: '%s' is being written by another run (pid %s); wait for it "
                    "or give this run another --profile-dir (autoReport.directory)",
                    sub, owner);
}

static void release(tg_profile *pf)
{
    tg_free(pf->counters);
    if (pf->db)
        sqlite3_close(pf->db);
    pf->db = NULL;
    tg_atomic_file_abort(&pf->af);
    if (pf->lock_fd >= 0)
        close(pf->lock_fd);
    tg_free(pf);
}

tg_status tg_profile_open(const char *dir, const tg_program *p, bool execution, tg_profile **out)
{
    *out = NULL;
    tg_profile *pf = tg_calloc(1, sizeof *pf);
    if (!pf)
        return tg_error(TG_ERR_NOMEM, "profile: out of memory");
    pf->program = p;
    pf->lock_fd = -1;
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/%s", dir, p->training ? "training" : "inference");
    tg_status s = make_dirs(sub);
    snprintf(pf->path, sizeof pf->path, "%s/profile.sqlite", sub);
    if (s == TG_OK)
        s = lock_dir(pf, sub);
    /* Written under a temporary name and renamed by tg_profile_close: the
     * previous profile stays whole until then, and a killed run leaves no
     * partial file that would read as a normal profile. That is also why
     * the fast, unsafe journal settings below are harmless. */
    if (s == TG_OK && (s = tg_atomic_file_reserve(pf->path, &pf->af)) != TG_OK)
        tg_error_prefix(s, "profile");
    if (s == TG_OK && sqlite3_open(pf->af.tmp, &pf->db) != SQLITE_OK)
        s = db_error(pf, "open");
    bool flops = p->config.report.flops;
    if (s == TG_OK)
        s = exec(pf, "PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF; BEGIN;");
    if (s == TG_OK)
        s = exec(pf, schema);
    if (s == TG_OK)
        s = write_meta(pf);
    if (s == TG_OK)
        s = write_devices(pf);
    if (s == TG_OK)
        s = write_ops(pf, flops);
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
    if (s == TG_OK)
        s = exec(pf, execution ? "INSERT INTO meta VALUES('execution_profile', 'true'); COMMIT;"
                               : "INSERT INTO meta VALUES('execution_profile', 'false'); COMMIT;");
    if (s != TG_OK) {
        release(pf);
        return s;
    }
    *out = pf;
    return TG_OK;
}

tg_status tg_profile_counter(tg_profile *pf, int64_t step, const char *name, double value)
{
    if (!pf || !name || !*name)
        return TG_OK;
    int k = 0;
    while (k < pf->n_counter_names && strcmp(pf->counter_names[k], name) != 0)
        k++;
    if (k == pf->n_counter_names) {
        if (k == TG_PROFILE_MAX_COUNTERS)
            return tg_error(TG_ERR_INVALID_ARG,
                            "profile %s: counter '%s': at most %d counters are recorded", pf->path,
                            name, TG_PROFILE_MAX_COUNTERS);
        snprintf(pf->counter_names[k], sizeof pf->counter_names[k], "%s", name);
        pf->n_counter_names++;
    }
    if (pf->n_counters == pf->cap_counters) {
        int64_t cap = pf->cap_counters ? pf->cap_counters * 2 : 1024;
        struct counter_row *grown = tg_realloc(pf->counters, (size_t)cap * sizeof *grown);
        if (!grown)
            return tg_error(TG_ERR_NOMEM, "profile %s: out of memory for counters", pf->path);
        pf->counters = grown;
        pf->cap_counters = cap;
    }
    pf->counters[pf->n_counters++] = (struct counter_row){step, k, value};
    return TG_OK;
}

/* The counters recorded, one row per host step and name (a later value of
 * the same step replaces an earlier one). */
static tg_status write_counters(tg_profile *pf)
{
    if (!pf->n_counters)
        return TG_OK;
    sqlite3_stmt *st = prepare(pf, "INSERT OR REPLACE INTO counters VALUES(?, ?, ?)");
    tg_status s = st ? exec(pf, "BEGIN") : db_error(pf, "prepare");
    for (int64_t i = 0; s == TG_OK && i < pf->n_counters; i++) {
        const struct counter_row *c = &pf->counters[i];
        s = isfinite(c->value)
                ? insert(pf, st, "isd", c->step, pf->counter_names[c->name], c->value)
                : insert(pf, st, "isn", c->step, pf->counter_names[c->name]);
    }
    sqlite3_finalize(st);
    if (s == TG_OK)
        s = exec(pf, "COMMIT");
    else if (st)
        exec(pf, "ROLLBACK");
    return s;
}

tg_status tg_profile_histogram(tg_profile *pf, int64_t run, const char *tensor, const char *kind,
                               const float *x, int64_t n)
{
    if (!pf || n <= 0)
        return TG_OK;
    double lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0;
    int64_t finite = 0, zeros = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        if (!isfinite(v))
            continue;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
        sq += v * v;
        zeros += v == 0;
        finite++;
    }
    int64_t bins[TG_PROFILE_HISTOGRAM_BINS] = {0};
    double width = hi > lo ? (hi - lo) / TG_PROFILE_HISTOGRAM_BINS : 0;
    for (int64_t i = 0; finite && i < n; i++) {
        if (!isfinite(x[i]))
            continue;
        int b = width > 0 ? (int)(((double)x[i] - lo) / width) : TG_PROFILE_HISTOGRAM_BINS / 2;
        bins[b < 0 ? 0 : b >= TG_PROFILE_HISTOGRAM_BINS ? TG_PROFILE_HISTOGRAM_BINS - 1 : b]++;
    }
    char text[TG_PROFILE_HISTOGRAM_BINS * 21 + 4];
    size_t used = 0;
    for (int b = 0; b < TG_PROFILE_HISTOGRAM_BINS; b++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%lld", b ? "," : "[",
                                 (long long)bins[b]);
    snprintf(text + used, sizeof text - used, "]");
    double mean = finite ? sum / (double)finite : NAN;
    double var = finite ? sq / (double)finite - mean * mean : NAN;
    sqlite3_stmt *st =
        prepare(pf, "INSERT OR REPLACE INTO histograms VALUES(?,?,?,?,?,?,?,?,?,?,?)");
    if (!st)
        return db_error(pf, "prepare");
    tg_status s =
        finite ? insert(pf, st, "issiddddiis", run, tensor, kind, n, lo, hi, mean,
                        sqrt(var > 0 ? var : 0), zeros, n - finite, text)
               : insert(pf, st, "issinnnniis", run, tensor, kind, n, zeros, n - finite, text);
    sqlite3_finalize(st);
    return s;
}

tg_status tg_profile_add_remedy(tg_profile *pf, const char *what, int64_t need, int64_t after,
                                int64_t capacity, const char *outcome)
{
    sqlite3_stmt *st = prepare(pf, after >= 0 ? "INSERT INTO remedies(remedy, need_bytes, "
                                                "after_bytes, capacity_bytes, outcome) "
                                                "VALUES(?, ?, ?, ?, ?)"
                                              : "INSERT INTO remedies(remedy, need_bytes, "
                                                "after_bytes, capacity_bytes, outcome) "
                                                "VALUES(?, ?, NULL, ?, ?)");
    if (!st)
        return db_error(pf, "prepare");
    tg_status s = after >= 0 ? insert(pf, st, "siiis", what, need, after, capacity, outcome)
                             : insert(pf, st, "siis", what, need, capacity, outcome);
    sqlite3_finalize(st);
    return s;
}

const char *tg_profile_path(const tg_profile *pf)
{
    return pf->path;
}

/* ---- execution profile ------------------------------------------------------------ */

typedef struct {
    tg_profile *pf;
    sqlite3_stmt *st;
    int64_t run;
    int replica;
    double ns_per_cycle, base_cycles;
} sim_ctx;

/* One piece of a simulated phase, from cycle `*at` for `cycles`; advances *at. */
static tg_status sim_piece(sim_ctx *c, int d, int ph, int it, int j, tg_event_kind kind, int peer,
                           double *at, double cycles, int64_t bytes, double flops)
{
    double start = *at, end = *at + cycles;
    *at = end;
    return insert(c->pf, c->st, "iiissiiiiiidii", c->run, (int64_t)c->replica, (int64_t)d,
                  tg_event_name(kind), phase_names[ph], (int64_t)it, (int64_t)j, (int64_t)peer,
                  (int64_t)(start * c->ns_per_cycle), (int64_t)(end * c->ns_per_cycle), bytes,
                  flops, (int64_t)start, (int64_t)end);
}

/* One simulated phase of a tiled target, split as the cycle model costs it
 * (target/tileplan.c): transfers received from other devices (a wait for
 * the peer's data), host streams in, the compute steps with their exchange
 * and syncs, host streams out, transfers sent. Forward streams are per
 * micro-batch (with I/O tiles, the inputs a piece of their own, beside the
 * compute); offloaded tensors come in and go out of their streamed copies
 * in every phase that uses them. Each piece has its bytes, so copies on mk2 have their cycles. */
static tg_status sim_event(void *ctx_, int d, int ph, tg_tile_piece piece, int it, int j,
                           double start, double end)
{
    sim_ctx *c = ctx_;
    const tg_program *p = c->pf->program;
    const tg_device_program *dp = &p->devices[d];
    const tg_target_desc *tg = &p->tile_plan->target;
    double at = start + c->base_cycles;
    int64_t in = 0, out = 0;
    for (int k = 0; ph == TG_PHASE_FORWARD && k < dp->n_inputs; k++)
        in += (int64_t)p->buffers[dp->inputs[k]].bytes;
    if (piece == TG_TILE_STREAM_IN) /* on the I/O tiles, beside the compute */
        return sim_piece(c, d, ph, it, j, TG_EVENT_STREAM_IO, -1, &at, end - start, in, 0);
    if (piece == TG_TILE_WEIGHT) /* a split backward's W: compute only, its FLOPs counted with B */
        return sim_piece(c, d, ph, it, j, TG_EVENT_PHASE, -1, &at, end - start, 0, 0);
    double host = tg->host_bytes_per_cycle, link = tg->link_bytes_per_cycle, copies = 0;
    tg_status s = TG_OK;
    if (tg->io_tiles > 0) /* they came in on the I/O tiles, above */
        in = 0;
    if (ph == TG_PHASE_FORWARD) {
        for (int k = 0; k < dp->n_outputs; k++)
            out += (int64_t)p->buffers[dp->outputs[k]].bytes;
    }
    in += (int64_t)dp->stream_in_bytes[ph]; /* streamed copies (compile/streaming.c) */
    out += (int64_t)dp->stream_out_bytes[ph];
    for (int k = 0; s == TG_OK && k < p->n_transfers; k++) {
        const tg_transfer *x = &p->transfers[k];
        if (x->phase == (tg_phase)ph && x->dst_device == d) {
            int64_t b = (int64_t)p->buffers[x->src_buffer].bytes;
            copies += (double)b / link;
            s = sim_piece(c, d, ph, it, j, TG_EVENT_WAIT, x->src_device, &at, (double)b / link, b,
                          0);
        }
    }
    if (s == TG_OK && in)
        s = sim_piece(c, d, ph, it, j, TG_EVENT_STREAM_IN, -1, &at, (double)in / host, in, 0);
    double sent = 0;
    for (int k = 0; k < p->n_transfers; k++)
        if (p->transfers[k].phase == (tg_phase)ph && p->transfers[k].src_device == d)
            sent += (double)p->buffers[p->transfers[k].src_buffer].bytes / link;
    /* what is left of the phase's cycles is compute, exchange and syncs */
    double compute = (end - start) - copies - (double)(in + out) / host - sent;
    if (s == TG_OK)
        s = sim_piece(c, d, ph, it, j, TG_EVENT_PHASE, -1, &at, compute > 0 ? compute : 0, 0,
                      dp->flops[ph]);
    if (s == TG_OK && out)
        s = sim_piece(c, d, ph, it, j, TG_EVENT_STREAM_OUT, -1, &at, (double)out / host, out, 0);
    for (int k = 0; s == TG_OK && k < p->n_transfers; k++) {
        const tg_transfer *x = &p->transfers[k];
        if (x->phase == (tg_phase)ph && x->src_device == d) {
            int64_t b = (int64_t)p->buffers[x->src_buffer].bytes;
            s = sim_piece(c, d, ph, it, j, TG_EVENT_COPY, x->dst_device, &at, (double)b / link, b,
                          0);
        }
    }
    return s;
}

/* On a tiled target the trace is the cycle model's timeline of the host
 * step (every replica alike), placed after the previous recorded steps. */
static tg_status record_simulated(tg_profile *pf, sqlite3_stmt *st, int64_t run)
{
    const tg_program *p = pf->program;
    sim_ctx c = {pf, st, run, 0, 1e9 / p->tile_plan->target.clock_hz, 0};
    int64_t last = 0;
    if (run > 0) {
        sqlite3_stmt *q = prepare(pf, "SELECT MAX(end_cycles) FROM trace");
        if (q && sqlite3_step(q) == SQLITE_ROW)
            last = sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
    }
    c.base_cycles = (double)last;
    const tg_target_ops *t = tg_target_of_config(&p->config);
    if (!t || !t->simulate)
        return tg_error(TG_ERR_INTERNAL, "profile: target '%s' has a tile plan but no cycle model",
                        p->config.target.name);
    tg_status s = TG_OK;
    for (int r = 0; s == TG_OK && r < p->replicas; r++) {
        c.replica = r;
        s = t->simulate(p, sim_event, &c);
    }
    return s;
}

const char *tg_event_name(tg_event_kind k)
{
    static const char *const names[] = {
#define TG_EVENT_NAME(e, name) name,
        TG_EVENT_LIST(TG_EVENT_NAME)
#undef TG_EVENT_NAME
    };
    return (unsigned)k < TG_EVENT_COUNT ? names[k] : "?";
}

tg_status tg_profile_record_run(tg_profile *pf, const tg_profile_recorder *recorders, int64_t run)
{
    if (!pf)
        return TG_OK;
    const tg_program *p = pf->program;
    TG_TRY(exec(pf, "BEGIN"));
    sqlite3_stmt *st = prepare(pf, "INSERT INTO trace VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    tg_status status = st ? TG_OK : db_error(pf, "prepare");
    if (status == TG_OK && p->tile_plan) {
        status = record_simulated(pf, st, run);
        sqlite3_finalize(st);
        if (status == TG_OK)
            return exec(pf, "COMMIT");
        exec(pf, "ROLLBACK");
        return status;
    }
    for (int i = 0; status == TG_OK && i < p->replicas * p->n_devices; i++) {
        const tg_profile_recorder *r = &recorders[i];
        for (int k = 0; status == TG_OK && k < r->n_events; k++) {
            const tg_profile_event *e = &r->events[k];
            status = insert(pf, st, "iiissiiiiiidnn", run, (int64_t)(i / p->n_devices),
                            (int64_t)(i % p->n_devices), tg_event_name((tg_event_kind)e->kind),
                            phase_names[e->phase], (int64_t)e->iteration, (int64_t)e->micro_batch,
                            (int64_t)e->peer, e->start_ns, e->end_ns, e->bytes, e->flops);
        }
    }
    sqlite3_finalize(st);
    if (status == TG_OK)
        status = exec(pf, "COMMIT");
    else
        exec(pf, "ROLLBACK");
    return status;
}

typedef struct {
    tg_profile *pf;
    sqlite3_stmt *st;
    const char *threads[256];
    tg_status status;
} host_ctx;

static int host_thread(const tg_trace_thread_info *t, void *ctx_)
{
    host_ctx *c = ctx_;
    if (t->index >= 0 && t->index < 256)
        c->threads[t->index] = t->name;
    return 0;
}

static int host_event(const tg_trace_event *e, void *ctx_)
{
    host_ctx *c = ctx_;
    const char *thread = e->thread >= 0 && e->thread < 256 ? c->threads[e->thread] : NULL;
    c->status = insert(c->pf, c->st, "ssssiiiid", thread ? thread : "?", e->channel,
                       tg_trace_kind_name(e->kind), e->name, e->start_ns, e->end_ns,
                       (int64_t)e->depth, (int64_t)e->link, e->value);
    return c->status != TG_OK;
}

/* The host trace recorded so far (tilegraph/trace.h), as the System
 * Analyser's data: every thread's regions, instants and series. */
static tg_status write_host_trace(tg_profile *pf)
{
    if (tg_trace_get_stats().threads == 0)
        return TG_OK;
    host_ctx c = {pf, prepare(pf, "INSERT INTO host_trace VALUES(?,?,?,?,?,?,?,?,?)"), {0}, TG_OK};
    if (!c.st)
        return db_error(pf, "prepare");
    tg_status s = exec(pf, "BEGIN");
    if (s == TG_OK)
        s = tg_trace_visit(host_thread, host_event, &c);
    if (s == TG_OK)
        s = c.status;
    sqlite3_finalize(c.st);
    if (s == TG_OK)
        s = exec(pf, "COMMIT");
    else
        exec(pf, "ROLLBACK");
    return s;
}

tg_status tg_profile_close(tg_profile *pf, const tg_profile_recorder *recorders)
{
    if (!pf)
        return TG_OK;
    const tg_program *p = pf->program;
    tg_status status = TG_OK;
    if (recorders) {
        status = exec(pf, "BEGIN");
        sqlite3_stmt *st = prepare(pf, "UPDATE ops SET calls = ?, total_ns = ? WHERE id = ?");
        for (int n = 0; status == TG_OK && st && n < p->graph->n_nodes; n++) {
            int64_t calls = 0, ns = 0;
            /* a session whose create ran out of memory may have made only
             * some recorders' counts; those hold none */
            for (int i = 0; i < p->replicas * p->n_devices; i++) {
                calls += recorders[i].op_calls ? recorders[i].op_calls[n] : 0;
                ns += recorders[i].op_ns ? recorders[i].op_ns[n] : 0;
            }
            if (calls)
                status = insert(pf, st, "iii", calls, ns, (int64_t)n);
        }
        sqlite3_finalize(st);
        if (status == TG_OK)
            status = exec(pf, "COMMIT");
    }
    if (status == TG_OK)
        status = write_counters(pf);
    if (status == TG_OK)
        status = write_host_trace(pf);
    if (sqlite3_close(pf->db) != SQLITE_OK && status == TG_OK)
        status = db_error(pf, "close");
    pf->db = NULL;
    /* Only a complete profile takes the final name. */
    if (status == TG_OK && (status = tg_atomic_file_commit(&pf->af)) != TG_OK)
        tg_error_prefix(status, "profile");
    release(pf);
    return status;
}

void tg_profile_abort(tg_profile *pf)
{
    if (pf)
        release(pf);
}
