/* tests/core/test_check.c - core/check.h: TG_UNREACHABLE aborts in every
 * build naming the file, line, what and value; TG_ASSERT aborts naming the
 * expression where it is on (debug and sanitizer builds, -DTILEGRAPH_ASSERT)
 * and does not even evaluate its condition where it is off (Release).
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "core/check.h"

static void unreachable_mode(void *ctx)
{
    int mode = *(const int *)ctx;
    TG_UNREACHABLE("pad mode", mode);
}

static int evaluated;

static int side_effect(void)
{
    evaluated++;
    return 0;
}

static void assert_false(void *ctx)
{
    (void)ctx;
    TG_ASSERT(side_effect() == 1);
}

static void test_unreachable_aborts(void)
{
    int mode = 7;
    TG_CHECK_ABORTS(unreachable_mode, &mode, "test_check.c:");
    TG_CHECK_ABORTS(unreachable_mode, &mode, ": unreachable: pad mode 7");
}

static void test_assert(void)
{
    if (TG_ASSERT_ON) {
        TG_CHECK_ABORTS(assert_false, NULL, "assertion failed: side_effect() == 1");
        evaluated = 0;
        TG_ASSERT(side_effect() == 0); /* true: no abort, evaluated once */
        TG_CHECK(evaluated == 1);
    } else {
        evaluated = 0;
        assert_false(NULL); /* off: neither aborts nor calls side_effect */
        TG_CHECK(evaluated == 0);
    }
    printf("  TG_ASSERT is %s in this build\n", TG_ASSERT_ON ? "on" : "off");
}

int main(void)
{
    TG_RUN(test_unreachable_aborts);
    TG_RUN(test_assert);
    return tg_test_finish();
}
