/* ops/compare.h - the params of CAST, COMPARE and LOGICAL (ops/compare.c)
 * and the element rules their reference and every backend's kernel share,
 * named once here. */
#ifndef TG_OPS_COMPARE_H
#define TG_OPS_COMPARE_H

#include "ops/op.h"

#include "core/check.h"

#include <stdbool.h>
#include <stdint.h>

/* CAST: the output dtype (TG_F32 or TG_I32). */
TG_PARAM_I(cast, to, 0)
/* COMPARE: a TG_CMP_*; LOGICAL: a TG_LOGIC_*. */
TG_PARAM_I(compare, kind, 0)

/* The kinds of COMPARE and LOGICAL. */
enum { TG_CMP_EQ, TG_CMP_LT, TG_CMP_LE, TG_CMP_GT, TG_CMP_GE, TG_CMP_COUNT };
enum { TG_LOGIC_AND, TG_LOGIC_OR, TG_LOGIC_XOR, TG_LOGIC_NOT, TG_LOGIC_COUNT };

/* CAST to i32 (ops/compare.c's top): truncates toward zero, saturates, NaN
 * to 0; the reference and every backend's kernel alike. */
static inline int32_t tg_to_i32(double v)
{
    if (!(v == v))
        return 0;
    if (v >= 2147483647.0)
        return INT32_MAX;
    if (v <= -2147483648.0)
        return INT32_MIN;
    return (int32_t)v; /* truncates toward zero */
}

static inline bool tg_compare_one(int kind, double x, double y)
{
    switch (kind) {
    case TG_CMP_EQ:
        return x == y;
    case TG_CMP_LT:
        return x < y;
    case TG_CMP_LE:
        return x <= y;
    case TG_CMP_GT:
        return x > y;
    case TG_CMP_GE:
        return x >= y;
    default:
        TG_UNREACHABLE("comparison", kind);
    }
}

static inline bool tg_logic_one(int kind, bool x, bool y)
{
    switch (kind) {
    case TG_LOGIC_AND:
        return x && y;
    case TG_LOGIC_OR:
        return x || y;
    case TG_LOGIC_XOR:
        return x != y;
    case TG_LOGIC_NOT:
        return !x;
    default:
        TG_UNREACHABLE("logical op", kind);
    }
}

/* One output value from the inputs' values at offsets off (in double: exact
 * for every f32 and i32 operand, so the fast and reference kernels agree). */
static inline double tg_compare_element(const tg_tensor *node, const double *v)
{
    switch (node->op) {
    case TG_OP_COMPARE:
        return tg_compare_one((int)tg_compare_kind(node), v[0], v[1]);
    case TG_OP_LOGICAL:
        return tg_logic_one((int)tg_compare_kind(node), v[0] != 0, node->n_in > 1 && v[1] != 0);
    case TG_OP_WHERE:
        return v[0] != 0 ? v[1] : v[2];
    default:
        TG_UNREACHABLE_OP(node->op);
    }
}

#endif
