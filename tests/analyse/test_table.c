/* tests/analyse/test_table.c - the view table (analyse/table.c): every row
 * has a builder and a --help line, names are unique, and an unknown name's
 * error lists every view from the table.
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "analyse/analyse.h"

#include <string.h>

static void test_rows_are_complete(void)
{
    int n = 0;
    for (const tg_an_view_def *d = tg_an_views; d->name; d++, n++) {
        TG_CHECK(d->build != NULL);
        TG_CHECK(d->about != NULL && d->about[0] != '\0');
        TG_CHECK(tg_an_view_find(d->name) == d); /* unique: the first row of its name */
        TG_CHECK(tg_view_known(d->name));
    }
    TG_CHECK(n >= 10);
    TG_CHECK(!tg_view_known("flamegraph") && tg_an_view_find("") == NULL);
}

static void test_unknown_view_lists_the_table(void)
{
    tg_an_filter f;
    tg_view_filter_defaults(&f);
    tg_an_view v;
    memset(&v, 0, sizeof v);
    /* the name is looked up before the profile is read: no profile needed */
    TG_CHECK(tg_an_build(NULL, "flamegraph", &f, &v) == TG_ERR_INVALID_ARG);
    const char *msg = tg_error_message();
    TG_CHECK(strstr(msg, "unknown view 'flamegraph'") != NULL);
    for (const tg_an_view_def *d = tg_an_views; d->name; d++)
        TG_CHECK(strstr(msg, d->name) != NULL);
    tg_an_view_free(&v);
}

static void test_list_joins(void)
{
    char buf[256];
    tg_view_list(buf, sizeof buf, ", ", " or ", "all");
    TG_CHECK(strncmp(buf, "summary, insights, ", 19) == 0);
    TG_CHECK(strstr(buf, ", instances or all") != NULL);
    char tiny[8];
    tg_view_list(tiny, sizeof tiny, "|", "|", NULL); /* truncated, terminated */
    TG_CHECK(strlen(tiny) < sizeof tiny);
}

int main(void)
{
    TG_RUN(test_rows_are_complete);
    TG_RUN(test_unknown_view_lists_the_table);
    TG_RUN(test_list_joins);
    return tg_test_finish();
}
