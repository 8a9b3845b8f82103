/* runtime/checkpoint.c - session weights and optimizer state <-> safetensors.
 *
 * Loading validates everything before it changes anything, so a checkpoint
 * that does not fit leaves the session as it was.
 *
 * Each tensor's bytes carry a CRC-32 in the metadata key CRC_KEY (issue 46,
 * row 13): eight hex digits a tensor, the tensors taken in the order of
 * their names, so a flipped bit is refused naming the tensor. Readers of
 * safetensors ignore metadata they do not know (PyTorch loads the file as
 * before), and a tilegraph checkpoint written before the checksums still
 * loads, with a note that it was not verified.
 */
#include "tilegraph/checkpoint.h"

#include "core/alloc.h"
#include "core/convert.h"
#include "core/error.h"
#include "data/safetensors.h"
#include "runtime/session_state.h"
#include "runtime/session_internal.h"
#include "runtime/scaling.h"

#include <math.h>
#include <stdio.h>
#include <zlib.h>
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

/* Batch norm keeps its running mean and variance as the rows of one state
 * tensor "<module>.running_stats" [2, C]; the file carries them under
 * PyTorch's names, "<module>.running_mean" and "<module>.running_var" [C] (and
 * "<module>.num_batches_tracked"), so a checkpoint loads into the PyTorch
 * module. The length of "<module>." is returned, or -1 for other tensors. */
static const char RUNNING_STATS[] = "running_stats";

static int running_stats_prefix(const char *file_name, const tg_tensor *t)
{
    size_t n = strlen(file_name), k = sizeof RUNNING_STATS - 1;
    if (t->op != TG_OP_STATE || t->shape.ndim != 2 || t->shape.dim[0] != 2 || n <= k ||
        strcmp(file_name + n - k, RUNNING_STATS) != 0 || (n > k && file_name[n - k - 1] != '.'))
        return -1;
    return (int)(n - k);
}

static bool is_saved(const tg_session *s, const tg_tensor *t)
{
    return (t->op == TG_OP_PARAM || t->op == TG_OP_STATE) && tg_session_data(s, t) != NULL;
}

/* Metadata the engine needs to continue exactly where it stopped, beside
 * the update counter: the loss-scaling state. 9 significant digits give a
 * float back exactly. */
typedef struct engine_meta {
    char step[32], loss_scale[32], good[32], skipped[32];
} engine_meta;

static size_t engine_meta_fill(const tg_session *s, engine_meta *m, tg_st_meta *out)
{
    snprintf(m->step, sizeof m->step, "%lld", (long long)tg_session_step(s));
    snprintf(m->loss_scale, sizeof m->loss_scale, "%.9g",
             (double)tg_scaling_loss_scale(s->scaling));
    snprintf(m->good, sizeof m->good, "%lld", (long long)tg_scaling_good_updates(s->scaling));
    snprintf(m->skipped, sizeof m->skipped, "%lld",
             (long long)tg_scaling_skipped_updates(s->scaling));
    out[0] = (tg_st_meta){"step", m->step};
    out[1] = (tg_st_meta){"skipped_updates", m->skipped};
    if (s->program->precision.loss_scaling != TG_LOSS_SCALING_DYNAMIC)
        return 2; /* a static scale is an option of the session, not state */
    out[2] = (tg_st_meta){"loss_scale", m->loss_scale};
    out[3] = (tg_st_meta){"good_updates", m->good};
    return 4;
}

/* Turn entry e (a [2, C] running_stats copy) into running_mean and
 * running_var [C], and append num_batches_tracked (the updates done: what
 * PyTorch counts in training, one per batch). e stays the owner of the
 * data; the entries after it point into it or own their own. */
static tg_status split_running_stats(const tg_session *s, tg_st_tensor *e, int prefix, size_t *n,
                                     const char *path)
{
    const char *suffix[3] = {"running_var", "num_batches_tracked", "running_mean"};
    char *names[3];
    int64_t *count = tg_malloc(sizeof *count);
    for (int i = 0; i < 3; i++) {
        size_t len = (size_t)prefix + strlen(suffix[i]) + 1;
        names[i] = tg_malloc(len);
        if (names[i])
            snprintf(names[i], len, "%.*s%s", prefix, e->name, suffix[i]);
    }
    if (!names[0] || !names[1] || !names[2] || !count) {
        for (int i = 0; i < 3; i++)
            tg_free(names[i]);
        tg_free(count);
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", path);
    }
    *count = tg_session_step(s);
    size_t half = e->nbytes / 2;
    tg_st_tensor *var = e + 1, *tracked = e + 2;
    *var = *e;
    var->name = names[0];
    var->ndim = 1;
    var->shape[0] = e->shape[1];
    var->data = (const char *)e->data + half;
    var->nbytes = 0; /* marks data it does not own */
    *tracked = (tg_st_tensor){
        .name = names[1], .dtype = TG_ST_I64, .ndim = 0, .data = count, .nbytes = sizeof *count};
    tg_free((char *)e->name);
    e->name = names[2];
    e->ndim = 1;
    e->shape[0] = e->shape[1];
    *n += 2;
    return TG_OK;
}

#define CRC_KEY "tilegraph_crc32"

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const tg_st_tensor *const *)a)->name, (*(const tg_st_tensor *const *)b)->name);
}

/* The tensors (n, `stride` bytes apart) in the order of their names: an
 * array of pointers, the caller's (tg_free); NULL when out of memory. */
static const tg_st_tensor **sorted_by_name(const tg_st_tensor *first, size_t stride, size_t n)
{
    const tg_st_tensor **v = tg_malloc((n + 1) * sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        v[i] = (const tg_st_tensor *)((const char *)first + i * stride);
    if (v)
        qsort(v, n, sizeof *v, by_name);
    return v;
}

static uint32_t tensor_crc(const tg_st_tensor *t)
{
    size_t bytes = tg_st_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++)
        bytes *= (size_t)t->shape[d];
    return (uint32_t)crc32_z(0, t->data, bytes);
}

/* The checksums' metadata value for list[0..n): the caller's (tg_free). */
static char *checksums_of(const tg_st_tensor *list, size_t n)
{
    const tg_st_tensor **v = sorted_by_name(list, sizeof *list, n);
    char *text = tg_malloc(8 * n + 1);
    if (v && text) {
        text[0] = 0;
        for (size_t i = 0; i < n; i++)
            snprintf(text + 8 * i, 9, "%08x", (unsigned)tensor_crc(v[i]));
    }
    tg_free(v);
    if (!v) {
        tg_free(text);
        return NULL;
    }
    return text;
}

/* The file's tensors against its checksums: TG_ERR_FORMAT naming the first
 * tensor whose bytes changed. */
static tg_status verify_checksums(const tg_safetensors *f)
{
    const char *want = tg_safetensors_metadata(f, CRC_KEY);
    const char *format = tg_safetensors_metadata(f, "format");
    size_t n = tg_safetensors_count(f);
    if (!want) {
        if (format && strcmp(format, "tilegraph") == 0)
            fprintf(stderr,
                    "tilegraph: note: %s has no checksums (written by an older tilegraph): its "
                    "tensors are loaded unverified\n",
                    tg_safetensors_name(f));
        return TG_OK;
    }
    if (strlen(want) != 8 * n)
        return tg_error(TG_ERR_FORMAT,
                        "%s: its checksums cover %zu tensors, the file holds %zu: the file was "
                        "edited or damaged",
                        tg_safetensors_name(f), strlen(want) / 8, n);
    const tg_st_tensor **v = tg_malloc((n + 1) * sizeof *v);
    if (!v)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", tg_safetensors_name(f));
    for (size_t i = 0; i < n; i++)
        v[i] = tg_safetensors_tensor(f, i);
    qsort(v, n, sizeof *v, by_name);
    tg_status st = TG_OK;
    for (size_t i = 0; i < n && st == TG_OK; i++) {
        char got[9];
        snprintf(got, sizeof got, "%08x", (unsigned)tensor_crc(v[i]));
        if (memcmp(got, want + 8 * i, 8) != 0)
            st = tg_error(TG_ERR_FORMAT,
                          "%s: tensor '%s' does not match its checksum (crc32 %s, recorded "
                          "%.8s): its bytes changed after it was saved (a damaged disk or "
                          "copy); load an intact copy",
                          tg_safetensors_name(f), v[i]->name, got, want + 8 * i);
    }
    tg_free(v);
    return st;
}

tg_status tg_checkpoint_save(const tg_session *s, const char *path, const char *model)
{
    return tg_checkpoint_save_meta(s, path, model, NULL, 0);
}

tg_status tg_checkpoint_save_meta(const tg_session *s, const char *path, const char *model,
                                  const char *const *kv, size_t n_pairs)
{
    const tg_graph *g = tg_session_graph(s);
    /* up to three entries a tensor: running statistics become three */
    tg_st_tensor *list = tg_calloc(3 * (size_t)g->n_nodes + 1, sizeof *list);
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
        e->dtype =
            tg_st_dtype_from_tg(tg_session_storage_dtype(s, t)); /* as stored: f16 halves it */
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
        e->nbytes = bytes;
        int prefix = running_stats_prefix(e->name, t);
        if (prefix >= 0)
            st = split_running_stats(s, e, prefix, &n, path);
    }
    engine_meta em;
    tg_st_meta meta[8 + TG_CHECKPOINT_MAX_META];
    meta[0] = (tg_st_meta){"format", "tilegraph"};
    meta[1] = (tg_st_meta){"tilegraph_version", TG_VERSION};
    meta[2] = (tg_st_meta){"model", model ? model : ""};
    size_t n_meta = 3 + engine_meta_fill(s, &em, meta + 3);
    if (n_pairs > TG_CHECKPOINT_MAX_META || (n_pairs && !kv))
        st = tg_error(TG_ERR_INVALID_ARG, "%s: %zu extra metadata pairs (at most %d)", path,
                      n_pairs, TG_CHECKPOINT_MAX_META);
    for (size_t i = 0; st == TG_OK && i < n_pairs; i++)
        meta[n_meta++] = (tg_st_meta){kv[2 * i], kv[2 * i + 1]};
    char *crcs = st == TG_OK ? checksums_of(list, n) : NULL;
    if (st == TG_OK && !crcs)
        st = tg_error(TG_ERR_NOMEM, "%s: out of memory", path);
    meta[n_meta++] = (tg_st_meta){CRC_KEY, crcs};
    if (st == TG_OK)
        st = tg_safetensors_write(path, list, n, meta, n_meta);
    tg_free(crcs);
    for (size_t i = 0; i < n; i++) {
        tg_free((char *)list[i].name);
        if (list[i].nbytes) /* 0: points into the entry before it */
            tg_free((void *)list[i].data);
    }
    tg_free(list);
    return st;
}

/* A [2, C] running_stats tensor from the file's running_mean and
 * running_var [C] (PyTorch's names, as tg_checkpoint_save writes them): a
 * joined copy in *owned, in the type of the mean. Nothing is found (TG_OK,
 * *owned NULL) when the file has neither. */
static tg_status join_running_stats(const tg_safetensors *f, const tg_tensor *t, const char *name,
                                    int prefix, void **owned, tg_dtype *dtype)
{
    char mean_name[1024], var_name[1024];
    snprintf(mean_name, sizeof mean_name, "%.*srunning_mean", prefix, name);
    snprintf(var_name, sizeof var_name, "%.*srunning_var", prefix, name);
    const tg_st_tensor *m = tg_safetensors_find(f, mean_name);
    if (!m && !tg_safetensors_find(f, var_name))
        return TG_OK;
    int saved = m ? tg_st_dtype_to_tg(m->dtype) : -1;
    if (saved >= 0 && tg_dtype_is_float((tg_dtype)saved))
        *dtype = (tg_dtype)saved;
    int64_t c = t->shape.dim[1];
    const void *mean = NULL, *var = NULL;
    tg_st_dtype want = tg_st_dtype_from_tg(*dtype);
    TG_TRY(tg_safetensors_get(f, mean_name, want, 1, &c, &mean));
    TG_TRY(tg_safetensors_get(f, var_name, want, 1, &c, &var));
    size_t half = (size_t)c * tg_dtype_size(*dtype);
    char *joined = tg_malloc(2 * half + 1);
    if (!joined)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for '%s'", tg_safetensors_name(f), name);
    memcpy(joined, mean, half);
    memcpy(joined + half, var, half);
    *owned = joined;
    return TG_OK;
}

/* Check one tensor of the session against the file; *data is NULL when the
 * file does not have it. *owned (freed by the caller) holds data assembled
 * from several tensors of the file. */
static tg_status match_tensor(const tg_safetensors *f, const tg_tensor *t, const void **data,
                              tg_dtype *dtype, void **owned)
{
    *data = NULL;
    *owned = NULL;
    *dtype = t->dtype;
    char *name = file_name_of(t->name);
    if (!name)
        return tg_error(TG_ERR_NOMEM, "out of memory");
    tg_status st = TG_OK;
    const tg_st_tensor *e = tg_safetensors_find(f, name);
    int prefix = e ? -1 : running_stats_prefix(name, t);
    if (prefix >= 0) {
        st = join_running_stats(f, t, name, prefix, owned, dtype);
        *data = *owned;
    } else if (!e) {
        if (t->op == TG_OP_PARAM)
            st = tg_error(TG_ERR_NOT_FOUND,
                          "%s: has no tensor '%s' (is it a checkpoint of this model?)",
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

/* A metadata integer written by tg_checkpoint_save: digits only, in
 * [0, max]; *out is kept when the key is absent (an older checkpoint).
 * Anything else means the file was edited or damaged. */
static tg_status meta_int(const tg_safetensors *f, const char *key, int64_t max, int64_t *out)
{
    const char *v = tg_safetensors_metadata(f, key);
    if (!v)
        return TG_OK;
    int64_t x = 0;
    int ok = *v != '\0';
    for (const char *c = v; ok && *c; c++) {
        ok = *c >= '0' && *c <= '9' && x <= (max - (*c - '0')) / 10;
        x = ok ? 10 * x + (*c - '0') : x;
    }
    if (!ok)
        return tg_error(TG_ERR_FORMAT,
                        "%s: metadata '%s' is '%.40s', not an integer in [0, %lld]; the file was "
                        "edited or damaged (save the checkpoint again)",
                        tg_safetensors_name(f), key, v, (long long)max);
    *out = x;
    return TG_OK;
}

static tg_status meta_scale(const tg_safetensors *f, float *out)
{
    const char *v = tg_safetensors_metadata(f, "loss_scale");
    if (!v)
        return TG_OK;
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= 1e-30 && x <= 1e30))
        return tg_error(TG_ERR_FORMAT,
                        "%s: metadata 'loss_scale' is '%.40s', not a number in [1e-30, 1e30]; "
                        "the file was edited or damaged",
                        tg_safetensors_name(f), v);
    *out = (float)x;
    return TG_OK;
}

/* The engine state beside the tensors, all checked before any is applied.
 * The bound leaves room for the additions of later runs (no overflow). */
static tg_status read_engine_meta(const tg_safetensors *f, tg_session *s, bool apply)
{
    const int64_t max = (int64_t)1 << 62;
    int64_t step = s->step, good = tg_scaling_good_updates(s->scaling);
    int64_t skipped = tg_scaling_skipped_updates(s->scaling);
    float scale = tg_scaling_loss_scale(s->scaling);
    TG_TRY(meta_int(f, "step", max, &step));
    TG_TRY(meta_int(f, "good_updates", max, &good));
    TG_TRY(meta_int(f, "skipped_updates", max, &skipped));
    TG_TRY(meta_scale(f, &scale));
    if (apply) {
        tg_session_set_step(s, step);
        /* Only a dynamic scale is state; a static one is the session's option. */
        tg_scaling_restore(s->scaling, scale, good, skipped);
    }
    return TG_OK;
}

/* NaN or infinity in a float tensor: the run that saved it had diverged
 * (unless `finite` is false: --allow-non-finite). A negative value in a
 * second moment (Adam's exp_avg_sq, a mean of squares; `square`): the file
 * was edited, and the run would divide by its square root. */
static tg_status check_values(const tg_safetensors *f, const tg_tensor *t, const void *data,
                              tg_dtype saved, bool finite, bool square)
{
    if (!data || !tg_dtype_is_float(saved) || (!finite && !square))
        return TG_OK;
    size_t n = (size_t)tg_numel(t);
    float *tmp = tg_malloc(n * sizeof(float) + 1);
    if (!tmp)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory checking '%s'", tg_safetensors_name(f),
                        t->name);
    tg_convert(data, saved, tmp, TG_F32, n);
    size_t bad = n, negative = n;
    for (size_t i = 0; i < n && bad == n && negative == n; i++) {
        if (finite && !isfinite(tmp[i]))
            bad = i;
        if (square && tmp[i] < 0)
            negative = i;
    }
    tg_status st = TG_OK;
    if (negative < n)
        st = tg_error(TG_ERR_FORMAT,
                      "%s: tensor '%s' is an optimizer's second moment (a mean of squares) but "
                      "holds %g at element %zu: the file was edited or damaged; load an intact "
                      "copy, or start its optimizer again with --resume-weights-only",
                      tg_safetensors_name(f), t->name, (double)tmp[negative], negative);
    else if (bad < n)
        st = tg_error(TG_ERR_NUMERIC,
                      "%s: tensor '%s' holds %s at element %zu: the run that saved it diverged; "
                      "train again (a lower --lr, --loss-scaling dynamic) or pass "
                      "--allow-non-finite to load it anyway",
                      tg_safetensors_name(f), t->name, isnan(tmp[bad]) ? "NaN" : "infinity", bad);
    tg_free(tmp);
    return st;
}

tg_status tg_checkpoint_load(tg_session *s, const char *path, const char *model)
{
    return tg_checkpoint_load_ex(s, path, model, 0);
}

/* One tensor of the file found and checked for the session, to be copied. */
typedef struct {
    const void *data; /* NULL: the file does not have it */
    tg_dtype saved;
    void *owned; /* data assembled from several tensors of the file */
} found_value;

/* Every saved tensor matched and checked, and the largest stored size, with
 * nothing in the session touched yet. */
static tg_status check_tensors(const tg_safetensors *f, const tg_session *s, unsigned flags,
                               const bool *skip, const bool *square, found_value *found,
                               size_t *most);

/* The optimizer's state (moments, momentum buffers): what a weight update
 * rewrites besides its parameter, in[1 .. n_mutated-1]; of it, in[first ..
 * last] (1..n: all of it; 2..2: the second moment, ADAM(param, exp_avg,
 * exp_avg_sq, grad) as compile/precision.c reads it). Marks them in `mark`;
 * running statistics are state too but are not marked. */
static void mark_optimizer_state(const tg_graph *g, int first, int last, bool *mark)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *u = g->nodes[i];
        if (!tg_is_weight_update(u))
            continue;
        for (int k = first; k < u->n_mutated && k < u->n_in && k <= last; k++)
            if (u->in[k] && u->in[k]->id >= 0 && u->in[k]->id < g->n_nodes)
                mark[u->in[k]->id] = true;
    }
}

static tg_status check_all(const tg_safetensors *f, const tg_session *s, unsigned flags,
                           found_value *found, size_t *most)
{
    const tg_graph *g = tg_session_graph(s);
    *most = 0;
    bool *skip = tg_calloc(2 * (size_t)g->n_nodes + 1, sizeof(bool)), *square = skip + g->n_nodes;
    if (!skip)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", tg_safetensors_name(f));
    if (flags & TG_CHECKPOINT_WEIGHTS_ONLY)
        mark_optimizer_state(g, 1, TG_MAX_INPUTS, skip);
    mark_optimizer_state(g, 2, 2, square);
    tg_status st = check_tensors(f, s, flags, skip, square, found, most);
    tg_free(skip);
    return st;
}

static tg_status check_tensors(const tg_safetensors *f, const tg_session *s, unsigned flags,
                               const bool *skip, const bool *square, found_value *found,
                               size_t *most)
{
    const tg_graph *g = tg_session_graph(s);
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!is_saved(s, t) || skip[i])
            continue;
        found[i].saved = t->dtype;
        TG_TRY(match_tensor(f, t, &found[i].data, &found[i].saved, &found[i].owned));
        TG_TRY(check_values(f, t, found[i].data, found[i].saved,
                            !(flags & TG_CHECKPOINT_ALLOW_NON_FINITE), square[i]));
        size_t bytes = (size_t)tg_numel(t) * tg_dtype_size(tg_session_storage_dtype(s, t));
        *most = bytes > *most ? bytes : *most;
    }
    return TG_OK;
}

tg_status tg_checkpoint_load_ex(tg_session *s, const char *path, const char *model, unsigned flags)
{
    tg_safetensors *f = NULL;
    TG_TRY(tg_safetensors_load(path, &f));
    const char *saved_model = tg_safetensors_metadata(f, "model");
    tg_status st = verify_checksums(f);
    if (st == TG_OK && model && saved_model && *saved_model && strcmp(model, saved_model) != 0)
        st = tg_error(TG_ERR_CONFIG, "%s: is a checkpoint of model '%s', not '%s'", path,
                      saved_model, model);
    const tg_graph *g = tg_session_graph(s);
    /* Everything is found, checked and allocated before the first value is
     * copied: a load that fails (a bad file, or no memory) changes nothing. */
    found_value *found = tg_calloc((size_t)g->n_nodes + 1, sizeof *found);
    size_t most = 0;
    if (st == TG_OK && !found)
        st = tg_error(TG_ERR_NOMEM, "%s: out of memory", path);
    if (st == TG_OK)
        st = check_all(f, s, flags, found, &most);
    if (st == TG_OK)
        st = read_engine_meta(f, s, false);
    void *tmp = st == TG_OK ? tg_malloc(most + 1) : NULL;
    if (st == TG_OK && !tmp)
        st = tg_error(TG_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; st == TG_OK && i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!found[i].data)
            continue;
        /* converted to the session's storage type, into every replica (or its shard) */
        tg_convert(found[i].data, found[i].saved, tmp, tg_session_storage_dtype(s, t),
                   (size_t)tg_numel(t));
        st = tg_session_value_in(s, t, tmp);
    }
    if (st == TG_OK && !(flags & TG_CHECKPOINT_WEIGHTS_ONLY))
        st = read_engine_meta(f, s, true);
    for (int i = 0; found && i < g->n_nodes; i++)
        tg_free(found[i].owned);
    tg_free(found);
    tg_free(tmp);
    tg_safetensors_destroy(f);
    return st;
}

tg_status tg_checkpoint_read_meta(const char *path, const char *key, char *buf, size_t cap)
{
    if (cap)
        buf[0] = '\0';
    tg_safetensors *f = NULL;
    TG_TRY(tg_safetensors_load(path, &f));
    const char *v = tg_safetensors_metadata(f, key);
    tg_status st = TG_OK;
    if (!v)
        st = tg_error(TG_ERR_NOT_FOUND, "%s: has no metadata '%s'", path, key);
    else if (strlen(v) >= cap)
        st = tg_error(TG_ERR_FORMAT, "%s: metadata '%s' is too long", path, key);
    else
        memcpy(buf, v, strlen(v) + 1);
    tg_safetensors_destroy(f);
    return st;
}
