/* runtime/session_internal.h - what checkpoints and tools see of a session. */
#ifndef TG_RUNTIME_SESSION_INTERNAL_H
#define TG_RUNTIME_SESSION_INTERNAL_H

#include "tilegraph/session.h"

#include "compile/program.h"

/* The bytes of tensor t in the session's arena, or NULL if not stored. */
void *tg_session_data(const tg_session *s, const tg_tensor *t);
const tg_program *tg_session_program(const tg_session *s);
const tg_graph *tg_session_graph(const tg_session *s);

#endif
