/* tests/tg_test_cli.c - the command runner of tg_test_cli.h. */
#include "tg_test_cli.h"

#include "tg_test.h"

#include "core/error.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

char tg_cli_output[1 << 21];

/* `prefix tilegraph ARGS` with its output as tg_cli_run keeps it. */
static int run_with(const char *dir, const char *prefix, const char *args, int with_err)
{
    char cmd[4096], path[512];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    snprintf(cmd, sizeof cmd, "%s%s/tilegraph %s > %s %s", prefix, TG_BINARY_DIR, args, path,
             with_err ? "2>&1" : "2>/dev/null");
    int r = system(cmd);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(tg_cli_output, 1, sizeof tg_cli_output - 1, f) : 0;
    tg_cli_output[n] = '\0';
    if (f)
        fclose(f);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

int tg_cli_run(const char *dir, const char *args, int with_err)
{
    return run_with(dir, "", args, with_err);
}

int tg_cli_run_bounded(const char *dir, const char *args, int seconds)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "timeout -s KILL %d ", seconds);
    return run_with(dir, prefix, args, 1);
}

const tg_json *tg_cli_json(const char *dir, tg_arena *arena, const char *args, const char *file,
                           int line)
{
    int rc = tg_cli_run(dir, args, 0);
    tg_json *root = NULL;
    if (rc != 0 ||
        tg_json_parse(arena, tg_cli_output, strlen(tg_cli_output), args, &root) != TG_OK) {
        tg_test_fail(file, line, "tilegraph %s: exit %d or not JSON: %s\n%.500s", args, rc,
                     tg_error_message(), tg_cli_output);
        return NULL;
    }
    return root;
}

double tg_cli_sql(const char *db, const char *sql, int a, int b)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    double out = NAN;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int(st, 1, a);
        sqlite3_bind_int(st, 2, b);
        if (sqlite3_step(st) == SQLITE_ROW)
            out = sqlite3_column_double(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return out;
}

double tg_cli_num(const tg_json *row, const char *key)
{
    const tg_json *v = tg_json_get(row, key);
    return v && v->type == TG_JSON_NUMBER ? v->number : NAN;
}

const char *tg_cli_str(const tg_json *row, const char *key)
{
    const tg_json *v = tg_json_get(row, key);
    return v && v->type == TG_JSON_STRING ? v->string : "";
}

int tg_cli_spawn(const char *dir, const char *out, const char *env_name, const char *env_value,
                 const char *args)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (dir && chdir(dir) != 0)
            _exit(127);
        if (env_name)
            setenv(env_name, env_value, 1);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        char bin[512];
        snprintf(bin, sizeof bin, "%s/tilegraph", TG_BINARY_DIR);
        execl("/bin/sh", "sh", "-c", "exec \"$0\" $1", bin, args, (char *)NULL);
        _exit(127);
    }
    return (int)pid;
}

bool tg_cli_same_file(const char *dir, const char *a, const char *b)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cmp -s %s/%s %s/%s", dir, a, dir, b);
    return system(cmd) == 0;
}

double tg_cli_row_bytes(const char *out, const char *row)
{
    const char *at = strstr(out, row);
    double v = -1;
    char unit[8] = "";
    if (at && sscanf(at + strlen(row), " %lf %7s", &v, unit) == 2) {
        if (!strcmp(unit, "KiB"))
            v *= 1024;
        else if (!strcmp(unit, "MiB"))
            v *= 1024 * 1024;
    }
    return v;
}
