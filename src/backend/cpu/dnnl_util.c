/* backend/cpu/dnnl_util.c - the oneDNN engine, descriptors, statuses and threads
 * shared by the oneDNN-backed kernels (see dnnl_util.h). */
#include "backend/cpu/dnnl_util.h"

#include "core/isa.h"
#include "core/process.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_once_t engine_once = PTHREAD_ONCE_INIT, isa_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;
static dnnl_status_t engine_status;

/* Hold oneDNN's JIT to the sets TILEGRAPH_ISA leaves the own kernels
 * (core/isa.h): avx512 is AVX-512 without its BF16 instructions, and
 * avx512_bf16 without AMX. oneDNN takes the cap only before it first asks
 * the CPU, so every path into it (the engine, the ISA queries) comes here
 * first. Unset, oneDNN's own ONEDNN_MAX_CPU_ISA still applies. */
static void hold_isa(void)
{
    if (tg_isa_get() == tg_isa_cpu())
        return;
    static const dnnl_cpu_isa_t cap[] = {dnnl_cpu_isa_sse41, dnnl_cpu_isa_avx2,
                                         dnnl_cpu_isa_avx512_core_vnni,
                                         dnnl_cpu_isa_avx512_core_bf16};
    dnnl_status_t s = dnnl_set_max_cpu_isa(cap[tg_isa_get()]);
    if (s != dnnl_success)
        fprintf(stderr, "tilegraph: warning: oneDNN refused the instruction-set cap %s (%s)\n",
                tg_isa_name(tg_isa_get()), dnnl_status2str(s));
}

dnnl_cpu_isa_t tg_dnnl_isa(void)
{
    pthread_once(&isa_once, hold_isa);
    return dnnl_get_effective_cpu_isa();
}

/* One engine for the process: it holds no per-run state, and primitives
 * created on it may run on any thread. It lives until the process ends. */
static void create_engine(void)
{
    pthread_once(&isa_once, hold_isa);
    engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0);
}

dnnl_engine_t tg_dnnl_engine(tg_status *status)
{
    pthread_once(&engine_once, create_engine);
    *status = tg_dnnl_check(engine_status, "creating oneDNN's CPU engine");
    return engine_status == dnnl_success ? engine : NULL;
}

tg_status tg_dnnl_check(dnnl_status_t s, const char *what)
{
    if (s == dnnl_success)
        return TG_OK;
    tg_status code = s == dnnl_out_of_memory   ? TG_ERR_NOMEM
                     : s == dnnl_unimplemented ? TG_ERR_UNSUPPORTED
                                               : TG_ERR_INTERNAL;
    return tg_error(code, "%s: oneDNN %s", what, dnnl_status2str(s));
}

dnnl_status_t tg_dnnl_plain_md(dnnl_memory_desc_t *md, int ndims, const dnnl_dims_t dims,
                               dnnl_data_type_t dt)
{
    dnnl_format_tag_t tag = ndims == 5 ? dnnl_goihw : ndims == 4 ? dnnl_nchw : dnnl_a;
    return dnnl_memory_desc_init_by_tag(md, ndims, dims, dt, tag);
}

dnnl_status_t tg_dnnl_reorder_create(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                     dnnl_engine_t eng, const_dnnl_primitive_attr_t attr,
                                     dnnl_primitive_t *prim, dnnl_memory_desc_t *scratch_md)
{
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from, eng, to, eng, attr);
    if (s != dnnl_success)
        return s;
    *scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    s = dnnl_primitive_create(prim, pd);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

_Noreturn void tg_dnnl_run_failed(dnnl_status_t s, const char *what)
{
    tg_dnnl_check(s, what);
    fprintf(stderr, "tilegraph: %s\n", tg_error_message());
    abort();
}

dnnl_memory_t tg_dnnl_memory(const dnnl_memory_desc_t *md, void *ptr, const char *what)
{
    tg_status ts;
    dnnl_memory_t m = NULL;
    if (md->ndims == 0)
        return NULL;
    dnnl_status_t s = dnnl_memory_create(&m, md, tg_dnnl_engine(&ts), ptr);
    if (s != dnnl_success)
        tg_dnnl_run_failed(s, what);
    return m;
}

void tg_dnnl_threads(int n)
{
    if (n > 0 && omp_get_max_threads() != n)
        omp_set_num_threads(n);
}

bool tg_dnnl_passive_wait(void)
{
    const char *e = getenv("OMP_WAIT_POLICY");
    return e && strcasecmp(e, "passive") == 0;
}

const char *tg_dnnl_isa_name(void)
{
    switch (tg_dnnl_isa()) {
    case dnnl_cpu_isa_sse41:
        return "sse41";
    case dnnl_cpu_isa_avx:
        return "avx";
    case dnnl_cpu_isa_avx2:
        return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
        return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic:
        return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops:
        return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core:
        return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
        return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
        return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
        return "avx512_core_amx";
    default:
        return "no JIT (reference C++ kernels)";
    }
}

tg_dnnl_mode tg_dnnl_mode_get(void)
{
    int forced;
    int mode = tg_process_dnnl_mode(&forced);
    if (forced)
        return (tg_dnnl_mode)mode;
    const char *e = getenv("TG_KERNELS");
    if (e && strcmp(e, "own") == 0)
        return TG_DNNL_NEVER;
    if (e && strcmp(e, "dnnl") == 0)
        return TG_DNNL_ALWAYS;
    return TG_DNNL_AUTO;
}

void tg_dnnl_force_mode(tg_dnnl_mode m, bool forced)
{
    tg_process_set_dnnl_mode((int)m, forced);
}
