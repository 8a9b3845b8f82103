/* core/json.h - a small, strict JSON (RFC 8259) reader and writer.
 *
 * Reader: tg_json_parse turns text into a tree of tg_json nodes allocated from
 * a caller's tg_arena (freed with the arena, never piecemeal). It accepts
 * exactly RFC 8259: any value at top level, strings in valid UTF-8 with the
 * standard escapes (\uXXXX surrogate pairs become one UTF-8 sequence; a lone
 * surrogate is an error), numbers in the JSON grammar only (no NaN, no
 * leading '+' or zeros, no hex), true/false/null. On top of the RFC it rejects
 * duplicate keys in one object (the RFC leaves their meaning open; for options
 * files and safetensors headers a duplicate is always a mistake), nesting
 * deeper than a limit and input longer than a limit. A leading UTF-8 byte
 * order mark is skipped. Errors read "options.json:3:14: expected ',' or '}'"
 * (line and column are 1-based; the column counts characters, not bytes).
 *
 * Lookups: tg_json_get finds a member by key; the typed getters fail with a
 * message naming the source, position and key ("options.json:2:9: key 'lr'
 * must be a number, found string").
 *
 * Writer: tg_json_writer appends compact JSON to a growable buffer with
 * correct string escaping. Errors (out of memory, misuse) are sticky and
 * reported once by tg_json_writer_finish, so call sites need not check each
 * append.
 *
 * Nothing here is thread-safe per object; distinct trees and writers may be
 * used from distinct threads. Number parsing does not depend on the locale.
 */
#ifndef TG_CORE_JSON_H
#define TG_CORE_JSON_H

#include "core/arena.h"
#include "tilegraph/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum tg_json_type {
    TG_JSON_NULL,
    TG_JSON_BOOL,
    TG_JSON_NUMBER,
    TG_JSON_STRING,
    TG_JSON_ARRAY,
    TG_JSON_OBJECT,
    TG_JSON_TYPE_COUNT
} tg_json_type;

typedef struct tg_json tg_json;

/* One value. Everything it points to lives in the arena it was parsed into. */
struct tg_json {
    tg_json_type type;
    const char *source; /* the name given to tg_json_parse, for messages */
    int line, col;      /* where the value starts, 1-based */

    bool boolean; /* TG_JSON_BOOL */

    /* TG_JSON_NUMBER: `number` always holds the (nearest double) value. When the
     * literal has no fraction or exponent and fits in int64, `is_int` is set and
     * `integer` holds it exactly (offsets above 2^53 stay exact). */
    double number;
    bool is_int;
    int64_t integer;

    /* TG_JSON_STRING: UTF-8, NUL-terminated; `len` counts bytes and is the
     * length to trust when the text held \u0000. */
    const char *string;
    size_t len;

    /* TG_JSON_ARRAY and TG_JSON_OBJECT: `count` elements in `items`, in input
     * order; for an object keys[i] (NUL-terminated, key_lens[i] bytes) names
     * items[i]. */
    size_t count;
    tg_json **items;
    const char **keys;
    size_t *key_lens;
};

typedef struct tg_json_limits {
    int max_depth;   /* arrays/objects nested deeper than this fail; 0: 128 */
    size_t max_size; /* input longer than this fails; 0: 64 MiB */
} tg_json_limits;

/* Parse `len` bytes of `text` (need not be NUL-terminated). `source` names the
 * input in messages (a file name; NULL means "json"). On success *out is the
 * root. On failure returns TG_ERR_FORMAT (or TG_ERR_NOMEM) with a
 * "source:line:col: what" message and sets *out to NULL; the arena keeps
 * whatever was allocated until it is destroyed. */
tg_status tg_json_parse(tg_arena *arena, const char *text, size_t len, const char *source,
                        tg_json **out);
tg_status tg_json_parse_ex(tg_arena *arena, const char *text, size_t len, const char *source,
                           tg_json_limits limits, tg_json **out);

/* "null", "boolean", "number", "string", "array", "object". */
const char *tg_json_type_name(tg_json_type t);

/* The member of object `obj` named `key`, or NULL when obj is NULL, not an
 * object, or has no such key. Linear in the member count. */
const tg_json *tg_json_get(const tg_json *obj, const char *key);
/* Element i of an array, or NULL when out of range or not an array. */
const tg_json *tg_json_at(const tg_json *arr, size_t i);

/* Typed getters: a missing key or a value of the wrong type fails with
 * TG_ERR_NOT_FOUND or TG_ERR_FORMAT and a message naming source, position and
 * key. tg_json_get_int accepts exact integers (3, 3.0, 3e2) and fails for others
 * (2.5, 1e30). */
tg_status tg_json_get_string(const tg_json *obj, const char *key, const char **out);
tg_status tg_json_get_number(const tg_json *obj, const char *key, double *out);
tg_status tg_json_get_int(const tg_json *obj, const char *key, int64_t *out);
tg_status tg_json_get_bool(const tg_json *obj, const char *key, bool *out);
tg_status tg_json_get_array(const tg_json *obj, const char *key, const tg_json **out);
tg_status tg_json_get_object(const tg_json *obj, const char *key, const tg_json **out);

/* 1 if two trees hold the same JSON: same types, strings and keys byte for
 * byte, members in the same order, numbers equal as doubles (and as integers
 * when both are exact integers). Positions and sources are ignored. */
int tg_json_equal(const tg_json *a, const tg_json *b);

/* 1 if the `len` bytes at s are well-formed UTF-8 (no overlong forms, no
 * surrogates, nothing above U+10FFFF), else 0. */
int tg_json_utf8_valid(const char *s, size_t len);

/* ---- writer ----------------------------------------------------------------- */

#define TG_JSON_WRITER_MAX_DEPTH 128 /* as deep as the reader accepts by default */

typedef struct tg_json_writer {
    char *buf; /* NUL-terminated while no error occurred; owned (tg_malloc) */
    size_t len, cap;
    tg_status status;       /* first error, sticky */
    const char *error_what; /* its description (a static string) */
    int depth;
    /* Per open container: has it got an element yet (so the next needs ',');
     * and, for objects, is a key waiting for its value. */
    unsigned char has_item[TG_JSON_WRITER_MAX_DEPTH + 1];
    unsigned char is_object[TG_JSON_WRITER_MAX_DEPTH + 1];
    bool after_key;
} tg_json_writer;

void tg_json_writer_init(tg_json_writer *w);
/* Frees the buffer (unless taken by tg_json_writer_finish). */
void tg_json_writer_free(tg_json_writer *w);

void tg_json_begin_object(tg_json_writer *w);
void tg_json_end_object(tg_json_writer *w);
void tg_json_begin_array(tg_json_writer *w);
void tg_json_end_array(tg_json_writer *w);
/* Inside an object, the key for the value that follows. */
void tg_json_key(tg_json_writer *w, const char *key);
/* Strings are written as UTF-8 with ", \ and control characters escaped;
 * bytes that are not valid UTF-8 are written as U+FFFD, so the output is
 * always valid JSON. */
void tg_json_string(tg_json_writer *w, const char *s);
void tg_json_string_n(tg_json_writer *w, const char *s, size_t len);
void tg_json_int(tg_json_writer *w, int64_t v);
void tg_json_uint(tg_json_writer *w, uint64_t v);
/* Shortest decimal that reads back as the same double; NaN and infinities,
 * which JSON cannot hold, are written as null. */
void tg_json_number(tg_json_writer *w, double v);
void tg_json_bool(tg_json_writer *w, bool v);
void tg_json_null(tg_json_writer *w);
/* Write a parsed tree (exact integers stay exact). */
void tg_json_value(tg_json_writer *w, const tg_json *v);
/* Append `len` bytes verbatim (the caller vouches they are JSON). */
void tg_json_raw(tg_json_writer *w, const char *text, size_t len);

/* Check that the document is complete (every container closed) and return the
 * first error, with a message. On TG_OK, if `take` is non-NULL the buffer is
 * handed over (*take, to be freed with tg_free; the writer forgets it). */
tg_status tg_json_writer_finish(tg_json_writer *w, char **take, size_t *len);

#endif
