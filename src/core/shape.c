/* core/shape.c - shape construction, element counts and printing. */
#include "tilegraph/shape.h"

#include <stdio.h>

tg_shape tg_shape_of(int ndim, const int64_t *dims)
{
    tg_shape s;
    s.ndim = ndim < 0 ? 0 : (ndim > TG_MAX_DIMS ? TG_MAX_DIMS : ndim);
    for (int i = 0; i < TG_MAX_DIMS; i++)
        s.dim[i] = i < s.ndim ? dims[i] : 1;
    return s;
}

tg_shape tg_shape1(int64_t a)
{
    return tg_shape_of(1, (int64_t[]){a});
}
tg_shape tg_shape2(int64_t a, int64_t b)
{
    return tg_shape_of(2, (int64_t[]){a, b});
}
tg_shape tg_shape3(int64_t a, int64_t b, int64_t c)
{
    return tg_shape_of(3, (int64_t[]){a, b, c});
}
tg_shape tg_shape4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    return tg_shape_of(4, (int64_t[]){a, b, c, d});
}

int64_t tg_shape_numel(tg_shape s)
{
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++)
        n *= s.dim[i];
    return n;
}

bool tg_shape_equal(tg_shape a, tg_shape b)
{
    if (a.ndim != b.ndim)
        return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.dim[i] != b.dim[i])
            return false;
    return true;
}

char *tg_shape_str(tg_shape s, char *buf, size_t cap)
{
    size_t used = 0;
    if (cap == 0)
        return buf;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < s.ndim && used < cap; i++)
        used +=
            (size_t)snprintf(buf + used, cap - used, i ? ", %lld" : "%lld", (long long)s.dim[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
    return buf;
}
