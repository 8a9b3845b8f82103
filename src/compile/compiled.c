/* compile/compiled.c - the compiled program as a public handle
 * (tilegraph/program.h): compile, save, its figures, destroy. The handle
 * owns a tg_program and adds nothing to it but how it was obtained, so the
 * figures here are the ones the engine would allocate. */
#include "compile/compiled.h"

#include "core/alloc.h"
#include "core/error.h"

#include <string.h>

_Static_assert(TG_REGION_COUNT - TG_REGION_PARAM <= TG_COMPILED_MAX_REGIONS,
               "tg_compiled_device.region_bytes is too small for the regions of compile/program.h");

/* Wrap a compiled program (or free it when the handle cannot be had). */
static tg_status wrap(tg_status s, tg_program *p, tg_cache_result cache, tg_compiled **out)
{
    if (s != TG_OK)
        return s;
    tg_compiled *c = tg_calloc(1, sizeof *c);
    if (!c) {
        tg_program_destroy(p);
        return tg_error(TG_ERR_NOMEM, "compile: out of memory");
    }
    c->program = p;
    c->cache = cache;
    *out = c;
    return TG_OK;
}

tg_status tg_compiled_create(const tg_graph *g, const tg_options *opts, tg_compiled **out)
{
    if (!out)
        return tg_error(TG_ERR_INVALID_ARG, "tg_compiled_create: no place for the result (out)");
    *out = NULL;
    tg_program *p = NULL;
    tg_status s = tg_program_compile(g, opts, &p);
    return wrap(s, p, TG_CACHE_OFF, out);
}

tg_status tg_compiled_create_cached(const tg_graph *g, const tg_options *opts, tg_compiled **out)
{
    if (!out)
        return tg_error(TG_ERR_INVALID_ARG,
                        "tg_compiled_create_cached: no place for the result (out)");
    *out = NULL;
    tg_program *p = NULL;
    tg_cache_result cache = TG_CACHE_OFF;
    tg_status s = tg_program_compile_cached(g, opts, &p, &cache);
    return wrap(s, p, cache, out);
}

void tg_compiled_destroy(tg_compiled *c)
{
    if (!c)
        return;
    tg_program_destroy(c->program);
    tg_free(c);
}

tg_status tg_compiled_save(const tg_compiled *c, const char *path)
{
    if (!c || !path)
        return tg_error(TG_ERR_INVALID_ARG, "tg_compiled_save: no %s", c ? "path" : "program");
    return tg_executable_save(c->program, path);
}

static tg_compiled_cache cache_of(tg_cache_result r)
{
    return r == TG_CACHE_OFF      ? TG_COMPILED_UNCACHED
           : r == TG_CACHE_LOADED ? TG_COMPILED_LOADED
                                  : TG_COMPILED_STORED;
}

void tg_compiled_facts_get(const tg_compiled *c, tg_compiled_facts *out)
{
    const tg_program *p = c->program;
    memset(out, 0, sizeof *out);
    out->training = p->training;
    out->n_devices = p->n_devices;
    out->replicas = p->replicas;
    out->micro_batches = p->micro_batches;
    out->iterations = p->iterations;
    out->threads_per_device = p->n_threads;
    out->threads_default = p->threads_auto;
    out->threads_warning = p->threads_warning;
    out->auto_stages = p->config.pipeline.auto_stages;
    out->stages = p->auto_stages;
    out->arena_bytes = (int64_t)p->arena_bytes;
    out->flops = p->flops;
    out->report_dir = p->config.report.directory;
    out->cache = cache_of(c->cache);
}

int tg_compiled_region_count(void)
{
    return TG_REGION_COUNT - TG_REGION_PARAM; /* TG_REGION_NONE holds nothing */
}

const char *tg_compiled_region_name(int region)
{
    if (region < 0 || region >= tg_compiled_region_count())
        return "?";
    return tg_region_name((tg_region)(TG_REGION_PARAM + region));
}

tg_status tg_compiled_device_get(const tg_compiled *c, int device, tg_compiled_device *out)
{
    const tg_program *p = c->program;
    if (device < 0 || device >= p->n_devices)
        return tg_error(TG_ERR_INVALID_ARG,
                        "tg_compiled_device_get: no device %d (the program has %d: 0..%d)", device,
                        p->n_devices, p->n_devices - 1);
    const tg_device_program *dp = &p->devices[device];
    memset(out, 0, sizeof *out);
    out->arena_bytes = (int64_t)dp->arena_bytes;
    for (int r = 0; r < tg_compiled_region_count(); r++)
        out->region_bytes[r] = (int64_t)dp->region_bytes[TG_REGION_PARAM + r];
    out->scratch_peak_bytes = (int64_t)dp->scratch_peak;
    out->offloaded_bytes = (int64_t)dp->offloaded_bytes;
    out->stash_depth = dp->stash_depth;
    out->flops = dp->flops[TG_PHASE_FORWARD] + dp->flops[TG_PHASE_BACKWARD];
    return TG_OK;
}
