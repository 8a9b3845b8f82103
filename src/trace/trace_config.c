/* trace/trace_config.c - switching the host trace on and off, and where it
 * is written.
 *
 * The configuration is a JSON object (from TILEGRAPH_TRACE, the engine
 * options or a C string) resolved into a tg_trace_settings and handed to the
 * recorder in one piece, so a configuration with an error changes nothing.
 * Values may be JSON strings, as in POPLAR_ENGINE_OPTIONS ("true", "100"), or
 * the matching JSON types.
 */
#include "trace/trace_internal.h"

#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define VALID_KEYS "enable, directory, channels, maxEventsPerThread, heatmapIntervalMs"

void tg_trace_settings_default(tg_trace_settings *s)
{
    memset(s, 0, sizeof *s);
    s->enable = false;
    s->all_channels = true;
    snprintf(s->directory, sizeof s->directory, ".");
    s->max_events = 1 << 20;
    s->heatmap_interval_ns = 100 * 1000000LL;
}

/* ---- parsing ------------------------------------------------------------------------ */

static tg_status bad(const tg_json *v, const char *key, const char *what)
{
    return tg_error(TG_ERR_CONFIG, "%s:%d:%d: key '%s' %s", v->source, v->line, v->col, key, what);
}

static tg_status parse_bool(const tg_json *v, const char *key, bool *out)
{
    if (v->type == TG_JSON_BOOL) {
        *out = v->boolean;
        return TG_OK;
    }
    if (v->type == TG_JSON_STRING && (!strcmp(v->string, "true") || !strcmp(v->string, "false"))) {
        *out = v->string[0] == 't';
        return TG_OK;
    }
    return bad(v, key, "must be \"true\" or \"false\"");
}

/* A JSON number or a string holding one; must be finite. */
static tg_status parse_number(const tg_json *v, const char *key, double *out)
{
    if (v->type == TG_JSON_NUMBER) {
        *out = v->number;
        return TG_OK;
    }
    if (v->type == TG_JSON_STRING && v->len > 0) {
        char *end = NULL;
        errno = 0;
        double x = strtod(v->string, &end);
        if (*end == '\0' && errno == 0 && isfinite(x)) {
            *out = x;
            return TG_OK;
        }
    }
    return bad(v, key, "must be a number");
}

static tg_status parse_channels(const tg_json *v, tg_trace_settings *s)
{
    if (v->type != TG_JSON_ARRAY)
        return bad(v, "channels", "must be an array of channel names, like [\"engine\", \"data\"]");
    s->all_channels = false;
    s->n_channels = 0;
    for (size_t i = 0; i < v->count; i++) {
        const tg_json *c = v->items[i];
        if (c->type != TG_JSON_STRING)
            return bad(c, "channels", "must hold strings");
        if (!strcmp(c->string, "*")) {
            s->all_channels = true;
            continue;
        }
        if (!tg_trace_channel_name_valid(c->string, c->len))
            return tg_error(TG_ERR_CONFIG,
                            "%s:%d:%d: key 'channels': '%s' is not a channel name (1 to %d of "
                            "A-Z a-z 0-9 _ . -)",
                            c->source, c->line, c->col, c->string, TG_TRACE_CHANNEL_NAME_MAX);
        bool dup = false;
        for (int k = 0; k < s->n_channels; k++)
            dup |= strcmp(s->channels[k], c->string) == 0;
        if (dup)
            continue;
        if (s->n_channels == TG_TRACE_MAX_CHANNELS)
            return bad(c, "channels", "names more channels than there can be");
        snprintf(s->channels[s->n_channels++], sizeof s->channels[0], "%s", c->string);
    }
    return TG_OK;
}

static tg_status parse_member(const char *key, const tg_json *v, tg_trace_settings *s)
{
    if (!strcmp(key, "enable"))
        return parse_bool(v, key, &s->enable);
    if (!strcmp(key, "directory")) {
        if (v->type != TG_JSON_STRING || v->len == 0 || v->len != strlen(v->string))
            return bad(v, key, "must be a non-empty string");
        if (v->len >= sizeof s->directory)
            return bad(v, key, "is too long");
        memcpy(s->directory, v->string, v->len + 1);
        return TG_OK;
    }
    if (!strcmp(key, "channels"))
        return parse_channels(v, s);
    if (!strcmp(key, "maxEventsPerThread")) {
        double x;
        TG_TRY(parse_number(v, key, &x));
        if (x != floor(x) || x < 1 || x > 1e9)
            return bad(v, key, "must be a whole number from 1 to 1000000000");
        s->max_events = (int64_t)x;
        return TG_OK;
    }
    if (!strcmp(key, "heatmapIntervalMs")) {
        double x;
        TG_TRY(parse_number(v, key, &x));
        if (!(x >= 0.001 && x <= 3.6e6))
            return bad(v, key, "must be from 0.001 to 3600000 (milliseconds)");
        s->heatmap_interval_ns = (int64_t)llround(x * 1e6);
        return TG_OK;
    }
    return tg_error(TG_ERR_CONFIG, "%s:%d:%d: unknown key '%s'; valid keys: " VALID_KEYS, v->source,
                    v->line, v->col, key);
}

static tg_status parse_config(const char *json, const char *source, tg_trace_settings *s)
{
    tg_trace_settings_default(s);
    tg_arena *arena = tg_arena_create(4096);
    if (!arena)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", source);
    tg_json *root = NULL;
    tg_status st = tg_json_parse(arena, json, strlen(json), source, &root);
    if (st == TG_OK && root->type != TG_JSON_OBJECT)
        st = tg_error(TG_ERR_CONFIG,
                      "%s: the trace configuration must be a JSON object like "
                      "{\"enable\":\"true\"}, not %s; valid keys: " VALID_KEYS,
                      source, tg_json_type_name(root->type));
    else if (st != TG_OK)
        st = tg_error_prefix(TG_ERR_CONFIG, "trace configuration");
    for (size_t i = 0; st == TG_OK && i < root->count; i++)
        st = parse_member(root->keys[i], root->items[i], s);
    tg_arena_destroy(arena);
    return st;
}

/* ---- configuring ------------------------------------------------------------------- */

tg_status tg_trace_configure(const char *json, const char *source)
{
    if (!source)
        source = "trace configuration";
    if (!json)
        return tg_error(TG_ERR_INVALID_ARG, "%s: no text", source);
    tg_trace_settings s;
    TG_TRY(parse_config(json, source, &s));
    tg_trace_settings_apply(&s);
    return TG_OK;
}

static pthread_mutex_t g_env_lock = PTHREAD_MUTEX_INITIALIZER;
static char *g_env_applied; /* the TILEGRAPH_TRACE text last applied */

tg_status tg_trace_configure_env(void)
{
    const char *text = getenv("TILEGRAPH_TRACE");
    if (!text || !*text)
        return TG_OK;
    pthread_mutex_lock(&g_env_lock);
    bool same = g_env_applied && strcmp(g_env_applied, text) == 0;
    pthread_mutex_unlock(&g_env_lock);
    if (same)
        return TG_OK;
    TG_TRY(tg_trace_configure(text, "TILEGRAPH_TRACE"));
    char *copy = tg_strdup(text);
    pthread_mutex_lock(&g_env_lock);
    tg_free(g_env_applied);
    g_env_applied = copy; /* NULL when out of memory: the next call re-applies */
    pthread_mutex_unlock(&g_env_lock);
    return TG_OK;
}

void tg_trace_config_forget_env(void)
{
    pthread_mutex_lock(&g_env_lock);
    tg_free(g_env_applied);
    g_env_applied = NULL;
    pthread_mutex_unlock(&g_env_lock);
}

tg_status tg_trace_enable(const char *channels)
{
    if (!channels)
        return tg_error(TG_ERR_INVALID_ARG, "tg_trace_enable: no channel list");
    tg_trace_settings s;
    tg_trace_settings_get(&s);
    if (!s.enable) { /* nothing was recording: the list replaces the old one */
        s.all_channels = false;
        s.n_channels = 0;
    }
    int named = 0;
    for (const char *p = channels; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *start = p;
        while (*p && *p != ',')
            p++;
        size_t len = (size_t)(p - start);
        while (len && start[len - 1] == ' ')
            len--;
        if (!len)
            continue;
        named++;
        if (len == 1 && start[0] == '*') {
            s.all_channels = true;
            continue;
        }
        if (!tg_trace_channel_name_valid(start, len))
            return tg_error(TG_ERR_INVALID_ARG,
                            "tg_trace_enable: '%.*s' is not a channel name (1 to %d of A-Z a-z "
                            "0-9 _ . -)",
                            (int)len, start, TG_TRACE_CHANNEL_NAME_MAX);
        bool dup = false;
        for (int k = 0; k < s.n_channels; k++)
            dup |= strlen(s.channels[k]) == len && !strncmp(s.channels[k], start, len);
        if (dup)
            continue;
        if (s.n_channels == TG_TRACE_MAX_CHANNELS)
            return tg_error(TG_ERR_INVALID_ARG, "tg_trace_enable: more than %d channels",
                            TG_TRACE_MAX_CHANNELS);
        snprintf(s.channels[s.n_channels++], sizeof s.channels[0], "%.*s", (int)len, start);
    }
    if (!named)
        return tg_error(TG_ERR_INVALID_ARG,
                        "tg_trace_enable: no channel named in '%s' (use \"*\" for all)", channels);
    s.enable = true;
    tg_trace_settings_apply(&s);
    return TG_OK;
}

void tg_trace_disable(void)
{
    tg_trace_settings s;
    tg_trace_settings_get(&s);
    s.enable = false;
    tg_trace_settings_apply(&s);
}

/* ---- writing ------------------------------------------------------------------------ */

const char *tg_trace_output_path(void)
{
    static _Thread_local char path[sizeof(((tg_trace_settings *)0)->directory) + 64];
    tg_trace_settings s;
    tg_trace_settings_get(&s);
    size_t n = strlen(s.directory);
    const char *sep = n && s.directory[n - 1] == '/' ? "" : "/";
    snprintf(path, sizeof path, "%s%stilegraph-%ld.trace.json", s.directory, sep, (long)getpid());
    return path;
}

const char *tg_trace_directory(void)
{
    static _Thread_local char dir[sizeof(((tg_trace_settings *)0)->directory)];
    tg_trace_settings s;
    tg_trace_settings_get(&s);
    if (!s.enable)
        return NULL;
    snprintf(dir, sizeof dir, "%s", s.directory);
    return dir;
}

/* mkdir -p: every missing directory of `dir`. */
static tg_status make_directory(const char *dir)
{
    char buf[sizeof(((tg_trace_settings *)0)->directory)];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return tg_error(TG_ERR_IO, "trace directory '%s': cannot create '%s': %s", dir, buf,
                                strerror(errno));
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return tg_error(TG_ERR_IO, "trace directory '%s' is not a directory", dir);
    return TG_OK;
}

/* Set once the unknown channels were warned about; tg_trace_shutdown
 * clears it with the configuration. */
static atomic_bool g_unknown_warned;

/* A channel named in the configuration but never registered records
 * nothing. It cannot be refused when the configuration is read (an
 * application may register its channels later), so it is said when a trace
 * is written - what was recorded is certain then - and once. */
static void warn_unknown_channels(void)
{
    char msg[1024];
    if (tg_trace_unknown_channels(msg, sizeof msg) && !atomic_exchange(&g_unknown_warned, true))
        fprintf(stderr, "tilegraph: warning: %s\n", msg);
}

tg_status tg_trace_flush(void)
{
    warn_unknown_channels(); /* also when it was the only channel named */
    if (!tg_trace_was_enabled())
        return TG_OK;
    tg_trace_settings s;
    tg_trace_settings_get(&s);
    TG_TRY(make_directory(s.directory));
    /* traces of killed runs are named for their pids: clean theirs here */
    tg_atomic_file_clean_stale_prefix(s.directory, "tilegraph-");
    return tg_trace_write(tg_trace_output_path());
}

static pthread_mutex_t noted_lock = PTHREAD_MUTEX_INITIALIZER;
static tg_status noted_status;
static char noted_message[512];

void tg_trace_note_failure(tg_status status)
{
    pthread_mutex_lock(&noted_lock);
    if (noted_status == TG_OK && status != TG_OK) {
        noted_status = status;
        snprintf(noted_message, sizeof noted_message, "%s", tg_error_message());
    }
    pthread_mutex_unlock(&noted_lock);
}

tg_status tg_trace_shutdown(void)
{
    tg_status st = tg_trace_flush();
    pthread_mutex_lock(&noted_lock);
    if (st == TG_OK && noted_status != TG_OK)
        st = tg_error(noted_status, "%s", noted_message);
    noted_status = TG_OK;
    pthread_mutex_unlock(&noted_lock);
    tg_trace_settings s;
    tg_trace_settings_default(&s);
    tg_trace_settings_apply(&s);
    tg_trace_clear();
    tg_trace_config_forget_env();
    atomic_store(&g_unknown_warned, false);
    return st;
}
