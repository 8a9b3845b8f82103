/* analyse/api.c - the analyser's public handle (tilegraph/analyse.h): a
 * tg_view is the view the library builds (report/table.h) behind a pointer,
 * so the command and other programs use views without their tables' layout. */
#include "analyse/analyse.h"

#include "core/alloc.h"
#include "core/error.h"

#include <string.h>

struct tg_view {
    tg_an_view v;
};

int tg_view_count(void)
{
    int n = 0;
    while (tg_an_views[n].name)
        n++;
    return n;
}

const char *tg_view_name(int i)
{
    return i >= 0 && i < tg_view_count() ? tg_an_views[i].name : NULL;
}

const char *tg_view_about(int i)
{
    return i >= 0 && i < tg_view_count() ? tg_an_views[i].about : NULL;
}

static tg_status view_new(tg_view **out)
{
    *out = tg_calloc(1, sizeof **out);
    return *out ? TG_OK : tg_error(TG_ERR_NOMEM, "out of memory for a view");
}

tg_status tg_view_build(tg_profile_reader *r, const char *name, const tg_view_filter *f,
                        tg_view **out)
{
    TG_TRY(view_new(out));
    tg_status s = tg_an_build(r, name, f, &(*out)->v);
    if (s != TG_OK) {
        tg_view_destroy(*out);
        *out = NULL;
    }
    return s;
}

tg_status tg_view_compare(const tg_view *a, const tg_view *b, int top, tg_view **out)
{
    TG_TRY(view_new(out));
    tg_an_view *v = &(*out)->v;
    tg_status s = tg_an_compare(&a->v, &b->v, v);
    if (s != TG_OK) {
        tg_view_destroy(*out);
        *out = NULL;
        return s;
    }
    /* the lists were compared whole (so "only in" is true); now shorten them */
    for (int i = 0; i < v->n_tables; i++)
        if (!strncmp(v->tables[i].title, "Largest", 7) ||
            !strncmp(v->tables[i].title, "Per op,", 7))
            tg_an_table_truncate(&v->tables[i], top);
    return TG_OK;
}

void tg_view_print_text(const tg_view *v, FILE *out)
{
    tg_an_print_text(&v->v, out);
}

tg_status tg_view_print_json(const tg_view *v, FILE *out)
{
    return tg_an_print_json(&v->v, out);
}

void tg_view_destroy(tg_view *v)
{
    if (!v)
        return;
    tg_an_view_free(&v->v);
    tg_free(v);
}

char *tg_format_bytes(double bytes, char *buf, size_t cap)
{
    return tg_an_format(TG_AN_BYTES, bytes, buf, cap);
}
