/* compile/executable_file.c - compiled programs as files, written and read
 * (the key and compiling through the cache are in executable.c).
 * docs/executable-cache.md describes the format; in short:
 *
 *   header (80 bytes, little-endian)
 *     0  magic "TGEXEC1\n"          8  format version (u32)
 *    12  layout hash (u32): sizes of the structs stored raw, so another
 *        build's layout is refused
 *    16  tilegraph version (16 bytes, NUL-padded)
 *    32  key (32 hex digits): graph + options + target + threads + version
 *    64  payload bytes (u64)        72  payload crc32 (u32)
 *    76  header crc32 (u32) of bytes 0..75
 *   payload: the program's arrays, each preceded by its count.
 *
 * Loading trusts nothing: the checksums come first, then every count is
 * bounded by the bytes left and every index is checked against what it
 * indexes, so a corrupt, truncated or stale file is an error naming the file
 * and the reason, never a crash (fuzz/fuzz_executable.c).
 */
#include "compile/program.h"
#include "compile/phases_auto.h"

#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/pool.h"
#include "target/tiled.h"
#include "tilegraph/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#ifndef TG_VERSION
#define TG_VERSION "0"
#endif

#define MAGIC "TGEXEC1\n"
#define HEADER_BYTES 80
#define MAX_PAYLOAD ((uint64_t)1 << 34)

/* The sizes of the structs stored raw: a build that lays them out otherwise
 * must not read them. */
static uint32_t layout_hash(void)
{
    size_t sizes[] = {
        sizeof(tg_buffer),      sizeof(tg_step),
        sizeof(tg_transfer),    sizeof(tg_accumulator),
        sizeof(tg_stream_op),   sizeof(tg_precision) + sizeof(((tg_program *)0)->auto_stages),
        sizeof(tg_pipe_op),     sizeof(tg_tile_span),
        sizeof(tg_target_desc), TG_MAX_INPUTS,
        TG_REGION_COUNT,        TG_TILE_CAT_COUNT,
        TG_PHASE_COUNT};
    return (uint32_t)crc32(0, (const Bytef *)sizes, sizeof sizes);
}

/* ---- writing ------------------------------------------------------------------ */

typedef struct writer {
    unsigned char *buf;
    size_t len, cap;
    bool failed;
} writer;

static void put(writer *w, const void *data, size_t n)
{
    if (w->failed || n == 0)
        return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 1 << 16;
        while (cap < w->len + n)
            cap *= 2;
        unsigned char *grown = tg_realloc(w->buf, cap);
        if (!grown) {
            w->failed = true;
            return;
        }
        w->buf = grown;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, data, n);
    w->len += n;
}

static void put_i64(writer *w, int64_t v)
{
    put(w, &v, sizeof v);
}

static void put_f64(writer *w, double v)
{
    put(w, &v, sizeof v);
}

/* An array: its count, then its elements. */
static void put_array(writer *w, const void *data, int64_t count, size_t elem)
{
    put_i64(w, count);
    put(w, data, (size_t)count * elem);
}

static void put_schedule(writer *w, const tg_pipe_schedule *s)
{
    put_i64(w, s->kind);
    put_i64(w, s->n_devices);
    put_i64(w, s->micro_batches);
    put_i64(w, s->training);
    put_i64(w, s->ops != NULL);
    if (!s->ops)
        return;
    for (int d = 0; d < s->n_devices; d++)
        put_array(w, s->ops[d], s->n_ops[d], sizeof(tg_pipe_op));
    put_array(w, s->stash_depth, s->n_devices, sizeof(int));
}

static void put_device(writer *w, const tg_device_program *dp)
{
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        put_array(w, dp->steps[ph], dp->n_steps[ph], sizeof(tg_step));
    put_array(w, dp->inputs, dp->n_inputs, sizeof(int));
    put_array(w, dp->outputs, dp->n_outputs, sizeof(int));
    put_array(w, dp->accumulators, dp->n_accumulators, sizeof(tg_accumulator));
    put_i64(w, (int64_t)dp->arena_bytes);
    for (int r = 0; r < TG_REGION_COUNT; r++)
        put_i64(w, (int64_t)dp->region_bytes[r]);
    put_i64(w, (int64_t)dp->scratch_peak);
    put_i64(w, (int64_t)dp->offloaded_bytes);
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++) {
        put_array(w, dp->streams[ph], dp->n_streams[ph], sizeof(tg_stream_op));
        put_i64(w, (int64_t)dp->stream_in_bytes[ph]);
        put_i64(w, (int64_t)dp->stream_out_bytes[ph]);
    }
    put_i64(w, dp->stash_depth);
    put_i64(w, dp->input_grad_steps);
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        put_f64(w, dp->flops[ph]);
}

static void put_tile_plan(writer *w, const tg_program *p)
{
    const tg_tile_plan *tp = p->tile_plan;
    put_i64(w, tp != NULL);
    if (!tp)
        return;
    put(w, &tp->target, sizeof tp->target);
    put_array(w, tp->span, p->n_buffers, sizeof(tg_tile_span));
    int tiles = tp->target.tiles;
    for (int d = 0; d < p->n_devices; d++) {
        const tg_tile_device *td = &tp->devices[d];
        put_array(w, td->bytes, (int64_t)tiles * TG_TILE_CAT_COUNT, sizeof(int64_t));
        put_array(w, td->peak_step, tiles, sizeof(int));
        put_i64(w, td->max_tile);
        put_i64(w, td->max_bytes);
        put(w, td->total, sizeof td->total);
        for (int ph = 0; ph < 3; ph++)
            put_array(w, td->step_cycles[ph], p->devices[d].n_steps[ph], sizeof(double));
        put(w, td->cycles, sizeof td->cycles);
        put(w, td->copy_cycles, sizeof td->copy_cycles);
        put_i64(w, td->compute_sets);
        put_i64(w, td->vertices);
        put_i64(w, td->edges);
    }
}

static void put_program(writer *w, const tg_program *p)
{
    int n_nodes = p->graph->n_nodes;
    int64_t scalars[] = {n_nodes,
                         p->plan_threads,
                         p->n_devices,
                         p->micro_batches,
                         p->iterations,
                         p->replicas,
                         p->training,
                         p->accumulate,
                         (int64_t)p->arena_bytes,
                         (int64_t)p->scratch_cap};
    put(w, scalars, sizeof scalars);
    put_f64(w, p->flops);
    put(w, &p->precision, sizeof p->precision);
    put(w, p->auto_stages, sizeof p->auto_stages);
    put_schedule(w, &p->schedule);
    put_array(w, p->device_of, n_nodes, sizeof(int));
    put_array(w, p->home, n_nodes, sizeof(int));
    put_array(w, p->storage, n_nodes, sizeof(tg_dtype));
    put_i64(w, p->n_phases);
    if (p->n_phases > 0)
        put_array(w, p->phase_of, n_nodes, sizeof(int));
    put_i64(w, p->fused_into != NULL);
    if (p->fused_into) {
        put_array(w, p->fused_into, n_nodes, sizeof(int));
        put_array(w, p->fused_tail, n_nodes, sizeof(int));
    }
    put_array(w, p->buffers, p->n_buffers, sizeof(tg_buffer));
    for (int d = 0; d < p->n_devices; d++)
        put_device(w, &p->devices[d]);
    put_array(w, p->transfers, p->n_transfers, sizeof(tg_transfer));
    put_tile_plan(w, p);
}

static void put_u32(unsigned char *at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        at[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *at, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        at[i] = (unsigned char)(v >> (8 * i));
}

tg_status tg_executable_serialize(const tg_program *p, void **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    char key[33];
    TG_TRY(tg_executable_key(p->graph, &p->config, key));
    writer w = {0};
    unsigned char header[HEADER_BYTES] = {0};
    put(&w, header, sizeof header); /* filled in below */
    put_program(&w, p);
    if (w.failed) {
        tg_free(w.buf);
        return tg_error(TG_ERR_NOMEM, "out of memory serialising the program");
    }
    unsigned char *h = w.buf;
    memcpy(h, MAGIC, 8);
    put_u32(h + 8, TG_EXECUTABLE_FORMAT_VERSION);
    put_u32(h + 12, layout_hash());
    snprintf((char *)h + 16, 16, "%s", TG_VERSION);
    memcpy(h + 32, key, 32);
    uint64_t payload = w.len - HEADER_BYTES;
    put_u64(h + 64, payload);
    put_u32(h + 72, (uint32_t)crc32_z(0, w.buf + HEADER_BYTES, (size_t)payload));
    put_u32(h + 76, (uint32_t)crc32(0, h, 76));
    *data = w.buf;
    *len = w.len;
    return TG_OK;
}

tg_status tg_executable_save(const tg_program *p, const char *path)
{
    void *data = NULL;
    size_t len = 0;
    tg_status s = tg_executable_serialize(p, &data, &len);
    if (s != TG_OK)
        return tg_error_prefix(s, "executable %s", path);
    s = tg_atomic_file_write(path, data, len);
    tg_free(data);
    return s == TG_OK ? TG_OK : tg_error_prefix(s, "executable");
}

/* ---- reading ------------------------------------------------------------------ */

typedef struct reader {
    const unsigned char *p;
    size_t len, pos;
    const char *path;
    const char *bad; /* the first thing found wrong, or NULL */
    bool nomem;      /* ... which was no memory for it, not the file */
} reader;

static void fail(reader *r, const char *what)
{
    if (!r->bad)
        r->bad = what;
}

/* Out of memory is not a fault of the file: the caller says TG_ERR_NOMEM,
 * not TG_ERR_FORMAT (which the cache takes for a damaged file). */
static void fail_nomem(reader *r)
{
    if (!r->bad)
        r->nomem = true;
    fail(r, "out of memory");
}

static void get(reader *r, void *out, size_t n)
{
    if (r->bad || n > r->len - r->pos) {
        fail(r, "it ends early (truncated)");
        memset(out, 0, n);
        return;
    }
    memcpy(out, r->p + r->pos, n);
    r->pos += n;
}

static int64_t get_i64(reader *r)
{
    int64_t v = 0;
    get(r, &v, sizeof v);
    return v;
}

/* An int in [lo, hi]; out of range marks the reader bad with `what`. */
static int get_int(reader *r, int64_t lo, int64_t hi, const char *what)
{
    int64_t v = get_i64(r);
    if (v < lo || v > hi) {
        fail(r, what);
        return (int)lo;
    }
    return (int)v;
}

/* A size in bytes: get_int's int would keep only its low 32 bits. */
static size_t get_size(reader *r, const char *what)
{
    int64_t v = get_i64(r);
    if (v < 0) {
        fail(r, what);
        return 0;
    }
    return (size_t)v;
}

/* An array stored by put_array, into new memory (NULL for none): its count
 * must be `want` (or anything up to what is left when want < 0). */
static void *get_array(reader *r, int64_t want, size_t elem, int *count, const char *what)
{
    int64_t n = get_i64(r);
    if (r->bad)
        return NULL;
    if (n < 0 || (want >= 0 && n != want) || (uint64_t)n > (r->len - r->pos) / elem ||
        n > INT32_MAX) {
        fail(r, what);
        return NULL;
    }
    if (count)
        *count = (int)n;
    void *out = tg_calloc((size_t)n + 1, elem);
    if (!out) {
        fail_nomem(r);
        return NULL;
    }
    get(r, out, (size_t)n * elem);
    return out;
}

static bool in_range(int v, int lo, int hi_excl)
{
    return v >= lo && v < hi_excl;
}

static void get_schedule(reader *r, tg_program *p)
{
    tg_pipe_schedule *s = &p->schedule;
    s->kind = (tg_schedule_kind)get_int(r, 0, TG_SCHEDULE_COUNT - 1, "a bad schedule kind");
    int n_dev = get_int(r, 0, p->n_devices, "a bad schedule device count");
    s->micro_batches = get_int(r, 0, p->micro_batches, "a bad schedule micro-batch count");
    s->training = get_int(r, 0, 1, "a bad schedule flag");
    if (!get_int(r, 0, 1, "a bad schedule flag") || r->bad)
        return;
    s->ops = tg_calloc((size_t)n_dev + 1, sizeof *s->ops);
    s->n_ops = tg_calloc((size_t)n_dev + 1, sizeof *s->n_ops);
    if (!s->ops || !s->n_ops) {
        fail_nomem(r);
        return;
    }
    s->n_devices = n_dev;
    for (int d = 0; d < n_dev && !r->bad; d++) {
        s->ops[d] = get_array(r, -1, sizeof(tg_pipe_op), &s->n_ops[d], "a bad schedule");
        for (int k = 0; s->ops[d] && k < s->n_ops[d]; k++)
            if (!in_range(s->ops[d][k].micro_batch, 0, s->micro_batches) ||
                !in_range((int)s->ops[d][k].pass, TG_PASS_FORWARD, TG_PASS_WEIGHT + 1))
                fail(r, "a schedule entry out of range");
    }
    s->stash_depth = get_array(r, n_dev, sizeof(int), NULL, "a bad stash depth list");
}

/* A bool stored raw holds 0 or 1; any other byte would be read as neither
 * (undefined behaviour), so it is looked at as a byte first. */
static bool bool_ok(const bool *v)
{
    unsigned char byte;
    memcpy(&byte, v, 1);
    return byte <= 1;
}

static bool buffer_ok(const tg_program *p, int b)
{
    return in_range(b, -1, p->n_buffers);
}

/* A sharded weight's gathered copy (compile/sharding.c): a whole copy of it
 * on its device. */
static bool gather_ok(const tg_program *p, const tg_stream_op *op)
{
    const tg_buffer *home = &p->buffers[op->home], *copy = &p->buffers[op->copy];
    const tg_tensor *t = p->graph->nodes[home->node];
    return tg_sharding_is_weight(p, op->home) && !copy->sharded && !copy->offloaded &&
           copy->copy_of == op->home && copy->device == home->device &&
           copy->bytes == (size_t)tg_numel(t) * tg_dtype_size(home->dtype);
}

/* A step's streamed copies: within the phase's list, each a copy on the
 * device of an offloaded buffer of the same size. */
static void check_streams(reader *r, const tg_program *p, const tg_device_program *dp, int ph,
                          const tg_step *st)
{
    int n = dp->n_streams[ph];
    if (st->stream_at < 0 || st->n_stream_in < 0 || st->n_stream_out < 0 || st->stream_at > n ||
        st->n_stream_in > n - st->stream_at ||
        st->n_stream_out > n - st->stream_at - st->n_stream_in) {
        fail(r, "a step's streamed copies lie outside its list");
        return;
    }
    for (int i = 0; i < st->n_stream_in + st->n_stream_out; i++) {
        const tg_stream_op *op = &dp->streams[ph][st->stream_at + i];
        if (in_range(op->copy, 0, p->n_buffers) && in_range(op->home, 0, p->n_buffers) &&
            op->kind == TG_STREAM_GATHER) {
            if (!gather_ok(p, op))
                fail(r, "a gathered copy names buffers that do not match");
            continue;
        }
        if (!in_range(op->copy, 0, p->n_buffers) || !in_range(op->home, 0, p->n_buffers) ||
            !in_range(op->kind, 0, TG_STREAM_ACCUMULATE + 1) || !p->buffers[op->home].offloaded ||
            p->buffers[op->copy].offloaded ||
            (op->kind == TG_STREAM_COPY &&
             (p->buffers[op->copy].copy_of != op->home ||
              p->buffers[op->copy].bytes != p->buffers[op->home].bytes)) ||
            (op->kind == TG_STREAM_ACCUMULATE &&
             tg_numel(p->graph->nodes[p->buffers[op->copy].node]) !=
                 tg_numel(p->graph->nodes[p->buffers[op->home].node])))
            fail(r, "a streamed copy names buffers that do not match");
    }
}

static void check_step(reader *r, const tg_program *p, const tg_step *st, size_t arena)
{
    if (!bool_ok(&st->staged) || !bool_ok(&st->exchange_before) || !bool_ok(&st->fused))
        fail(r, "a step's flags are not flags");
    if (!in_range(st->node, 0, p->graph->n_nodes) || !buffer_ok(p, st->out))
        fail(r, "a step names a node or buffer that does not exist");
    for (int k = 0; k < TG_MAX_INPUTS; k++)
        if (!buffer_ok(p, st->in[k]))
            fail(r, "a step reads a buffer that does not exist");
    if (st->scratch_offset > arena || st->scratch_bytes > arena - st->scratch_offset ||
        st->kernel_scratch > st->scratch_bytes)
        fail(r, "a step's scratch lies outside its device's memory");
}

static void get_device(reader *r, tg_program *p, tg_device_program *dp)
{
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++)
        dp->steps[ph] = get_array(r, -1, sizeof(tg_step), &dp->n_steps[ph], "a bad step list");
    dp->inputs = get_array(r, -1, sizeof(int), &dp->n_inputs, "a bad input list");
    dp->outputs = get_array(r, -1, sizeof(int), &dp->n_outputs, "a bad output list");
    dp->accumulators =
        get_array(r, -1, sizeof(tg_accumulator), &dp->n_accumulators, "a bad accumulator list");
    dp->arena_bytes = get_size(r, "a bad arena size");
    for (int k = 0; k < TG_REGION_COUNT; k++)
        dp->region_bytes[k] = get_size(r, "a bad region size");
    dp->scratch_peak = get_size(r, "a bad scratch size");
    dp->offloaded_bytes = get_size(r, "a bad offloaded size");
    for (int ph = 0; ph < TG_PHASE_COUNT; ph++) {
        dp->streams[ph] =
            get_array(r, -1, sizeof(tg_stream_op), &dp->n_streams[ph], "a bad stream list");
        dp->stream_in_bytes[ph] = get_size(r, "a bad stream size");
        dp->stream_out_bytes[ph] = get_size(r, "a bad stream size");
    }
    dp->stash_depth = get_int(r, 0, 1 << 20, "a bad stash depth");
    dp->input_grad_steps = get_int(r, 0, dp->n_steps[TG_PHASE_BACKWARD], "a bad backward split");
    get(r, dp->flops, sizeof dp->flops);
}

/* Indices the engine follows without checking: all must be in range. */
static void check_device(reader *r, const tg_program *p, const tg_device_program *dp)
{
    for (int ph = 0; ph < TG_PHASE_COUNT && !r->bad; ph++)
        for (int k = 0; dp->steps[ph] && k < dp->n_steps[ph]; k++) {
            check_step(r, p, &dp->steps[ph][k], dp->arena_bytes);
            check_streams(r, p, dp, ph, &dp->steps[ph][k]);
        }
    for (int k = 0; dp->inputs && k < dp->n_inputs; k++)
        if (!in_range(dp->inputs[k], 0, p->n_buffers))
            fail(r, "a bad host input");
    for (int k = 0; dp->outputs && k < dp->n_outputs; k++)
        if (!in_range(dp->outputs[k], 0, p->n_buffers))
            fail(r, "a bad host output");
    for (int k = 0; dp->accumulators && k < dp->n_accumulators; k++) {
        const tg_accumulator *a = &dp->accumulators[k];
        if (!bool_ok(&a->early) || !in_range(a->param, 0, p->graph->n_nodes) ||
            !in_range(a->grad_buffer, 0, p->n_buffers) || !in_range(a->acc_buffer, 0, p->n_buffers))
            fail(r, "a bad accumulator");
    }
}

/* Bytes of buffer b's value as the program holds it: one shard of a
 * sharded one. */
static size_t value_bytes(const tg_program *p, int b)
{
    const tg_buffer *buf = &p->buffers[b];
    return buf->sharded ? tg_sharding_shard_bytes(p, b)
                        : (size_t)tg_numel(p->graph->nodes[buf->node]) * tg_dtype_size(buf->dtype);
}

static void check_buffers(reader *r, const tg_program *p)
{
    for (int i = 0; i < p->n_buffers && !r->bad; i++) {
        const tg_buffer *b = &p->buffers[i];
        if (!in_range(b->node, 0, p->graph->n_nodes) || !in_range(b->device, 0, p->n_devices) ||
            !in_range((int)b->region, 0, TG_REGION_COUNT) ||
            !in_range((int)b->dtype, 0, TG_DTYPE_COUNT) || b->slots < 1 || b->slots > (1 << 20))
            fail(r, "a buffer names a node, device, region or type that does not exist");
        else if (!bool_ok(&b->offloaded) || !bool_ok(&b->sharded))
            fail(r, "a buffer's flags are not flags");
        else if (!in_range(b->copy_of, -1, p->n_buffers) ||
                 (b->offloaded && (b->region != TG_REGION_NONE || b->stride < b->bytes ||
                                   b->bytes != value_bytes(p, i))))
            fail(r, "an offloaded buffer or streamed copy does not match its value");
        else if (b->region != TG_REGION_NONE) {
            size_t arena = p->devices[b->device].arena_bytes;
            size_t span = b->bytes;
            if (b->slots > 1 && b->stride > (arena - span) / (size_t)(b->slots - 1))
                fail(r, "a buffer lies outside its device's memory");
            else if (b->slots > 1)
                span += b->stride * (size_t)(b->slots - 1);
            if (span > arena || b->offset > arena - span)
                fail(r, "a buffer lies outside its device's memory");
        }
    }
    for (int i = 0; i < p->n_transfers && !r->bad; i++) {
        const tg_transfer *t = &p->transfers[i];
        if (!in_range(t->node, 0, p->graph->n_nodes) || !in_range(t->src_device, 0, p->n_devices) ||
            !in_range(t->dst_device, 0, p->n_devices) ||
            !in_range((int)t->phase, 0, TG_PHASE_COUNT) ||
            !in_range(t->src_buffer, 0, p->n_buffers) || !in_range(t->dst_buffer, 0, p->n_buffers))
            fail(r, "a transfer names something that does not exist");
        else if (!bool_ok(&t->used_forward) || !bool_ok(&t->used_backward))
            fail(r, "a transfer's flags are not flags");
        else if (!in_range(t->send_at, -1, p->devices[t->src_device].n_steps[t->phase]) ||
                 !in_range(t->recv_at[0], -1, p->devices[t->dst_device].n_steps[0]) ||
                 !in_range(t->recv_at[1], -1, p->devices[t->dst_device].n_steps[1]))
            fail(r, "a transfer moves at a step that does not exist");
    }
    for (int i = 0; i < p->graph->n_nodes && !r->bad; i++)
        if (!in_range(p->device_of[i], -1, p->n_devices) || !buffer_ok(p, p->home[i]) ||
            !in_range((int)p->storage[i], 0, TG_DTYPE_COUNT))
            fail(r, "a node's device, buffer or type does not exist");
}

/* The fusion's indices (compile/fuse.c), before anything follows them:
 * each in range, a node fused into a convolution that computes a last node
 * (fused into it, or itself) and is fused into nothing; whether the pass
 * would fuse so is checked once the program is whole
 * (tg_fuse_check_loaded). */
static void get_fusion(reader *r, tg_program *p)
{
    int n = p->graph->n_nodes;
    if (!get_int(r, 0, 1, "a bad fusion flag") || r->bad)
        return;
    p->fused_into = get_array(r, n, sizeof(int), NULL, "a bad fusion table");
    p->fused_tail = get_array(r, n, sizeof(int), NULL, "a bad fusion table");
    for (int i = 0; p->fused_into && p->fused_tail && i < n; i++)
        if (!in_range(p->fused_into[i], -1, n) || !in_range(p->fused_tail[i], -1, n))
            fail(r, "a node fused into, or computing, a node that does not exist");
    for (int i = 0; p->fused_into && p->fused_tail && i < n && !r->bad; i++) {
        int into = p->fused_into[i], tail = p->fused_tail[i];
        if (into >= 0 &&
            (into == i || p->fused_into[into] != -1 || p->fused_tail[into] < 0 || tail != -1))
            fail(r, "a node fused into a node that computes no others");
        else if (tail >= 0 && (into != -1 || tail == i || p->fused_into[tail] != i))
            fail(r, "a fused node's last node is not fused into it");
    }
}

static void get_tile_plan(reader *r, tg_program *p)
{
    if (!get_int(r, 0, 1, "a bad tile plan flag") || r->bad)
        return;
    tg_tile_plan *tp = tg_calloc(1, sizeof *tp);
    if (!tp) {
        fail_nomem(r);
        return;
    }
    p->tile_plan = tp;
    tp->n_devices = p->n_devices;
    tp->devices = tg_calloc((size_t)p->n_devices + 1, sizeof *tp->devices);
    if (!tp->devices) {
        fail_nomem(r);
        return;
    }
    get(r, &tp->target, sizeof tp->target);
    int tiles = tp->target.tiles;
    if (tiles < 1 || tiles > (1 << 20)) {
        fail(r, "a bad tile count");
        return;
    }
    tp->span = get_array(r, p->n_buffers, sizeof(tg_tile_span), NULL, "a bad tile mapping");
    for (int i = 0; tp->span && i < p->n_buffers; i++)
        if (!in_range(tp->span[i].start, 0, tiles) || !in_range(tp->span[i].used, 0, tiles + 1))
            fail(r, "a tile mapping out of range");
    for (int d = 0; d < p->n_devices && !r->bad; d++) {
        tg_tile_device *td = &tp->devices[d];
        td->bytes = get_array(r, (int64_t)tiles * TG_TILE_CAT_COUNT, sizeof(int64_t), NULL,
                              "a bad tile memory table");
        td->peak_step = get_array(r, tiles, sizeof(int), NULL, "a bad tile peak table");
        int steps = p->devices[d].n_steps[0] + p->devices[d].n_steps[1] + p->devices[d].n_steps[2];
        for (int t = 0; td->peak_step && t < tiles; t++)
            if (!in_range(td->peak_step[t], 0, steps + 1))
                fail(r, "a tile's peak step out of range");
        td->max_tile = get_int(r, 0, tiles - 1, "a bad fullest tile");
        td->max_bytes = get_i64(r);
        get(r, td->total, sizeof td->total);
        for (int ph = 0; ph < 3; ph++)
            td->step_cycles[ph] =
                get_array(r, p->devices[d].n_steps[ph], sizeof(double), NULL, "a bad cycle table");
        get(r, td->cycles, sizeof td->cycles);
        get(r, td->copy_cycles, sizeof td->copy_cycles);
        td->compute_sets = get_i64(r);
        td->vertices = get_i64(r);
        td->edges = get_i64(r);
    }
}

static void get_program(reader *r, tg_program *p)
{
    int n_nodes = p->graph->n_nodes;
    if (get_i64(r) != n_nodes)
        fail(r, "it was compiled from another graph (node count)");
    p->plan_threads = get_int(r, 1, 1 << 16, "a bad thread count");
    p->n_devices = get_int(r, 1, 1 << 10, "a bad device count");
    p->micro_batches = get_int(r, 1, INT32_MAX, "a bad micro-batch count");
    p->iterations = get_int(r, 1, INT32_MAX, "a bad iteration count");
    p->replicas = get_int(r, 1, 1 << 10, "a bad replica count");
    p->training = get_int(r, 0, 1, "a bad flag");
    p->accumulate = get_int(r, 0, 1, "a bad flag");
    p->arena_bytes = get_size(r, "a bad arena size");
    p->scratch_cap = (size_t)get_i64(r);
    get(r, &p->flops, sizeof p->flops);
    get(r, &p->precision, sizeof p->precision);
    get(r, p->auto_stages, sizeof p->auto_stages);
    if (memchr(p->auto_stages, 0, sizeof p->auto_stages) == NULL)
        fail(r, "a bad automatic split");
    if (r->bad)
        return;
    get_schedule(r, p);
    p->device_of = get_array(r, n_nodes, sizeof(int), NULL, "a bad device table");
    p->home = get_array(r, n_nodes, sizeof(int), NULL, "a bad buffer table");
    p->storage = get_array(r, n_nodes, sizeof(tg_dtype), NULL, "a bad type table");
    p->n_phases = get_int(r, 0, 1 << 16, "a bad phase count");
    if (p->n_phases > 0 && !r->bad)
        p->phase_of = get_array(r, n_nodes, sizeof(int), NULL, "a bad phase table");
    for (int i = 0; p->phase_of && i < n_nodes && !r->bad; i++)
        if (!in_range(p->phase_of[i], -1, p->n_phases))
            fail(r, "a node's phase does not exist");
    get_fusion(r, p);
    p->buffers = get_array(r, -1, sizeof(tg_buffer), &p->n_buffers, "a bad buffer list");
    p->cap_buffers = p->n_buffers;
    if (r->bad)
        return;
    p->devices = tg_calloc((size_t)p->n_devices, sizeof *p->devices);
    if (!p->devices) {
        fail_nomem(r);
        return;
    }
    for (int d = 0; d < p->n_devices && !r->bad; d++)
        get_device(r, p, &p->devices[d]);
    p->transfers = get_array(r, -1, sizeof(tg_transfer), &p->n_transfers, "a bad transfer list");
    p->cap_transfers = p->n_transfers;
    if (r->bad)
        return;
    for (int d = 0; d < p->n_devices && !r->bad; d++)
        check_device(r, p, &p->devices[d]);
    check_buffers(r, p);
    get_tile_plan(r, p);
    if (!r->bad && r->pos != r->len)
        fail(r, "it has bytes after the program");
}

static uint32_t get_u32(const unsigned char *at)
{
    return (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
}

static uint64_t get_u64(const unsigned char *at)
{
    return (uint64_t)get_u32(at) | (uint64_t)get_u32(at + 4) << 32;
}

/* The header: magic, versions, key, checksums. TG_ERR_NOT_FOUND for a file
 * that is sound but for another graph, options or version (stale). */
static tg_status check_header(const unsigned char *buf, size_t len, const char *path,
                              const char *key)
{
    if (len < HEADER_BYTES || memcmp(buf, MAGIC, 8) != 0)
        return tg_error(TG_ERR_FORMAT, "executable %s: not a tilegraph executable%s", path,
                        len < HEADER_BYTES ? " (shorter than its header)" : " (bad magic)");
    if (get_u32(buf + 76) != (uint32_t)crc32(0, buf, 76))
        return tg_error(TG_ERR_FORMAT, "executable %s: its header checksum does not match", path);
    if (get_u32(buf + 8) != TG_EXECUTABLE_FORMAT_VERSION)
        return tg_error(TG_ERR_NOT_FOUND, "executable %s: format version %u, this build reads %u",
                        path, get_u32(buf + 8), TG_EXECUTABLE_FORMAT_VERSION);
    char version[17] = {0};
    memcpy(version, buf + 16, 16);
    version[15] = 0;
    if (strcmp(version, TG_VERSION) != 0)
        return tg_error(TG_ERR_NOT_FOUND, "executable %s: written by tilegraph %s, this is %s",
                        path, version, TG_VERSION);
    if (get_u32(buf + 12) != layout_hash())
        return tg_error(TG_ERR_NOT_FOUND, "executable %s: written by another build (layout)", path);
    if (memcmp(buf + 32, key, 32) != 0)
        return tg_error(TG_ERR_NOT_FOUND,
                        "executable %s: compiled from another graph, options or target "
                        "(key %.32s, this run's %s)",
                        path, (const char *)buf + 32, key);
    uint64_t payload = get_u64(buf + 64);
    if (payload > len - HEADER_BYTES)
        return tg_error(TG_ERR_FORMAT,
                        "executable %s: truncated (%llu payload bytes, %llu present)", path,
                        (unsigned long long)payload, (unsigned long long)(len - HEADER_BYTES));
    if (payload < len - HEADER_BYTES)
        return tg_error(TG_ERR_FORMAT,
                        "executable %s: %llu bytes follow its end (%llu payload bytes, %llu "
                        "present): something was appended to it",
                        path, (unsigned long long)(len - HEADER_BYTES - payload),
                        (unsigned long long)payload, (unsigned long long)(len - HEADER_BYTES));
    if (get_u32(buf + 72) != (uint32_t)crc32_z(0, buf + HEADER_BYTES, (size_t)payload))
        return tg_error(TG_ERR_FORMAT, "executable %s: its checksum does not match (corrupt)",
                        path);
    return TG_OK;
}

tg_status tg_executable_parse(const tg_graph *g, const tg_config *c, const void *data, size_t len,
                              const char *path, tg_program **out)
{
    *out = NULL;
    char key[33];
    TG_TRY(tg_executable_key(g, c, key));
    TG_TRY(check_header(data, len, path, key));
    tg_program *p = tg_calloc(1, sizeof *p);
    if (!p)
        return tg_error(TG_ERR_NOMEM, "executable %s: out of memory", path);
    p->graph = g;
    if (tg_config_copy(c, &p->config) != TG_OK) {
        tg_program_destroy(p);
        return tg_error(TG_ERR_NOMEM, "executable %s: out of memory", path);
    }
    reader r = {
        (const unsigned char *)data + HEADER_BYTES, len - HEADER_BYTES, 0, path, NULL, false};
    get_program(&r, p);
    if (r.bad) {
        tg_program_destroy(p);
        return tg_error(r.nomem ? TG_ERR_NOMEM : TG_ERR_FORMAT, "executable %s: %s", path, r.bad);
    }
    tg_status s = tg_executable_check(p);
    if (s == TG_OK)
        s = tg_program_plan_loaded(p);
    if (s != TG_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tg_error_message());
        tg_program_destroy(p);
        return tg_error(s, "executable %s: %s", path, why);
    }
    *out = p;
    return TG_OK;
}

tg_status tg_executable_load(const tg_graph *g, const tg_config *c, const char *path,
                             tg_program **out)
{
    *out = NULL;
    FILE *f = NULL;
    TG_TRY(tg_fopen_regular(path, &f));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || (uint64_t)st.st_size > MAX_PAYLOAD) {
        fclose(f);
        return tg_error(TG_ERR_FORMAT, "executable %s: cannot size it or too large", path);
    }
    size_t len = (size_t)st.st_size;
    unsigned char *buf = tg_malloc(len + 1);
    if (!buf) {
        fclose(f);
        return tg_error(TG_ERR_NOMEM, "executable %s: out of memory", path);
    }
    size_t got = fread(buf, 1, len, f);
    fclose(f);
    tg_status s = got == len ? tg_executable_parse(g, c, buf, len, path, out)
                             : tg_error(TG_ERR_IO, "executable %s: cannot read it", path);
    tg_free(buf);
    return s;
}
