/* target/target.h - the target interface: what the compiler, the profile,
 * the options and `tilegraph devices` ask of a target, and the registry that
 * finds one by name (target/targets.c).
 *
 * A target is one file defining a tg_target_ops (target/cpu.c, target/mk2.c,
 * target/tiny.c) and its line in the registry's table (target/targets.c);
 * the externs below name them for that table and the tests. Code outside
 * src/target/ asks a target's capabilities (tg_target_tiled,
 * tg_target_has_cycle_model, takes_description), never compares its name.
 * The tile processor types a tiled target plans with (its description, the
 * tile plan, the cycle model) are in target/tiled.h.
 */
#ifndef TG_TARGET_TARGET_H
#define TG_TARGET_TARGET_H

#include "backend/backend.h"
#include "core/config.h"
#include "tilegraph/devices.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tg_program;
/* A tile processor's numbers (target/tiled.h); the cpu target's names only
 * the target. */
typedef struct tg_target_desc tg_target_desc;

/* The timeline of one host step on the tiled target, from the cycle model:
 * fn is called for every forward, backward (micro_batch >= 0) and update
 * (micro_batch -1) of every device, with start and end in cycles from the
 * start of the host step; under a zero-bubble schedule a backward comes as
 * two calls, the input gradient (B, with the phase's copies) and then, as
 * TG_TILE_WEIGHT, the weight gradient (W: compute only). With I/O tiles each
 * forward's host streams in come first as a TG_TILE_STREAM_IN of their own,
 * on the I/O tiles: after the previous one, from the start of the previous
 * forward on (it runs beside that micro-batch's compute), and the forward
 * waits for it. Stops at fn's first failure. */
typedef enum tg_tile_piece {
    TG_TILE_PASS,      /* a forward, backward (or its B) or update pass */
    TG_TILE_WEIGHT,    /* a split backward's W: compute only */
    TG_TILE_STREAM_IN, /* with I/O tiles: a micro-batch's host streams in, beside the compute */
} tg_tile_piece;
typedef tg_status (*tg_tile_event_fn)(void *ctx, int device, int phase, tg_tile_piece piece,
                                      int iteration, int micro_batch, double start_cycles,
                                      double end_cycles);

/* What the compiler and the profile ask of a target. A NULL hook means the
 * target has nothing to do there (the cpu target has no tile plan). */
typedef struct tg_target_ops {
    const char *name; /* the value of option "target" */
    /* The kernels its programs run with (backend/backend.h); an op the
     * backend has no kernel for runs its reference kernel. A target is a
     * backend plus a cost model: cpu measures the host, mk2 and tiny model
     * tiles and cycles, and all three run the host's kernels (the cpu
     * backend) today. */
    const struct tg_backend *backend;
    bool plan_kernels; /* the backend's plan hooks run (the host executes the kernels as planned) */
    /* option targetDescription (a JSON file, target/tiled.h) replaces the
     * numbers of its tile processor; with other targets it is refused */
    bool takes_description;
    /* For `tilegraph devices` (tilegraph/devices.h). */
    tg_status (*describe)(tg_target_info *out);
    /* The description the compiler plans with, from the configuration. */
    tg_status (*limits)(const tg_config *c, tg_target_desc *out);
    /* A device's memory when memoryPerDevice is unset; 0: no limit. */
    int64_t (*device_memory)(const tg_target_desc *t);
    /* After the memory plan: the target's plan of p (sets p->tile_plan). */
    tg_status (*plan)(struct tg_program *p, const tg_target_desc *t);
    /* Whether p fits the target's memory, past the per-device arena check. */
    tg_status (*check)(const struct tg_program *p);
    /* The cycle model's timeline of one host step (see tg_tile_event_fn);
     * NULL: the profile's trace is the recorded runs. */
    tg_status (*simulate)(const struct tg_program *p, tg_tile_event_fn fn, void *ctx);
} tg_target_ops;

extern const tg_target_ops tg_target_cpu_ops;  /* target/cpu.c */
extern const tg_target_ops tg_target_mk2_ops;  /* target/mk2.c */
extern const tg_target_ops tg_target_tiny_ops; /* target/tiny.c */

/* Target i of the registered ones (0 <= i < tg_target_count()), else NULL. */
const tg_target_ops *tg_target_at(int i);
/* The target named `name`, or NULL. */
const tg_target_ops *tg_target_find(const char *name);
/* The registered targets' names, "cpu, mk2 or tiny", for messages and help
 * texts; returns out. */
char *tg_target_names(char *out, size_t cap, const char *last_sep);
/* Whether t models tiles (it has a tile plan): the compiler then costs steps
 * with its cycle model and plans device memory over its tiles. */
bool tg_target_tiled(const tg_target_ops *t);
/* Whether t's time is a cycle model's (simulate), not measured on the host. */
bool tg_target_has_cycle_model(const tg_target_ops *t);
/* The target of configuration c (option "target", validated by the options
 * table, so never NULL for a configuration read by tg_config_read). */
const tg_target_ops *tg_target_of_config(const tg_config *c);

/* The description of c's target, its limits hook: for a tiled target its tile
 * processor's numbers (with takes_description, the file named by
 * targetDescription when set); for cpu no tiles (all zero but
 * the name), which nothing reads. */
tg_status tg_target_from_config(const tg_config *c, tg_target_desc *out);

/* The memory that limits device d of compiled program p: on a tiled target
 * its fullest tile, on the others its arena. */
int64_t tg_target_device_need(const struct tg_program *p, int d);
/* What tg_target_device_need is held to (memoryPerTile on a tiled target,
 * memoryPerDevice elsewhere; 0: no limit), and in *unit the name of the
 * fullest such unit for reports ("the fullest tile", "the largest device"). */
int64_t tg_target_capacity(const struct tg_program *p, const char **unit);
/* The tile processor's numbers p was planned with (clock, host and link
 * bytes per cycle, I/O tiles: target/tiled.h), or NULL when p's target has
 * no tiles (its time is measured, not modelled). */
const tg_target_desc *tg_target_planned(const struct tg_program *p);

#endif
