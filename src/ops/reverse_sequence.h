/* ops/reverse_sequence.h - the params of REVERSE_SEQUENCE
 * (ops/reverse_sequence.c), named once here. */
#ifndef TG_OPS_REVERSE_SEQUENCE_H
#define TG_OPS_REVERSE_SEQUENCE_H

#include "ops/op.h"

TG_PARAM_I(reverse_sequence, batch_axis, 0) /* the axis lens[] indexes */
TG_PARAM_I(reverse_sequence, time_axis, 1)  /* the axis reversed */

#endif
