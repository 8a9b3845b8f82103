/* tests/tg_test_cli.h - running the `tilegraph` command from tests: the
 * build tree's binary, its output captured through a file in the test's
 * temporary directory. */
#ifndef TG_TEST_CLI_H
#define TG_TEST_CLI_H

#include "core/arena.h"
#include <stdbool.h>
#include "core/json.h"

/* What the last tg_cli_run printed. */
extern char tg_cli_output[1 << 21];

/* Run `tilegraph ARGS` with its output in dir/out.txt: stdout into
 * tg_cli_output, and stderr too when with_err. Returns the exit code. */
int tg_cli_run(const char *dir, const char *args, int with_err);

/* Start `tilegraph ARGS` in the background in directory dir (NULL: this
 * one) with stdout and stderr in the file `out` (relative to dir) and, with
 * env_name non-NULL, that variable set; returns its pid (wait for it). */
int tg_cli_spawn(const char *dir, const char *out, const char *env_name, const char *env_value,
                 const char *args);

/* tg_cli_run (stdout and stderr) under timeout(1) with SIGKILL after
 * `seconds`: a hang is exit 137, not a hung suite. */
int tg_cli_run_bounded(const char *dir, const char *args, int seconds);

/* Run and parse the JSON it prints; NULL (and a test failure) when it exits
 * non-zero or prints something else. */
const tg_json *tg_cli_json(const char *dir, tg_arena *arena, const char *args, const char *file,
                           int line);

/* Whether files a and b of directory dir hold the same bytes (cmp -s). */
bool tg_cli_same_file(const char *dir, const char *a, const char *b);

/* The bytes on the line of `out` that starts with `row` ("  weights 352
 * KiB" -> 360448: B, KiB or MiB); -1 when it is missing. */
double tg_cli_row_bytes(const char *out, const char *row);

/* The first column of the first row of `sql` on the SQLite file `db`
 * (read-only), with ?1 = a and ?2 = b bound (a NULL reads 0); NAN when
 * there is no row or the query fails. */
double tg_cli_sql(const char *db, const char *sql, int a, int b);

/* A row's number (NAN when missing) and string ("" when missing). */
double tg_cli_num(const tg_json *row, const char *key);
const char *tg_cli_str(const tg_json *row, const char *key);

/* The command exits with `code` and its output (stdout and stderr) holds `text`. */
#define TG_CLI_EXPECT(dir, args, code, text)                                                       \
    do {                                                                                           \
        int rc_ = tg_cli_run(dir, args, 1);                                                        \
        if (rc_ != (code) || !strstr(tg_cli_output, text))                                         \
            tg_test_fail(__FILE__, __LINE__,                                                       \
                         "tilegraph %s: exit %d (want %d, '%s'), output:\n%.2000s", args, rc_,     \
                         code, text, tg_cli_output);                                               \
    } while (0)

#endif
