/* compile/compiled.h - what the public handle of a compiled program
 * (tilegraph/program.h) holds: the program and how it was obtained. The
 * report layer reads the program through it (report/plan.c, tilegraph/plan.h); the command
 * sees only the opaque tg_compiled.
 */
#ifndef TG_COMPILE_COMPILED_H
#define TG_COMPILE_COMPILED_H

#include "compile/program.h"
#include "tilegraph/program.h"

struct tg_compiled {
    tg_program *program; /* owned */
    tg_cache_result cache;
};

/* The program inside c. */
static inline const tg_program *tg_compiled_program(const tg_compiled *c)
{
    return c->program;
}

#endif
