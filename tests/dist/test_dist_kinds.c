/* tests/dist/test_dist_kinds.c - two instances at the same collective of
 * the job in different collectives (issue 46: one gathers, as a save does,
 * the other sums, as an evaluation does) fail naming both, instead of
 * waiting for each other for ever (runtime/dist_watch.c).
 *
 * Run by CTest, it starts itself as 2 instances under mpirun, bounded by
 * timeout(1): a hang is exit 137, a failure of the test, not of the suite.
 * Each instance then agrees on one value (a sum, tg_dist_sum_i64) and, in
 * its second collective, instance 0 sums a value while instance 1 gathers
 * one (tg_dist_agree_values: the same 8 bytes, which MPI exchanged as if
 * they matched, silently) or a megabyte (as a save's gather meets an
 * evaluation's sum: MPI failed inside with a truncation error, and a hang
 * is the other way such a clash ends).
 * Skipped (77) without mpirun. TG_TEST_LABELS: mpi */
#include "tg_test.h"

#include "tilegraph/dist.h"
#include "tilegraph/status.h"

#include "runtime/dist.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BOUND_S 60
#define GATHER (1 << 20) /* bytes from each, as a save gathers a state */

/* One instance of the job: exit 0 only if the clash was not noticed.
 * Instance 1's second collective: 8 bytes (`small`) or GATHER bytes. */
static int instance_main(bool small)
{
    if (tg_dist_init(NULL, NULL) != TG_OK || tg_dist_instances() != 2) {
        fprintf(stderr, "test_dist_kinds: not 2 instances: %s\n", tg_error_message());
        return 3;
    }
    int64_t v = 1;
    tg_status s = tg_dist_sum_i64(&v, 1); /* both: collective 1, a sum */
    if (s == TG_OK && tg_dist_instance() == 0) {
        s = tg_dist_sum_i64(&v, 1);
    } else if (s == TG_OK && small) {
        const char *names[] = {"value"};
        s = tg_dist_agree_values(names, &v, 1, "(the test's advice)");
    } else if (s == TG_OK) {
        static char send[GATHER], recv[2 * GATHER];
        s = tg_dist_allgather(send, recv, GATHER);
    }
    if (s != TG_OK) {
        fprintf(stderr, "instance %d: %s\n", tg_dist_instance(), tg_error_message());
        tg_dist_abort(1); /* as the CLI and the Python package do */
    }
    tg_dist_finalize();
    return 0;
}

static void expect_refused(const char *which, const char *gather)
{
    char dir[] = "/tmp/tg_dist_kinds_XXXXXX";
    static char out[1 << 16];
    TG_CHECK(TG_MKDTEMP(dir) != NULL);
    int code = tg_test_mpi_self(dir, NULL, which, BOUND_S, out, sizeof out);
    TG_CHECK(code != 0);
    if (!strstr(out, "called different collectives at their collective 2 over the job") ||
        !strstr(out, gather) || !strstr(out, "a sum of 8 bytes from each"))
        tg_test_fail(__FILE__, __LINE__, "%s: no message naming both collectives (exit %d):\n%s",
                     which, code, out);
    rmdir(dir);
}

/* The same 8 bytes: MPI completed both with the other's data. */
static void test_gather_against_sum_of_same_bytes(void)
{
    expect_refused("small", "a gather of 8 bytes from each");
}

/* A save's gather against a sum: MPI failed inside with a truncation. */
static void test_large_gather_against_sum(void)
{
    expect_refused("large", "a gather of 1048576 bytes from each");
}

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "small") == 0 || strcmp(argv[1], "large") == 0))
        return instance_main(strcmp(argv[1], "small") == 0);
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("skipped: no mpirun (openmpi-bin)\n");
        return 77;
    }
    TG_RUN(test_gather_against_sum_of_same_bytes);
    TG_RUN(test_large_gather_against_sum);
    return tg_test_finish();
}
