/* tests/analyse/test_views_time.c - the trace view's transfers (issue 15,
 * "execution trace: bytes per stream copy and per inter-device copy"): per
 * device the host streams (Rx from the host, Tx to it) and the inter-device
 * copies sent (Tx, recorded on the sender) and received (Rx, the same
 * events seen from the receiver), with counts and bytes equal to SQL on the
 * profile's trace, on the cpu target and on mk2 (whose copies and streams
 * have the cycle model's time); and repeated executions grouped per
 * device, step and phase (count and total equal to SQL), or each on its
 * own row with --no-group. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256], db[512];

static double sql(const char *q, int device, int peer)
{
    return tg_cli_sql(db, q, device, peer);
}

#define RUN0 "run = (SELECT MIN(run) FROM trace) AND replica = 0"

static void check_transfers(const char *profile)
{
    snprintf(db, sizeof db, "%s", profile);
    tg_arena *arena = tg_arena_create(1 << 20);
    char args[700];
    snprintf(args, sizeof args, "analyse %s trace --json", db);
    const tg_json *root = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    const tg_json *tables = root ? tg_json_get(root, "tables") : NULL, *rows = NULL;
    for (size_t i = 0; tables && i < tables->count; i++) {
        const tg_json *t = tg_json_get(tables->items[i], "title");
        if (t && !strncmp(t->string, "Transfers", 9))
            rows = tg_json_get(tables->items[i], "rows");
    }
    TG_CHECK(rows && rows->count > 0);
    int checked = 0, tx = 0, rx = 0;
    for (size_t i = 0; rows && i < rows->count; i++) {
        const tg_json *row = rows->items[i];
        int d = (int)tg_cli_num(row, "device"), peer = (int)tg_cli_num(row, "peer");
        const char *what = tg_cli_str(row, "transfer");
        double bytes = tg_cli_num(row, "bytes"), count = tg_cli_num(row, "count"), want = NAN,
               want_n = NAN;
        if (!strcmp(what, "copy to device (Tx)")) {
            want = sql("SELECT SUM(bytes) FROM trace WHERE " RUN0 " AND kind = 'copy to device' "
                       "AND device = ?1 AND peer = ?2",
                       d, peer);
            want_n = sql("SELECT COUNT(*) FROM trace WHERE " RUN0 " AND kind = 'copy to device' "
                         "AND device = ?1 AND peer = ?2",
                         d, peer);
            tx++;
        } else if (!strcmp(what, "copy from device (Rx)")) {
            want = sql("SELECT SUM(bytes) FROM trace WHERE " RUN0 " AND kind = 'copy to device' "
                       "AND peer = ?1 AND device = ?2",
                       d, peer);
            want_n = sql("SELECT COUNT(*) FROM trace WHERE " RUN0 " AND kind = 'copy to device' "
                         "AND peer = ?1 AND device = ?2",
                         d, peer);
            rx++;
        } else if (!strcmp(what, "stream from host (Rx)") || !strcmp(what, "stream to host (Tx)")) {
            const char *q = what[7] == 'f'
                                ? "SELECT SUM(bytes) FROM trace WHERE " RUN0
                                  " AND kind = 'stream from host' AND device = ?1 AND ?2 = ?2"
                                : "SELECT SUM(bytes) FROM trace WHERE " RUN0
                                  " AND kind = 'stream to host' AND device = ?1 AND ?2 = ?2";
            want = sql(q, d, 0);
            want_n = count;
        }
        if (bytes == want && count == want_n)
            checked++;
        else
            tg_test_fail(__FILE__, __LINE__, "device %d %s peer %d: %g bytes x %g, SQL %g x %g", d,
                         what, peer, bytes, count, want, want_n);
    }
    TG_CHECK(tx > 0 && tx == rx); /* every copy sent is received */
    TG_CHECK(checked == (int)(rows ? rows->count : 0));
    double all_tx = sql("SELECT SUM(bytes) FROM trace WHERE " RUN0 " AND kind = 'copy to device' "
                        "AND ?1 = ?2",
                        0, 0);
    TG_CHECK(all_tx > 0);
    /* time too: on mk2 the copies were drawn as 0 ns */
    TG_CHECK(sql("SELECT MIN(end_ns - start_ns) FROM trace WHERE " RUN0
                 " AND kind = 'copy to device' AND ?1 = ?2",
                 0, 0) > 0);
    tg_arena_destroy(arena);
}

static void test_transfers(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/cpu/training/profile.sqlite", tmpdir);
    check_transfers(path);
    snprintf(path, sizeof path, "%s/mk2/training/profile.sqlite", tmpdir);
    check_transfers(path);
}

/* The table titled `prefix...` of `analyse DB trace [extra] --json`. */
static const tg_json *trace_table(tg_arena *arena, const char *extra, const char *prefix)
{
    char args[700];
    snprintf(args, sizeof args, "analyse %s trace %s --json", db, extra);
    const tg_json *root = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    const tg_json *tables = root ? tg_json_get(root, "tables") : NULL;
    for (size_t i = 0; tables && i < tables->count; i++) {
        const tg_json *t = tg_json_get(tables->items[i], "title");
        if (t && !strncmp(t->string, prefix, strlen(prefix)))
            return tg_json_get(tables->items[i], "rows");
    }
    return NULL;
}

static void test_repeated_executions(void)
{
    snprintf(db, sizeof db, "%s/cpu/training/profile.sqlite", tmpdir);
    tg_arena *arena = tg_arena_create(1 << 22);
    const tg_json *rows = trace_table(arena, "", "Repeated executions, grouped");
    TG_CHECK(rows && rows->count > 0);
    int grouped = 0;
    double executions = 0;
    for (size_t i = 0; rows && i < rows->count; i++) {
        const tg_json *row = rows->items[i];
        int d = (int)tg_cli_num(row, "device");
        char q[400];
        snprintf(q, sizeof q,
                 "SELECT %s FROM trace WHERE " RUN0 " AND device = ?1 AND ?2 = ?2 AND kind = '%s' "
                 "AND phase = '%s'",
                 "COUNT(*)", tg_cli_str(row, "step"), tg_cli_str(row, "phase"));
        double n = sql(q, d, 0);
        snprintf(q, sizeof q,
                 "SELECT SUM(end_ns - start_ns) FROM trace WHERE " RUN0 " AND device = ?1 AND "
                 "?2 = ?2 AND kind = '%s' AND phase = '%s'",
                 tg_cli_str(row, "step"), tg_cli_str(row, "phase"));
        double total = sql(q, d, 0);
        if (tg_cli_num(row, "count") == n && tg_cli_num(row, "total") == total &&
            tg_cli_num(row, "min") <= tg_cli_num(row, "mean") &&
            tg_cli_num(row, "mean") <= tg_cli_num(row, "max"))
            grouped++;
        executions += n;
    }
    TG_CHECK(grouped == (int)(rows ? rows->count : 0));
    double all = sql("SELECT COUNT(*) FROM trace WHERE " RUN0 " AND ?1 = ?2", 0, 0);
    TG_CHECK(executions == all && all > (rows ? (double)rows->count : all)); /* some fold */
    rows = trace_table(arena, "--no-group", "Executions (first");
    TG_CHECK(rows && (double)rows->count == all);
    TG_CHECK(trace_table(arena, "--no-group", "Repeated executions") == NULL);
    tg_arena_destroy(arena);
}

int main(void)
{
    int begun = tg_test_fashion_tmpdir("views_time", tmpdir, sizeof tmpdir);
    if (begun)
        return begun;
    char cmd[1400];
    snprintf(cmd, sizeof cmd,
             "%s/tilegraph train --model mnist-pipeline --strategy pipelined "
             "--gradient-accumulation 4 --batch-size 8 --train-limit 64 --test-limit 16 --quiet "
             "--profile-dir %s/cpu > %s/train.txt 2>&1 && "
             "%s/tilegraph train --model mnist-pipeline --strategy pipelined "
             "--gradient-accumulation 4 --batch-size 8 --train-limit 64 --test-limit 16 --quiet "
             "--target mk2 --profile-dir %s/mk2 >> %s/train.txt 2>&1",
             TG_BINARY_DIR, tmpdir, tmpdir, TG_BINARY_DIR, tmpdir, tmpdir);
    if (system(cmd) != 0) {
        fprintf(stderr, "training failed; see %s/train.txt\n", tmpdir);
        return 1;
    }
    TG_RUN(test_transfers);
    TG_RUN(test_repeated_executions);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
