/* runtime/monitor.c - the process registry (tilegraph/monitor.h): sessions
 * write their record, readers list the live ones.
 *
 * A record is REGISTRY/PID-SEQ.json (SEQ numbers the sessions of one
 * process, which may run a training and an inference session at once),
 * written through tg_atomic_file so a reader never sees half a record.
 */
#define _GNU_SOURCE
#include "runtime/monitor.h"

#include "tilegraph/monitor.h"

#include "compile/placement.h"
#include "core/alloc.h"
#include "core/arena.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct tg_monitor {
    char path[1024];
    tg_monitor_entry e;
    int64_t samples_per_run;
    double last_write, last_samples_time;
    int64_t last_samples;
};

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

tg_status tg_monitor_dir(char *buf, size_t cap)
{
    const char *env = getenv("TILEGRAPH_MONITOR_DIR");
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n = env && *env   ? snprintf(buf, cap, "%s", env)
            : xdg && *xdg ? snprintf(buf, cap, "%s/tilegraph", xdg)
                          : snprintf(buf, cap, "/tmp/tilegraph-%u", (unsigned)getuid());
    if (n < 0 || (size_t)n >= cap)
        return tg_error(TG_ERR_INVALID_ARG, "monitor: the registry directory name is too long");
    return TG_OK;
}

int64_t tg_process_start_ticks(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* the command name (field 2) may hold spaces and ')': start after the last ')' */
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    p++;
    /* a zombie (Z) or dead (X) process answers kill(pid, 0) but runs no more */
    if (p[0] == ' ' && (p[1] == 'Z' || p[1] == 'X'))
        return -1;
    for (int field = 3; field < 22 && *p; field++) {
        p = strchr(p + 1, ' ');
        if (!p)
            return -1;
    }
    return strtoll(p, NULL, 10);
}

/* The command line, arguments joined by spaces. */
static void own_command(char *out, size_t cap)
{
    out[0] = 0;
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f)
        return;
    size_t n = fread(out, 1, cap - 1, f);
    fclose(f);
    out[n] = 0;
    while (n > 0 && out[n - 1] == 0)
        n--;
    for (size_t i = 0; i < n; i++)
        if (out[i] == 0)
            out[i] = ' ';
}

static bool monitoring_wanted(const tg_config *c)
{
    const char *env = getenv("TILEGRAPH_MONITOR");
    if (env && (!strcmp(env, "0") || !strcmp(env, "false") || !strcmp(env, "off")))
        return false;
    return c->monitor;
}

/* One warning per process: a registry that cannot be written is not the
 * user's problem, but they should know why `tilegraph monitor` misses it. */
static void warn_once(const char *what)
{
    static int warned;
    if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        return;
    fprintf(stderr,
            "tilegraph: warning: not listed by `tilegraph monitor`: %s "
            "(set TILEGRAPH_MONITOR=0 to stop trying)\n",
            what);
}

static void write_record(tg_monitor *m)
{
    const tg_monitor_entry *e = &m->e;
    tg_json_writer w;
    tg_json_writer_init(&w);
    tg_json_begin_object(&w);
#define KEY_INT(k, v) (tg_json_key(&w, k), tg_json_int(&w, (int64_t)(v)))
#define KEY_STR(k, v) (tg_json_key(&w, k), tg_json_string(&w, v))
#define KEY_NUM(k, v) (tg_json_key(&w, k), tg_json_number(&w, v))
    KEY_INT("format", 1);
    KEY_INT("pid", e->pid);
    KEY_INT("start_ticks", e->start_ticks);
    KEY_STR("command", e->command);
    KEY_STR("program", e->program);
    KEY_STR("target", e->target);
    KEY_STR("strategy", e->strategy);
    KEY_INT("instance", e->instance);
    KEY_INT("instances", e->instances);
    KEY_INT("replicas", e->replicas);
    KEY_INT("devices", e->devices);
    tg_json_key(&w, "memory");
    tg_json_begin_array(&w);
    for (int d = 0; d < e->devices; d++)
        tg_json_int(&w, e->memory[d]);
    tg_json_end_array(&w);
    KEY_INT("steps", e->steps);
    KEY_INT("samples", e->samples);
    KEY_NUM("samples_per_second", e->samples_per_second);
    KEY_NUM("started", e->started);
    KEY_NUM("updated", e->updated);
    tg_json_end_object(&w);
    char *text = NULL;
    size_t len = 0;
    if (tg_json_writer_finish(&w, &text, &len) != TG_OK ||
        tg_atomic_file_write(m->path, text, len) != TG_OK)
        warn_once(tg_error_message());
    tg_free(text);
    tg_json_writer_free(&w);
}

/* Under mpirun each rank learns its place from Open MPI's environment. */
static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

static void describe(tg_monitor_entry *e, const tg_program *p)
{
    e->pid = (int)getpid();
    e->start_ticks = tg_process_start_ticks(e->pid);
    own_command(e->command, sizeof e->command);
    snprintf(e->program, sizeof e->program, "%s", p->training ? "training" : "inference");
    snprintf(e->target, sizeof e->target, "%s", p->config.target.name);
    snprintf(e->strategy, sizeof e->strategy, "%s", p->config.pipeline.strategy);
    e->instance = env_int("OMPI_COMM_WORLD_RANK", 0);
    e->instances = env_int("OMPI_COMM_WORLD_SIZE", 1);
    e->replicas = p->replicas;
    e->devices = p->n_devices < TG_MONITOR_MAX_DEVICES ? p->n_devices : TG_MONITOR_MAX_DEVICES;
    for (int d = 0; d < e->devices; d++)
        e->memory[d] = (int64_t)p->devices[d].arena_bytes;
    e->started = e->updated = wall_now();
}

tg_monitor *tg_monitor_start(const tg_program *p, int64_t samples_per_run)
{
    if (!monitoring_wanted(&p->config))
        return NULL;
    char dir[900];
    if (tg_monitor_dir(dir, sizeof dir) != TG_OK) {
        warn_once(tg_error_message());
        return NULL;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        char msg[1024];
        snprintf(msg, sizeof msg, "cannot create %s: %s", dir, strerror(errno));
        warn_once(msg);
        return NULL;
    }
    tg_monitor *m = tg_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    static int sequence;
    int seq = __atomic_add_fetch(&sequence, 1, __ATOMIC_RELAXED);
    snprintf(m->path, sizeof m->path, "%s/%d-%d.json", dir, (int)getpid(), seq);
    describe(&m->e, p);
    m->samples_per_run = samples_per_run;
    m->last_write = m->last_samples_time = m->e.started;
    write_record(m);
    return m;
}

void tg_monitor_step(tg_monitor *m)
{
    if (!m)
        return;
    m->e.steps++;
    m->e.samples += m->samples_per_run;
    double now = wall_now();
    if (now - m->last_write < TG_MONITOR_PERIOD)
        return;
    m->e.samples_per_second =
        (double)(m->e.samples - m->last_samples) / (now - m->last_samples_time);
    m->last_samples = m->e.samples;
    m->last_samples_time = m->last_write = m->e.updated = now;
    write_record(m);
}

void tg_monitor_stop(tg_monitor *m)
{
    if (!m)
        return;
    unlink(m->path);
    tg_free(m);
}

/* ---- reading ------------------------------------------------------------------ */

static void copy_string(const tg_json *obj, const char *key, char *out, size_t cap)
{
    const char *v = NULL;
    if (tg_json_get_string(obj, key, &v) == TG_OK)
        snprintf(out, cap, "%s", v);
}

static int64_t get_int(const tg_json *obj, const char *key)
{
    int64_t v = 0;
    (void)tg_json_get_int(obj, key, &v);
    return v;
}

static double get_number(const tg_json *obj, const char *key)
{
    double v = 0;
    (void)tg_json_get_number(obj, key, &v);
    return v;
}

/* Parse one record; false when it is not one. */
static bool parse_record(const char *text, size_t len, const char *path, tg_monitor_entry *e)
{
    tg_arena *a = tg_arena_create(4096);
    tg_json *root = NULL;
    bool ok = a && tg_json_parse(a, text, len, path, &root) == TG_OK &&
              root->type == TG_JSON_OBJECT && get_int(root, "format") == 1 &&
              get_int(root, "pid") > 0;
    if (ok) {
        memset(e, 0, sizeof *e);
        e->pid = (int)get_int(root, "pid");
        e->start_ticks = get_int(root, "start_ticks");
        copy_string(root, "command", e->command, sizeof e->command);
        copy_string(root, "program", e->program, sizeof e->program);
        copy_string(root, "target", e->target, sizeof e->target);
        copy_string(root, "strategy", e->strategy, sizeof e->strategy);
        e->instance = (int)get_int(root, "instance");
        e->instances = (int)get_int(root, "instances");
        e->replicas = (int)get_int(root, "replicas");
        const tg_json *mem = tg_json_get(root, "memory");
        for (size_t d = 0; mem && d < mem->count && d < TG_MONITOR_MAX_DEVICES; d++)
            if (mem->items[d]->type == TG_JSON_NUMBER)
                e->memory[e->devices++] = mem->items[d]->integer;
        e->steps = get_int(root, "steps");
        e->samples = get_int(root, "samples");
        e->samples_per_second = get_number(root, "samples_per_second");
        e->started = get_number(root, "started");
        e->updated = get_number(root, "updated");
    }
    tg_arena_destroy(a);
    return ok;
}

static bool read_small_file(const char *path, char *buf, size_t cap, size_t *len)
{
    FILE *f = NULL;
    if (tg_fopen_regular(path, &f) != TG_OK)
        return false;
    *len = fread(buf, 1, cap, f);
    bool whole = feof(f) || fgetc(f) == EOF;
    fclose(f);
    return whole && *len > 0;
}

/* A process is the one that wrote the record if it runs and started when the
 * record says (pids are reused). */
static bool still_running(const tg_monitor_entry *e)
{
    if (kill(e->pid, 0) != 0 && errno != EPERM)
        return false;
    return tg_process_start_ticks(e->pid) == e->start_ticks;
}

static int by_pid(const void *a, const void *b)
{
    const tg_monitor_entry *x = a, *y = b;
    return x->pid != y->pid ? (x->pid > y->pid) - (x->pid < y->pid)
                            : (x->started > y->started) - (x->started < y->started);
}

static bool is_record_name(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && !strcmp(name + n - 5, ".json") && name[0] >= '1' && name[0] <= '9';
}

tg_status tg_monitor_list(tg_monitor_entry **out, int *n)
{
    *out = NULL;
    *n = 0;
    char dir[900];
    TG_TRY(tg_monitor_dir(dir, sizeof dir));
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT
                   ? TG_OK
                   : tg_error(TG_ERR_IO, "monitor: cannot read %s: %s", dir, strerror(errno));
    (void)tg_atomic_file_clean_stale_prefix(dir, ""); /* records torn by kill -9 */
    tg_monitor_entry *list = NULL;
    int count = 0, cap = 0;
    tg_status st = TG_OK;
    struct dirent *de;
    while (st == TG_OK && (de = readdir(d))) {
        if (!is_record_name(de->d_name))
            continue;
        char path[1200], text[8192];
        size_t len = 0;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        tg_monitor_entry e;
        if (!read_small_file(path, text, sizeof text, &len) || !parse_record(text, len, path, &e))
            continue;
        if (!still_running(&e)) {
            unlink(path); /* forget it; fails harmlessly in a read-only registry */
            continue;
        }
        if (count == cap) {
            cap = cap ? 2 * cap : 8;
            tg_monitor_entry *grown = tg_realloc(list, (size_t)cap * sizeof *list);
            if (!grown) {
                st = tg_error(TG_ERR_NOMEM, "monitor: out of memory");
                break;
            }
            list = grown;
        }
        list[count++] = e;
    }
    closedir(d);
    if (st != TG_OK) {
        tg_free(list);
        return st;
    }
    if (count)
        qsort(list, (size_t)count, sizeof *list, by_pid);
    *out = list;
    *n = count;
    return TG_OK;
}

void tg_monitor_list_free(tg_monitor_entry *entries)
{
    tg_free(entries);
}
