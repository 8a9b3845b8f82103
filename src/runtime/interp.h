/* runtime/interp.h - the reference interpreter: runs a graph in double
 * precision with every op's reference kernel, one buffer per node.
 *
 * It is the independent check the fast engine is tested against, and the
 * arithmetic behind gradient checks. It is simple on purpose: no plan, no
 * threads, no reuse.
 */
#ifndef TG_RUNTIME_INTERP_H
#define TG_RUNTIME_INTERP_H

#include "graph/node.h"

typedef struct tg_interp tg_interp;

/* Allocate a buffer for every node and fill leaves from their initialisers
 * (inputs start at zero). */
tg_status tg_interp_create(const tg_graph *g, uint64_t seed, tg_interp **out);
void tg_interp_destroy(tg_interp *ip);
/* The node's buffer (tg_numel(t) doubles); write inputs here before running. */
double *tg_interp_data(tg_interp *ip, const tg_tensor *t);
/* The random ops' stream (tg_kernel_args.stream: replica << 32 | micro-batch;
 * 0 unless set) for the runs that follow. */
void tg_interp_set_stream(tg_interp *ip, uint64_t stream);
/* Run every non-leaf node in creation order; `step` is the optimizer step. */
tg_status tg_interp_run(tg_interp *ip, int64_t step);

#endif
