/* compile/stages.c - atoms of a model, their costs, and the exact split of
 * the chain into stages (the model is described in stages.h). */
#include "compile/stages.h"

#include "compile/placement.h"
#include "compile/program.h"
#include "core/alloc.h"
#include "core/error.h"
#include "ops/op.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static bool is_forward(const tg_tensor *t)
{
    return t->n_in > 0 && !(t->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER));
}

/* ---- atoms ----------------------------------------------------------------------- */

/* The layer an op belongs to: its scope down to the first numbered module
 * (a member of an nn.Sequential or nn.ModuleList), else its first scope.
 * "layer3/8/conv1" -> "layer3.8"; "bert/encoder/layer/4/attention/self" ->
 * "bert.encoder.layer.4" (Hugging Face's layers sit below containers);
 * "bert/embeddings/LayerNorm" -> "bert"; "conv1/weight" -> "conv1";
 * "relu_3" -> "". */
static void scope_key(const char *name, char *key, size_t cap)
{
    const char *s1 = strchr(name, '/');
    key[0] = '\0';
    if (!s1)
        return;
    size_t n = (size_t)(s1 - name);
    /* the components after the first that are followed by another: scopes */
    for (const char *c = s1 + 1, *e; (e = strchr(c, '/')) != NULL; c = e + 1) {
        bool numbered = e > c;
        for (const char *d = c; numbered && d < e; d++)
            numbered = isdigit((unsigned char)*d) != 0;
        if (numbered) {
            n = (size_t)(e - name);
            break;
        }
    }
    if (n >= cap)
        n = cap - 1;
    memcpy(key, name, n);
    key[n] = '\0';
    for (char *c = key; *c; c++)
        if (*c == '/')
            *c = '.';
}

static tg_status atoms_from_scopes(const tg_graph *g, const bool *needed, tg_stage_atoms *a)
{
    char key[48];
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!needed[i] || !is_forward(t))
            continue;
        scope_key(t->name, key, sizeof key);
        bool fresh = a->n == 0 || (*key && strcmp(key, a->names[a->n - 1]) != 0);
        if (fresh) {
            if (a->n == TG_ATOMS_MAX)
                return tg_error(TG_ERR_CONFIG,
                                "automatic stages: the model has more than %d layer scopes; "
                                "mark blocks (tg_block_begin) or give --split points",
                                TG_ATOMS_MAX);
            snprintf(a->names[a->n++], sizeof a->names[0], "%s", *key ? key : t->name);
        }
        a->atom_of[i] = a->n - 1;
    }
    return TG_OK;
}

/* A part of block b starting at op t: "B2:layer2/relu" (an atom of its own,
 * `part` set), or an error naming what does not fit. */
static tg_status start_part(const tg_graph *g, int b, const tg_tensor *t, tg_stage_atoms *a)
{
    if (a->n == TG_ATOMS_MAX)
        return tg_error(TG_ERR_CONFIG, "stages: more than %d blocks and parts of blocks",
                        TG_ATOMS_MAX);
    int n = snprintf(a->names[a->n], sizeof a->names[0], "%s:%s", g->blocks[b].name, t->name);
    if (n >= (int)sizeof a->names[0])
        return tg_error(TG_ERR_CONFIG,
                        "stages: the part of block '%s' from op '%s' has a name longer than %d "
                        "characters; cut the block with tg_block_begin instead",
                        g->blocks[b].name, t->name, (int)sizeof a->names[0] - 1);
    a->part[a->n++] = true;
    return TG_OK;
}

static tg_status atoms_from_blocks(const tg_graph *g, const bool *needed, const bool *cut_at,
                                   tg_stage_atoms *a)
{
    /* blocks in the order they first appear; each must be one run; an op
     * with cut_at set begins a part of its block (after the block's first op) */
    int map[TG_ATOMS_MAX], last = -1, last_block = -1;
    for (int b = 0; b < TG_ATOMS_MAX; b++)
        map[b] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!needed[i] || !is_forward(t))
            continue;
        int b = t->block;
        if (b < 0 || b >= TG_ATOMS_MAX) {
            a->atom_of[i] = last; /* outside any block: with the block before */
            continue;
        }
        if (map[b] < 0) {
            if (a->n == TG_ATOMS_MAX)
                return tg_error(TG_ERR_CONFIG, "stages: more than %d blocks", TG_ATOMS_MAX);
            map[b] = a->n;
            snprintf(a->names[a->n++], sizeof a->names[0], "%s", g->blocks[b].name);
        } else if (b != last_block) {
            return tg_error(TG_ERR_CONFIG,
                            "automatic stages: block '%s' is not one run of the model (op '%s' "
                            "comes back to it after block '%s'); group stages by hand with "
                            "--stages",
                            g->blocks[b].name, t->name, last >= 0 ? a->names[last] : "?");
        } else if (cut_at && cut_at[i]) {
            TG_TRY(start_part(g, b, t, a));
        }
        a->atom_of[i] = last = a->n - 1;
        last_block = b;
    }
    for (int i = 0; i < g->n_nodes; i++) /* ops before the first block */
        if (a->atom_of[i] < 0 && needed[i] && is_forward(g->nodes[i]))
            a->atom_of[i] = 0;
    return TG_OK;
}

/* The atom a node's cost and bytes belong to: forward nodes their own,
 * backward nodes their forward op's, updates their parameter's consumer. */
static int atom_of_any(const tg_stage_atoms *a, const int *param_atom, const tg_tensor *t)
{
    if (is_forward(t))
        return a->atom_of[t->id];
    if ((t->flags & TG_NODE_BACKWARD) && t->forward_of)
        return atom_of_any(a, param_atom, t->forward_of);
    if (t->flags & TG_NODE_OPTIMIZER)
        return param_atom[t->in[0]->id];
    return -1;
}

/* Leaves go with their first forward consumer (parameters, inputs). */
static void leaf_atoms(const tg_graph *g, const bool *needed, const tg_stage_atoms *a,
                       int *param_atom)
{
    for (int i = 0; i < g->n_nodes; i++)
        param_atom[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!needed[i] || !is_forward(t))
            continue;
        for (int k = 0; k < t->n_in; k++) {
            const tg_tensor *x = t->in[k];
            if (x->n_in == 0 && param_atom[x->id] < 0)
                param_atom[x->id] = a->atom_of[i];
        }
    }
}

/* lowest[i]: the lowest atom whose backward reads node i, directly or
 * through other backward nodes (INT_MAX if none). Nodes are in topological
 * order, so walking them backwards sees every reader before what it reads. */
static void lowest_backward_reader(const tg_graph *g, const bool *needed, const tg_stage_atoms *a,
                                   const int *param_atom, int *lowest)
{
    for (int i = 0; i < g->n_nodes; i++)
        lowest[i] = INT_MAX;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const tg_tensor *t = g->nodes[i];
        if (!needed[i] || !(t->flags & TG_NODE_BACKWARD))
            continue;
        int at = atom_of_any(a, param_atom, t), low = lowest[i];
        if (at >= 0 && at < low)
            low = at;
        for (int k = 0; k < t->n_in; k++)
            if (low < lowest[t->in[k]->id])
                lowest[t->in[k]->id] = low;
    }
}

/* Whether forward node x has forward readers other than f. */
static bool read_by_another(const tg_graph *g, const tg_tensor *x, const tg_tensor *f)
{
    for (int i = x->id + 1; i < g->n_nodes; i++) {
        const tg_tensor *r = g->nodes[i];
        for (int k = 0; r != f && is_forward(r) && k < r->n_in; k++)
            if (r->in[k] == x)
                return true;
    }
    return false;
}

bool tg_stage_handoff_node(const tg_graph *g, const tg_tensor *t, const int *index_of)
{
    if (t->op != TG_OP_CONV2D_BWD_DATA || t->n_in != 2 || !(t->flags & TG_NODE_BACKWARD))
        return false;
    const tg_tensor *f = t->forward_of, *dy = t->in[0], *w = t->in[1];
    if (!f || f->op != TG_OP_CONV2D || f->in[1] != w || w->n_in != 0 || w->role != TG_ROLE_PARAM ||
        !(dy->flags & TG_NODE_BACKWARD))
        return false;
    /* x read by the convolution alone: then dx is x's whole gradient, and
     * no sum on the convolution's stage (autodiff's, whose forward_of is a
     * reader) would wait for it, a gradient flowing forward */
    const tg_tensor *x = f->in[0];
    if (!is_forward(x) || (x->flags & TG_NODE_ALIAS) || index_of[x->id] < 0 ||
        index_of[f->id] < 0 || index_of[x->id] != index_of[f->id] - 1)
        return false;
    return !read_by_another(g, x, f);
}

/* The input gradients an atom may hand to the one before: their seconds,
 * the bytes of what they read that cross back instead (dy, the weight) and
 * of what they make (dx, which then stays on the stage before). */
static void add_handoffs(const tg_graph *g, const bool *needed, const tg_cost_model *cost,
                         tg_stage_atoms *a)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!needed[i] || !tg_stage_handoff_node(g, t, a->atom_of))
            continue;
        int at = a->atom_of[t->forward_of->id];
        a->handoff[at] += tg_cost_node_seconds(cost, t);
        a->handoff_in[at] += (double)(tg_nbytes(t->in[0]) + tg_nbytes(t->in[1]));
        a->handoff_dx[at] += (double)tg_nbytes(t);
    }
}

static void add_costs(const tg_graph *g, const bool *needed, const tg_cost_model *cost,
                      bool accumulate, const int *param_atom, const int *lowest, tg_stage_atoms *a)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!needed[i])
            continue;
        if (t->n_in == 0) {
            int at = param_atom[i];
            if (t->role == TG_ROLE_PARAM && at >= 0) {
                a->persistent[at] += (double)tg_nbytes(t) * (accumulate ? 2 : 1);
                a->params[at] += (double)tg_nbytes(t);
            }
            continue;
        }
        int at = atom_of_any(a, param_atom, t);
        if (at < 0)
            continue;
        double sec = tg_cost_node_seconds(cost, t);
        if (is_forward(t)) {
            a->forward[at] += sec;
        } else if (t->flags & TG_NODE_BACKWARD) {
            a->backward[at] += sec;
            /* W: no earlier atom waits for it (on the first atom, nothing does) */
            if (lowest[i] >= at)
                a->weight[at] += sec;
        } else {
            a->update[at] += sec;
        }
        /* optimizer state: the update's other leaf inputs */
        for (int k = 1; (t->flags & TG_NODE_OPTIMIZER) && k < t->n_in; k++)
            if (t->in[k]->n_in == 0 && t->in[k]->role == TG_ROLE_STATE) {
                a->persistent[at] += (double)tg_nbytes(t->in[k]);
                a->state[at] += (double)tg_nbytes(t->in[k]);
            }
        if (!(t->flags & TG_NODE_ALIAS) && tg_cost_node_bytes(t) > a->working[at])
            a->working[at] = tg_cost_node_bytes(t);
    }
}

/* Kept bytes: values read by an atom's backward pass (its own forward
 * values, inputs and values received from earlier atoms), once per atom. */
static void add_kept(const tg_graph *g, const bool *needed, const int *param_atom,
                     unsigned char *seen, tg_stage_atoms *a)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!needed[i] || !(t->flags & TG_NODE_BACKWARD))
            continue;
        int at = atom_of_any(a, param_atom, t);
        for (int k = 0; at >= 0 && k < t->n_in; k++) {
            const tg_tensor *x = t->in[k];
            bool fwd_value = is_forward(x) || (x->n_in == 0 && x->role == TG_ROLE_INPUT);
            if (!fwd_value || (x->flags & TG_NODE_ALIAS) || seen[(size_t)x->id * a->n + at])
                continue;
            seen[(size_t)x->id * a->n + at] = 1;
            a->kept[at] += (double)tg_nbytes(x);
        }
    }
}

/* Boundary bytes: a forward value crosses every boundary between its atom
 * and the furthest atom whose forward pass reads it. */
static void add_cuts(const tg_graph *g, const bool *needed, int *reach, tg_stage_atoms *a)
{
    for (int i = 0; i < g->n_nodes; i++)
        reach[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!needed[i] || !is_forward(t))
            continue;
        for (int k = 0; k < t->n_in; k++) {
            const tg_tensor *x = t->in[k];
            while (x->flags & TG_NODE_ALIAS) /* a view travels as its storage */
                x = x->in[0];
            if (is_forward(x) && a->atom_of[i] > reach[x->id])
                reach[x->id] = a->atom_of[i];
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *x = g->nodes[i];
        if (reach[i] < 0 || !is_forward(x))
            continue;
        for (int b = a->atom_of[i]; b < reach[i]; b++)
            a->cut[b] += (double)tg_nbytes(x);
    }
}

void tg_stage_atoms_free(tg_stage_atoms *a)
{
    tg_free(a->atom_of);
    a->atom_of = NULL;
}

tg_status tg_stage_atoms_build(const tg_graph *g, const bool *needed, bool scopes,
                               const tg_cost_model *cost, bool accumulate, tg_stage_atoms *a)
{
    return tg_stage_atoms_build_cut(g, needed, scopes, NULL, cost, accumulate, a);
}

tg_status tg_stage_atoms_build_cut(const tg_graph *g, const bool *needed, bool scopes,
                                   const bool *cut_at, const tg_cost_model *cost, bool accumulate,
                                   tg_stage_atoms *a)
{
    memset(a, 0, sizeof *a);
    a->atom_of = tg_malloc(((size_t)g->n_nodes + 1) * sizeof(int));
    int *param_atom = tg_malloc(((size_t)g->n_nodes + 1) * sizeof(int));
    int *lowest = tg_malloc(((size_t)g->n_nodes + 1) * sizeof(int));
    if (!a->atom_of || !param_atom || !lowest) {
        tg_free(param_atom);
        tg_free(lowest);
        tg_stage_atoms_free(a);
        return tg_error(TG_ERR_NOMEM, "automatic stages: out of memory");
    }
    for (int i = 0; i < g->n_nodes; i++)
        a->atom_of[i] = -1;
    a->from_blocks = !scopes && g->n_blocks > 0;
    tg_status s =
        a->from_blocks ? atoms_from_blocks(g, needed, cut_at, a) : atoms_from_scopes(g, needed, a);
    unsigned char *seen = NULL;
    if (s == TG_OK && !(seen = tg_calloc((size_t)g->n_nodes * (size_t)(a->n + 1) + 1, 1)))
        s = tg_error(TG_ERR_NOMEM, "automatic stages: out of memory");
    if (s == TG_OK) {
        leaf_atoms(g, needed, a, param_atom);
        lowest_backward_reader(g, needed, a, param_atom, lowest);
        add_costs(g, needed, cost, accumulate, param_atom, lowest, a);
        add_kept(g, needed, param_atom, seen, a);
        add_cuts(g, needed, param_atom, a); /* param_atom is no longer needed: reused */
        add_handoffs(g, needed, cost, a);
    }
    tg_free(seen);
    tg_free(param_atom);
    tg_free(lowest);
    if (s != TG_OK)
        tg_stage_atoms_free(a);
    return s;
}

/* ---- goal, evaluation, search ---------------------------------------------------- */

tg_status tg_stage_goal_read(const tg_config *c, int n_stages, bool training, tg_stage_goal *g)
{
    memset(g, 0, sizeof *g);
    if (n_stages < 1 || n_stages > TG_STAGES_MAX)
        return tg_error(TG_ERR_CONFIG, "automatic stages: %d stages; give 1 to %d devices",
                        n_stages, TG_STAGES_MAX);
    g->n_stages = n_stages;
    g->training = training;
    g->kind = strcmp(c->pipeline.strategy, "sharded") == 0
                  ? TG_SCHEDULE_SHARDED
                  : (tg_schedule_kind)tg_schedule_parse(c->pipeline.schedule);
    const tg_tensor_location *w = &c->memory.location[TG_TENSOR_WEIGHT];
    g->weight_copies = !w->off_chip && !w->sharded;
    g->micro_batches = training ? c->pipeline.accumulation : c->pipeline.device_iterations;
    if (g->micro_batches < 1)
        g->micro_batches = 1;
    TG_TRY(tg_cost_model_from_config(c, n_stages, &g->cost));
    int64_t cap = c->memory.per_device;
    if (cap <= 0 && g->cost.tiled)
        cap = (int64_t)g->cost.target.tiles * g->cost.target.tile_memory;
    double margin = c->pipeline.memory_margin;
    g->capacity = cap > 0 ? (double)cap * (1 - margin) : 0;
    tg_pipe_schedule s;
    TG_TRY(tg_pipe_schedule_build(g->kind, n_stages, g->micro_batches, training, &s));
    for (int k = 0; k < n_stages; k++)
        g->depth[k] = s.stash_depth[k];
    tg_pipe_schedule_free(&s);
    return TG_OK;
}

/* Stage k = atoms [i, j]: its cost for the simulator, time and memory.
 * gives: atom i's input gradient runs on the stage before (handoff); takes:
 * this stage runs atom j+1's. */
static void stage_eval(const tg_stage_atoms *a, const tg_stage_goal *goal, int k, int i, int j,
                       bool gives, bool takes, tg_stage_cost *c, double *time, double *memory)
{
    memset(c, 0, sizeof *c);
    double persistent = 0, kept = 0, working = 0;
    for (int x = i; x <= j; x++) {
        c->time[TG_SIM_FORWARD] += a->forward[x];
        /* an atom's B feeds the atom before it: the stage's sent gradient
         * for the first atom, and for a later one the path towards it */
        double w = a->weight[x];
        c->time[TG_SIM_BACKWARD] += goal->training ? a->backward[x] - w : 0;
        c->time[TG_SIM_WEIGHT] += goal->training ? w : 0;
        c->update += goal->training ? a->update[x] : 0;
        persistent += a->persistent[x];
        kept += a->kept[x];
        working = a->working[x] > working ? a->working[x] : working;
    }
    gives = gives && goal->training && i > 0 && a->handoff[i] > 0;
    takes = takes && goal->training && j + 1 < a->n && a->handoff[j + 1] > 0;
    double back = i > 0 ? a->cut[i - 1] : 0, received = back;
    if (gives) { /* dy and the weight cross back, not dx */
        c->time[TG_SIM_BACKWARD] -= a->handoff[i];
        back += a->handoff_in[i] - a->handoff_dx[i];
    }
    if (takes) {
        c->time[TG_SIM_BACKWARD] += a->handoff[j + 1];
        received += a->handoff_in[j + 1];
    }
    if (j < a->n - 1)
        c->send_forward = tg_cost_copy_seconds(&goal->cost, a->cut[j]);
    if (i > 0 && goal->training)
        c->send_backward = tg_cost_copy_seconds(&goal->cost, back);
    *time = c->time[TG_SIM_FORWARD] + c->time[TG_SIM_BACKWARD] + c->time[TG_SIM_WEIGHT] +
            c->send_forward + c->send_backward + c->update / goal->micro_batches;
    int depth = goal->training ? goal->depth[k] : 1;
    *memory = persistent + depth * (kept + received) + working;
}

static bool pipelined(const tg_stage_goal *goal)
{
    return goal->kind != TG_SCHEDULE_SHARDED;
}

static double combine(const tg_stage_goal *goal, double acc, double t)
{
    return pipelined(goal) ? (acc > t ? acc : t) : acc + t;
}

void tg_stage_plan_eval_handoff(const tg_stage_atoms *a, const tg_stage_goal *goal,
                                const int *first, const bool *handoff, tg_stage_plan *p)
{
    memset(p, 0, sizeof *p);
    p->n_stages = goal->n_stages;
    for (int k = 0; k < goal->n_stages; k++) {
        p->first[k] = first[k];
        p->handoff[k] = handoff && k > 0 && handoff[k] && a->handoff[first[k]] > 0;
    }
    p->first[goal->n_stages] = a->n;
    for (int k = 0; k < goal->n_stages; k++) {
        bool takes = k + 1 < goal->n_stages && p->handoff[k + 1];
        stage_eval(a, goal, k, p->first[k], p->first[k + 1] - 1, p->handoff[k], takes, &p->costs[k],
                   &p->time[k], &p->memory[k]);
        for (int x = p->first[k]; x < p->first[k + 1]; x++)
            p->kept[k] += a->kept[x];
        p->kept[k] += p->first[k] > 0 ? a->cut[p->first[k] - 1] : 0;
        p->objective = combine(goal, p->objective, p->time[k]);
        if (goal->capacity > 0 && p->memory[k] > goal->capacity)
            p->objective = INFINITY;
    }
}

void tg_stage_plan_eval(const tg_stage_atoms *a, const tg_stage_goal *goal, const int *first,
                        tg_stage_plan *p)
{
    tg_stage_plan_eval_handoff(a, goal, first, NULL, p);
}

/* Take `try` for plan when it is TG_STAGE_PART_GAIN better. */
static void take_if_better(tg_stage_plan *plan, const tg_stage_plan *try)
{
    if (try->objective < plan->objective * (1 - TG_STAGE_PART_GAIN))
        *plan = *try;
}

tg_status tg_stage_plan_handoffs(const tg_stage_atoms *a, const tg_stage_goal *goal,
                                 tg_stage_plan *plan)
{
    /* blocks only: --split takes layer names, with no place for a '<' */
    if (!a->from_blocks || !goal->training || goal->n_stages < 2 || !goal->weight_copies ||
        !isfinite(plan->objective))
        return TG_OK;
    tg_stage_plan *try = tg_malloc(sizeof *try);
    if (!try)
        return tg_error(TG_ERR_NOMEM, "automatic stages: out of memory");
    bool handoff[TG_STAGES_MAX] = {0};
    int first[TG_STAGES_MAX + 1] = {0};
    if (goal->n_stages == 2) {
        handoff[1] = true;
        for (first[1] = 1; first[1] < a->n; first[1]++) {
            tg_stage_plan_eval_handoff(a, goal, first, handoff, try);
            if (try->handoff[1])
                take_if_better(plan, try);
        }
    } else {
        for (int k = 1; k < goal->n_stages; k++) {
            for (int q = 0; q < goal->n_stages; q++)
                handoff[q] = plan->handoff[q] || q == k;
            tg_stage_plan_eval_handoff(a, goal, plan->first, handoff, try);
            if (try->handoff[k])
                take_if_better(plan, try);
        }
    }
    tg_free(try);
    return TG_OK;
}

tg_status tg_stage_plan_best(const tg_stage_atoms *a, const tg_stage_goal *goal, tg_stage_plan *out)
{
    int n = a->n, S = goal->n_stages;
    if (n < S)
        return tg_error(TG_ERR_CONFIG,
                        "automatic stages: %d stages asked for, but the model has only %d %s to "
                        "divide; use at most %d devices%s",
                        S, n, a->from_blocks ? "blocks" : "layer scopes", n,
                        a->from_blocks ? " or --split auto (layer boundaries)" : "");
    /* best[k][j]: the best objective of atoms 0..j in stages 0..k; from[k][j]
     * the first atom of stage k in it */
    double *best = tg_malloc(sizeof(double) * (size_t)S * (size_t)n);
    int *from = tg_malloc(sizeof(int) * (size_t)S * (size_t)n);
    if (!best || !from) {
        tg_free(best);
        tg_free(from);
        return tg_error(TG_ERR_NOMEM, "automatic stages: out of memory");
    }
    tg_stage_cost c;
    double t, mem;
    for (int k = 0; k < S; k++)
        for (int j = 0; j < n; j++) {
            double *b = &best[k * n + j];
            *b = INFINITY;
            from[k * n + j] = -1;
            for (int i = k; i <= j; i++) {
                double before = k == 0 ? (i == 0 ? 0 : INFINITY) : best[(k - 1) * n + i - 1];
                if (before == INFINITY)
                    continue;
                stage_eval(a, goal, k, i, j, false, false, &c, &t, &mem);
                if (goal->capacity > 0 && mem > goal->capacity)
                    continue;
                double v = combine(goal, before, t);
                if (v < *b) {
                    *b = v;
                    from[k * n + j] = i;
                }
            }
        }
    tg_status s = TG_OK;
    if (best[(S - 1) * n + n - 1] == INFINITY) {
        s = tg_error(TG_ERR_CAPACITY,
                     "automatic stages: no split of the model's %d %s over %d devices fits "
                     "%.1f MiB per device (memoryPerDevice less autoStages.memoryMargin, by the "
                     "estimate); use more devices, recomputation, offloading or a smaller batch",
                     n, a->from_blocks ? "blocks" : "layer scopes", S, goal->capacity / 1048576.0);
    } else {
        int first[TG_STAGES_MAX + 1];
        for (int k = S - 1, j = n - 1; k >= 0; k--) {
            first[k] = from[k * n + j];
            j = first[k] - 1;
        }
        tg_stage_plan_eval(a, goal, first, out);
    }
    tg_free(best);
    tg_free(from);
    return s;
}

/* ---- user splits ----------------------------------------------------------------- */

static int find_atom(const tg_stage_atoms *a, const char *name)
{
    for (int x = 0; x < a->n; x++) {
        const char *p = a->names[x], *q = name;
        while (*p && (*p == *q || (*p == '.' && *q == '/')))
            p++, q++;
        if (!*p && !*q)
            return x;
    }
    return -1;
}

static void atom_list(const tg_stage_atoms *a, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int x = 0; x < a->n && used + 1 < cap; x++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", x ? ", " : "", a->names[x]);
}

tg_status tg_stage_plan_parse(const tg_stage_atoms *a, const tg_stage_goal *goal, const char *spec,
                              tg_stage_plan *out)
{
    char buf[1024], list[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    atom_list(a, list, sizeof list);
    int first[TG_STAGES_MAX + 1], n_stages = 0, expect = 0;
    bool handoff[TG_STAGES_MAX + 1] = {0};
    bool stages_form = strchr(spec, '|') != NULL || a->from_blocks;
    char *save = NULL;
    const char *sep = stages_form ? "|" : ",";
    if (!stages_form)
        first[n_stages++] = 0;
    for (char *st = strtok_r(buf, sep, &save); st; st = strtok_r(NULL, sep, &save)) {
        char *save2 = NULL;
        bool head = true;
        for (char *nm = strtok_r(st, ",", &save2); nm; nm = strtok_r(NULL, ",", &save2)) {
            while (*nm == ' ')
                nm++;
            bool back = *nm == '<';
            nm += back;
            if (back && !a->from_blocks)
                return tg_error(TG_ERR_CONFIG,
                                "%s \"%s\": '<%s': an input gradient is handed back between "
                                "blocks only (--stages \"B1|<B2\"); split points take no '<'",
                                stages_form ? "stages" : "split", spec, nm);
            if (back && stages_form && (!head || n_stages == 0))
                return tg_error(TG_ERR_CONFIG,
                                "stages \"%s\": '<%s': only a stage after the first may hand "
                                "its input gradient back, written before its first item "
                                "(\"B1|<B2,B3\")",
                                spec, nm);
            int x = find_atom(a, nm);
            if (x < 0)
                return tg_error(TG_ERR_CONFIG, "%s \"%s\": '%s' is not one of the model's %s (%s)",
                                stages_form ? "stages" : "split", spec, nm,
                                a->from_blocks ? "blocks" : "layer scopes", list);
            if (n_stages >= TG_STAGES_MAX)
                return tg_error(TG_ERR_CONFIG, "stages \"%s\": more than %d stages", spec,
                                TG_STAGES_MAX);
            /* an inference program of the same options (train's evaluation)
             * has no gradient to hand back: the forward split is the same */
            if (back && goal->training && a->handoff[x] <= 0)
                return tg_error(TG_ERR_CONFIG,
                                "stages \"%s\": '<%s': %s does not begin with a convolution "
                                "reading the stage before, whose input gradient that stage "
                                "could compute; drop the '<'",
                                spec, nm, nm);
            if (!stages_form) {
                if (x <= first[n_stages - 1])
                    return tg_error(TG_ERR_CONFIG,
                                    "split \"%s\": '%s' is not after the point "
                                    "before it",
                                    spec, nm);
                handoff[n_stages] = back;
                first[n_stages++] = x;
            } else if (x != expect) {
                return tg_error(TG_ERR_CONFIG,
                                "stages \"%s\": '%s' is out of order; stages must "
                                "be runs of consecutive %s in model order (%s)",
                                spec, nm, a->from_blocks ? "blocks" : "scopes", list);
            } else {
                if (head)
                    handoff[n_stages] = back, first[n_stages++] = x;
                head = false;
                expect++;
            }
        }
    }
    if (stages_form && expect != a->n)
        return tg_error(TG_ERR_CONFIG, "stages \"%s\": '%s' is in no stage", spec,
                        expect < a->n ? a->names[expect] : "?");
    if (n_stages != goal->n_stages)
        return tg_error(TG_ERR_CONFIG,
                        "stages \"%s\" has %d stages, and the comparison is over %d devices", spec,
                        n_stages, goal->n_stages);
    tg_stage_plan_eval_handoff(a, goal, first, handoff, out);
    return TG_OK;
}

void tg_stage_plan_spec(const tg_stage_atoms *a, const tg_stage_plan *p, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < p->n_stages && used + 1 < cap; k++) {
        if (!a->from_blocks) {
            if (k > 0)
                used += (size_t)snprintf(buf + used, cap - used, "%s%s%s", k > 1 ? "," : "",
                                         p->handoff[k] ? "<" : "", a->names[p->first[k]]);
            continue;
        }
        for (int x = p->first[k]; x < p->first[k + 1] && used + 1 < cap; x++)
            if (!a->part[x] || x == p->first[k]) /* a part goes with its block in the stage */
                used += (size_t)snprintf(buf + used, cap - used, "%s%s%s",
                                         x == p->first[k] ? (k ? "|" : "") : ",",
                                         x == p->first[k] && p->handoff[k] ? "<" : "", a->names[x]);
    }
}

/* ---- below the blocks ------------------------------------------------------------ */

/* The ops a spec's "BLOCK:OP" items name: cut_at[op] set, or an error
 * naming the item that is not an op of its block. */
tg_status tg_stage_spec_cuts(const tg_graph *g, const bool *needed, const char *spec, bool *cut_at)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *tok = strtok_r(buf, ",|", &save); tok;
         tok = strtok_r(NULL, ",|", &save)) {
        char *colon = strchr(tok, ':');
        while (*tok == ' ')
            tok++;
        if (!colon)
            continue;
        *colon = '\0';
        const char *op = colon + 1;
        int found = -1, block = -1;
        for (int b = 0; b < g->n_blocks; b++)
            if (strcmp(g->blocks[b].name, tok) == 0)
                block = b;
        for (int i = 0; block >= 0 && found < 0 && i < g->n_nodes; i++)
            if (needed[i] && is_forward(g->nodes[i]) && g->nodes[i]->block == block &&
                strcmp(g->nodes[i]->name, op) == 0)
                found = i;
        if (block < 0)
            return tg_error(TG_ERR_CONFIG,
                            "stages \"%s\": '%s:%s' names block '%s', which the model does not "
                            "have (BLOCK:OP is the part of a block from one of its ops on)",
                            spec, tok, op, tok);
        if (found < 0)
            return tg_error(TG_ERR_CONFIG,
                            "stages \"%s\": block '%s' has no forward op '%s' (BLOCK:OP is the "
                            "part of a block from one of its ops on; `tilegraph compile "
                            "--stages auto` prints the cuts it finds)",
                            spec, tok, op);
        cut_at[found] = true;
    }
    return TG_OK;
}

/* Seconds an atom costs per micro-batch, as stage_eval counts them. */
static double atom_seconds(const tg_stage_atoms *a, const tg_stage_goal *goal, int x)
{
    return a->forward[x] +
           (goal->training ? a->backward[x] + a->update[x] / goal->micro_batches : 0);
}

/* The blocks worth cutting into ops: the ones holding the points k/S of
 * the work (where a balanced boundary would fall) and the ones on either
 * side of the block plan's boundaries. */
static void blocks_to_cut(const tg_stage_atoms *a, const tg_stage_goal *goal,
                          const tg_stage_plan *p, bool *cut_block)
{
    double total = 0, sum = 0;
    for (int x = 0; x < a->n; x++)
        total += atom_seconds(a, goal, x);
    for (int x = 0, k = 1; x < a->n; x++) {
        sum += atom_seconds(a, goal, x);
        for (; k < goal->n_stages && sum >= total * k / goal->n_stages; k++)
            cut_block[x] = true;
    }
    for (int k = 1; k < p->n_stages; k++)
        cut_block[p->first[k] - 1] = cut_block[p->first[k]] = true;
}

/* spanned[i]: a leaf (a weight, an input) is read by forward ops both
 * before op i and at or after it, so no stage may begin at i (a weight or
 * input is not shared by two stages). */
static int *leaf_spans(const tg_graph *g, const bool *needed)
{
    int *first = tg_malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    int *span = tg_calloc((size_t)g->n_nodes + 2, sizeof(int));
    if (!first || !span) {
        tg_free(first);
        tg_free(span);
        return NULL;
    }
    for (int i = 0; i < g->n_nodes; i++)
        first[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        for (int k = 0; needed[i] && is_forward(t) && k < t->n_in; k++) {
            const tg_tensor *x = t->in[k];
            if (x->n_in != 0)
                continue;
            if (first[x->id] >= 0 && first[x->id] < i) { /* (first, i] */
                span[first[x->id] + 1]++;
                span[i + 1]--;
            }
            first[x->id] = first[x->id] < 0 ? i : first[x->id];
        }
    }
    for (int i = 1; i <= g->n_nodes; i++)
        span[i] += span[i - 1];
    tg_free(first);
    return span;
}

/* cut_at for every forward op but the first of the blocks chosen, the ops
 * sharing storage (views) staying with the op before them, as do ops a
 * leaf's readers span; *cut_at NULL when that would pass TG_ATOMS_MAX
 * atoms. */
static tg_status op_cuts(const tg_graph *g, const bool *needed, const tg_stage_atoms *a,
                         const bool *cut_block, bool **out)
{
    bool *cut_at = tg_calloc((size_t)g->n_nodes + 1, sizeof(bool));
    int *spanned = leaf_spans(g, needed), n = a->n;
    *out = NULL;
    if (!cut_at || !spanned) {
        tg_free(cut_at);
        tg_free(spanned);
        return tg_error(TG_ERR_NOMEM, "automatic stages: out of memory");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!needed[i] || !is_forward(t) || (t->flags & TG_NODE_ALIAS) || a->atom_of[i] < 0 ||
            !cut_block[a->atom_of[i]] || spanned[i] > 0)
            continue;
        cut_at[i] = true;
        n++;
    }
    tg_free(spanned);
    if (n > TG_ATOMS_MAX)
        tg_free(cut_at); /* blocks of hundreds of ops: the blocks' split stands */
    else
        *out = cut_at;
    return TG_OK;
}

tg_status tg_stage_plan_refine(const tg_graph *g, const bool *needed, bool accumulate,
                               const tg_stage_goal *goal, tg_stage_atoms *atoms,
                               tg_stage_plan *plan)
{
    if (!atoms->from_blocks || goal->n_stages < 2 || !isfinite(plan->objective))
        return TG_OK;
    bool cut_block[TG_ATOMS_MAX] = {0}, *cut_at = NULL;
    blocks_to_cut(atoms, goal, plan, cut_block);
    TG_TRY(op_cuts(g, needed, atoms, cut_block, &cut_at));
    if (!cut_at)
        return TG_OK;
    tg_stage_atoms *parts = tg_calloc(1, sizeof *parts);
    tg_stage_plan *better = tg_calloc(1, sizeof *better);
    tg_status s =
        parts && better ? TG_OK : tg_error(TG_ERR_NOMEM, "automatic stages: out of memory");
    if (s == TG_OK)
        s = tg_stage_atoms_build_cut(g, needed, false, cut_at, &goal->cost, accumulate, parts);
    if (s == TG_OK)
        s = tg_stage_plan_best(parts, goal, better);
    if (s == TG_OK && better->objective < plan->objective * (1 - TG_STAGE_PART_GAIN)) {
        tg_stage_atoms_free(atoms);
        *atoms = *parts; /* takes atom_of */
        *plan = *better;
        parts->atom_of = NULL;
    }
    /* the parts are an option, not a requirement: when they cannot be made
     * (an op's name too long for an atom, no split of them fits) the
     * blocks' split stands; running out of memory does not pass */
    if (s != TG_ERR_NOMEM)
        s = TG_OK;
    if (parts)
        tg_stage_atoms_free(parts);
    tg_free(parts);
    tg_free(better);
    tg_free(cut_at);
    return s;
}

tg_status tg_stage_plan_for(const tg_graph *g, const bool *needed, bool scopes, const char *spec,
                            bool accumulate, const tg_stage_goal *goal, tg_stage_atoms *atoms,
                            tg_stage_plan *plan)
{
    bool automatic = strcmp(spec, "auto") == 0;
    bool *cut_at = NULL;
    if (!automatic && !scopes && strchr(spec, ':')) {
        if (!(cut_at = tg_calloc((size_t)g->n_nodes + 1, sizeof(bool))))
            return tg_error(TG_ERR_NOMEM, "stages: out of memory");
        tg_status s = tg_stage_spec_cuts(g, needed, spec, cut_at);
        if (s != TG_OK) {
            tg_free(cut_at);
            return s;
        }
    }
    tg_status s =
        tg_stage_atoms_build_cut(g, needed, scopes, cut_at, &goal->cost, accumulate, atoms);
    tg_free(cut_at);
    if (s == TG_OK)
        s = automatic ? tg_stage_plan_best(atoms, goal, plan)
                      : tg_stage_plan_parse(atoms, goal, spec, plan);
    if (s == TG_OK && automatic)
        s = tg_stage_plan_refine(g, needed, accumulate, goal, atoms, plan);
    if (s == TG_OK && automatic)
        s = tg_stage_plan_handoffs(atoms, goal, plan);
    if (s != TG_OK)
        tg_stage_atoms_free(atoms);
    return s;
}

tg_status tg_stage_plan_auto(const tg_graph *g, const tg_config *c, int n_stages, bool scopes,
                             const char *spec, tg_stage_atoms *atoms, tg_stage_goal *goal,
                             tg_stage_plan *plan)
{
    memset(atoms, 0, sizeof *atoms);
    int *order = NULL, n_order = 0;
    TG_TRY(tg_schedule(g, &order, &n_order));
    bool *needed = tg_calloc((size_t)g->n_nodes + 1, sizeof(bool));
    if (!needed) {
        tg_free(order);
        return tg_error(TG_ERR_NOMEM, "automatic stages: out of memory");
    }
    bool training = false;
    for (int k = 0; k < n_order; k++) {
        needed[order[k]] = true;
        training |= (g->nodes[order[k]]->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER)) != 0;
    }
    tg_status s = tg_stage_goal_read(c, n_stages, training, goal);
    bool accumulate = training && goal->micro_batches > 1;
    if (s == TG_OK)
        s = tg_cost_model_time_kernels(&goal->cost, g, needed);
    if (s == TG_OK)
        s = tg_stage_plan_for(g, needed, scopes, spec, accumulate, goal, atoms, plan);
    if (s != TG_OK)
        tg_cost_model_free(&goal->cost);
    tg_free(order);
    tg_free(needed);
    return s;
}
