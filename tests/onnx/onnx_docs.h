/* tests/onnx/onnx_docs.h - generated sections of docs/onnx.md: the text
 * between "<!-- NAME:begin -->" and "<!-- NAME:end -->" is written by a
 * test (its --update-docs mode) and checked by the same test on every run,
 * so the documented op list and conformance table cannot drift from the
 * importer (header-only: each test is its own executable). */
#ifndef TG_TESTS_ONNX_DOCS_H
#define TG_TESTS_ONNX_DOCS_H

#include "tg_test.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ONNX_DOCS TG_SOURCE_DIR "/docs/onnx.md"

/* docs/onnx.md's text (NUL-terminated, malloc'd) and its length; NULL
 * (and 0) when it cannot be read. */
static char *onnx_docs_read(size_t *len)
{
    *len = 0;
    return tg_test_read_file(ONNX_DOCS, len);
}

/* The section's body (between the marker lines) in *start / *end of doc;
 * false if the markers are missing. */
static bool onnx_docs_find(const char *doc, const char *name, const char **start, const char **end)
{
    char begin[96], stop[96];
    snprintf(begin, sizeof begin, "<!-- %s:begin -->\n", name);
    snprintf(stop, sizeof stop, "<!-- %s:end -->", name);
    const char *b = strstr(doc, begin);
    const char *e = b ? strstr(b, stop) : NULL;
    if (!e)
        return false;
    *start = b + strlen(begin);
    *end = e;
    return true;
}

/* Whether section `name` of docs/onnx.md is `text`; with update, rewrite
 * it to be. A message says what differs and how to regenerate. */
static bool onnx_docs_section(const char *name, const char *text, bool update, const char *how)
{
    size_t len;
    char *doc = onnx_docs_read(&len);
    const char *s, *e;
    if (!doc || !onnx_docs_find(doc, name, &s, &e)) {
        printf("docs/onnx.md has no section '<!-- %s:begin -->' ... '<!-- %s:end -->'\n", name,
               name);
        free(doc);
        return false;
    }
    bool same = (size_t)(e - s) == strlen(text) && !memcmp(s, text, strlen(text));
    if (!same && update) {
        FILE *f = fopen(ONNX_DOCS, "wb");
        if (f) {
            fwrite(doc, 1, (size_t)(s - doc), f);
            fputs(text, f);
            fputs(e, f);
            same = fclose(f) == 0;
        }
        printf("%s docs/onnx.md section '%s'\n", same ? "rewrote" : "could not rewrite", name);
    } else if (!same) {
        printf("docs/onnx.md section '%s' differs from what this run generates; regenerate it "
               "with %s\n--- generated:\n%s---\n",
               name, how, text);
    }
    free(doc);
    return same;
}

#endif
