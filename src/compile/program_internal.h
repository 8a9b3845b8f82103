/* compile/program_internal.h - what compile/program.c's compile() calls in
 * the files split from it: the steps, buffers and transfers
 * (compile/program_steps.c) and the staging plans
 * (compile/program_staging.c). Only those three files include it. */
#ifndef TG_COMPILE_PROGRAM_INTERNAL_H
#define TG_COMPILE_PROGRAM_INTERNAL_H

#include "compile/placement.h"
#include "compile/program.h"
#include "ops/op.h"

/* From the counts read from the options and the graph's first host input. */
void tg_program_count_samples(tg_program *p);
/* A phased program's phase per node, from its placement. */
tg_status tg_program_keep_phases(tg_program *p, const tg_placement *pl);
/* Refuses replicated tensor sharding of `kind` ("optimizer", "weight") for
 * an update that is not element-wise (LAMB). */
tg_status tg_program_check_shardable(const tg_graph *g, const char *kind);
/* Every value's home buffer on its device, in schedule order; with
 * shard_optimizer the optimizer state is sharded over the replicas. */
tg_status tg_program_make_homes(tg_program *p, const int *order, int n_order, bool shard_optimizer);
/* The step of node t (its kernel plan, scratch and buffers) in its phase
 * on its device. */
tg_status tg_program_add_step(tg_program *p, const tg_tensor *t);
/* The copies between devices of every value read on another device. */
tg_status tg_program_make_transfers_and_links(tg_program *p);
/* A weight copied to another device (an input gradient handed back) must
 * be whole and on chip: an error naming it otherwise. After the sharding
 * and streaming plans. */
tg_status tg_program_check_weight_copies(const tg_program *p);
/* Gradients summed over micro-batches (and averaged over replicas) before
 * the update: the update reads the accumulator instead of the gradient. */
tg_status tg_program_make_accumulators(tg_program *p);
/* The scratch the project's own kernel of t is planned with. */
size_t tg_program_own_scratch(const tg_program *p, const tg_tensor *t);
/* Each step's f32 staging in its scratch, before the memory plan
 * (compile/program_staging.c). */
void tg_program_plan_staging(tg_program *p);

#endif
