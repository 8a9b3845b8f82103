/* ops/compare.h - the params of CAST, COMPARE and LOGICAL (ops/compare.c),
 * named once here. */
#ifndef TG_OPS_COMPARE_H
#define TG_OPS_COMPARE_H

#include "ops/op.h"

/* CAST: the output dtype (TG_F32 or TG_I32). */
TG_PARAM_I(cast, to, 0)
/* COMPARE: a TG_CMP_*; LOGICAL: a TG_LOGIC_*. */
TG_PARAM_I(compare, kind, 0)

#endif
