/* tilegraph/verify.h - one run of a compiled program checked against the
 * reference, tensor by tensor.
 *
 * The compiled program uses fast paths: the blocked activation layout,
 * oneDNN's kernels, half-precision storage, fused and native-bf16 kernels,
 * recomputation, pipelining. The reference is the same graph with all of
 * them off: each op's own reference kernel in double precision, NCHW, no
 * reuse (the interpreter the test suite checks the engine against).
 *
 * A verified run keeps every value the program computes for the first
 * micro-batch of replica 0 (in NCHW and f32, whatever the program stored),
 * then checks each tensor two ways:
 *   - its own error: the op's reference kernel run on the very inputs the
 *     program used, against what the program's kernel wrote. Errors coming
 *     from earlier tensors do not count, so the first tensor beyond its
 *     tolerance is where a fast path went wrong. The tolerance comes from
 *     the tensor's magnitude (its largest reference value m), its reduction
 *     length K (the op's FLOPs per output element) and its storage type:
 *     factor * m * (2^-24 * sqrt(K) + unit roundoff of the storage type).
 *   - its drift: the whole graph run by the reference from the same
 *     weights and inputs, against the program's value (relative to the
 *     reference's largest value): what the errors add up to.
 *
 *     tg_session_verify_next_run(s);
 *     tg_session_run(s);
 *     const tg_verify_report *r = tg_session_verify_report(s);
 *     if (tg_verify_first_beyond(r) >= 0) ...
 *
 * The engine option debug.verifyAgainstReference does this on a session's
 * first run and fails that run naming the first tensor beyond tolerance;
 * `tilegraph check` prints the table.
 */
#ifndef TILEGRAPH_VERIFY_H
#define TILEGRAPH_VERIFY_H

#include "tilegraph/export.h"

#include "tilegraph/session.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tg_verify_verdict {
    TG_VERIFY_OK,      /* within tolerance */
    TG_VERIFY_BEYOND,  /* its own error exceeds the tolerance, or a NaN the reference lacks */
    TG_VERIFY_SKIPPED, /* not checked: `note` says why */
} tg_verify_verdict;

typedef struct tg_verify_row {
    const char *name;  /* the tensor */
    const char *op;    /* its op */
    const char *block; /* its block (BeginBlock), or "" */
    int64_t elements;
    double max_abs;   /* its own error: max |program - reference kernel| */
    double max_rel;   /* max_abs / the reference's largest magnitude */
    double tolerance; /* on max_abs */
    double drift_rel; /* against the reference run of the whole graph, relative; -1 not compared */
    tg_verify_verdict verdict;
    const char *note; /* why skipped, or how a fused value was checked; "" otherwise */
    int micro_batch;  /* which micro-batch of replica 0's first iteration (updates: 0) */
} tg_verify_row;

/* End to end: the largest difference from the reference run over each
 * set of values, relative to the largest reference value of the set (-1
 * when not compared): what a user sees of the run. */
typedef struct tg_verify_summary {
    double loss;      /* scalar outputs */
    double outputs;   /* other outputs */
    double gradients; /* the parameters' gradients (each micro-batch's own) */
    double weights;   /* the parameters after the update (one micro-batch, one replica) */
} tg_verify_summary;

typedef struct tg_verify_report tg_verify_report;

/* Factor on every tolerance (default 32): the options' debug.verifyTolerance. */
TG_API void tg_session_verify_set_factor(tg_session *s, double factor);
/* Keep and check the values of the next tg_session_run (one only; the
 * memory of every value of one micro-batch is held for it). */
TG_API tg_status tg_session_verify_next_run(tg_session *s);
/* The last verified run's report, owned by the session (NULL before one). */
TG_API const tg_verify_report *tg_session_verify_report(const tg_session *s);

TG_API int tg_verify_rows(const tg_verify_report *r);
TG_API const tg_verify_row *tg_verify_row_at(const tg_verify_report *r, int index);
/* The index of the first row (graph order) beyond tolerance, or -1. */
TG_API int tg_verify_first_beyond(const tg_verify_report *r);
TG_API int tg_verify_count(const tg_verify_report *r, tg_verify_verdict verdict);
TG_API tg_verify_summary tg_verify_summary_of(const tg_verify_report *r);
/* What was not compared end to end and why ("" when everything was). */
TG_API const char *tg_verify_limits(const tg_verify_report *r);

#ifdef __cplusplus
}
#endif

#endif
