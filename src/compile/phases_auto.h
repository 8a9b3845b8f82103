/* compile/phases_auto.h - executionStrategy phased with phases "auto": the
 * compiler chooses the phases' devices and which kinds of tensor live in
 * streaming memory (docs/memory-locations.md, "Automatic phases").
 *
 * The search is the cost model's (compile/stages.h's atoms: the model's
 * blocks with their weights, optimizer state, kept and working bytes), and
 * the check is the compiler's: the candidates the estimate admits are
 * compiled in order of their estimated copies per host step until one fits
 * the devices' memory (every tile of a tiled target).
 */
#ifndef TG_COMPILE_PHASES_AUTO_H
#define TG_COMPILE_PHASES_AUTO_H

#include "compile/program.h"
#include "core/config.h"

/* Whether c asks for automatic phases (phases "auto" with executionStrategy
 * phased, which phases imply when the strategy is auto). */
bool tg_phases_auto_wanted(const tg_config *c);

/* Compile g phased with the plan chosen for c (whose phases are "auto"):
 * the program keeps the chosen config, with p->auto_phases naming the plan
 * and p->auto_phases_why saying why. TG_ERR_CAPACITY when no plan fits,
 * naming the closest and what it needed; other errors as compiling gives
 * them. */
tg_status tg_phases_auto_compile(const tg_graph *g, const tg_config *c, tg_program **out);

/* For --stages auto that found no pipelined split that fits: the phased
 * plan that would (its command-line flags, into buf) by the same search
 * over c's devices; false when none does or the model has no blocks. */
bool tg_phases_auto_suggest(const tg_graph *g, const tg_config *c, char *buf, size_t cap);

#endif
