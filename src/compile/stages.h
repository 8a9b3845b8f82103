/* compile/stages.h - automatic stages: the model's chain of atoms (user
 * blocks, or layer and residual-block scopes) cut into N stages that
 * minimise the predicted time of the schedule, with every stage's memory
 * within the device's capacity.
 *
 * Each atom carries its predicted forward, backward and update seconds (the
 * cost model, compile/cost.h), its persistent bytes (weights, gradients'
 * accumulators, optimizer state), the bytes it keeps per micro-batch in
 * flight (values read by the backward pass) and its working bytes, and each
 * boundary the bytes that cross it. A stage's time is its forward and
 * backward per micro-batch plus the copies it sends (activations forward,
 * gradients back); its memory is persistent + stash depth x kept bytes +
 * working bytes, where the stash depth is the schedule's for the stage's
 * position (1f1b: N - k). The objective is the slowest stage for a
 * pipelined schedule and the sum of stages for a sharded one: both are
 * monotone in each stage, so the dynamic programme over (stages used, last
 * atom) is exact. The memory estimate guides the search; the compiled
 * program's memory plan is the check (a split that the estimate admits but
 * the plan refuses fails to compile with the plan's message).
 */
#ifndef TG_COMPILE_STAGES_H
#define TG_COMPILE_STAGES_H

#include "compile/cost.h"
#include "compile/pipeline.h"
#include "compile/simulate.h"
#include "graph/node.h"
#include "core/config.h"

#define TG_STAGES_MAX 64
#define TG_ATOMS_MAX 256

typedef struct tg_stage_atoms {
    int n;
    bool from_blocks; /* atoms are the user's blocks (else scopes) */
    char names[TG_ATOMS_MAX][48];
    double forward[TG_ATOMS_MAX], backward[TG_ATOMS_MAX], update[TG_ATOMS_MAX]; /* seconds */
    /* of backward: the weight gradient alone (W of a split schedule): the
     * atom's backward nodes no earlier atom's backward reads */
    double weight[TG_ATOMS_MAX];
    double persistent[TG_ATOMS_MAX], kept[TG_ATOMS_MAX], working[TG_ATOMS_MAX]; /* bytes */
    double cut[TG_ATOMS_MAX]; /* bytes crossing the boundary after atom a, each way */
    /* of persistent, by kind (for the tensor locations of phases auto):
     * the weights (once; their accumulators are as many again) and the
     * optimizer state */
    double params[TG_ATOMS_MAX], state[TG_ATOMS_MAX];
    /* the atom is a part of the block of the atom before it, cut at an op
     * ("B2:layer2/relu", named by its block and first op) */
    bool part[TG_ATOMS_MAX];
    /* Handing an input gradient back (tg_stage_handoff_node): seconds of
     * the atom's input-gradient nodes the stage before may run, the bytes
     * that then cross back instead of their gradient (the gradient they
     * read and their weight, copied each micro-batch) and that gradient's
     * bytes; 0 where the atom has none */
    double handoff[TG_ATOMS_MAX], handoff_in[TG_ATOMS_MAX], handoff_dx[TG_ATOMS_MAX];
    int *atom_of; /* per node: atom of a forward node, else -1 (owned) */
} tg_stage_atoms;

/* What the split is chosen for. */
typedef struct tg_stage_goal {
    int n_stages;
    tg_schedule_kind kind;
    int micro_batches;
    bool training;
    double capacity;          /* bytes per device; 0: no limit */
    int depth[TG_STAGES_MAX]; /* stash depth of the stage at each position */
    tg_cost_model cost;       /* for the copies */
    /* weights stay whole and on chip, so one may be copied to the stage
     * before for an input gradient handed back (tg_stage_plan_handoffs) */
    bool weight_copies;
} tg_stage_goal;

typedef struct tg_stage_plan {
    int n_stages;
    int first[TG_STAGES_MAX + 1]; /* stage k holds atoms first[k] .. first[k+1]-1 */
    /* stage k (> 0) hands its first atom's input gradient to stage k-1:
     * written "B1|<B2,B3,B4" */
    bool handoff[TG_STAGES_MAX];
    double time[TG_STAGES_MAX];   /* per micro-batch: forward + backward + copies sent */
    double memory[TG_STAGES_MAX]; /* estimated bytes */
    double kept[TG_STAGES_MAX];   /* bytes per micro-batch in flight (kept + received) */
    double objective;             /* max (pipelined) or sum (sharded) of time; INFINITY: no fit */
    tg_stage_cost costs[TG_STAGES_MAX]; /* for the simulator */
} tg_stage_plan;

/* Atoms of g: its blocks, or with `scopes` (or a model without blocks) its
 * top-level scopes, a numbered child ("layer3/8") making a residual block
 * its own atom; nodes without a scope join the atom before them. */
tg_status tg_stage_atoms_build(const tg_graph *g, const bool *needed, bool scopes,
                               const tg_cost_model *cost, bool accumulate, tg_stage_atoms *out);
void tg_stage_atoms_free(tg_stage_atoms *a);

/* The same, with blocks cut into parts: a forward op i with cut_at[i] (not
 * the first of its block) begins a part of its block, an atom of its own
 * named "BLOCK:OP". cut_at may be NULL; it is ignored for scopes. */
tg_status tg_stage_atoms_build_cut(const tg_graph *g, const bool *needed, bool scopes,
                                   const bool *cut_at, const tg_cost_model *cost, bool accumulate,
                                   tg_stage_atoms *out);

/* The goal for n_stages under the config (schedule, accumulation,
 * capacity: memoryPerDevice, or the tiles' memory on a tiled target). */
tg_status tg_stage_goal_read(const tg_config *c, int n_stages, bool training, tg_stage_goal *out);

/* Evaluate the split whose stages begin at first[0..n_stages-1] (first[0]
 * = 0, increasing): per-stage time, memory, costs and the objective. */
void tg_stage_plan_eval(const tg_stage_atoms *a, const tg_stage_goal *goal, const int *first,
                        tg_stage_plan *out);

/* The same with handoff[k] (NULL: none) as in tg_stage_plan.handoff. */
void tg_stage_plan_eval_handoff(const tg_stage_atoms *a, const tg_stage_goal *goal,
                                const int *first, const bool *handoff, tg_stage_plan *out);

/* Whether backward node t of g may run on the stage before its own: the
 * input gradient of a convolution (dy, w -> dx) whose input x comes from
 * the index (atom or stage) just before the convolution's, by index_of over
 * forward nodes, and is read by that convolution alone. Its weight stays with the convolution; the
 * stage before receives a copy of it with dy each micro-batch (the weight changes only at the
 * update), so the results are the same to the bit. It moves the gradient's kernel, not a copy: dx's
 * reader is on the stage before. */
bool tg_stage_handoff_node(const tg_graph *g, const tg_tensor *t, const int *index_of);

/* Input gradients handed back: when running a stage's first input
 * gradient on the stage before makes the objective TG_STAGE_PART_GAIN
 * better, plan takes it (over 2 stages every boundary is tried with it,
 * over more each boundary of plan in turn). */
tg_status tg_stage_plan_handoffs(const tg_stage_atoms *a, const tg_stage_goal *goal,
                                 tg_stage_plan *plan);

/* The best split by dynamic programming. TG_ERR_CONFIG when there are fewer
 * atoms than stages, or no split fits the capacity (naming the estimates). */
tg_status tg_stage_plan_best(const tg_stage_atoms *a, const tg_stage_goal *goal,
                             tg_stage_plan *out);

/* A user's split in the atoms' terms: "B1|B2,B3,B4" (stages of blocks) or
 * "layer2.0,layer4.0" (the atoms where stages 1.. begin). Stages must be
 * contiguous runs of atoms. A stage's first item written "<B2" hands its
 * input gradient to the stage before (tg_stage_handoff_node). */
tg_status tg_stage_plan_parse(const tg_stage_atoms *a, const tg_stage_goal *goal, const char *spec,
                              tg_stage_plan *out);

/* The split as the options express it: "B1|B2,B3,B4" for blocks, split
 * points "layer2.0,layer4.0" for scopes. */
void tg_stage_plan_spec(const tg_stage_atoms *a, const tg_stage_plan *p, char *buf, size_t cap);

/* Below the blocks: when the best split of block atoms leaves the stages
 * unbalanced, the blocks where a balanced boundary would fall (and those
 * beside the split's boundaries) are cut into their ops (views stay with
 * the op before them), and the best split of those finer atoms replaces
 * the blocks' when the cost model predicts it TG_STAGE_PART_GAIN faster
 * (copies between the stages included). Stages may then begin inside a
 * block: "B1,B2|B2:layer2/relu,B3,B4". Nothing changes for scopes, one
 * stage, or blocks of more ops than TG_ATOMS_MAX atoms hold. */
#define TG_STAGE_PART_GAIN 0.02
tg_status tg_stage_plan_refine(const tg_graph *g, const bool *needed, bool accumulate,
                               const tg_stage_goal *goal, tg_stage_atoms *atoms,
                               tg_stage_plan *plan);

/* The ops a spec's "BLOCK:OP" items name (cut_at[op] set); an error names
 * an item whose block or op the model does not have. */
tg_status tg_stage_spec_cuts(const tg_graph *g, const bool *needed, const char *spec, bool *cut_at);

/* Atoms and plan for spec: "auto" (the best split, refined below the
 * blocks), else a user's split, whose BLOCK:OP items cut their blocks.
 * The atoms own memory (tg_stage_atoms_free); on error none is left. */
tg_status tg_stage_plan_for(const tg_graph *g, const bool *needed, bool scopes, const char *spec,
                            bool accumulate, const tg_stage_goal *goal, tg_stage_atoms *atoms,
                            tg_stage_plan *plan);

/* Everything placement needs from a graph and the config, in one call: the
 * schedule's needed nodes, the goal (its cost model with the program's
 * kernels timed) and tg_stage_plan_for(spec) over n_stages. The atoms and
 * the goal's cost model own memory: tg_stage_atoms_free and
 * tg_cost_model_free(&goal->cost). */
tg_status tg_stage_plan_auto(const tg_graph *g, const tg_config *c, int n_stages, bool scopes,
                             const char *spec, tg_stage_atoms *atoms, tg_stage_goal *goal,
                             tg_stage_plan *plan);

#endif
