/* tests/analyse/test_compare.c - the comparison of two views (compare.c):
 * rows matched by key with repeated keys paired in order, rows of one side
 * marked "only in A"/"only in B", and the matching linear in the rows (a
 * million-tile description made the old pairwise matching run for minutes:
 * issue 17, H4). */
#include "tg_test.h"

#include "analyse/analyse.h"
#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const cols[] = {"tensor", "device", "bytes"};
static const tg_an_kind kinds[] = {TG_AN_TEXT, TG_AN_ID, TG_AN_BYTES};

/* The compared table's column index named `name`, or -1. */
static int col(const tg_an_table *t, const char *name)
{
    for (int c = 0; c < t->n_cols; c++)
        if (!strcmp(t->cols[c], name))
            return c;
    return -1;
}

static const tg_an_cell *at(const tg_an_table *t, int r, int c)
{
    return &t->cells[(size_t)r * (size_t)t->n_cols + (size_t)c];
}

static void test_repeated_keys_and_one_side(void)
{
    tg_an_view a = {0}, b = {0}, out = {0};
    tg_an_table *ta = tg_an_table_add(&a, "T", 3, cols, kinds);
    tg_an_row(ta, "w", 0.0, 10.0);
    tg_an_row(ta, "w", 0.0, 20.0); /* the second "w" of device 0 */
    tg_an_row(ta, "x", 1.0, 5.0);
    tg_an_table *tb = tg_an_table_add(&b, "T", 3, cols, kinds);
    tg_an_row(tb, "w", 0.0, 11.0);
    tg_an_row(tb, "y", 0.0, 7.0);
    tg_an_row(tb, "w", 0.0, 22.0);
    TG_CHECK_OK(tg_an_compare(&a, &b, &out));
    TG_CHECK(out.n_tables == 1);
    const tg_an_table *t = &out.tables[0];
    int ca = col(t, "bytes (A)"), cb = col(t, "bytes (B)"), cp = col(t, "present");
    TG_CHECK(ca >= 0 && cb >= 0 && cp >= 0);
    TG_CHECK(t->n_rows == 4);
    if (t->n_rows == 4 && ca >= 0 && cb >= 0 && cp >= 0) {
        TG_CHECK(at(t, 0, ca)->num == 10 && at(t, 0, cb)->num == 11);
        TG_CHECK(at(t, 1, ca)->num == 20 && at(t, 1, cb)->num == 22);
        TG_CHECK(at(t, 2, ca)->num == 5 && !strcmp(at(t, 2, cp)->text, "only in A"));
        TG_CHECK(!strcmp(at(t, 3, 0)->text, "y") && !strcmp(at(t, 3, cp)->text, "only in B"));
    }
    tg_an_view_free(&a);
    tg_an_view_free(&b);
    tg_an_view_free(&out);
}

/* 300,000 rows a side, in opposite orders, one missing on each side: a
 * pairwise matching does 9e10 key comparisons; by hash it takes a moment. */
static void test_large_tables_linear(void)
{
    enum { N = 300000 };
    tg_an_view a = {0}, b = {0}, out = {0};
    tg_an_table *ta = tg_an_table_add(&a, "Big", 3, cols, kinds);
    tg_an_table *tb = tg_an_table_add(&b, "Big", 3, cols, kinds);
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "t%d", i);
        if (i != 7)
            tg_an_row(ta, name, (double)(i % 4), (double)i);
        snprintf(name, sizeof name, "t%d", N - 1 - i);
        if (N - 1 - i != 9)
            tg_an_row(tb, name, (double)((N - 1 - i) % 4), 2.0 * (N - 1 - i));
    }
    clock_t c0 = clock();
    TG_CHECK_OK(tg_an_compare(&a, &b, &out));
    double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
    printf("  compare: %.2f s\n", secs);
    TG_CHECK(secs < 20);
    const tg_an_table *t = &out.tables[0];
    int cb = col(t, "bytes (B)"), cp = col(t, "present");
    TG_CHECK(t->n_rows == N);
    int only_a = 0, only_b = 0, matched_right = 0;
    for (int r = 0; r < t->n_rows && cb >= 0 && cp >= 0; r++) {
        const char *p = at(t, r, cp)->text;
        only_a += !strcmp(p, "only in A");
        only_b += !strcmp(p, "only in B");
        int i = atoi(at(t, r, 0)->text + 1);
        matched_right += !p[0] && at(t, r, cb)->num == 2.0 * i;
    }
    TG_CHECK(only_a == 1 && only_b == 1);
    TG_CHECK(matched_right == N - 2);
    tg_an_view_free(&a);
    tg_an_view_free(&b);
    tg_an_view_free(&out);
}

int main(void)
{
    int64_t live = tg_alloc_live_bytes();
    TG_RUN(test_repeated_keys_and_one_side);
    TG_RUN(test_large_tables_linear);
    tg_test_check_no_leak(live);
    return tg_test_finish();
}
