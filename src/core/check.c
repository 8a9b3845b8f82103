/* core/check.c - the aborts of core/check.h. */
#include "core/check.h"

#include <stdio.h>
#include <stdlib.h>

void tg_unreachable_fail(const char *file, int line, const char *what, long long value,
                         const char *name)
{
    if (name)
        fprintf(stderr, "%s:%d: unreachable: %s %lld (%s)\n", file, line, what, value, name);
    else
        fprintf(stderr, "%s:%d: unreachable: %s %lld\n", file, line, what, value);
    fflush(stderr);
    abort();
}

void tg_assert_fail(const char *file, int line, const char *expr)
{
    fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}
