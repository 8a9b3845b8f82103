/* tests/onnx/test_onnx_docs.c - docs/onnx.md's list of supported ops is
 * the importer's op tables (tg_onnx_supported_ops), generated: the test
 * fails when the two differ, and `--update-docs` rewrites the list.
 */
#include "tg_test.h"

#include "onnx_docs.h"

#include "tilegraph/onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The comma-separated list wrapped at 76 columns, alphabetical. */
static void wrapped_list(char *out, size_t cap)
{
    char ops[256][64];
    int n = 0;
    const char *p = tg_onnx_supported_ops();
    while (*p && n < 256) {
        size_t len = strcspn(p, ",");
        snprintf(ops[n++], sizeof ops[0], "%.*s", (int)len, p);
        p += len;
        p += strspn(p, ", ");
    }
    qsort(ops, (size_t)n, sizeof ops[0], (int (*)(const void *, const void *))strcmp);
    size_t used = 0, col = 0;
    out[0] = '\0';
    for (int k = 0; k < n && used < cap; k++) {
        size_t len = strlen(ops[k]) + (k + 1 < n ? 1 : 0);
        if (col && col + 1 + len > 76) {
            used += (size_t)snprintf(out + used, cap - used, "\n");
            col = 0;
        } else if (col) {
            used += (size_t)snprintf(out + used, cap - used, " ");
            col++;
        }
        used += (size_t)snprintf(out + used, cap - used, "%s%s", ops[k], k + 1 < n ? "," : "");
        col += len;
    }
    if (used < cap)
        snprintf(out + used, cap - used, "\n");
}

static bool update;

static void test_supported_ops_documented(void)
{
    static char list[8192];
    wrapped_list(list, sizeof list);
    TG_CHECK(strstr(list, "Conv,") != NULL && strstr(list, "GatherElements,") != NULL);
    TG_CHECK(onnx_docs_section("supported-ops", list, update,
                               "build/tests/onnx_test_onnx_docs --update-docs"));
}

int main(int argc, char **argv)
{
    update = argc > 1 && !strcmp(argv[1], "--update-docs");
    TG_RUN(test_supported_ops_documented);
    return tg_test_finish();
}
