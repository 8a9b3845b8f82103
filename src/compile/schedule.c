/* compile/schedule.c - which nodes run, and in what order.
 *
 * The roots are the nodes marked as outputs and the nodes with side effects
 * (updates that mutate their inputs); everything they depend on runs.
 * Order: a topological sort that prefers creation order (a min-heap keyed by
 * node id), so the schedule reads like the model and buffers die early.
 * Besides data edges, every node that mutates an input X runs after every
 * other reader of X: a weight is not updated while the backward pass still
 * needs its old value.
 */
#include "compile/program.h"

#include "core/alloc.h"
#include "core/error.h"

#include <string.h>

typedef struct {
    int *from, *to;
    int n, cap;
} edge_list;

static int add_edge(edge_list *e, int from, int to)
{
    if (e->n == e->cap) {
        int cap = e->cap ? e->cap * 2 : 1024;
        int *f = tg_realloc(e->from, (size_t)cap * sizeof *f);
        if (!f)
            return 0;
        e->from = f;
        int *t = tg_realloc(e->to, (size_t)cap * sizeof *t);
        if (!t)
            return 0;
        e->to = t;
        e->cap = cap;
    }
    e->from[e->n] = from;
    e->to[e->n] = to;
    e->n++;
    return 1;
}

/* Mark every node the roots need. */
static void mark_needed(const tg_graph *g, bool *needed)
{
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const tg_tensor *t = g->nodes[i];
        if ((t->flags & TG_NODE_OUTPUT) || t->n_mutated > 0)
            needed[i] = true;
        if (!needed[i])
            continue;
        for (int k = 0; k < t->n_in; k++)
            needed[t->in[k]->id] = true;
    }
}

static void heap_push(int *heap, int *n, int v)
{
    int i = (*n)++;
    heap[i] = v;
    while (i > 0 && heap[(i - 1) / 2] > heap[i]) {
        int p = (i - 1) / 2, tmp = heap[p];
        heap[p] = heap[i];
        heap[i] = tmp;
        i = p;
    }
}

static int heap_pop(int *heap, int *n)
{
    int top = heap[0];
    heap[0] = heap[--(*n)];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && heap[l] < heap[m])
            m = l;
        if (r < *n && heap[r] < heap[m])
            m = r;
        if (m == i)
            break;
        int tmp = heap[m];
        heap[m] = heap[i];
        heap[i] = tmp;
        i = m;
    }
    return top;
}

static tg_status build_edges(const tg_graph *g, const bool *needed, edge_list *e)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (!needed[i])
            continue;
        for (int k = 0; k < t->n_in; k++)
            if (!add_edge(e, t->in[k]->id, i))
                return tg_error(TG_ERR_NOMEM, "schedule: out of memory");
    }
    /* Readers of a mutated tensor (through aliases too) before the mutator. */
    for (int m = 0; m < g->n_nodes; m++) {
        const tg_tensor *mut = g->nodes[m];
        if (!needed[m] || mut->n_mutated == 0)
            continue;
        for (int i = 0; i < g->n_nodes; i++) {
            const tg_tensor *r = g->nodes[i];
            if (i == m || !needed[i])
                continue;
            for (int k = 0; k < r->n_in; k++) {
                bool reads = false;
                for (int j = 0; j < mut->n_mutated; j++)
                    reads |= r->in[k] == mut->in[j];
                if (reads && !add_edge(e, i, m))
                    return tg_error(TG_ERR_NOMEM, "schedule: out of memory");
            }
        }
    }
    return TG_OK;
}

tg_status tg_schedule(const tg_graph *g, int **order_out, int *n_out)
{
    int n = g->n_nodes;
    bool *needed = tg_calloc((size_t)n + 1, sizeof *needed);
    int *indeg = tg_calloc((size_t)n + 1, sizeof *indeg);
    int *heap = tg_malloc(((size_t)n + 1) * sizeof *heap);
    int *order = tg_malloc(((size_t)n + 1) * sizeof *order);
    int *first_out = tg_calloc((size_t)n + 2, sizeof *first_out);
    edge_list e = {0};
    int *adj = NULL;
    tg_status s = TG_OK;
    if (!needed || !indeg || !heap || !order || !first_out) {
        s = tg_error(TG_ERR_NOMEM, "schedule: out of memory");
        goto done;
    }
    mark_needed(g, needed);
    if ((s = build_edges(g, needed, &e)) != TG_OK)
        goto done;
    /* adjacency in CSR form */
    for (int i = 0; i < e.n; i++) {
        first_out[e.from[i] + 1]++;
        indeg[e.to[i]]++;
    }
    for (int i = 0; i < n; i++)
        first_out[i + 1] += first_out[i];
    adj = tg_malloc(((size_t)e.n + 1) * sizeof *adj);
    if (!adj) {
        s = tg_error(TG_ERR_NOMEM, "schedule: out of memory");
        goto done;
    }
    {
        int *fill = tg_calloc((size_t)n + 1, sizeof *fill);
        if (!fill) {
            s = tg_error(TG_ERR_NOMEM, "schedule: out of memory");
            goto done;
        }
        for (int i = 0; i < e.n; i++)
            adj[first_out[e.from[i]] + fill[e.from[i]]++] = e.to[i];
        tg_free(fill);
    }
    int heap_n = 0, n_order = 0, n_needed = 0;
    for (int i = 0; i < n; i++)
        if (needed[i]) {
            n_needed++;
            if (indeg[i] == 0)
                heap_push(heap, &heap_n, i);
        }
    while (heap_n > 0) {
        int v = heap_pop(heap, &heap_n);
        order[n_order++] = v;
        for (int k = first_out[v]; k < first_out[v + 1]; k++)
            if (--indeg[adj[k]] == 0)
                heap_push(heap, &heap_n, adj[k]);
    }
    if (n_order != n_needed) {
        for (int i = 0; i < n; i++)
            if (needed[i] && indeg[i] > 0) {
                s = tg_error(TG_ERR_CONFIG,
                             "schedule: '%s' both reads a tensor and must run after an update "
                             "of it (a cycle through an in-place update)",
                             g->nodes[i]->name);
                break;
            }
        goto done;
    }
    *order_out = order;
    *n_out = n_order;
    order = NULL;
done:
    tg_free(needed);
    tg_free(indeg);
    tg_free(heap);
    tg_free(order);
    tg_free(first_out);
    tg_free(adj);
    tg_free(e.from);
    tg_free(e.to);
    return s;
}
