/* runtime/checkpoint.c - session weights and optimizer state <-> safetensors.
 *
 * Loading validates everything before it changes anything, so a checkpoint
 * that does not fit leaves the session as it was.
 */
#include "tilegraph/checkpoint.h"

#include "core/alloc.h"
#include "core/convert.h"
#include "core/error.h"
#include "data/safetensors.h"
#include "runtime/session_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TG_VERSION
#define TG_VERSION "0"
#endif

/* "layer1/conv/weight" -> "layer1.conv.weight" */
static char *file_name_of(const char *graph_name)
{
    char *s = tg_strdup(graph_name);
    for (char *p = s; p && *p; p++)
        if (*p == '/')
            *p = '.';
    return s;
}

static bool is_saved(const tg_session *s, const tg_tensor *t)
{
    return (t->op == TG_OP_PARAM || t->op == TG_OP_STATE) && tg_session_data(s, t) != NULL;
}

tg_status tg_checkpoint_save(const tg_session *s, const char *path, const char *model)
{
    const tg_graph *g = tg_session_graph(s);
    tg_st_tensor *list = tg_calloc((size_t)g->n_nodes + 1, sizeof *list);
    if (!list)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", path);
    size_t n = 0;
    tg_status st = TG_OK;
    for (int i = 0; i < g->n_nodes && st == TG_OK; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!is_saved(s, t))
            continue;
        tg_st_tensor *e = &list[n];
        e->name = file_name_of(t->name);
        if (!e->name) {
            st = tg_error(TG_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        n++;
        e->dtype = tg_st_dtype_from_tg(tg_session_storage_dtype(s, t)); /* as stored: f16 halves it */
        e->ndim = t->shape.ndim;
        for (int d = 0; d < t->shape.ndim; d++)
            e->shape[d] = t->shape.dim[d];
        /* a copy: the value may be spread over the replicas (sharding) */
        size_t bytes = (size_t)tg_numel(t) * tg_dtype_size(tg_session_storage_dtype(s, t));
        void *copy = tg_malloc(bytes + 1);
        if (!copy) {
            st = tg_error(TG_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        tg_session_value_out(s, t, copy);
        e->data = copy;
    }
    char step[32];
    snprintf(step, sizeof step, "%lld", (long long)tg_session_step(s));
    tg_st_meta meta[] = {
        {"format", "tilegraph"},
        {"tilegraph_version", TG_VERSION},
        {"model", model ? model : ""},
        {"step", step},
    };
    if (st == TG_OK)
        st = tg_safetensors_write(path, list, n, meta, sizeof meta / sizeof meta[0]);
    for (size_t i = 0; i < n; i++) {
        tg_free((char *)list[i].name);
        tg_free((void *)list[i].data);
    }
    tg_free(list);
    return st;
}

/* Check one tensor of the session against the file; *data is NULL when the
 * file does not have it. */
static tg_status match_tensor(const tg_safetensors *f, const tg_tensor *t, const void **data,
                              tg_dtype *dtype)
{
    *data = NULL;
    *dtype = t->dtype;
    char *name = file_name_of(t->name);
    if (!name)
        return tg_error(TG_ERR_NOMEM, "out of memory");
    tg_status st = TG_OK;
    const tg_st_tensor *e = tg_safetensors_find(f, name);
    if (!e) {
        if (t->op == TG_OP_PARAM)
            st = tg_error(TG_ERR_NOT_FOUND, "%s: has no tensor '%s' (is it a checkpoint of this model?)",
                          tg_safetensors_name(f), name);
    } else {
        int64_t shape[TG_MAX_DIMS];
        for (int d = 0; d < t->shape.ndim; d++)
            shape[d] = t->shape.dim[d];
        /* a float tensor may have been saved in another float type (precision) */
        int saved = tg_st_dtype_to_tg(e->dtype);
        if (saved >= 0 && tg_dtype_is_float((tg_dtype)saved) && tg_dtype_is_float(t->dtype))
            *dtype = (tg_dtype)saved;
        st = tg_safetensors_get(f, name, tg_st_dtype_from_tg(*dtype), t->shape.ndim, shape, data);
    }
    tg_free(name);
    return st;
}

/* The file's values, converted to the session's storage type, into every
 * replica (or its shard). */
static tg_status load_value(tg_session *s, const tg_tensor *t, const void *data, tg_dtype saved)
{
    tg_dtype stored = tg_session_storage_dtype(s, t);
    void *tmp = tg_malloc((size_t)tg_numel(t) * tg_dtype_size(stored) + 1);
    if (!tmp)
        return tg_error(TG_ERR_NOMEM, "checkpoint: out of memory for '%s'", t->name);
    tg_convert(data, saved, tmp, stored, (size_t)tg_numel(t));
    tg_status st = tg_session_value_in(s, t, tmp);
    tg_free(tmp);
    return st;
}

tg_status tg_checkpoint_load(tg_session *s, const char *path, const char *model)
{
    tg_safetensors *f = NULL;
    TG_TRY(tg_safetensors_load(path, &f));
    const char *saved_model = tg_safetensors_metadata(f, "model");
    tg_status st = TG_OK;
    if (model && saved_model && *saved_model && strcmp(model, saved_model) != 0)
        st = tg_error(TG_ERR_CONFIG, "%s: is a checkpoint of model '%s', not '%s'", path,
                      saved_model, model);
    const tg_graph *g = tg_session_graph(s);
    /* first validate everything, then copy */
    for (int pass = 0; pass < 2 && st == TG_OK; pass++) {
        for (int i = 0; i < g->n_nodes && st == TG_OK; i++) {
            const tg_tensor *t = g->nodes[i];
            const void *data = NULL;
            tg_dtype saved = t->dtype;
            if (!is_saved(s, t))
                continue;
            st = match_tensor(f, t, &data, &saved);
            if (st == TG_OK && pass == 1 && data)
                st = load_value(s, t, data, saved);
        }
    }
    const char *step = tg_safetensors_metadata(f, "step");
    if (st == TG_OK && step)
        tg_session_set_step(s, strtoll(step, NULL, 10));
    tg_safetensors_destroy(f);
    return st;
}
