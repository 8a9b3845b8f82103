/* ops/leaf.c - leaves: inputs, parameters, state and constants.
 *
 * Leaves have no kernel: the engine fills them from the host (inputs), from
 * their initialiser (parameters, state, constants) or from a checkpoint.
 */
#include "ops/op.h"

const tg_op_def tg_opdef_INPUT = {.memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_PARAM = {.memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_STATE = {.memory = TG_OP_OWN_STORAGE};
const tg_op_def tg_opdef_CONSTANT = {.memory = TG_OP_OWN_STORAGE};
