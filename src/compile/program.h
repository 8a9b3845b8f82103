/* compile/program.h - the executable: what runs, in which order, where every
 * byte lives.
 *
 * A program is compiled from a graph and is the whole truth about a run: the
 * engine allocates exactly `arena_bytes` and executes exactly `steps`, and
 * the memory report, liveness and schedule shown to the user are read from
 * here. The graph must outlive the program.
 */
#ifndef TG_COMPILE_PROGRAM_H
#define TG_COMPILE_PROGRAM_H

#include "graph/node.h"

#include <stddef.h>
#include <stdint.h>

#define TG_ALIGN 64

/* Where a tensor's bytes live. Persistent regions hold values across runs. */
typedef enum tg_region {
    TG_REGION_NONE,      /* not stored: dead code, aliases, empty outputs */
    TG_REGION_PARAM,     /* trainable weights */
    TG_REGION_STATE,     /* optimizer state, running statistics */
    TG_REGION_CONSTANT,  /* constants */
    TG_REGION_INPUT,     /* host-fed inputs */
    TG_REGION_ACTIVATION /* transient: offsets reused by liveness */
} tg_region;

typedef struct tg_buffer {
    tg_region region;
    size_t offset; /* from the arena start */
    size_t bytes;
    int first, last; /* live from step `first` to step `last` inclusive; -1/n for persistent */
} tg_buffer;

typedef struct tg_step {
    int node;        /* node id */
    size_t scratch_offset, scratch_bytes;
} tg_step;

typedef struct tg_program {
    const tg_graph *graph;
    int n_threads;      /* the thread count scratch was sized for */
    tg_step *steps;
    int n_steps;
    tg_buffer *buffers; /* per node id; aliases point at their root's entry through `root` */
    int *root;          /* per node id: the node whose storage it uses (itself unless alias) */
    size_t arena_bytes;
    size_t region_bytes[TG_REGION_ACTIVATION + 1]; /* totals; activation = peak extent */
    size_t scratch_peak;
    double flops;       /* per run */
} tg_program;

/* Compile `g` for one device with `n_threads` threads: schedule the nodes the
 * outputs and updates need, plan every buffer. */
tg_status tg_program_compile(const tg_graph *g, int n_threads, tg_program **out);
void tg_program_destroy(tg_program *p);

/* The buffer holding node `id`'s value (through aliases). */
static inline const tg_buffer *tg_program_buffer(const tg_program *p, int id)
{
    return &p->buffers[p->root[id]];
}

/* Internal passes, each in its own file. */
tg_status tg_schedule(const tg_graph *g, int **order, int *n_order);
tg_status tg_memplan(tg_program *p);

#endif
