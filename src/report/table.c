/* report/table.c - building a view's tables (report/table.h): tables, rows,
 * notes, and the numbers formatted for people. */
#include "report/table.h"

#include "core/alloc.h"
#include "core/units.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

void tg_an_view_free(tg_an_view *v)
{
    for (int t = 0; t < v->n_tables; t++) {
        tg_an_table *tb = &v->tables[t];
        for (int i = 0; i < tb->n_rows * tb->n_cols; i++)
            tg_free(tb->cells[i].text);
        for (int c = 0; c < tb->n_cols; c++)
            tg_free(tb->cols[c]);
        tg_free(tb->cells);
        tg_free(tb->title);
    }
    tg_free(v->tables);
    for (int i = 0; i < v->n_notes; i++)
        tg_free(v->notes[i]);
    tg_free(v->notes);
    memset(v, 0, sizeof *v);
}

bool tg_an_kind_is_text(tg_an_kind k)
{
    return k == TG_AN_TEXT || k == TG_AN_LABEL || k == TG_AN_BAR;
}

static char *dup_or_empty(const char *s)
{
    return tg_strdup(s ? s : "");
}

tg_an_table *tg_an_table_add(tg_an_view *v, const char *title, int n_cols, const char *const *cols,
                             const tg_an_kind *kinds)
{
    tg_an_table *grown = tg_realloc(v->tables, sizeof *grown * (size_t)(v->n_tables + 1));
    if (!grown)
        return NULL;
    v->tables = grown;
    tg_an_table *t = &v->tables[v->n_tables++];
    memset(t, 0, sizeof *t);
    t->title = dup_or_empty(title);
    t->n_cols = n_cols < TG_AN_MAX_COLS ? n_cols : TG_AN_MAX_COLS;
    for (int c = 0; c < t->n_cols; c++) {
        t->cols[c] = dup_or_empty(cols[c]);
        t->kinds[c] = kinds[c];
    }
    return t;
}

/* Room for one more row: its cells (the caller fills them and counts the
 * row), or NULL when out of memory (the row is then dropped). */
static tg_an_cell *next_row(tg_an_table *t)
{
    if (t->n_rows == t->cap_rows) {
        int cap = t->cap_rows ? 2 * t->cap_rows : 16;
        tg_an_cell *c = tg_realloc(t->cells, sizeof *c * (size_t)cap * (size_t)t->n_cols);
        if (!c)
            return NULL;
        t->cells = c;
        t->cap_rows = cap;
    }
    return &t->cells[(size_t)t->n_rows * (size_t)t->n_cols];
}

void tg_an_row_numbers(tg_an_table *t, const char *label, const double *nums)
{
    tg_an_cell *row = t ? next_row(t) : NULL;
    if (!row)
        return;
    row[0] = (tg_an_cell){0, dup_or_empty(label)};
    for (int c = 1; c < t->n_cols; c++)
        row[c] = (tg_an_cell){nums[c - 1], NULL};
    t->n_rows++;
}

void tg_an_row(tg_an_table *t, ...)
{
    tg_an_cell *row = t ? next_row(t) : NULL;
    if (!row)
        return;
    va_list ap;
    va_start(ap, t);
    for (int c = 0; c < t->n_cols; c++) {
        if (tg_an_kind_is_text(t->kinds[c])) {
            row[c].text = dup_or_empty(va_arg(ap, const char *));
            row[c].num = 0;
        } else {
            row[c].text = NULL;
            row[c].num = va_arg(ap, double);
        }
    }
    va_end(ap);
    t->n_rows++;
}

void tg_an_table_truncate(tg_an_table *t, int n)
{
    if (n < 0 || n >= t->n_rows)
        return;
    for (size_t i = (size_t)n * (size_t)t->n_cols; i < (size_t)t->n_rows * (size_t)t->n_cols; i++)
        tg_free(t->cells[i].text);
    t->n_rows = n;
}

void tg_an_note(tg_an_view *v, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **n = tg_realloc(v->notes, sizeof *n * (size_t)(v->n_notes + 1));
    if (!n)
        return;
    v->notes = n;
    v->notes[v->n_notes++] = tg_strdup(buf);
}

char *tg_an_format_fixed(double v, int decimals, char *buf, size_t cap)
{
    double a = fabs(v);
    if (!isfinite(v) || a >= 1e21) { /* beyond any count a profile holds (damaged) */
        snprintf(buf, cap, "%.4g", v);
        return buf;
    }
    if (decimals < 0) /* four significant figures, never an exponent */
        decimals = a >= 1000 || a == 0 ? 0 : a >= 100 ? 1 : a >= 10 ? 2 : a >= 1 ? 3 : 4;
    if (a > 0 && a < 1e-4)
        decimals = 6;
    char digits[64];
    snprintf(digits, sizeof digits, "%.*f", decimals, a);
    const char *point = strchr(digits, '.');
    size_t whole = point ? (size_t)(point - digits) : strlen(digits), n = 0;
    char out[96];
    if (v < 0 && strspn(digits, "0.") != strlen(digits))
        out[n++] = '-';
    for (size_t i = 0; i < whole; i++) { /* thousands grouped: 11,090 */
        if (i && (whole - i) % 3 == 0)
            out[n++] = ',';
        out[n++] = digits[i];
    }
    snprintf(out + n, sizeof out - n, "%s", point ? point : "");
    snprintf(buf, cap, "%s", out);
    return buf;
}

char *tg_an_format(tg_an_kind k, double v, char *buf, size_t cap)
{
    if (isnan(v)) {
        snprintf(buf, cap, "\xe2\x80\x94"); /* em dash: no value */
        return buf;
    }
    switch (k) {
    case TG_AN_BYTES:
        if (v < 0) {
            tg_bytes_str(-v, buf + 1, cap - 1);
            buf[0] = '-';
            return buf;
        }
        return tg_bytes_str(v, buf, cap);
    case TG_AN_NS: {
        double a = v < 0 ? -v : v, s = a * 1e-9;
        const char *sign = v < 0 ? "-" : "";
        if (a < 1e3)
            snprintf(buf, cap, "%s%.0f ns", sign, a);
        else if (a < 1e6)
            snprintf(buf, cap, "%s%.1f us", sign, a / 1e3);
        else if (a < 1e9)
            snprintf(buf, cap, "%s%.2f ms", sign, a / 1e6);
        else
            snprintf(buf, cap, "%s%.3f s", sign, s);
        return buf;
    }
    case TG_AN_FRAC:
        snprintf(buf, cap, "%.1f%%", v * 100);
        return buf;
    case TG_AN_ID:
        snprintf(buf, cap, "%.0f", v);
        return buf;
    case TG_AN_COUNT:
    case TG_AN_NUM:
        return tg_an_format_fixed(v, k == TG_AN_COUNT ? 0 : -1, buf, cap);
    default:
        snprintf(buf, cap, "%g", v);
        return buf;
    }
}

void tg_an_bar(double frac, bool keep_visible, char *buf, size_t cap)
{
    enum { WIDTH = 30 };
    /* a damaged profile gives negative, huge or NaN shares: draw 0..1 */
    frac = frac > 0 ? (frac < 1 ? frac : 1) : 0;
    int eighths = (int)(frac * WIDTH * 8 + 0.5), used = 0;
    static const char *const parts[] = {"",
                                        "\xe2\x96\x8f",
                                        "\xe2\x96\x8e",
                                        "\xe2\x96\x8d",
                                        "\xe2\x96\x8c",
                                        "\xe2\x96\x8b",
                                        "\xe2\x96\x8a",
                                        "\xe2\x96\x89"};
    buf[0] = '\0';
    if (keep_visible && frac > 0 && eighths == 0)
        eighths = 1;
    for (int i = 0; i < eighths / 8 && used + 4 < (int)cap; i++)
        used += snprintf(buf + used, cap - (size_t)used, "\xe2\x96\x88"); /* full block */
    if (eighths % 8 && used + 4 < (int)cap)
        snprintf(buf + used, cap - (size_t)used, "%s", parts[eighths % 8]);
}
