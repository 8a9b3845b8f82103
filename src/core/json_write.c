/* core/json_write.c - tg_json_writer: compact JSON into a growable buffer.
 *
 * Used for safetensors headers and the command's --json output. The writer
 * tracks which containers are open so it inserts ',' and ':' itself and can
 * tell a caller that forgot to close one or wrote a value where a key belongs.
 */
#include "core/alloc.h"
#include "core/error.h"
#include "core/json.h"

#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tg_json_writer_init(tg_json_writer *w)
{
    memset(w, 0, sizeof *w);
}

void tg_json_writer_free(tg_json_writer *w)
{
    tg_free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
}

static void set_error(tg_json_writer *w, tg_status s, const char *what)
{
    if (w->status == TG_OK) {
        w->status = tg_error(s, "JSON writer: %s", what);
        w->error_what = what;
    }
}

static void append(tg_json_writer *w, const char *s, size_t n)
{
    if (w->status != TG_OK)
        return;
    if (n >= SIZE_MAX / 2 - w->len) {
        set_error(w, TG_ERR_NOMEM, "output too large");
        return;
    }
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n + 1)
            cap *= 2;
        char *b = tg_realloc(w->buf, cap);
        if (!b) {
            set_error(w, TG_ERR_NOMEM, "out of memory");
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

/* Called before every value: writes the separating ',' and checks that an
 * object member got its key first. */
static void before_value(tg_json_writer *w)
{
    if (w->status != TG_OK)
        return;
    if (w->depth == 0) {
        if (w->has_item[0])
            set_error(w, TG_ERR_INVALID_ARG, "a second top-level value");
        w->has_item[0] = 1;
        return;
    }
    if (w->is_object[w->depth]) {
        if (!w->after_key)
            set_error(w, TG_ERR_INVALID_ARG, "object member written without a key");
        w->after_key = false;
        return;
    }
    if (w->has_item[w->depth])
        append(w, ",", 1);
    w->has_item[w->depth] = 1;
}

static void open_container(tg_json_writer *w, int is_object)
{
    before_value(w);
    if (w->status != TG_OK)
        return;
    if (w->depth >= TG_JSON_WRITER_MAX_DEPTH) {
        set_error(w, TG_ERR_INVALID_ARG, "nesting too deep");
        return;
    }
    w->depth++;
    w->has_item[w->depth] = 0;
    w->is_object[w->depth] = (unsigned char)is_object;
    append(w, is_object ? "{" : "[", 1);
}

static void close_container(tg_json_writer *w, int is_object)
{
    if (w->status != TG_OK)
        return;
    if (w->depth == 0 || w->is_object[w->depth] != is_object || w->after_key) {
        set_error(w, TG_ERR_INVALID_ARG,
                  is_object ? "end_object does not match an open object"
                            : "end_array does not match an open array");
        return;
    }
    w->depth--;
    append(w, is_object ? "}" : "]", 1);
}

void tg_json_begin_object(tg_json_writer *w)
{
    open_container(w, 1);
}
void tg_json_end_object(tg_json_writer *w)
{
    close_container(w, 1);
}
void tg_json_begin_array(tg_json_writer *w)
{
    open_container(w, 0);
}
void tg_json_end_array(tg_json_writer *w)
{
    close_container(w, 0);
}

/* Quoted, escaped string; invalid UTF-8 bytes become U+FFFD. */
static void write_quoted(tg_json_writer *w, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    append(w, "\"", 1);
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    const unsigned char *run = p; /* bytes that need no escaping, flushed together */
    while (p < end) {
        unsigned char c = *p;
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            p++;
            continue;
        }
        if (c >= 0x80) {
            /* A well-formed sequence (2..4 bytes) joins the run; a byte that
             * starts none is replaced. */
            size_t n = 2;
            while (n <= 4 && (n > (size_t)(end - p) || !tg_json_utf8_valid((const char *)p, n)))
                n++;
            if (n <= 4) {
                p += n;
                continue;
            }
            append(w, (const char *)run, (size_t)(p - run));
            append(w, "\xEF\xBF\xBD", 3);
            p++;
            run = p;
            continue;
        }
        append(w, (const char *)run, (size_t)(p - run));
        char esc[8];
        size_t n = 2;
        esc[0] = '\\';
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        append(w, esc, n);
        p++;
        run = p;
    }
    append(w, (const char *)run, (size_t)(p - run));
    append(w, "\"", 1);
}

void tg_json_key(tg_json_writer *w, const char *key)
{
    if (w->status != TG_OK)
        return;
    if (w->depth == 0 || !w->is_object[w->depth] || w->after_key) {
        set_error(w, TG_ERR_INVALID_ARG, "key written outside an object or twice in a row");
        return;
    }
    if (w->has_item[w->depth])
        append(w, ",", 1);
    w->has_item[w->depth] = 1;
    write_quoted(w, key ? key : "", key ? strlen(key) : 0);
    append(w, ":", 1);
    w->after_key = true;
}

void tg_json_string_n(tg_json_writer *w, const char *s, size_t len)
{
    before_value(w);
    write_quoted(w, s ? s : "", s ? len : 0);
}

void tg_json_string(tg_json_writer *w, const char *s)
{
    tg_json_string_n(w, s, s ? strlen(s) : 0);
}

void tg_json_int(tg_json_writer *w, int64_t v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%" PRId64, v);
    before_value(w);
    append(w, buf, (size_t)n);
}

void tg_json_uint(tg_json_writer *w, uint64_t v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%" PRIu64, v);
    before_value(w);
    append(w, buf, (size_t)n);
}

/* Print with the given precision; replace a locale decimal comma by '.'. */
static int format_double(char *buf, size_t cap, int prec, double v)
{
    int n = snprintf(buf, cap, "%.*g", prec, v);
    const char *dp = localeconv()->decimal_point;
    if (dp && dp[0] && dp[0] != '.' && !dp[1]) {
        char *c = strchr(buf, dp[0]);
        if (c)
            *c = '.';
    }
    return n;
}

void tg_json_number(tg_json_writer *w, double v)
{
    if (!isfinite(v)) {
        tg_json_null(w);
        return;
    }
    char buf[40];
    int n = 0;
    /* The shortest of %.15g..%.17g that reads back exactly. */
    for (int prec = 15; prec <= 17; prec++) {
        n = format_double(buf, sizeof buf, prec, v);
        char tmp[40];
        memcpy(tmp, buf, sizeof tmp);
        const char *dp = localeconv()->decimal_point;
        if (dp && dp[0] && dp[0] != '.' && !dp[1]) {
            char *c = strchr(tmp, '.');
            if (c)
                *c = dp[0];
        }
        if (strtod(tmp, NULL) == v)
            break;
    }
    before_value(w);
    append(w, buf, (size_t)n);
}

void tg_json_bool(tg_json_writer *w, bool v)
{
    before_value(w);
    append(w, v ? "true" : "false", v ? 4 : 5);
}

void tg_json_null(tg_json_writer *w)
{
    before_value(w);
    append(w, "null", 4);
}

void tg_json_value(tg_json_writer *w, const tg_json *v)
{
    if (!v) {
        set_error(w, TG_ERR_INVALID_ARG, "NULL value");
        return;
    }
    switch (v->type) {
    case TG_JSON_NULL:
        tg_json_null(w);
        break;
    case TG_JSON_BOOL:
        tg_json_bool(w, v->boolean);
        break;
    case TG_JSON_NUMBER:
        if (v->is_int)
            tg_json_int(w, v->integer);
        else
            tg_json_number(w, v->number);
        break;
    case TG_JSON_STRING:
        tg_json_string_n(w, v->string, v->len);
        break;
    case TG_JSON_ARRAY:
    case TG_JSON_OBJECT: {
        int obj = v->type == TG_JSON_OBJECT;
        open_container(w, obj);
        for (size_t i = 0; i < v->count && w->status == TG_OK; i++) {
            if (obj) {
                /* Keys may hold NUL (from \u0000): write them with their length. */
                if (w->has_item[w->depth])
                    append(w, ",", 1);
                w->has_item[w->depth] = 1;
                write_quoted(w, v->keys[i], v->key_lens[i]);
                append(w, ":", 1);
                w->after_key = true;
            }
            tg_json_value(w, v->items[i]);
        }
        close_container(w, obj);
        break;
    }
    default:
        set_error(w, TG_ERR_INVALID_ARG, "unknown value type");
    }
}

void tg_json_raw(tg_json_writer *w, const char *text, size_t len)
{
    before_value(w);
    append(w, text, len);
}

tg_status tg_json_writer_finish(tg_json_writer *w, char **take, size_t *len)
{
    if (w->status == TG_OK && (w->depth != 0 || w->after_key))
        set_error(w, TG_ERR_INVALID_ARG, "document finished with a container still open");
    if (w->status == TG_OK && !w->has_item[0])
        set_error(w, TG_ERR_INVALID_ARG, "document has no value");
    if (w->status != TG_OK)
        return tg_error(w->status, "JSON writer: %s", w->error_what);
    if (len)
        *len = w->len;
    if (take) {
        *take = w->buf;
        w->buf = NULL;
        w->len = w->cap = 0;
    }
    return TG_OK;
}
