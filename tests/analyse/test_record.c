/* tests/analyse/test_record.c - tg_print_record (analyse/record.c), the
 * one-line JSON records of `train --json`: fields in order, a name that
 * needs escaping stays one JSON string, integers exact, a NaN or infinite
 * number prints null (never `nan`), and the shortest exact form of a double.
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "analyse/analyse.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void record_text(const tg_record_field *f, int n, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *out = tmpfile();
    TG_CHECK(out != NULL);
    if (!out)
        return;
    TG_CHECK_OK(tg_print_record(out, f, n));
    rewind(out);
    size_t len = fread(buf, 1, cap - 1, out);
    buf[len] = '\0';
    fclose(out);
}

static void test_fields_in_order(void)
{
    const tg_record_field f[] = {
        {"model", TG_RECORD_STRING, "my \"net\"\n", 0, 0},
        {"epoch", TG_RECORD_INT, NULL, 9007199254740993LL, 0},
        {"loss", TG_RECORD_NUMBER, NULL, 0, 0.1},
        {"accuracy", TG_RECORD_NUMBER, NULL, 0, NAN},
        {"scale", TG_RECORD_NUMBER, NULL, 0, INFINITY},
    };
    char buf[512];
    record_text(f, 5, buf, sizeof buf);
    TG_CHECK(!strcmp(buf, "{\"model\":\"my \\\"net\\\"\\n\",\"epoch\":9007199254740993,"
                          "\"loss\":0.1,\"accuracy\":null,\"scale\":null}\n"));
}

static void test_empty_record(void)
{
    char buf[64];
    record_text(NULL, 0, buf, sizeof buf);
    TG_CHECK(!strcmp(buf, "{}\n"));
}

int main(void)
{
    TG_RUN(test_fields_in_order);
    TG_RUN(test_empty_record);
    return tg_test_finish();
}
