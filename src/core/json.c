/* core/json.c - strict RFC 8259 parser into an arena, and lookup helpers.
 *
 * Recursive descent over a byte range that need not be NUL-terminated: every
 * read checks `p < end` first, so no input can make it read past the buffer.
 * Container elements are collected on one shared growable stack (tg_malloc'd,
 * freed at the end) and copied into exact-size arena arrays when the
 * container closes, so the arena holds no slack from growing.
 *
 * Positions: the line is counted as newlines are skipped (strings cannot hold
 * a raw newline, so a token never spans lines). The column is counted in
 * characters, lazily from the last known point, so that asking for the
 * position of every value costs O(input) in total even on a single 100 MB line
 * (positions are only ever asked for in increasing order).
 */
#include "core/json.h"

#include "core/alloc.h"
#include "core/error.h"

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_DEPTH 128
#define DEFAULT_MAX_SIZE ((size_t)64 << 20)

typedef struct member {
    tg_json *value;
    const char *key; /* NULL inside arrays */
    size_t key_len;
} member;

typedef struct parser {
    tg_arena *arena;
    const unsigned char *p, *end;
    const char *source;
    int line;
    const unsigned char *col_ptr; /* column of col_ptr is col_at_ptr */
    int col_at_ptr;
    int depth, max_depth;
    member *stack; /* elements of the open containers */
    size_t stack_len, stack_cap;
    tg_status status;
} parser;

/* ---- positions and errors --------------------------------------------------- */

static int column_of(parser *ps, const unsigned char *q)
{
    if (q < ps->col_ptr) /* never happens in order; stay safe */
        return ps->col_at_ptr;
    for (const unsigned char *s = ps->col_ptr; s < q; s++)
        if ((*s & 0xC0) != 0x80) /* count characters: skip UTF-8 continuation bytes */
            ps->col_at_ptr++;
    ps->col_ptr = q;
    return ps->col_at_ptr;
}

static void newline(parser *ps, const unsigned char *after)
{
    ps->line++;
    ps->col_ptr = after;
    ps->col_at_ptr = 1;
}

TG_PRINTF(3, 4) static tg_status fail_at(parser *ps, const unsigned char *q, const char *fmt, ...)
{
    if (ps->status != TG_OK) /* keep the first error */
        return ps->status;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int col = column_of(ps, q);
    ps->status = tg_error(TG_ERR_FORMAT, "%s:%d:%d: %s", ps->source, ps->line, col, what);
    return ps->status;
}

static tg_status fail_nomem(parser *ps)
{
    if (ps->status == TG_OK)
        ps->status = tg_error(TG_ERR_NOMEM, "%s: out of memory while parsing JSON", ps->source);
    return ps->status;
}

/* A printable description of the byte at q for messages: "'x'", "'\x01'" or
 * "end of input". */
static const char *describe(parser *ps, const unsigned char *q, char buf[16])
{
    if (q >= ps->end)
        return "end of input";
    if (*q >= 0x20 && *q < 0x7f)
        snprintf(buf, 16, "'%c'", *q);
    else
        snprintf(buf, 16, "byte 0x%02X", *q);
    return buf;
}

/* ---- small helpers -------------------------------------------------------- */

static void skip_ws(parser *ps)
{
    const unsigned char *p = ps->p;
    while (p < ps->end) {
        unsigned char c = *p;
        if (c == '\n') {
            p++;
            newline(ps, p);
        } else if (c == ' ' || c == '\t' || c == '\r') {
            p++;
        } else {
            break;
        }
    }
    ps->p = p;
}

static tg_json *new_node(parser *ps, tg_json_type type, const unsigned char *at)
{
    tg_json *v = tg_arena_alloc(ps->arena, sizeof *v);
    if (!v) {
        fail_nomem(ps);
        return NULL;
    }
    v->type = type;
    v->source = ps->source;
    v->line = ps->line;
    v->col = column_of(ps, at);
    return v;
}

static int push_member(parser *ps, tg_json *value, const char *key, size_t key_len)
{
    if (ps->stack_len == ps->stack_cap) {
        size_t cap = ps->stack_cap ? ps->stack_cap * 2 : 64;
        member *s = tg_realloc(ps->stack, cap * sizeof *s);
        if (!s) {
            fail_nomem(ps);
            return 0;
        }
        ps->stack = s;
        ps->stack_cap = cap;
    }
    ps->stack[ps->stack_len++] = (member){value, key, key_len};
    return 1;
}

/* Decode one UTF-8 sequence at p (p < end). Returns its length, or 0 if it is
 * malformed (overlong, surrogate, above U+10FFFF, truncated, stray byte). */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t n;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2, cp = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3, cp = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if ((size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

int tg_json_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        size_t n = utf8_seq(p, end);
        if (!n)
            return 0;
        p += n;
    }
    return 1;
}

static int hex4(const unsigned char *p, const unsigned char *end, uint32_t *out)
{
    if (end - p < 4)
        return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

static size_t put_utf8(unsigned char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- strings ------------------------------------------------------------- */

/* Parse the string starting at the opening quote ps->p into arena memory. */
static int parse_string(parser *ps, const char **out, size_t *out_len)
{
    const unsigned char *open = ps->p;
    const unsigned char *q = open + 1;
    /* First pass: find the closing quote; the decoded text is never longer. */
    while (q < ps->end && *q != '"') {
        if (*q == '\\' && q + 1 < ps->end)
            q++;
        q++;
    }
    if (q >= ps->end) {
        fail_at(ps, open, "unterminated string");
        return 0;
    }
    size_t raw = (size_t)(q - open - 1);
    unsigned char *dst = tg_arena_alloc(ps->arena, raw + 1);
    if (!dst) {
        fail_nomem(ps);
        return 0;
    }
    unsigned char *o = dst;
    const unsigned char *p = open + 1, *close = q;
    while (p < close) {
        unsigned char c = *p;
        if (c < 0x20) {
            fail_at(ps, p, "control character U+%04X in string must be escaped", c);
            return 0;
        }
        if (c >= 0x80) {
            size_t n = utf8_seq(p, close);
            if (!n) {
                fail_at(ps, p, "invalid UTF-8 in string");
                return 0;
            }
            memcpy(o, p, n);
            o += n;
            p += n;
            continue;
        }
        if (c != '\\') {
            *o++ = c;
            p++;
            continue;
        }
        const unsigned char *esc = p;
        p++; /* p < close: the first pass skipped the byte after each '\' */
        switch (*p) {
        case '"':
            *o++ = '"';
            p++;
            break;
        case '\\':
            *o++ = '\\';
            p++;
            break;
        case '/':
            *o++ = '/';
            p++;
            break;
        case 'b':
            *o++ = '\b';
            p++;
            break;
        case 'f':
            *o++ = '\f';
            p++;
            break;
        case 'n':
            *o++ = '\n';
            p++;
            break;
        case 'r':
            *o++ = '\r';
            p++;
            break;
        case 't':
            *o++ = '\t';
            p++;
            break;
        case 'u': {
            uint32_t cp;
            if (!hex4(p + 1, close, &cp)) {
                fail_at(ps, esc, "\\u must be followed by 4 hex digits");
                return 0;
            }
            p += 5;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                fail_at(ps, esc, "lone low surrogate \\u%04X", (unsigned)cp);
                return 0;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (close - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, close, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF) {
                    fail_at(ps, esc, "high surrogate \\u%04X not followed by a low surrogate",
                            (unsigned)cp);
                    return 0;
                }
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            /* \uXXXX (6 bytes) decodes to at most 3 bytes, a pair (12) to 4. */
            o += put_utf8(o, cp);
            break;
        }
        default: {
            char buf[16];
            fail_at(ps, esc, "invalid escape '\\' followed by %s", describe(ps, p, buf));
            return 0;
        }
        }
    }
    *o = '\0';
    *out = (const char *)dst;
    *out_len = (size_t)(o - dst);
    ps->p = close + 1;
    return 1;
}

/* ---- numbers --------------------------------------------------------------- */

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static tg_json *parse_number(parser *ps)
{
    const unsigned char *start = ps->p, *p = start, *end = ps->end;
    tg_json *v = new_node(ps, TG_JSON_NUMBER, start);
    if (!v)
        return NULL;
    int neg = 0, integral = 1;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end || !is_digit(*p)) {
        fail_at(ps, p, "expected a digit after '-'");
        return NULL;
    }
    uint64_t mag = 0;
    int overflow = 0;
    if (*p == '0') {
        p++;
        if (p < end && is_digit(*p)) {
            fail_at(ps, start, "leading zeros are not allowed in numbers");
            return NULL;
        }
    } else {
        for (; p < end && is_digit(*p); p++) {
            unsigned d = (unsigned)(*p - '0');
            if (mag > (UINT64_MAX - d) / 10)
                overflow = 1;
            else
                mag = mag * 10 + d;
        }
    }
    if (p < end && *p == '.') {
        integral = 0;
        p++;
        if (p >= end || !is_digit(*p)) {
            fail_at(ps, p, "expected a digit after '.'");
            return NULL;
        }
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        integral = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !is_digit(*p)) {
            fail_at(ps, p, "expected a digit in the exponent");
            return NULL;
        }
        while (p < end && is_digit(*p))
            p++;
    }
    size_t n = (size_t)(p - start);
    /* strtod needs a NUL-terminated copy, and the locale's decimal point. */
    char small[64];
    char *copy = n < sizeof small ? small : tg_malloc(n + 1);
    if (!copy) {
        fail_nomem(ps);
        return NULL;
    }
    memcpy(copy, start, n);
    copy[n] = '\0';
    const char *dp = localeconv()->decimal_point;
    if (dp && dp[0] && dp[0] != '.' && !dp[1]) {
        char *dot = strchr(copy, '.');
        if (dot)
            *dot = dp[0];
    }
    double d = strtod(copy, NULL);
    if (copy != small)
        tg_free(copy);
    if (isinf(d)) {
        fail_at(ps, start, "number out of range");
        return NULL;
    }
    v->number = d;
    if (integral && !overflow) {
        if (!neg && mag <= (uint64_t)INT64_MAX) {
            v->is_int = true;
            v->integer = (int64_t)mag;
        } else if (neg && mag <= (uint64_t)INT64_MAX + 1) {
            v->is_int = true;
            v->integer = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
        }
    }
    ps->p = p;
    return v;
}

/* ---- containers -------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int same_key(const member *a, const member *b)
{
    return a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0;
}

/* Index of the first member whose key repeats an earlier one, or -1. Small
 * objects compare pairwise; larger ones use a temporary hash table so that a
 * 100,000-key object stays linear. Returns -2 when out of memory. */
static long find_duplicate(const member *m, size_t n)
{
    if (n <= 16) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (same_key(&m[i], &m[j]))
                    return (long)i;
        return -1;
    }
    size_t cap = 32;
    while (cap < 2 * n)
        cap *= 2;
    size_t *slots = tg_malloc(cap * sizeof *slots); /* member index + 1; 0 = empty */
    if (!slots)
        return -2;
    memset(slots, 0, cap * sizeof *slots);
    long dup = -1;
    for (size_t i = 0; i < n && dup < 0; i++) {
        size_t h = (size_t)hash_bytes(m[i].key, m[i].key_len) & (cap - 1);
        while (slots[h]) {
            if (same_key(&m[slots[h] - 1], &m[i])) {
                dup = (long)i;
                break;
            }
            h = (h + 1) & (cap - 1);
        }
        if (dup < 0)
            slots[h] = i + 1;
    }
    tg_free(slots);
    return dup;
}

/* Move the members pushed since `base` into the container's arena arrays. */
static int close_container(parser *ps, tg_json *v, size_t base, const unsigned char *open)
{
    size_t n = ps->stack_len - base;
    const member *m = n ? ps->stack + base : NULL; /* the stack is NULL until first used */
    if (v->type == TG_JSON_OBJECT) {
        long dup = find_duplicate(m, n);
        if (dup == -2) {
            fail_nomem(ps);
            return 0;
        }
        if (dup >= 0) {
            const tg_json *val = m[dup].value;
            ps->status = tg_error(TG_ERR_FORMAT, "%s:%d:%d: duplicate key '%s' in object",
                                  ps->source, val->line, val->col, m[dup].key);
            return 0;
        }
    }
    v->count = n;
    if (n) {
        v->items = tg_arena_alloc(ps->arena, n * sizeof *v->items);
        if (!v->items) {
            fail_nomem(ps);
            return 0;
        }
        if (v->type == TG_JSON_OBJECT) {
            v->keys = tg_arena_alloc(ps->arena, n * sizeof *v->keys);
            v->key_lens = tg_arena_alloc(ps->arena, n * sizeof *v->key_lens);
            if (!v->keys || !v->key_lens) {
                fail_nomem(ps);
                return 0;
            }
        }
        for (size_t i = 0; i < n; i++) {
            v->items[i] = m[i].value;
            if (v->keys) {
                v->keys[i] = m[i].key;
                v->key_lens[i] = m[i].key_len;
            }
        }
    }
    (void)open;
    ps->stack_len = base;
    return 1;
}

static tg_json *parse_value(parser *ps);

static tg_json *parse_container(parser *ps, int is_object)
{
    const unsigned char *open = ps->p;
    if (ps->depth >= ps->max_depth) {
        fail_at(ps, open, "nesting deeper than %d levels", ps->max_depth);
        return NULL;
    }
    tg_json *v = new_node(ps, is_object ? TG_JSON_OBJECT : TG_JSON_ARRAY, open);
    if (!v)
        return NULL;
    char close = is_object ? '}' : ']';
    size_t base = ps->stack_len;
    ps->depth++;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
    } else {
        for (;;) {
            const char *key = NULL;
            size_t key_len = 0;
            char buf[16];
            if (is_object) {
                if (ps->p >= ps->end || *ps->p != '"') {
                    fail_at(ps, ps->p, "expected a string key, found %s", describe(ps, ps->p, buf));
                    return NULL;
                }
                if (!parse_string(ps, &key, &key_len))
                    return NULL;
                skip_ws(ps);
                if (ps->p >= ps->end || *ps->p != ':') {
                    fail_at(ps, ps->p, "expected ':' after key '%s', found %s", key,
                            describe(ps, ps->p, buf));
                    return NULL;
                }
                ps->p++;
            }
            tg_json *item = parse_value(ps);
            if (!item || !push_member(ps, item, key, key_len))
                return NULL;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                skip_ws(ps);
                continue;
            }
            if (ps->p < ps->end && *ps->p == close) {
                ps->p++;
                break;
            }
            fail_at(ps, ps->p, "expected ',' or '%c', found %s", close, describe(ps, ps->p, buf));
            return NULL;
        }
    }
    ps->depth--;
    if (!close_container(ps, v, base, open))
        return NULL;
    return v;
}

static tg_json *parse_literal(parser *ps, const char *word, tg_json_type type, bool b)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) {
        fail_at(ps, ps->p, "invalid literal (expected '%s')", word);
        return NULL;
    }
    tg_json *v = new_node(ps, type, ps->p);
    if (!v)
        return NULL;
    v->boolean = b;
    ps->p += n;
    return v;
}

static tg_json *parse_value(parser *ps)
{
    skip_ws(ps);
    char buf[16];
    if (ps->p >= ps->end) {
        fail_at(ps, ps->p, "unexpected end of input, expected a value");
        return NULL;
    }
    switch (*ps->p) {
    case '{':
        return parse_container(ps, 1);
    case '[':
        return parse_container(ps, 0);
    case '"': {
        tg_json *v = new_node(ps, TG_JSON_STRING, ps->p);
        if (!v || !parse_string(ps, &v->string, &v->len))
            return NULL;
        return v;
    }
    case 't':
        return parse_literal(ps, "true", TG_JSON_BOOL, true);
    case 'f':
        return parse_literal(ps, "false", TG_JSON_BOOL, false);
    case 'n':
        return parse_literal(ps, "null", TG_JSON_NULL, false);
    default:
        if (*ps->p == '-' || is_digit(*ps->p))
            return parse_number(ps);
        fail_at(ps, ps->p, "unexpected %s, expected a value", describe(ps, ps->p, buf));
        return NULL;
    }
}

tg_status tg_json_parse_ex(tg_arena *arena, const char *text, size_t len, const char *source,
                           tg_json_limits limits, tg_json **out)
{
    *out = NULL;
    if (!source)
        source = "json";
    if (!arena || (!text && len))
        return tg_error(TG_ERR_INVALID_ARG, "%s: no arena or no text to parse", source);
    size_t max_size = limits.max_size ? limits.max_size : DEFAULT_MAX_SIZE;
    if (len > max_size)
        return tg_error(TG_ERR_FORMAT, "%s: %zu bytes of JSON, more than the limit of %zu", source,
                        len, max_size);
    parser ps = {0};
    ps.arena = arena;
    ps.p = (const unsigned char *)(text ? text : "");
    ps.end = ps.p + len;
    ps.source = tg_arena_strdup(arena, source);
    if (!ps.source)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory while parsing JSON", source);
    ps.line = 1;
    ps.col_ptr = ps.p;
    ps.col_at_ptr = 1;
    ps.max_depth = limits.max_depth > 0 ? limits.max_depth : DEFAULT_MAX_DEPTH;
    if (len >= 3 && memcmp(ps.p, "\xEF\xBB\xBF", 3) == 0) { /* byte order mark */
        ps.p += 3;
        ps.col_ptr = ps.p;
    }
    tg_json *root = parse_value(&ps);
    if (root) {
        skip_ws(&ps);
        if (ps.p < ps.end) {
            char buf[16];
            fail_at(&ps, ps.p, "unexpected %s after the JSON value", describe(&ps, ps.p, buf));
            root = NULL;
        }
    }
    tg_free(ps.stack);
    if (!root)
        return ps.status != TG_OK ? ps.status
                                  : tg_error(TG_ERR_INTERNAL, "%s: JSON parse failed", source);
    *out = root;
    return TG_OK;
}

tg_status tg_json_parse(tg_arena *arena, const char *text, size_t len, const char *source,
                        tg_json **out)
{
    return tg_json_parse_ex(arena, text, len, source, (tg_json_limits){0, 0}, out);
}

/* ---- lookups ------------------------------------------------------------- */

const char *tg_json_type_name(tg_json_type t)
{
    static const char *const names[] = {"null", "boolean", "number", "string", "array", "object"};
    return (unsigned)t < TG_JSON_TYPE_COUNT ? names[t] : "?";
}

const tg_json *tg_json_get(const tg_json *obj, const char *key)
{
    if (!obj || obj->type != TG_JSON_OBJECT || !key)
        return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->count; i++)
        if (obj->key_lens[i] == n && memcmp(obj->keys[i], key, n) == 0)
            return obj->items[i];
    return NULL;
}

const tg_json *tg_json_at(const tg_json *arr, size_t i)
{
    if (!arr || arr->type != TG_JSON_ARRAY || i >= arr->count)
        return NULL;
    return arr->items[i];
}

/* Find `key` in `obj` and check its type; the message names position and key. */
static tg_status typed(const tg_json *obj, const char *key, tg_json_type want, const tg_json **out)
{
    *out = NULL;
    if (!obj)
        return tg_error(TG_ERR_INVALID_ARG, "no JSON object to look up key '%s' in", key);
    if (obj->type != TG_JSON_OBJECT)
        return tg_error(TG_ERR_FORMAT, "%s:%d:%d: expected an object holding key '%s', found %s",
                        obj->source, obj->line, obj->col, key, tg_json_type_name(obj->type));
    const tg_json *v = tg_json_get(obj, key);
    if (!v)
        return tg_error(TG_ERR_NOT_FOUND, "%s:%d:%d: missing key '%s'", obj->source, obj->line,
                        obj->col, key);
    if (v->type != want)
        return tg_error(TG_ERR_FORMAT, "%s:%d:%d: key '%s' must be %s %s, found %s", v->source,
                        v->line, v->col, key,
                        want == TG_JSON_ARRAY || want == TG_JSON_OBJECT ? "an" : "a",
                        tg_json_type_name(want), tg_json_type_name(v->type));
    *out = v;
    return TG_OK;
}

tg_status tg_json_get_string(const tg_json *obj, const char *key, const char **out)
{
    const tg_json *v;
    TG_TRY(typed(obj, key, TG_JSON_STRING, &v));
    *out = v->string;
    return TG_OK;
}

tg_status tg_json_get_number(const tg_json *obj, const char *key, double *out)
{
    const tg_json *v;
    TG_TRY(typed(obj, key, TG_JSON_NUMBER, &v));
    *out = v->number;
    return TG_OK;
}

tg_status tg_json_get_int(const tg_json *obj, const char *key, int64_t *out)
{
    const tg_json *v;
    TG_TRY(typed(obj, key, TG_JSON_NUMBER, &v));
    if (v->is_int) {
        *out = v->integer;
        return TG_OK;
    }
    /* 2.0 or 1e3 name an integer exactly; 2.5 or 1e30 do not. */
    if (v->number == floor(v->number) && fabs(v->number) < 9223372036854775808.0) {
        *out = (int64_t)v->number;
        return TG_OK;
    }
    return tg_error(TG_ERR_FORMAT, "%s:%d:%d: key '%s' must be an integer, found %.17g", v->source,
                    v->line, v->col, key, v->number);
}

tg_status tg_json_get_bool(const tg_json *obj, const char *key, bool *out)
{
    const tg_json *v;
    TG_TRY(typed(obj, key, TG_JSON_BOOL, &v));
    *out = v->boolean;
    return TG_OK;
}

tg_status tg_json_get_array(const tg_json *obj, const char *key, const tg_json **out)
{
    return typed(obj, key, TG_JSON_ARRAY, out);
}

tg_status tg_json_get_object(const tg_json *obj, const char *key, const tg_json **out)
{
    return typed(obj, key, TG_JSON_OBJECT, out);
}

int tg_json_equal(const tg_json *a, const tg_json *b)
{
    if (!a || !b || a->type != b->type)
        return a == b;
    switch (a->type) {
    case TG_JSON_NULL:
        return 1;
    case TG_JSON_BOOL:
        return a->boolean == b->boolean;
    case TG_JSON_NUMBER:
        return a->number == b->number && (!a->is_int || !b->is_int || a->integer == b->integer);
    case TG_JSON_STRING:
        return a->len == b->len && memcmp(a->string, b->string, a->len) == 0;
    case TG_JSON_ARRAY:
    case TG_JSON_OBJECT:
        if (a->count != b->count)
            return 0;
        for (size_t i = 0; i < a->count; i++) {
            if (a->type == TG_JSON_OBJECT && (a->key_lens[i] != b->key_lens[i] ||
                                              memcmp(a->keys[i], b->keys[i], a->key_lens[i]) != 0))
                return 0;
            if (!tg_json_equal(a->items[i], b->items[i]))
                return 0;
        }
        return 1;
    default:
        return 0;
    }
}
