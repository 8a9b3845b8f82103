/* report/render.c - printing a view: aligned text tables for people, one
 * JSON object for scripts (numbers raw: bytes, nanoseconds, fractions). */
#include "report/table.h"

#include "core/alloc.h"
#include "core/json.h"

#include <string.h>

/* Display width of UTF-8 text (counts code points, not bytes), so the
 * liveness bars made of block characters line up. */
static int width(const char *s)
{
    int w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

/* Spaces are held back until something follows them, so lines never end in
 * blanks (an empty last column, a bar of zero length). */
typedef struct {
    FILE *out;
    int pending;
} line_out;

static void pad(line_out *l, int n)
{
    l->pending += n > 0 ? n : 0;
}

static void put(line_out *l, const char *s)
{
    if (!*s)
        return;
    for (; l->pending > 0; l->pending--)
        fputc(' ', l->out);
    fputs(s, l->out);
}

static void end_line(line_out *l)
{
    l->pending = 0;
    fputc('\n', l->out);
}

static const char *cell_text(const tg_an_table *t, int r, int c, char *buf, size_t cap)
{
    const tg_an_cell *cell = &t->cells[(size_t)r * (size_t)t->n_cols + (size_t)c];
    if (tg_an_kind_is_text(t->kinds[c]))
        return cell->text ? cell->text : "";
    return tg_an_format(t->kinds[c], cell->num, buf, cap);
}

static void print_table(const tg_an_table *t, FILE *out)
{
    if (t->title[0])
        fprintf(out, "%s\n", t->title);
    int w[TG_AN_MAX_COLS];
    char buf[64];
    for (int c = 0; c < t->n_cols; c++) {
        w[c] = width(t->cols[c]);
        for (int r = 0; r < t->n_rows; r++) {
            int x = width(cell_text(t, r, c, buf, sizeof buf));
            if (x > w[c])
                w[c] = x;
        }
    }
    /* text columns align left, numbers right; the last text column needs no padding */
    line_out l = {out, 0};
    for (int r = -1; r < t->n_rows; r++) {
        pad(&l, 2);
        for (int c = 0; c < t->n_cols; c++) {
            const char *s = r < 0 ? t->cols[c] : cell_text(t, r, c, buf, sizeof buf);
            int gap = w[c] - width(s);
            if (c)
                pad(&l, 2);
            if (tg_an_kind_is_text(t->kinds[c])) {
                put(&l, s);
                pad(&l, gap);
            } else {
                pad(&l, gap);
                put(&l, s);
            }
        }
        end_line(&l);
    }
    if (t->n_rows == 0)
        fputs("  (none)\n", out);
}

void tg_an_print_text(const tg_an_view *v, FILE *out)
{
    for (int i = 0; i < v->n_tables; i++) {
        if (i)
            fputc('\n', out);
        print_table(&v->tables[i], out);
    }
    if (v->n_notes && v->n_tables)
        fputc('\n', out);
    for (int i = 0; i < v->n_notes; i++)
        fprintf(out, "%s\n", v->notes[i]);
}

tg_status tg_an_view_json(const tg_an_view *v, char **text, size_t *len)
{
    tg_json_writer w;
    tg_json_writer_init(&w);
    tg_json_begin_object(&w);
    tg_json_key(&w, "view");
    tg_json_string(&w, v->name ? v->name : "");
    tg_json_key(&w, "tables");
    tg_json_begin_array(&w);
    for (int i = 0; i < v->n_tables; i++) {
        const tg_an_table *t = &v->tables[i];
        tg_json_begin_object(&w);
        tg_json_key(&w, "title");
        tg_json_string(&w, t->title);
        tg_json_key(&w, "columns");
        tg_json_begin_array(&w);
        for (int c = 0; c < t->n_cols; c++)
            if (t->kinds[c] != TG_AN_BAR)
                tg_json_string(&w, t->cols[c]);
        tg_json_end_array(&w);
        tg_json_key(&w, "rows");
        tg_json_begin_array(&w);
        for (int r = 0; r < t->n_rows; r++) {
            tg_json_begin_object(&w);
            for (int c = 0; c < t->n_cols; c++) {
                const tg_an_cell *cell = &t->cells[(size_t)r * (size_t)t->n_cols + (size_t)c];
                if (t->kinds[c] == TG_AN_BAR)
                    continue; /* a picture of numbers the row already holds */
                tg_json_key(&w, t->cols[c]);
                if (tg_an_kind_is_text(t->kinds[c]))
                    tg_json_string(&w, cell->text ? cell->text : "");
                else
                    tg_json_number(&w, cell->num);
            }
            tg_json_end_object(&w);
        }
        tg_json_end_array(&w);
        tg_json_end_object(&w);
    }
    tg_json_end_array(&w);
    tg_json_key(&w, "notes");
    tg_json_begin_array(&w);
    for (int i = 0; i < v->n_notes; i++)
        tg_json_string(&w, v->notes[i]);
    tg_json_end_array(&w);
    tg_json_end_object(&w);
    *text = NULL;
    *len = 0;
    tg_status s = tg_json_writer_finish(&w, text, len);
    tg_json_writer_free(&w);
    return s;
}

tg_status tg_an_print_json(const tg_an_view *v, FILE *out)
{
    char *text = NULL;
    size_t len = 0;
    tg_status s = tg_an_view_json(v, &text, &len);
    if (s == TG_OK) {
        fwrite(text, 1, len, out);
        fputc('\n', out);
    }
    tg_free(text);
    return s;
}
