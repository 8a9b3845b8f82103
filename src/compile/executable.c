/* compile/executable.c - the executable cache (options
 * enableExecutableCaching and executableFile, `compile --save-executable`,
 * `train --executable`): the key a program is cached under, and compiling
 * through the cache. The file itself is written and read in
 * executable_file.c; docs/executable-cache.md describes it.
 */
#include "compile/program.h"
#include "compile/phases_auto.h"

#include "core/atomic_file.h"
#include "core/error.h"
#include "target/tiled.h"
#include "tilegraph/options.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef TG_VERSION
#define TG_VERSION "0"
#endif

/* ---- the key ---------------------------------------------------------------- */

typedef struct hasher {
    uint64_t a, b; /* two FNV-1a streams with different seeds: 128 bits */
} hasher;

static void hash_bytes(hasher *h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ p[i]) * 0x100000001b3ull;
        h->b = (h->b ^ p[i]) * 0x100000001b3ull;
        h->b ^= h->b >> 29;
    }
}

static void hash_int(hasher *h, int64_t v)
{
    hash_bytes(h, &v, sizeof v);
}

static void hash_str(hasher *h, const char *s)
{
    s = s ? s : "";
    hash_int(h, (int64_t)strlen(s));
    hash_bytes(h, s, strlen(s));
}

/* Everything about a node the compiler reads: not initial values, which
 * the engine fills after compiling. */
static void hash_graph(hasher *h, const tg_graph *g)
{
    hash_int(h, g->n_nodes);
    hash_int(h, g->training);
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        int64_t f[8] = {t->op,   t->role,      t->dtype, t->shape.ndim,
                        t->n_in, t->n_mutated, t->flags, t->block};
        hash_bytes(h, f, sizeof f);
        hash_bytes(h, t->shape.dim, sizeof t->shape.dim);
        for (int k = 0; k < t->n_in; k++)
            hash_int(h, t->in[k] ? t->in[k]->id : -1);
        hash_bytes(h, t->p.i, sizeof t->p.i);
        hash_bytes(h, t->p.f, sizeof t->p.f);
        hash_int(h, t->grad ? t->grad->id : -1);
        hash_int(h, t->forward_of ? t->forward_of->id : -1);
        hash_str(h, t->name);
    }
    hash_int(h, g->n_blocks);
    for (int i = 0; i < g->n_blocks; i++) {
        hash_str(h, g->blocks[i].name);
        hash_int(h, g->blocks[i].device_id);
    }
}

/* Options that do not change the program: where profiles, traces and the
 * cache itself go, the monitor, and verifying a run. */
static bool affects_program(const char *key)
{
    return (!tg_options_is_engine(key) || !strcmp(key, "debug.allowOutOfMemory")) &&
           strncmp(key, "debug.verify", 12) != 0;
}

static bool is_cache_option(const char *key)
{
    return !strcmp(key, "enableExecutableCaching") || !strcmp(key, "executableFile");
}

static int effective_threads(const tg_config *c)
{
    int n = c->threads.per_device;
    return n > 0 ? n : tg_cpu_count();
}

tg_status tg_executable_key(const tg_graph *g, const tg_config *c, char out[33])
{
    hasher h = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    hash_str(&h, TG_VERSION);
    hash_int(&h, TG_EXECUTABLE_FORMAT_VERSION);
    hash_graph(&h, g);
    for (int i = 0; i < tg_options_count(); i++) {
        const char *key = tg_options_key(i);
        if (affects_program(key) && !is_cache_option(key)) {
            hash_str(&h, key);
            hash_str(&h, tg_config_text(c, i));
        }
    }
    tg_target_desc target;
    bool tiled = tg_target_tiled(tg_target_of_config(c));
    TG_TRY(tg_target_from_config(c, &target)); /* the description file's contents */
    hash_int(&h, tiled);
    if (tiled)
        hash_bytes(&h, &target, sizeof target);
    hash_int(&h, effective_threads(c)); /* kernel scratch is sized per thread */
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.a, (unsigned long long)h.b);
    return TG_OK;
}

/* ---- compiling through the cache --------------------------------------------------- */

/* The file a run uses: executableFile, or KEY.tgx in enableExecutableCaching;
 * false when neither is set. */
static bool cache_path(const tg_graph *g, const tg_config *c, char *path, size_t cap)
{
    const char *file = c->executable.file;
    const char *dir = c->executable.cache_dir;
    char key[33];
    if (*file)
        snprintf(path, cap, "%s", file);
    else if (*dir && tg_executable_key(g, c, key) == TG_OK)
        snprintf(path, cap, "%s/%s.tgx", dir, key);
    else
        return false;
    return true;
}

tg_status tg_program_compile_cached_config(const tg_graph *g, const tg_config *c, tg_program **out,
                                           tg_cache_result *result)
{
    *out = NULL;
    tg_cache_result res = TG_CACHE_OFF;
    char path[2048];
    /* phases auto compiles the plans it considers each time: a cached one
     * would not say which it chose (tg_program's auto_phases) */
    bool cached =
        g && g->status == TG_OK && !tg_phases_auto_wanted(c) && cache_path(g, c, path, sizeof path);
    if (cached && access(path, F_OK) == 0) {
        if (tg_executable_load(g, c, path, out) == TG_OK) {
            tg_program_choose_threads(*out); /* for this machine's cores */
            if (result)
                *result = TG_CACHE_LOADED;
            return TG_OK;
        }
        /* never trusted, never fatal: say why and compile */
        fprintf(stderr, "tilegraph: warning: %s; compiling again\n", tg_error_message());
        res = TG_CACHE_REPLACED;
    } else if (cached) {
        res = TG_CACHE_COMPILED;
    }
    TG_TRY(tg_program_compile_config(g, c, out));
    if (cached) {
        if (*c->executable.cache_dir)
            (void)tg_probe_writable_dir("enableExecutableCaching", c->executable.cache_dir);
        if (tg_executable_save(*out, path) != TG_OK) {
            fprintf(stderr, "tilegraph: warning: not cached: %s\n", tg_error_message());
            res = TG_CACHE_UNSAVED;
        }
    }
    if (result)
        *result = res;
    return TG_OK;
}

tg_status tg_program_compile_cached(const tg_graph *g, const tg_options *o, tg_program **out,
                                    tg_cache_result *result)
{
    tg_config c;
    *out = NULL;
    TG_TRY(tg_config_read(o, &c));
    tg_status s = tg_program_compile_cached_config(g, &c, out, result);
    tg_config_free(&c);
    return s;
}
