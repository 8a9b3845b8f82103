/* compile/predict.c - the public predictions (tilegraph/predict.h): a
 * split's stage costs and simulated step, the automatic split, and every
 * schedule simulated over a split. */
#include "tilegraph/predict.h"

#include "compile/program.h"
#include "compile/stages.h"
#include "core/alloc.h"
#include "core/error.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct prediction_ctx {
    tg_stage_atoms atoms;
    tg_stage_goal goal;
    tg_stage_plan plan;
} prediction_ctx;

static tg_status needed_nodes(const tg_graph *g, bool **needed, bool *training)
{
    int *order = NULL, n = 0;
    TG_TRY(tg_schedule(g, &order, &n));
    *needed = tg_calloc((size_t)g->n_nodes + 1, sizeof(bool));
    *training = false;
    for (int k = 0; *needed && k < n; k++) {
        (*needed)[order[k]] = true;
        *training |= (g->nodes[order[k]]->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER)) != 0;
    }
    tg_free(order);
    return *needed ? TG_OK : tg_error(TG_ERR_NOMEM, "predict: out of memory");
}

static tg_status plan_with(const tg_graph *g, const bool *needed, bool scopes, const char *spec,
                           prediction_ctx *c)
{
    bool acc = c->goal.training && c->goal.micro_batches > 1;
    return tg_stage_plan_for(g, needed, scopes, spec, acc, &c->goal, &c->atoms, &c->plan);
}

/* Atoms, goal and plan for spec; the caller frees c->atoms. */
static tg_status predict(const tg_graph *g, const tg_options *o, int n_devices, const char *spec,
                         prediction_ctx *c)
{
    if (!g || !o || !spec)
        return tg_error(TG_ERR_INVALID_ARG, "predict: no graph, options or split given");
    if (g->status != TG_OK)
        return tg_error(g->status, "predict: the graph has an error: %s", g->error);
    memset(c, 0, sizeof *c);
    bool *needed = NULL, training = false;
    TG_TRY(needed_nodes(g, &needed, &training));
    tg_config cfg; /* the public entries take options: read them once here */
    tg_status s = tg_config_read(o, &cfg);
    if (s != TG_OK) {
        tg_free(needed);
        return s;
    }
    s = tg_stage_goal_read(&cfg, n_devices, training, &c->goal);
    if (s == TG_OK)
        s = tg_cost_model_time_kernels(&c->goal.cost, g, needed);
    bool scopes = g->n_blocks == 0 || strcmp(cfg.pipeline.split, "auto") == 0;
    tg_config_free(&cfg);
    if (s == TG_OK)
        s = plan_with(g, needed, scopes, spec, c);
    /* split points name layers even in a model with blocks; when they do
     * not either, the blocks' message is the one to show */
    bool split_points = !scopes && !strchr(spec, '|') && strcmp(spec, "auto") != 0;
    if (s == TG_ERR_CONFIG && split_points) {
        char first[1024];
        snprintf(first, sizeof first, "%s", tg_error_message());
        s = plan_with(g, needed, true, spec, c) == TG_OK ? TG_OK
                                                         : tg_error(TG_ERR_CONFIG, "%s", first);
    }
    tg_free(needed);
    return s;
}

static tg_status simulate(const prediction_ctx *c, tg_schedule_kind kind, tg_sim_result *r)
{
    tg_pipe_schedule s;
    TG_TRY(tg_pipe_schedule_build(kind, c->goal.n_stages, c->goal.micro_batches, c->goal.training,
                                  &s));
    tg_status st = tg_schedule_simulate_costs(&s, c->plan.costs, r);
    tg_pipe_schedule_free(&s);
    return st;
}

tg_status tg_predict_split(const tg_graph *g, const tg_options *o, int n_devices, const char *spec,
                           tg_split_prediction *out)
{
    memset(out, 0, sizeof *out);
    prediction_ctx *c = tg_calloc(1, sizeof *c);
    if (!c)
        return tg_error(TG_ERR_NOMEM, "predict: out of memory");
    tg_status s = predict(g, o, n_devices, spec, c);
    tg_sim_result r = {0};
    if (s == TG_OK)
        s = simulate(c, c->goal.kind, &r);
    if (s == TG_OK) {
        out->n_stages = c->plan.n_stages;
        out->micro_batches = c->goal.micro_batches;
        out->blocks = c->atoms.from_blocks;
        tg_stage_plan_spec(&c->atoms, &c->plan, out->spec, sizeof out->spec);
        out->fits = isfinite(c->plan.objective);
        out->step_seconds = r.step_time;
        out->calibrated = c->goal.cost.rates.calibrated;
        out->cycle_model = c->goal.cost.tiled;
        for (int k = 0; k < c->plan.n_stages && k < TG_PREDICT_MAX_STAGES; k++) {
            const tg_stage_cost *sc = &c->plan.costs[k];
            out->forward[k] = sc->time[TG_SIM_FORWARD];
            out->backward[k] = sc->time[TG_SIM_BACKWARD] + sc->time[TG_SIM_WEIGHT];
            out->copies[k] = sc->send_forward + sc->send_backward;
            out->stage_seconds[k] = c->plan.time[k];
            out->memory_bytes[k] = c->plan.memory[k];
            out->busy[k] = r.busy[k];
        }
    }
    tg_sim_result_free(&r);
    tg_stage_atoms_free(&c->atoms);
    tg_cost_model_free(&c->goal.cost);
    tg_free(c);
    return s;
}

tg_status tg_predict_schedules(const tg_graph *g, const tg_options *o, int n_devices,
                               const char *spec, tg_schedule_prediction *out, int cap, int *n)
{
    *n = 0;
    prediction_ctx *c = tg_calloc(1, sizeof *c);
    if (!c)
        return tg_error(TG_ERR_NOMEM, "predict: out of memory");
    tg_status s = predict(g, o, n_devices, spec, c);
    for (int k = 0; s == TG_OK && k < TG_SCHEDULE_COUNT && *n < cap; k++) {
        tg_sim_result r;
        if ((s = simulate(c, (tg_schedule_kind)k, &r)) != TG_OK)
            break;
        tg_schedule_prediction *p = &out[(*n)++];
        memset(p, 0, sizeof *p);
        snprintf(p->name, sizeof p->name, "%s", tg_schedule_name((tg_schedule_kind)k));
        p->step_seconds = r.step_time;
        p->bubble = r.bubble;
        for (int d = 0; d < r.n_devices && d < TG_PREDICT_MAX_STAGES; d++) {
            p->busy[d] = r.busy[d];
            p->peak_stash[d] = r.peak_stash[d];
            p->peak_stash_bytes[d] = r.peak_stash[d] * c->plan.kept[d];
        }
        tg_sim_result_free(&r);
    }
    tg_stage_atoms_free(&c->atoms);
    tg_cost_model_free(&c->goal.cost);
    tg_free(c);
    return s;
}
