/* graph/init.h - filling leaves from their initialiser.
 *
 * The random stream of a leaf depends only on the session seed and the leaf's
 * name, so a parameter gets the same initial values in a training graph and
 * in an inference graph built from the same model, whatever else either holds.
 */
#ifndef TG_GRAPH_INIT_H
#define TG_GRAPH_INIT_H

#include "graph/node.h"

/* Fill dst (tg_numel(t) floats) from t->init. */
void tg_init_fill_f32(const tg_tensor *t, uint64_t seed, float *dst);

#endif
