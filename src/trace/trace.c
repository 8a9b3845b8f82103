/* trace/trace.c - the trace recorder: channels, per-thread event buffers,
 * and reading them back.
 *
 * Each thread that records gets its own buffer, a list of fixed-size chunks
 * that only that thread appends to, so recording takes no lock. A reader
 * (tg_trace_visit, the exporters) may walk any buffer at any time:
 *  - a record's fields are written before the chunk's `count` is raised with
 *    a release store, and never change afterwards - except a region's end,
 *    which is atomic and set (release) when the region closes;
 *  - a chunk's `next` is published (release) before the first record in it;
 *  - buffers stay in the registry after their thread exits, so the engine can
 *    join its threads and then write the trace.
 * The engine starts new device threads for each run; so that a device keeps
 * one track, a thread that names itself after a thread that has exited
 * adopts that thread's buffer (a pthread key destructor marks buffers whose
 * thread exited; the adoption happens under the registry lock, which orders
 * the old owner's last writes before the new owner's first).
 * Only tg_trace_clear frees buffers. It bumps a generation number, so a
 * thread whose thread-local pointer names a buffer of an older generation
 * registers a new one instead of touching freed memory; it must not run
 * while another thread records (header).
 *
 * The recording calls are inline wrappers (tilegraph/trace.h) that test
 * tg_trace_on_ - nonzero while any channel is enabled - before calling in
 * here; the functions here then test the channel's own flag.
 */
#include "trace/trace_internal.h"

#include "core/alloc.h"
#include "core/error.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int tg_trace_on_;

enum { CHUNK_RECS = 2048, MAX_DEPTH = 64, THREAD_NAME_MAX = 64 };

/* One event. 40 bytes. */
typedef struct rec {
    const char *name;
    int64_t t0;
    _Atomic int64_t t1; /* REGION: end, -1 while open */
    union {
        uint64_t link; /* REGION, INSTANT */
        double value;  /* VALUE, SAMPLE */
    } u;
    uint16_t channel;
    uint8_t kind;
    uint8_t depth;
} rec;

typedef struct chunk {
    _Atomic(struct chunk *) next;
    atomic_size_t count; /* records published in this chunk */
    rec recs[CHUNK_RECS];
} chunk;

typedef struct open_region {
    rec *r; /* NULL when the begin was dropped (buffer full) */
    int channel;
} open_region;

typedef struct thread_buf {
    int index;
    uint64_t serial;            /* never reused, unlike addresses */
    char name[THREAD_NAME_MAX]; /* guarded by g_lock */
    bool exited;                /* guarded by g_lock: its thread is gone */
    _Atomic(chunk *) head;
    _Atomic uint64_t dropped, unmatched;
    /* owner thread only: */
    chunk *tail;
    uint64_t kept;
    int depth;    /* entries on `stack` */
    int overflow; /* regions open beyond MAX_DEPTH, not recorded */
    open_region stack[MAX_DEPTH];
} thread_buf;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* Channels: slots below g_n_channels are immutable except `enabled`. */
static tg_trace_channel g_channels[TG_TRACE_MAX_CHANNELS];
static atomic_int g_n_channels;
/* Registry of thread buffers, guarded by g_lock. */
static thread_buf **g_threads;
static int g_n_threads, g_cap_threads;
static uint64_t g_next_serial = 1;
/* Its destructor runs when a thread that has a buffer exits. */
static pthread_key_t g_exit_key;
static pthread_once_t g_exit_key_once = PTHREAD_ONCE_INIT;
static bool g_exit_key_ok;
static _Atomic uint64_t g_generation = 1;
static _Atomic uint64_t g_lost; /* events lost before a thread had a buffer */
static _Atomic int64_t g_max_events = 1 << 20;
static _Atomic int64_t g_origin;
/* Settings in force, guarded by g_lock (g_have_settings: set once). */
static tg_trace_settings g_settings;
static bool g_have_settings, g_was_enabled;

static _Thread_local thread_buf *tls_buf;
static _Thread_local uint64_t tls_generation;
static _Thread_local char tls_name[THREAD_NAME_MAX];
/* Regions begun while this thread had no buffer (out of memory), so that their
 * ends are not taken for unmatched ones; valid for generation tls_lost_gen. */
static _Thread_local int tls_lost_open;
static _Thread_local uint64_t tls_lost_gen;

int64_t tg_trace_clock_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int64_t tg_trace_origin_ns(void)
{
    return atomic_load_explicit(&g_origin, memory_order_relaxed);
}

bool tg_trace_is_on(void)
{
    return __atomic_load_n(&tg_trace_on_, __ATOMIC_RELAXED) != 0;
}

const char *tg_trace_kind_name(tg_trace_kind k)
{
    static const char *const names[] = {"region", "instant", "value", "sample"};
    return (unsigned)k < TG_TRACE_KIND_COUNT ? names[k] : "unknown";
}

const char *tg_trace_phase_name(tg_trace_phase p)
{
    static const char *const names[] = {"other", "forward", "backward", "update"};
    return (unsigned)p < TG_TRACE_PHASE_COUNT ? names[p] : "unknown";
}

/* ---- channels and settings ------------------------------------------------------- */

int tg_trace_channel_name_valid(const char *name, size_t len)
{
    if (!name || len == 0 || len > TG_TRACE_CHANNEL_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

const char *tg_trace_channel_name_of(int id)
{
    return id >= 0 && id < atomic_load(&g_n_channels) ? g_channels[id].name : "?";
}

static void ensure_settings_locked(void)
{
    if (!g_have_settings) {
        tg_trace_settings_default(&g_settings);
        g_have_settings = true;
    }
}

static bool settings_select(const tg_trace_settings *s, const char *channel)
{
    if (!s->enable)
        return false;
    if (s->all_channels)
        return true;
    for (int i = 0; i < s->n_channels; i++)
        if (strcmp(s->channels[i], channel) == 0)
            return true;
    return false;
}

/* Set every channel's flag from g_settings, then the global flag. */
static void recompute_locked(void)
{
    int any = 0, n = atomic_load(&g_n_channels);
    for (int i = 0; i < n; i++) {
        int on = settings_select(&g_settings, g_channels[i].name);
        atomic_store_explicit(&g_channels[i].enabled, on, memory_order_relaxed);
        any |= on;
    }
    if (any) {
        if (atomic_load(&g_origin) == 0)
            atomic_store(&g_origin, tg_trace_clock_ns());
        g_was_enabled = true;
    }
    __atomic_store_n(&tg_trace_on_, any, __ATOMIC_RELAXED);
}

void tg_trace_settings_get(tg_trace_settings *out)
{
    pthread_mutex_lock(&g_lock);
    ensure_settings_locked();
    *out = g_settings;
    pthread_mutex_unlock(&g_lock);
}

void tg_trace_settings_apply(const tg_trace_settings *s)
{
    pthread_mutex_lock(&g_lock);
    g_settings = *s;
    g_have_settings = true;
    atomic_store(&g_max_events, s->max_events);
    recompute_locked();
    pthread_mutex_unlock(&g_lock);
}

bool tg_trace_was_enabled(void)
{
    pthread_mutex_lock(&g_lock);
    bool was = g_was_enabled;
    pthread_mutex_unlock(&g_lock);
    return was;
}

tg_trace_channel *tg_trace_channel_get(const char *name)
{
    if (!name || !tg_trace_channel_name_valid(name, strlen(name))) {
        tg_error(TG_ERR_INVALID_ARG,
                 "trace channel '%s': a name is 1 to %d of the characters A-Z a-z 0-9 _ . -",
                 name ? name : "(null)", TG_TRACE_CHANNEL_NAME_MAX);
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    int n = atomic_load(&g_n_channels);
    tg_trace_channel *ch = NULL;
    for (int i = 0; i < n && !ch; i++)
        if (strcmp(g_channels[i].name, name) == 0)
            ch = &g_channels[i];
    if (!ch && n < TG_TRACE_MAX_CHANNELS) {
        ch = &g_channels[n];
        snprintf(ch->name, sizeof ch->name, "%s", name);
        ch->id = n;
        atomic_store(&g_n_channels, n + 1);
        ensure_settings_locked();
        recompute_locked();
    }
    pthread_mutex_unlock(&g_lock);
    if (!ch)
        tg_error(TG_ERR_CONFIG, "trace channel '%s': already %d channels, the most there can be",
                 name, TG_TRACE_MAX_CHANNELS);
    return ch;
}

/* The library's own channels (docs/tracing.md): known before their first
 * use, so naming one that a run never reaches ("comms" outside an MPI job)
 * is no mistake. */
static const char *const library_channels[] = {"compile", "engine", "data", "comms"};

static bool is_library_channel(const char *name)
{
    for (size_t i = 0; i < sizeof library_channels / sizeof library_channels[0]; i++)
        if (strcmp(library_channels[i], name) == 0)
            return true;
    return false;
}

static bool channel_known_locked(const char *name)
{
    int n = atomic_load(&g_n_channels);
    for (int i = 0; i < n; i++)
        if (strcmp(g_channels[i].name, name) == 0)
            return true;
    return is_library_channel(name);
}

/* buf += text, truncated at cap. */
static size_t append_text(char *buf, size_t cap, size_t used, const char *text)
{
    if (used + 1 < cap)
        used += (size_t)snprintf(buf + used, cap - used, "%s", text);
    return used < cap ? used : cap - 1;
}

int tg_trace_unknown_channels(char *buf, size_t cap)
{
    char names[512] = "", known[512] = "compile, engine, data, comms";
    size_t n_used = 0, k_used = strlen(known);
    int unknown = 0;
    pthread_mutex_lock(&g_lock);
    ensure_settings_locked();
    for (int i = 0; g_settings.enable && !g_settings.all_channels && i < g_settings.n_channels; i++)
        if (!channel_known_locked(g_settings.channels[i])) {
            n_used = append_text(names, sizeof names, n_used, unknown++ ? ", '" : "'");
            n_used = append_text(names, sizeof names, n_used, g_settings.channels[i]);
            n_used = append_text(names, sizeof names, n_used, "'");
        }
    /* the library's channels, then those the application registered */
    int n = atomic_load(&g_n_channels);
    for (int i = 0; i < n; i++)
        if (!is_library_channel(g_channels[i].name)) {
            k_used = append_text(known, sizeof known, k_used, ", ");
            k_used = append_text(known, sizeof known, k_used, g_channels[i].name);
        }
    pthread_mutex_unlock(&g_lock);
    if (unknown)
        snprintf(buf, cap,
                 "trace channel%s %s %s named in the trace configuration, but no channel of that "
                 "name exists: nothing was recorded on %s; the channels are %s (check the "
                 "spelling in TILEGRAPH_TRACE or trace.channels; an application's channel "
                 "exists once it calls tg_trace_channel_get)",
                 unknown > 1 ? "s" : "", names, unknown > 1 ? "are" : "is",
                 unknown > 1 ? "them" : "it", known);
    else if (cap)
        buf[0] = '\0';
    return unknown;
}

const char *tg_trace_channel_name(const tg_trace_channel *ch)
{
    return ch ? ch->name : "";
}

bool tg_trace_channel_enabled(const tg_trace_channel *ch)
{
    return ch && atomic_load_explicit(&ch->enabled, memory_order_relaxed);
}

/* ---- per-thread buffers ---------------------------------------------------------- */

static void name_thread(thread_buf *b)
{
    if (tls_name[0])
        snprintf(b->name, sizeof b->name, "%s", tls_name);
    else
        snprintf(b->name, sizeof b->name, "thread %d", b->index);
}

static void thread_exited(void *serial)
{
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n_threads; i++) /* not found: freed by a clear */
        if (g_threads[i]->serial == (uint64_t)(uintptr_t)serial)
            g_threads[i]->exited = true;
    pthread_mutex_unlock(&g_lock);
    tls_buf = NULL; /* anything recorded later on this thread gets a new buffer */
}

static void make_exit_key(void)
{
    g_exit_key_ok = pthread_key_create(&g_exit_key, thread_exited) == 0;
}

/* Called with g_lock held: make b the calling thread's buffer. */
static void own_locked(thread_buf *b)
{
    tls_buf = b;
    tls_generation = atomic_load(&g_generation);
    if (g_exit_key_ok)
        pthread_setspecific(g_exit_key, (void *)(uintptr_t)b->serial);
}

static thread_buf *register_thread(void)
{
    pthread_once(&g_exit_key_once, make_exit_key);
    thread_buf *b = tg_calloc(1, sizeof *b);
    if (!b)
        return NULL;
    pthread_mutex_lock(&g_lock);
    if (g_n_threads == g_cap_threads) {
        int cap = g_cap_threads ? 2 * g_cap_threads : 16;
        thread_buf **t = tg_realloc(g_threads, (size_t)cap * sizeof *t);
        if (!t) {
            pthread_mutex_unlock(&g_lock);
            tg_free(b);
            return NULL;
        }
        g_threads = t;
        g_cap_threads = cap;
    }
    b->index = g_n_threads;
    b->serial = g_next_serial++;
    name_thread(b);
    g_threads[g_n_threads++] = b;
    own_locked(b);
    pthread_mutex_unlock(&g_lock);
    return b;
}

/* The calling thread's buffer of the current generation, or NULL. */
static inline thread_buf *existing_buf(void)
{
    uint64_t gen = atomic_load_explicit(&g_generation, memory_order_acquire);
    return tls_buf && tls_generation == gen ? tls_buf : NULL;
}

static inline thread_buf *this_buf(void)
{
    thread_buf *b = existing_buf();
    return b ? b : register_thread();
}

/* Room for one record at the end of b, or NULL (counted as dropped). The
 * caller fills it and calls commit(). */
static rec *append(thread_buf *b)
{
    if (b->kept >= (uint64_t)atomic_load_explicit(&g_max_events, memory_order_relaxed))
        goto drop;
    chunk *c = b->tail;
    size_t n = c ? atomic_load_explicit(&c->count, memory_order_relaxed) : CHUNK_RECS;
    if (n == CHUNK_RECS) {
        chunk *fresh = tg_malloc(sizeof *fresh);
        if (!fresh)
            goto drop;
        atomic_init(&fresh->next, NULL);
        atomic_init(&fresh->count, 0);
        if (c)
            atomic_store_explicit(&c->next, fresh, memory_order_release);
        else
            atomic_store_explicit(&b->head, fresh, memory_order_release);
        b->tail = c = fresh;
        n = 0;
    }
    return &c->recs[n];
drop:
    atomic_store_explicit(&b->dropped, atomic_load_explicit(&b->dropped, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    return NULL;
}

static void commit(thread_buf *b)
{
    chunk *c = b->tail;
    size_t n = atomic_load_explicit(&c->count, memory_order_relaxed);
    atomic_store_explicit(&c->count, n + 1, memory_order_release);
    b->kept++;
}

static void lost(void)
{
    atomic_fetch_add_explicit(&g_lost, 1, memory_order_relaxed);
}

static void record_point(thread_buf *b, tg_trace_channel *ch, const char *name, tg_trace_kind kind,
                         uint64_t link, double value, int64_t t)
{
    rec *r = append(b);
    if (!r)
        return;
    r->name = name ? name : "(null)";
    r->t0 = t;
    atomic_store_explicit(&r->t1, t, memory_order_relaxed);
    if (kind == TG_TRACE_VALUE || kind == TG_TRACE_SAMPLE)
        r->u.value = value;
    else
        r->u.link = link;
    r->channel = (uint16_t)ch->id;
    r->kind = (uint8_t)kind;
    r->depth = (uint8_t)b->depth;
    commit(b);
}

/* ---- recording ------------------------------------------------------------------- */

void tg_trace_rec_begin(tg_trace_channel *ch, const char *name, uint64_t link)
{
    if (!ch || !atomic_load_explicit(&ch->enabled, memory_order_relaxed))
        return;
    thread_buf *b = this_buf();
    if (!b) {
        lost();
        uint64_t gen = atomic_load_explicit(&g_generation, memory_order_acquire);
        if (tls_lost_gen != gen) {
            tls_lost_gen = gen;
            tls_lost_open = 0;
        }
        tls_lost_open++;
        return;
    }
    if (b->depth >= MAX_DEPTH) {
        b->overflow++;
        atomic_fetch_add_explicit(&b->dropped, 1, memory_order_relaxed);
        return;
    }
    rec *r = append(b);
    if (r) {
        r->name = name ? name : "(null)";
        atomic_store_explicit(&r->t1, -1, memory_order_relaxed);
        r->u.link = link;
        r->channel = (uint16_t)ch->id;
        r->kind = TG_TRACE_REGION;
        r->depth = (uint8_t)b->depth;
        r->t0 = tg_trace_clock_ns(); /* last, so buffer upkeep is not timed */
        commit(b);
    }
    b->stack[b->depth++] = (open_region){r, ch->id};
}

void tg_trace_rec_end(tg_trace_channel *ch)
{
    if (!ch)
        return;
    bool enabled = atomic_load_explicit(&ch->enabled, memory_order_relaxed);
    thread_buf *b = existing_buf();
    bool innermost = b && b->depth > 0 && b->stack[b->depth - 1].channel == ch->id;
    /* No region of this channel is innermost. On a disabled channel that is
     * what an unrecorded begin leaves behind: nothing to do, and cheaply. */
    if (!enabled && !innermost)
        return;
    int64_t t = tg_trace_clock_ns(); /* before any upkeep, which is not to be timed */
    if (b && b->overflow > 0 && enabled) {
        b->overflow--;
        return;
    }
    if (innermost) {
        rec *r = b->stack[--b->depth].r;
        if (r)
            atomic_store_explicit(&r->t1, t > r->t0 ? t : r->t0, memory_order_release);
        return;
    }
    /* On an enabled channel an end without its begin is a bug in the caller,
     * which the trace shows rather than hides. */
    if (tls_lost_open > 0 &&
        tls_lost_gen == atomic_load_explicit(&g_generation, memory_order_acquire)) {
        tls_lost_open--; /* the end of a region whose begin was lost */
        return;
    }
    if (!b && !(b = this_buf())) {
        lost();
        return;
    }
    atomic_fetch_add_explicit(&b->unmatched, 1, memory_order_relaxed);
    record_point(b, ch, "unmatched end", TG_TRACE_INSTANT, 0, 0.0, t);
}

static void point(tg_trace_channel *ch, const char *name, tg_trace_kind kind, uint64_t link,
                  double value)
{
    if (!ch || !atomic_load_explicit(&ch->enabled, memory_order_relaxed))
        return;
    thread_buf *b = this_buf();
    if (!b) {
        lost();
        return;
    }
    record_point(b, ch, name, kind, link, value, tg_trace_clock_ns());
}

void tg_trace_rec_instant(tg_trace_channel *ch, const char *name, uint64_t link)
{
    point(ch, name, TG_TRACE_INSTANT, link, 0.0);
}

void tg_trace_rec_value(tg_trace_channel *ch, const char *name, double value)
{
    point(ch, name, TG_TRACE_VALUE, 0, value);
}

void tg_trace_rec_heatmap(tg_trace_channel *ch, const char *name, double value)
{
    if (value != value) /* NaN has no bin */
        return;
    point(ch, name, TG_TRACE_SAMPLE, 0, value);
}

void tg_trace_thread_name(const char *name)
{
    snprintf(tls_name, sizeof tls_name, "%s", name ? name : "");
    thread_buf *b = existing_buf();
    pthread_once(&g_exit_key_once, make_exit_key);
    pthread_mutex_lock(&g_lock);
    if (b) {
        name_thread(b);
    } else if (tls_name[0]) { /* continue the track of an exited namesake */
        for (int i = 0; i < g_n_threads; i++)
            if (g_threads[i]->exited && strcmp(g_threads[i]->name, tls_name) == 0) {
                g_threads[i]->exited = false;
                own_locked(g_threads[i]);
                break;
            }
    }
    pthread_mutex_unlock(&g_lock);
}

/* ---- interned names -------------------------------------------------------------- */

/* Open-addressing set of strings that live for the process (never freed,
 * always reachable from here). */
static pthread_mutex_t g_intern_lock = PTHREAD_MUTEX_INITIALIZER;
static char **g_intern;
static size_t g_intern_cap, g_intern_count;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int intern_grow_locked(void)
{
    size_t cap = g_intern_cap ? 2 * g_intern_cap : 256;
    char **t = tg_calloc(cap, sizeof *t);
    if (!t)
        return 0;
    for (size_t i = 0; i < g_intern_cap; i++)
        if (g_intern[i]) {
            size_t j = hash_str(g_intern[i]) & (cap - 1);
            while (t[j])
                j = (j + 1) & (cap - 1);
            t[j] = g_intern[i];
        }
    tg_free(g_intern);
    g_intern = t;
    g_intern_cap = cap;
    return 1;
}

const char *tg_trace_intern(const char *s)
{
    if (!s)
        return NULL;
    const char *out = NULL;
    pthread_mutex_lock(&g_intern_lock);
    if ((g_intern_count + 1) * 2 <= g_intern_cap || intern_grow_locked()) {
        size_t j = hash_str(s) & (g_intern_cap - 1);
        while (g_intern[j] && strcmp(g_intern[j], s) != 0)
            j = (j + 1) & (g_intern_cap - 1);
        if (!g_intern[j] && (g_intern[j] = tg_strdup(s)))
            g_intern_count++;
        out = g_intern[j];
    }
    pthread_mutex_unlock(&g_intern_lock);
    return out;
}

/* ---- clearing ---------------------------------------------------------------------- */

void tg_trace_clear(void)
{
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n_threads; i++) {
        chunk *c = atomic_load(&g_threads[i]->head);
        while (c) {
            chunk *next = atomic_load(&c->next);
            tg_free(c);
            c = next;
        }
        tg_free(g_threads[i]);
    }
    tg_free(g_threads);
    g_threads = NULL;
    g_n_threads = g_cap_threads = 0;
    atomic_fetch_add(&g_generation, 1);
    atomic_store(&g_lost, 0);
    atomic_store(&g_origin, 0);
    g_was_enabled = false;
    ensure_settings_locked();
    recompute_locked(); /* restarts the origin if something is still enabled */
    pthread_mutex_unlock(&g_lock);
}

/* ---- reading ------------------------------------------------------------------------ */

typedef struct thread_ref {
    thread_buf *b;
    char name[THREAD_NAME_MAX];
} thread_ref;

/* The registered buffers and their names, copied under the lock. */
static tg_status snapshot_threads(thread_ref **out, int *n)
{
    *out = NULL;
    pthread_mutex_lock(&g_lock);
    *n = g_n_threads;
    thread_ref *refs = g_n_threads ? tg_malloc((size_t)g_n_threads * sizeof *refs) : NULL;
    for (int i = 0; refs && i < g_n_threads; i++) {
        refs[i].b = g_threads[i];
        memcpy(refs[i].name, g_threads[i]->name, sizeof refs[i].name);
    }
    pthread_mutex_unlock(&g_lock);
    if (*n && !refs)
        return tg_error(TG_ERR_NOMEM, "trace: out of memory reading %d threads", *n);
    *out = refs;
    return TG_OK;
}

static uint64_t published(thread_buf *b)
{
    uint64_t n = 0;
    for (chunk *c = atomic_load_explicit(&b->head, memory_order_acquire); c;
         c = atomic_load_explicit(&c->next, memory_order_acquire))
        n += atomic_load_explicit(&c->count, memory_order_acquire);
    return n;
}

tg_status tg_trace_visit(tg_trace_thread_fn on_thread, tg_trace_event_fn on_event, void *ctx)
{
    thread_ref *refs;
    int n;
    TG_TRY(snapshot_threads(&refs, &n));
    int stop = 0;
    for (int i = 0; i < n && !stop; i++) {
        thread_buf *b = refs[i].b;
        uint64_t total = published(b);
        tg_trace_thread_info info = {
            .index = b->index,
            .name = refs[i].name,
            .events = total,
            .dropped = atomic_load_explicit(&b->dropped, memory_order_relaxed),
            .unmatched_ends = atomic_load_explicit(&b->unmatched, memory_order_relaxed),
        };
        if (on_thread && (stop = on_thread(&info, ctx)) != 0)
            break;
        if (!on_event)
            continue;
        /* Visit exactly the `total` events counted above, so that the
         * thread's info and its events agree. */
        uint64_t seen = 0;
        for (chunk *c = atomic_load_explicit(&b->head, memory_order_acquire);
             c && seen < total && !stop; c = atomic_load_explicit(&c->next, memory_order_acquire)) {
            size_t count = atomic_load_explicit(&c->count, memory_order_acquire);
            for (size_t k = 0; k < count && seen < total && !stop; k++, seen++) {
                rec *r = &c->recs[k];
                tg_trace_event e = {
                    .kind = (tg_trace_kind)r->kind,
                    .thread = b->index,
                    .channel = tg_trace_channel_name_of(r->channel),
                    .name = r->name,
                    .start_ns = r->t0,
                    .end_ns = atomic_load_explicit(&r->t1, memory_order_acquire),
                    .depth = r->depth,
                };
                if (r->kind == TG_TRACE_VALUE || r->kind == TG_TRACE_SAMPLE)
                    e.value = r->u.value;
                else
                    e.link = r->u.link;
                stop = on_event(&e, ctx);
            }
        }
    }
    tg_free(refs);
    return TG_OK;
}

static int add_stats(const tg_trace_thread_info *t, void *ctx)
{
    tg_trace_stats *s = ctx;
    s->threads++;
    s->events += t->events;
    s->dropped += t->dropped;
    s->unmatched_ends += t->unmatched_ends;
    return 0;
}

tg_trace_stats tg_trace_get_stats(void)
{
    tg_trace_stats s = {0};
    if (tg_trace_visit(add_stats, NULL, &s) != TG_OK)
        s = (tg_trace_stats){0};
    s.dropped += atomic_load(&g_lost);
    return s;
}
