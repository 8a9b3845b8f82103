/* tests/core/test_json.c - the strict JSON reader, lookups and writer.
 * TG_TEST_LABELS: quick */
#include "core/alloc.h"
#include "core/arena.h"
#include "core/json.h"
#include "tg_test.h"

#include <string.h>

static tg_arena *arena;

static tg_json *parse(const char *text, tg_status *st)
{
    tg_json *v = NULL;
    *st = tg_json_parse(arena, text, strlen(text), "t.json", &v);
    return v;
}

static tg_json *parse_ok(const char *text)
{
    tg_status st;
    tg_json *v = parse(text, &st);
    if (st != TG_OK)
        tg_test_fail(__FILE__, __LINE__, "parse of %s failed: %s", text, tg_error_message());
    return v;
}

/* Parsing `text` must fail with a message containing `msg`. */
static void expect_error(const char *text, size_t len, const char *msg, int line)
{
    tg_json *v = (tg_json *)1;
    tg_status st = tg_json_parse(arena, text, len, "t.json", &v);
    if (st == TG_OK || v != NULL)
        tg_test_fail(__FILE__, line, "parse of '%.*s' succeeded, expected '%s'", (int)len, text,
                     msg);
    else if (!strstr(tg_error_message(), msg))
        tg_test_fail(__FILE__, line, "parse of '%.*s': message '%s' lacks '%s'", (int)len, text,
                     tg_error_message(), msg);
}
#define EXPECT_ERROR(text, msg) expect_error(text, strlen(text), msg, __LINE__)

static void test_scalars(void)
{
    tg_json *v = parse_ok(" true ");
    TG_CHECK(v && v->type == TG_JSON_BOOL && v->boolean);
    v = parse_ok("false");
    TG_CHECK(v && v->type == TG_JSON_BOOL && !v->boolean);
    v = parse_ok("null");
    TG_CHECK(v && v->type == TG_JSON_NULL);
    v = parse_ok("-0");
    TG_CHECK(v && v->is_int && v->integer == 0);
    v = parse_ok("12345678901234567");
    TG_CHECK(v && v->is_int && v->integer == 12345678901234567LL); /* above 2^53: exact */
    v = parse_ok("9223372036854775807");
    TG_CHECK(v && v->is_int && v->integer == INT64_MAX);
    v = parse_ok("-9223372036854775808");
    TG_CHECK(v && v->is_int && v->integer == INT64_MIN);
    v = parse_ok("9223372036854775808");
    TG_CHECK(v && !v->is_int && v->number == 9223372036854775808.0);
    v = parse_ok("1.5e3");
    TG_CHECK(v && !v->is_int && v->number == 1500.0);
    v = parse_ok("-0.125");
    TG_CHECK(v && v->number == -0.125);
    v = parse_ok("1E-2");
    TG_CHECK(v && fabs(v->number - 0.01) < 1e-18);
    v = parse_ok("1e-400"); /* underflow to zero is fine */
    TG_CHECK(v && v->number == 0.0);
}

static void test_strings(void)
{
    tg_json *v = parse_ok("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"");
    TG_CHECK(v && strcmp(v->string, "a\"b\\c/d\b\f\n\r\t") == 0);
    v = parse_ok("\"\\u00e9\\u20AC\"");
    TG_CHECK(v && strcmp(v->string, "\xC3\xA9\xE2\x82\xAC") == 0);
    v = parse_ok("\"\\uD83D\\uDE00\""); /* surrogate pair -> U+1F600 */
    TG_CHECK(v && strcmp(v->string, "\xF0\x9F\x98\x80") == 0 && v->len == 4);
    v = parse_ok("\"x\\u0000y\"");
    TG_CHECK(v && v->len == 3 && v->string[1] == '\0' && v->string[2] == 'y');
    v = parse_ok("\"\xE6\x97\xA5\xE6\x9C\xAC\""); /* raw UTF-8 passes through */
    TG_CHECK(v && v->len == 6);
    v = parse_ok("\"\"");
    TG_CHECK(v && v->len == 0 && v->string[0] == '\0');
}

static void test_containers(void)
{
    tg_json *v = parse_ok("{\"a\": [1, 2, {\"b\": null}], \"c\": {}, \"d\": []}");
    TG_CHECK(v && v->type == TG_JSON_OBJECT && v->count == 3);
    if (!v)
        return;
    const tg_json *a = tg_json_get(v, "a");
    TG_CHECK(a && a->type == TG_JSON_ARRAY && a->count == 3);
    TG_CHECK(tg_json_at(a, 1) && tg_json_at(a, 1)->integer == 2);
    TG_CHECK(tg_json_at(a, 3) == NULL);
    TG_CHECK(tg_json_get(tg_json_at(a, 2), "b")->type == TG_JSON_NULL);
    TG_CHECK(tg_json_get(v, "c")->count == 0 && tg_json_get(v, "d")->count == 0);
    TG_CHECK(tg_json_get(v, "zz") == NULL);
    TG_CHECK(strcmp(v->keys[2], "d") == 0);

    /* A large object (hash-based duplicate check) with one duplicate at the end. */
    char *big = tg_malloc(200000);
    size_t n = 0;
    n += (size_t)sprintf(big + n, "{");
    for (int i = 0; i < 5000; i++)
        n += (size_t)sprintf(big + n, "%s\"k%d\":%d", i ? "," : "", i, i);
    n += (size_t)sprintf(big + n, "}");
    tg_json *o = NULL;
    TG_CHECK_OK(tg_json_parse(arena, big, n, "big.json", &o));
    TG_CHECK(o && o->count == 5000 && tg_json_get(o, "k4321")->integer == 4321);
    n -= 1;
    n += (size_t)sprintf(big + n, ",\"k17\":0}");
    expect_error(big, n, "duplicate key 'k17'", __LINE__);
    tg_free(big);
}

static void test_positions_and_errors(void)
{
    /* The canonical message: file:line:col: what. */
    EXPECT_ERROR("{\n  \"a\": 1,\n  \"b\": 2 \"c\"\n}", "t.json:3:10: expected ',' or '}'");
    EXPECT_ERROR("[1, 2", "t.json:1:6: expected ',' or ']', found end of input");
    EXPECT_ERROR("", "unexpected end of input");
    EXPECT_ERROR("   ", "t.json:1:4: unexpected end of input");
    EXPECT_ERROR("[1,]", "1:4: unexpected ']', expected a value");
    EXPECT_ERROR("{\"a\":1,}", "1:8: expected a string key");
    EXPECT_ERROR("{a:1}", "expected a string key, found 'a'");
    EXPECT_ERROR("{\"a\" 1}", "expected ':' after key 'a'");
    EXPECT_ERROR("01", "leading zeros");
    EXPECT_ERROR("-", "expected a digit after '-'");
    EXPECT_ERROR("+1", "unexpected '+'");
    EXPECT_ERROR("1.", "expected a digit after '.'");
    EXPECT_ERROR(".5", "unexpected '.'");
    EXPECT_ERROR("1e", "exponent");
    EXPECT_ERROR("1e999", "number out of range");
    EXPECT_ERROR("NaN", "unexpected 'N'");
    EXPECT_ERROR("tru", "expected 'true'");
    EXPECT_ERROR("nul", "expected 'null'");
    EXPECT_ERROR("true false", "after the JSON value");
    EXPECT_ERROR("\"abc", "1:1: unterminated string");
    EXPECT_ERROR("\"a\\", "unterminated string");
    EXPECT_ERROR("\"a\tb\"", "control character U+0009");
    EXPECT_ERROR("\"\\x\"", "invalid escape");
    EXPECT_ERROR("\"\\u12\"", "4 hex digits");
    EXPECT_ERROR("\"\\uD83D\"", "not followed by a low surrogate");
    EXPECT_ERROR("\"\\uD83Dx\"", "not followed by a low surrogate");
    EXPECT_ERROR("\"\\uD83D\\u0041\"", "not followed by a low surrogate");
    EXPECT_ERROR("\"\\uDE00\"", "lone low surrogate");
    EXPECT_ERROR("\"\xC0\xAF\"", "invalid UTF-8");         /* overlong '/' */
    EXPECT_ERROR("\"\xED\xA0\x80\"", "invalid UTF-8");     /* encoded surrogate */
    EXPECT_ERROR("\"\xF4\x90\x80\x80\"", "invalid UTF-8"); /* above U+10FFFF */
    EXPECT_ERROR("\"\xE2\x82\"", "invalid UTF-8");         /* truncated sequence */
    EXPECT_ERROR("{\"a\":1,\"a\":2}", "1:12: duplicate key 'a'");
    expect_error("[1,\0 2]", 7, "unexpected byte 0x00", __LINE__);
    /* The column counts characters: two 2-byte characters before the error. */
    EXPECT_ERROR("[\"\xC3\xA9\xC3\xA9\" x]", "1:7: expected ','");

    /* A BOM is skipped. */
    tg_json *v = parse_ok("\xEF\xBB\xBF[1]");
    TG_CHECK(v && v->count == 1);
}

static void test_limits(void)
{
    char deep[300];
    memset(deep, '[', 200);
    tg_json *v = NULL;
    tg_status st = tg_json_parse(arena, deep, 200, "deep.json", &v);
    TG_CHECK(st == TG_ERR_FORMAT && strstr(tg_error_message(), "nesting deeper than 128"));
    /* At the limit it parses. */
    tg_json_limits lim = {4, 0};
    TG_CHECK_OK(tg_json_parse_ex(arena, "[[[[1]]]]", 9, "d.json", lim, &v));
    st = tg_json_parse_ex(arena, "[[[[[1]]]]]", 11, "d.json", lim, &v);
    TG_CHECK(st == TG_ERR_FORMAT &&
             strstr(tg_error_message(), "d.json:1:5: nesting deeper than 4"));
    lim = (tg_json_limits){0, 8};
    st = tg_json_parse_ex(arena, "[1,2,3,4,5]", 11, "s.json", lim, &v);
    TG_CHECK(st == TG_ERR_FORMAT && strstr(tg_error_message(), "more than the limit of 8"));
}

static void test_typed_getters(void)
{
    tg_json *o =
        parse_ok("{\n \"lr\": \"fast\",\n \"steps\": 2.5, \"name\": \"x\", \"n\": 3, \"on\": true,"
                 " \"list\": [1], \"sub\": {}}");
    const char *s;
    double d;
    int64_t i;
    bool b;
    const tg_json *j;
    TG_CHECK_OK(tg_json_get_string(o, "name", &s));
    TG_CHECK(strcmp(s, "x") == 0);
    TG_CHECK_OK(tg_json_get_number(o, "n", &d));
    TG_CHECK(d == 3.0);
    TG_CHECK_OK(tg_json_get_int(o, "n", &i));
    TG_CHECK(i == 3);
    TG_CHECK_OK(tg_json_get_bool(o, "on", &b));
    TG_CHECK(b);
    TG_CHECK_OK(tg_json_get_array(o, "list", &j));
    TG_CHECK(j->count == 1);
    TG_CHECK_OK(tg_json_get_object(o, "sub", &j));

    tg_status st = tg_json_get_number(o, "lr", &d);
    TG_CHECK(st == TG_ERR_FORMAT);
    TG_CHECK(strstr(tg_error_message(), "t.json:2:8: key 'lr' must be a number, found string"));
    tg_json *e = parse_ok("{\"a\": 3.0, \"b\": 1e3, \"c\": 1e30}");
    TG_CHECK_OK(tg_json_get_int(e, "a", &i));
    TG_CHECK(i == 3);
    TG_CHECK_OK(tg_json_get_int(e, "b", &i));
    TG_CHECK(i == 1000);
    TG_CHECK(tg_json_get_int(e, "c", &i) == TG_ERR_FORMAT);
    st = tg_json_get_int(o, "steps", &i);
    TG_CHECK(st == TG_ERR_FORMAT && strstr(tg_error_message(), "key 'steps' must be an integer"));
    st = tg_json_get_bool(o, "missing", &b);
    TG_CHECK(st == TG_ERR_NOT_FOUND &&
             strstr(tg_error_message(), "t.json:1:1: missing key 'missing'"));
    st = tg_json_get_object(o, "list", &j);
    TG_CHECK(st == TG_ERR_FORMAT && strstr(tg_error_message(), "must be an object, found array"));
    st = tg_json_get_string(tg_json_get(o, "list"), "x", &s);
    TG_CHECK(st == TG_ERR_FORMAT && strstr(tg_error_message(), "expected an object"));
}

static void test_writer(void)
{
    tg_json_writer w;
    tg_json_writer_init(&w);
    tg_json_begin_object(&w);
    tg_json_key(&w, "s");
    tg_json_string(&w, "q\"b\\s\n\x01\xC3\xA9");
    tg_json_key(&w, "bad");
    tg_json_string_n(&w,
                     "a\xFF"
                     "b",
                     3);
    tg_json_key(&w, "n");
    tg_json_begin_array(&w);
    tg_json_int(&w, -5);
    tg_json_uint(&w, UINT64_MAX);
    tg_json_number(&w, 0.1);
    tg_json_number(&w, 1e300);
    tg_json_number(&w, 1.0 / 0.0);
    tg_json_bool(&w, true);
    tg_json_null(&w);
    tg_json_end_array(&w);
    tg_json_key(&w, "e");
    tg_json_begin_object(&w);
    tg_json_end_object(&w);
    tg_json_end_object(&w);
    char *out = NULL;
    size_t len = 0;
    TG_CHECK_OK(tg_json_writer_finish(&w, &out, &len));
    const char *want = "{\"s\":\"q\\\"b\\\\s\\n\\u0001\xC3\xA9\",\"bad\":\"a\xEF\xBF\xBD"
                       "b\","
                       "\"n\":[-5,18446744073709551615,0.1,1e+300,null,true,null],\"e\":{}}";
    TG_CHECK(out && strcmp(out, want) == 0);
    if (out && strcmp(out, want) != 0)
        fprintf(stderr, "got  %s\nwant %s\n", out, want);
    TG_CHECK(len == strlen(want));
    /* What the writer writes, the reader reads back. */
    tg_json *v = NULL;
    TG_CHECK_OK(tg_json_parse(arena, out, len, "w.json", &v));
    TG_CHECK(v && strcmp(tg_json_get(v, "s")->string, "q\"b\\s\n\x01\xC3\xA9") == 0);
    TG_CHECK(v && tg_json_at(tg_json_get(v, "n"), 2)->number == 0.1);
    tg_free(out);
    tg_json_writer_free(&w);

    /* Misuse is reported, not ignored. */
    tg_json_writer_init(&w);
    tg_json_begin_object(&w);
    tg_json_int(&w, 1); /* value without key */
    TG_CHECK(tg_json_writer_finish(&w, NULL, NULL) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "without a key"));
    tg_json_writer_free(&w);
    tg_json_writer_init(&w);
    tg_json_begin_array(&w);
    TG_CHECK(tg_json_writer_finish(&w, NULL, NULL) == TG_ERR_INVALID_ARG);
    tg_json_writer_free(&w);
    tg_json_writer_init(&w);
    tg_json_begin_array(&w);
    tg_json_end_object(&w);
    TG_CHECK(tg_json_writer_finish(&w, NULL, NULL) == TG_ERR_INVALID_ARG);
    tg_json_writer_free(&w);

    /* Out of memory while growing is sticky and reported. */
    tg_json_writer_init(&w);
    tg_alloc_fail_after(1);
    tg_json_begin_array(&w);
    tg_json_end_array(&w);
    tg_alloc_fail_after(0);
    TG_CHECK(tg_json_writer_finish(&w, NULL, NULL) == TG_ERR_NOMEM);
    tg_json_writer_free(&w);
}

static void test_number_round_trip(void)
{
    const double vals[] = {0.0,       -0.0,          1.0,    0.1,
                           1.0 / 3.0, 6.02214076e23, 5e-324, 1.7976931348623157e308,
                           -123.456,  0.2860,        0.3530};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        tg_json_writer w;
        tg_json_writer_init(&w);
        tg_json_number(&w, vals[i]);
        char *out = NULL;
        size_t len;
        TG_CHECK_OK(tg_json_writer_finish(&w, &out, &len));
        tg_json *v = NULL;
        TG_CHECK_OK(tg_json_parse(arena, out, len, "n", &v));
        TG_CHECK(v && v->number == vals[i]);
        tg_free(out);
        tg_json_writer_free(&w);
    }
}

static void test_allocation_failures(void)
{
    /* Every allocation the parser makes may fail: it must say so and not leak. */
    const char *text = "{\"a\": [1, 2, 3, \"four\", {\"five\": 5e0}], \"b\": \"x\\u00e9\"}";
    int64_t live = tg_alloc_live_bytes();
    int saw_ok = 0;
    for (int n = 1; n < 40 && !saw_ok; n++) {
        tg_arena *a = tg_arena_create(64);
        tg_json *v = NULL;
        tg_alloc_fail_after(n);
        tg_status st = a ? tg_json_parse(a, text, strlen(text), "f.json", &v) : TG_ERR_NOMEM;
        tg_alloc_fail_after(0);
        TG_CHECK(st == TG_OK || st == TG_ERR_NOMEM);
        TG_CHECK((st == TG_OK) == (v != NULL));
        saw_ok = st == TG_OK;
        tg_arena_destroy(a);
    }
    TG_CHECK(saw_ok);
    TG_CHECK(tg_alloc_live_bytes() == live);
}

int main(void)
{
    arena = tg_arena_create(0);
    TG_RUN(test_scalars);
    TG_RUN(test_strings);
    TG_RUN(test_containers);
    TG_RUN(test_positions_and_errors);
    TG_RUN(test_limits);
    TG_RUN(test_typed_getters);
    TG_RUN(test_writer);
    TG_RUN(test_number_round_trip);
    TG_RUN(test_allocation_failures);
    tg_arena_destroy(arena);
    return tg_test_finish();
}
