/* analyse/compare.c - two reports side by side, like the Graph Analyser's
 * comparison: for each table of a view, rows matched by key (TEXT and ID
 * cells, with a running count so repeated keys pair up in order; by hash,
 * so linear in the rows), and for
 * every numeric column the source, the target and the difference, absolute
 * and relative. A row in one report only is marked "only in A" / "only in B"
 * and compared against nothing (the Graph Analyser's dash and -100%). */
#include "analyse/analyse.h"

#include "core/alloc.h"
#include "core/error.h"
#include "profile/reader.h"

#include <math.h>
#include <string.h>

static bool is_key(tg_an_kind k)
{
    return k == TG_AN_TEXT || k == TG_AN_ID;
}

static const tg_an_cell *cell(const tg_an_table *t, int r, int c)
{
    return &t->cells[(size_t)r * (size_t)t->n_cols + (size_t)c];
}

/* The key of row r, with the occurrence number of that key before it. */
static void row_key(const tg_an_table *t, int r, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int c = 0; c < t->n_cols && used < cap; c++) {
        if (!is_key(t->kinds[c]))
            continue;
        const tg_an_cell *x = cell(t, r, c);
        int n = t->kinds[c] == TG_AN_TEXT ? snprintf(buf + used, cap - used, "%s\x1f", x->text)
                                          : snprintf(buf + used, cap - used, "%.0f\x1f", x->num);
        used += n > 0 ? (size_t)n : 0;
    }
}

/* Rows matched by hash, so a million-row table compares in linear time: a
 * row's full key is its key plus its occurrence number ("\x1e" and the count
 * of rows with that key before it), which pairs repeated keys in order. */
typedef struct str_map {
    size_t cap; /* a power of two, at least twice the entries */
    const char **keys;
    int *vals;
} str_map;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool map_init(str_map *m, int n)
{
    m->cap = 16;
    while (m->cap < 2 * (size_t)n + 2)
        m->cap *= 2;
    m->keys = tg_calloc(m->cap, sizeof *m->keys);
    m->vals = tg_calloc(m->cap, sizeof *m->vals);
    return m->keys && m->vals;
}

static void map_free(str_map *m)
{
    tg_free(m->keys);
    tg_free(m->vals);
}

/* The value slot of `key` (owned by the caller, kept alive as long as the
 * map); with `insert`, a new slot (value 0) when absent; else NULL. */
static int *map_slot(str_map *m, const char *key, bool insert)
{
    size_t i = hash_str(key) & (m->cap - 1);
    while (m->keys[i]) {
        if (!strcmp(m->keys[i], key))
            return &m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    if (!insert)
        return NULL;
    m->keys[i] = key;
    m->vals[i] = 0;
    return &m->vals[i];
}

typedef struct keyed_rows {
    int n;
    char **full;  /* each row's full key, owned */
    str_map rows; /* full key -> row */
} keyed_rows;

static void keyed_free(keyed_rows *k)
{
    for (int r = 0; k->full && r < k->n; r++)
        tg_free(k->full[r]);
    tg_free(k->full);
    map_free(&k->rows);
}

static tg_status keyed_build(const tg_an_table *t, keyed_rows *k)
{
    memset(k, 0, sizeof *k);
    k->n = t->n_rows;
    str_map counts = {0};
    char **plain = tg_calloc((size_t)t->n_rows + 1, sizeof *plain);
    k->full = tg_calloc((size_t)t->n_rows + 1, sizeof *k->full);
    bool ok = plain && k->full && map_init(&counts, t->n_rows) && map_init(&k->rows, t->n_rows);
    char key[1024], full[1040];
    for (int r = 0; ok && r < t->n_rows; r++) {
        row_key(t, r, key, sizeof key);
        ok = (plain[r] = tg_strdup(key)) != NULL;
        if (!ok)
            break;
        int occurrence = (*map_slot(&counts, plain[r], true))++;
        snprintf(full, sizeof full, "%s\x1e%d", key, occurrence);
        ok = (k->full[r] = tg_strdup(full)) != NULL;
        if (ok)
            *map_slot(&k->rows, k->full[r], true) = r;
    }
    for (int r = 0; plain && r < t->n_rows; r++)
        tg_free(plain[r]);
    tg_free(plain);
    map_free(&counts);
    if (!ok) {
        keyed_free(k);
        return tg_error(TG_ERR_NOMEM, "out of memory matching the rows of '%s'", t->title);
    }
    return TG_OK;
}

/* The row of `k` with full key `full`, or -1. */
static int keyed_find(keyed_rows *k, const char *full)
{
    int *slot = map_slot(&k->rows, full, false);
    return slot ? *slot : -1;
}

static bool same_columns(const tg_an_table *a, const tg_an_table *b)
{
    if (a->n_cols != b->n_cols)
        return false;
    for (int c = 0; c < a->n_cols; c++)
        if (a->kinds[c] != b->kinds[c] || strcmp(a->cols[c], b->cols[c]))
            return false;
    return true;
}

/* Build the compared table's columns: keys once; labels A | B; numbers
 * A | B | diff | diff %; bars dropped. Returns the column count. */
static int layout(const tg_an_table *a, char names[][64], tg_an_kind *kinds, int *src, int *what)
{
    int n = 0;
    for (int c = 0; c < a->n_cols; c++) {
        tg_an_kind k = a->kinds[c];
        if (k == TG_AN_BAR)
            continue;
        if (is_key(k)) {
            if (n + 1 > TG_AN_MAX_COLS - 1)
                break;
            snprintf(names[n], 64, "%s", a->cols[c]);
            kinds[n] = k, src[n] = c, what[n++] = 0;
        } else if (k == TG_AN_LABEL) {
            if (n + 2 > TG_AN_MAX_COLS - 1)
                break;
            snprintf(names[n], 64, "%s (A)", a->cols[c]);
            kinds[n] = k, src[n] = c, what[n++] = 1;
            snprintf(names[n], 64, "%s (B)", a->cols[c]);
            kinds[n] = k, src[n] = c, what[n++] = 2;
        } else {
            if (n + 4 > TG_AN_MAX_COLS - 1)
                break;
            const char *cn = a->cols[c][0] ? a->cols[c] : "value";
            snprintf(names[n], 64, "%s (A)", cn);
            kinds[n] = k, src[n] = c, what[n++] = 1;
            snprintf(names[n], 64, "%s (B)", cn);
            kinds[n] = k, src[n] = c, what[n++] = 2;
            snprintf(names[n], 64, "%s diff", cn); /* unique: JSON keys are column names */
            kinds[n] = k == TG_AN_ID ? TG_AN_NUM : k, src[n] = c, what[n++] = 3;
            if (k != TG_AN_FRAC) { /* a relative change of a share says little */
                snprintf(names[n], 64, "%s diff %%", cn);
                kinds[n] = TG_AN_FRAC, src[n] = c, what[n++] = 4;
            }
        }
    }
    snprintf(names[n], 64, "present");
    kinds[n] = TG_AN_LABEL, src[n] = -1, what[n++] = 5;
    return n;
}

static void put_row(tg_an_table *out, const tg_an_table *a, int ra, const tg_an_table *b, int rb,
                    const int *src, const int *what)
{
    if (out->n_rows == out->cap_rows) {
        int cap = out->cap_rows ? 2 * out->cap_rows : 16;
        tg_an_cell *c = tg_realloc(out->cells, sizeof *c * (size_t)cap * (size_t)out->n_cols);
        if (!c)
            return;
        out->cells = c;
        out->cap_rows = cap;
    }
    tg_an_cell *row = &out->cells[(size_t)out->n_rows * (size_t)out->n_cols];
    const tg_an_table *keyt = ra >= 0 ? a : b;
    int keyr = ra >= 0 ? ra : rb;
    for (int c = 0; c < out->n_cols; c++) {
        row[c].text = NULL;
        row[c].num = NAN;
        int s = src[c];
        switch (what[c]) {
        case 0:
            if (out->kinds[c] == TG_AN_TEXT)
                row[c].text = tg_strdup(cell(keyt, keyr, s)->text);
            else
                row[c].num = cell(keyt, keyr, s)->num;
            break;
        case 1:
        case 2: {
            const tg_an_table *t = what[c] == 1 ? a : b;
            int r = what[c] == 1 ? ra : rb;
            if (out->kinds[c] == TG_AN_LABEL)
                row[c].text = tg_strdup(r >= 0 ? cell(t, r, s)->text : "\xe2\x80\x94");
            else if (r >= 0)
                row[c].num = cell(t, r, s)->num;
            break;
        }
        case 3:
        case 4: {
            double x = ra >= 0 ? cell(a, ra, s)->num : 0, y = rb >= 0 ? cell(b, rb, s)->num : 0;
            if (isnan(x) || isnan(y))
                break;
            if (what[c] == 3)
                row[c].num = y - x;
            else if (x != 0)
                row[c].num = (y - x) / fabs(x);
            else if (y != 0)
                row[c].num = 1; /* from nothing: +100%, as the Graph Analyser shows it */
            else
                row[c].num = 0;
            break;
        }
        case 5:
            row[c].text = tg_strdup(ra < 0 ? "only in B" : rb < 0 ? "only in A" : "");
            break;
        }
    }
    out->n_rows++;
}

static tg_status compare_table(const tg_an_table *a, const tg_an_table *b, tg_an_view *out)
{
    char names[TG_AN_MAX_COLS][64];
    const char *np[TG_AN_MAX_COLS];
    tg_an_kind kinds[TG_AN_MAX_COLS];
    int src[TG_AN_MAX_COLS], what[TG_AN_MAX_COLS];
    int n = layout(a, names, kinds, src, what);
    for (int i = 0; i < n; i++)
        np[i] = names[i];
    tg_an_table *t = tg_an_table_add(out, a->title, n, np, kinds);
    if (!t)
        return tg_error(TG_ERR_NOMEM, "out of memory comparing '%s'", a->title);
    keyed_rows ka, kb;
    TG_TRY(keyed_build(a, &ka));
    if (b) {
        tg_status s = keyed_build(b, &kb);
        if (s != TG_OK) {
            keyed_free(&ka);
            return s;
        }
    }
    /* A's rows in A's order, then B's rows that A lacks */
    for (int r = 0; r < a->n_rows; r++)
        put_row(t, a, r, b, b ? keyed_find(&kb, ka.full[r]) : -1, src, what);
    if (b)
        for (int r = 0; r < b->n_rows; r++)
            if (keyed_find(&ka, kb.full[r]) < 0)
                put_row(t, a, -1, b, r, src, what);
    keyed_free(&ka);
    if (b)
        keyed_free(&kb);
    return TG_OK;
}

/* The per-device top-tile lists (tiled targets) hold every tile when
 * compared (compare lifts --top), thousands of rows of unrelated tiles. */
static bool skip_table(const tg_an_table *t)
{
    return !strncmp(t->title, "Top tiles", 9);
}

tg_status tg_an_compare(const tg_an_view *a, const tg_an_view *b, tg_an_view *out)
{
    out->name = a->name;
    bool skipped_top_tiles = false;
    for (int i = 0; i < a->n_tables; i++) {
        const tg_an_table *ta = &a->tables[i], *tb = NULL;
        if (skip_table(ta)) {
            skipped_top_tiles = true;
            continue;
        }
        for (int j = 0; j < b->n_tables && !tb; j++)
            if (!strcmp(b->tables[j].title, ta->title) && same_columns(ta, &b->tables[j]))
                tb = &b->tables[j];
        TG_TRY(compare_table(ta, tb, out));
    }
    /* tables B has and A lacks (a fifth device, say): B's side only */
    for (int j = 0; j < b->n_tables; j++) {
        const tg_an_table *tb = &b->tables[j];
        if (skip_table(tb)) {
            skipped_top_tiles = true;
            continue;
        }
        bool found = false;
        for (int i = 0; i < a->n_tables && !found; i++)
            found = !strcmp(a->tables[i].title, tb->title) && same_columns(&a->tables[i], tb);
        if (found)
            continue;
        tg_an_table empty = *tb;
        empty.n_rows = 0;
        TG_TRY(compare_table(&empty, tb, out));
    }
    if (skipped_top_tiles)
        tg_an_note(out, "top tiles are not compared: each report's largest tiles are different "
                        "tiles, so matching them by device and tile says little; the tile "
                        "memory per device and the histograms are compared above, and "
                        "--tile N compares one tile of both");
    for (int i = 0; i < a->n_notes; i++)
        tg_an_note(out, "A: %s", a->notes[i]);
    for (int i = 0; i < b->n_notes; i++)
        tg_an_note(out, "B: %s", b->notes[i]);
    return TG_OK;
}

tg_status tg_analyse_comparable(tg_profile_reader *a, tg_profile_reader *b)
{
    static const char *const keys[] = {"target", "program"};
    for (int i = 0; i < 2; i++) {
        char va[128];
        snprintf(va, sizeof va, "%s", tg_profile_reader_meta(a, keys[i]));
        const char *vb = tg_profile_reader_meta(b, keys[i]);
        if (strcmp(va, vb))
            return tg_error(TG_ERR_CONFIG,
                            "cannot compare %s (%s '%s') with %s (%s '%s'): different %ss "
                            "(--force compares them anyway)",
                            tg_profile_reader_path(a), keys[i], va, tg_profile_reader_path(b),
                            keys[i], vb, keys[i]);
    }
    return TG_OK;
}
