/* runtime/verify_internal.h - what the two halves of a verified run share
 * (runtime/verify.c keeps the values while the run goes, verify_check.c
 * checks them after): the kept values and the report. Internal to them. */
#ifndef TG_RUNTIME_VERIFY_INTERNAL_H
#define TG_RUNTIME_VERIFY_INTERNAL_H

#include "runtime/verify.h"

struct tg_verify_report {
    tg_verify_row *rows;
    int n_rows;
    int first_beyond;
    int counts[3];
    tg_verify_summary summary;
    char limits[512];
};

struct tg_verify {
    double factor;
    bool armed;     /* the next run is verified */
    bool fail;      /* and fails when a tensor is beyond tolerance */
    bool capturing; /* the current run is */
    int n;          /* nodes */
    int n_mb;       /* micro-batches kept: those of replica 0's first iteration */
    int cur_mb;     /* the one fast and captured show */
    float **fast;   /* per node: the program's value of micro-batch cur_mb (f32, NCHW) */
    unsigned char *captured;
    float ***fast_mb; /* per micro-batch: its fast */
    unsigned char **captured_mb;
    void ***inputs_mb;             /* per micro-batch, per input node: what it streamed */
    int *alias_first, *alias_next; /* per root buffer's node: its views, chained */
    /* per value leaf (weights, state, constants): its value as the run began,
     * as stored (raw_dt), or `seeded`: the loss scale the engine writes. Kept
     * in its own type, not in double: BERT-large's weights are 1.3 GB so. */
    void **before;
    tg_dtype *raw_dt; /* per leaf: the type of before's or inputs_mb's bytes */
    unsigned char *seeded;
    int64_t step;
    float loss_scale;
    tg_verify_report *report;
};

/* The node whose buffer t's is (t itself unless t is a view). */
static inline const tg_tensor *tg_verify_storage_root(const tg_tensor *t)
{
    while (t->flags & TG_NODE_ALIAS)
        t = t->in[0];
    return t;
}

/* A leaf with a value of its own (weights, state, constants): not an input. */
static inline bool tg_verify_is_value_leaf(const tg_tensor *t)
{
    return t->n_in == 0 && t->op != TG_OP_INPUT;
}

/* n values of type dt into floats (verify_check.c; into doubles:
 * core/convert.h's tg_convert_to_double). */
void tg_verify_to_float(const void *src, tg_dtype dt, float *dst, int64_t n);

/* The run is over: every kept value checked into r (verify_check.c). */
tg_status tg_verify_build_report(tg_session *s, tg_verify *v, tg_verify_report *r);

#endif
