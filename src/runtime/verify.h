/* runtime/verify.h - the engine's side of a verified run
 * (tilegraph/verify.h): the values kept while it runs, and the checks after.
 *
 * The session arms it (tg_session_verify_next_run, or
 * debug.verifyAgainstReference for the first run); tg_session_run calls
 * tg_verify_begin before the devices start, the device threads call
 * tg_verify_capture after each step of replica 0 (micro-batch g of the first
 * iteration is kept, later ones are not),
 * and tg_session_run calls tg_verify_end when the run is over. Each node is
 * captured by the one step that writes it, so the threads never share a
 * buffer.
 */
#ifndef TG_RUNTIME_VERIFY_H
#define TG_RUNTIME_VERIFY_H

#include "tilegraph/verify.h"

#include "compile/program.h"

typedef struct tg_verify tg_verify;

/* Verify the next run; with `fail` that run fails when a tensor is beyond
 * tolerance (debug.verifyAgainstReference). */
tg_status tg_verify_arm(tg_session *s, bool fail);
void tg_verify_destroy(tg_verify *v);
/* Whether the run about to start is verified: then the leaves' values
 * (weights, state, micro-batch 0's inputs) are kept first. */
tg_status tg_verify_begin(tg_session *s);
/* Step st (of node st->node) wrote `out`: keep its value, and those of the
 * views (aliases) of its buffer. */
/* For tests: the step that computes node tg_verify_test_fault_node adds 1
 * to the first value it writes (f32 outputs) in micro-batches g >= _from of
 * every iteration, as a kernel wrong on those micro-batches only would;
 * -1 (the default): none. Set while no session runs. */
extern int tg_verify_test_fault_node;
extern int64_t tg_verify_test_fault_from;
/* Apply it to a step's output (engine_passes.c, before the capture). */
void tg_verify_test_fault(const tg_program *p, const tg_step *st, void *out, int64_t g);

void tg_verify_capture(tg_verify *v, const tg_program *p, const tg_step *st, const void *out,
                       int64_t g);
/* The run is over: check every kept value; returns TG_ERR_NUMERIC when
 * armed to fail and a tensor is beyond tolerance, naming it. */
tg_status tg_verify_end(tg_session *s);
bool tg_verify_capturing(const tg_verify *v);

#endif
