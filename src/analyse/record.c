/* analyse/record.c - flat JSON records, one per line (analyse/analyse.h). */
#include "analyse/analyse.h"

#include "core/alloc.h"
#include "core/json.h"

static void write_field(tg_json_writer *w, const tg_record_field *f)
{
    tg_json_key(w, f->key);
    if (f->kind == TG_RECORD_STRING)
        tg_json_string(w, f->s);
    else if (f->kind == TG_RECORD_INT)
        tg_json_int(w, f->i);
    else
        tg_json_number(w, f->v);
}

tg_status tg_print_record(FILE *out, const tg_record_field *f, int n)
{
    tg_json_writer w;
    tg_json_writer_init(&w);
    tg_json_begin_object(&w);
    for (int k = 0; k < n; k++)
        write_field(&w, &f[k]);
    tg_json_end_object(&w);
    char *text = NULL;
    size_t len = 0;
    tg_status s = tg_json_writer_finish(&w, &text, &len);
    if (s == TG_OK)
        fprintf(out, "%s\n", text);
    tg_free(text);
    tg_json_writer_free(&w);
    return s;
}
