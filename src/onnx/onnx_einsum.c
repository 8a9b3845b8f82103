/* onnx/onnx_einsum.c - ONNX Einsum of one or two operands, built from
 * existing ops (so kernels, reference kernels and gradients are theirs):
 *
 *   one operand    reduce_sum over the letters the output drops, then a
 *                  transpose to the output's order ("ij->ji", "ij->i");
 *   two operands   each operand first sums the letters only it has and the
 *                  output drops; the rest are batch letters (both operands
 *                  and the output), contracted ones (both, not the output)
 *                  and kept ones (one operand and the output). A becomes
 *                  [batch, M, K] and B [batch, K, N] by a transpose and a
 *                  reshape, one batched matmul multiplies them, and a
 *                  reshape and a transpose give the output's order: matmul,
 *                  batch matmul, inner and outer products, bilinear forms.
 *
 * An ellipsis stands for the same leading dims in each operand (aligned on
 * the right, of equal sizes). Refused, naming the equation: more than two
 * operands, a letter twice in one operand (a diagonal, "ii->i"), sizes of
 * one letter that differ (broadcasting a 1), an output letter no operand
 * has.
 */
#include "onnx/onnx_build.h"

#include <ctype.h>
#include <string.h>

#define EQ_MAX 128
#define N_LABELS 64 /* a-z, A-Z, and up to 12 ellipsis dims */

typedef struct term {
    int n;                  /* dims */
    int label[TG_MAX_DIMS]; /* per dim */
    int64_t size[TG_MAX_DIMS];
} term;

static int label_of(char c)
{
    return islower((unsigned char)c) ? c - 'a' : isupper((unsigned char)c) ? 26 + c - 'A' : -1;
}

/* One operand's letters (spaces removed) against its shape; the ellipsis
 * takes the dims the letters leave, as labels 52.. from the right. */
static tg_status parse_term(onnx_builder *b, const char *eq, const char *t, size_t len, tg_shape s,
                            bool out, int ell, term *r)
{
    int letters = 0;
    bool dots = false;
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '.' && i + 3 <= len && !strncmp(t + i, "...", 3) && !dots) {
            dots = true;
            i += 2;
        } else if (label_of(t[i]) >= 0) {
            letters++;
        } else {
            return ob_fail(b, TG_ERR_INVALID_ARG, "equation \"%s\": '%c' is not a letter", eq,
                           t[i]);
        }
    }
    int n_ell = out ? (dots ? ell : 0) : dots ? s.ndim - letters : 0;
    if ((!out && (n_ell < 0 || (!dots && letters != s.ndim))) || letters + n_ell > TG_MAX_DIMS)
        return ob_fail(b, TG_ERR_SHAPE, "equation \"%s\": a term of %d letters for %d dims", eq,
                       letters, s.ndim);
    r->n = 0;
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '.') {
            for (int e = 0; e < n_ell; e++)
                r->label[r->n++] = 52 + e; /* inputs' renumbered from the right */
            i += 2;
        } else {
            r->label[r->n++] = label_of(t[i]);
        }
    }
    for (int d = 0; d < r->n; d++) {
        r->size[d] = out ? 0 : s.dim[d];
        for (int e = 0; e < d; e++)
            if (r->label[e] == r->label[d])
                return ob_fail(b, TG_ERR_UNSUPPORTED,
                               "equation \"%s\": a letter twice in one term (a diagonal) is not "
                               "implemented",
                               eq);
    }
    return TG_OK;
}

static int find_label(const term *t, int l)
{
    for (int d = 0; d < t->n; d++)
        if (t->label[d] == l)
            return d;
    return -1;
}

/* x's dims that `keep` does not hold, summed away; *t loses them. */
static tg_tensor *sum_unused(onnx_builder *b, tg_tensor *x, term *t, const term *o1, const term *o2)
{
    unsigned mask = 0;
    term kept = {0};
    for (int d = 0; d < t->n; d++) {
        bool used = find_label(o1, t->label[d]) >= 0 || (o2 && find_label(o2, t->label[d]) >= 0);
        if (!used) {
            mask |= 1u << d;
            continue;
        }
        kept.label[kept.n] = t->label[d];
        kept.size[kept.n++] = t->size[d];
    }
    *t = kept;
    return mask ? tg_reduce_sum(b->g, x, mask, false) : x;
}

/* x (labelled `from`) transposed to the labels `to` (the same set). */
static tg_tensor *permute(onnx_builder *b, tg_tensor *x, const term *from, const int *to)
{
    int perm[TG_MAX_DIMS];
    bool moved = false;
    for (int d = 0; d < from->n; d++) {
        perm[d] = find_label(from, to[d]);
        moved |= perm[d] != d;
    }
    return moved ? tg_transpose(b->g, x, perm) : x;
}

/* The output's term: given after "->", or the letters used once in
 * alphabetical order after the ellipsis dims (ONNX's implicit form). */
static tg_status output_term(onnx_builder *b, const char *eq, const char *arrow, const term *in,
                             int n_in, int ell, term *o)
{
    if (arrow)
        return parse_term(b, eq, arrow + 2, strlen(arrow + 2), tg_shape_of(0, NULL), true, ell, o);
    int count[N_LABELS] = {0};
    for (int k = 0; k < n_in; k++)
        for (int d = 0; d < in[k].n; d++)
            count[in[k].label[d]]++;
    o->n = 0;
    for (int l = 52; l < N_LABELS; l++)
        if (count[l])
            o->label[o->n++] = l;
    for (int l = 0; l < 52; l++)
        if (count[l] == 1)
            o->label[o->n++] = l;
    return TG_OK;
}

/* Each output label's size from the operands; one letter's sizes agree. */
static tg_status sizes_agree(onnx_builder *b, const char *eq, const term *in, int n_in, term *o)
{
    for (int k = 0; k < n_in; k++)
        for (int d = 0; d < in[k].n; d++)
            for (int j = 0; j < n_in; j++) {
                int e = find_label(&in[j], in[k].label[d]);
                if (e >= 0 && in[j].size[e] != in[k].size[d])
                    return ob_fail(b, TG_ERR_UNSUPPORTED,
                                   "equation \"%s\": one letter has sizes %lld and %lld "
                                   "(broadcasting is not implemented)",
                                   eq, (long long)in[k].size[d], (long long)in[j].size[e]);
            }
    for (int d = 0; d < o->n; d++) {
        int found = 0;
        for (int k = 0; k < n_in && !found; k++) {
            int e = find_label(&in[k], o->label[d]);
            if (e >= 0)
                o->size[d] = in[k].size[e], found = 1;
        }
        if (!found)
            return ob_fail(b, TG_ERR_INVALID_ARG,
                           "equation \"%s\": an output letter no operand has", eq);
        for (int e = 0; e < d; e++)
            if (o->label[e] == o->label[d])
                return ob_fail(b, TG_ERR_INVALID_ARG, "equation \"%s\": an output letter twice",
                               eq);
    }
    return TG_OK;
}

static int64_t product(const term *t, const int *labels, int n)
{
    int64_t p = 1;
    for (int k = 0; k < n; k++)
        p *= t->size[find_label(t, labels[k])];
    return p;
}

/* A [.., batch, M-letters, K-letters] times B [.., batch, K, N] as one
 * batched matmul, then the output's order. */
static tg_status contract(onnx_builder *b, tg_tensor *x, term ta, tg_tensor *y, term tb,
                          const term *o)
{
    int bat[TG_MAX_DIMS], con[TG_MAX_DIMS], ak[TG_MAX_DIMS], bk[TG_MAX_DIMS];
    int nb = 0, nc = 0, na = 0, nk = 0;
    for (int d = 0; d < ta.n; d++) {
        bool in_b = find_label(&tb, ta.label[d]) >= 0, in_o = find_label(o, ta.label[d]) >= 0;
        if (in_b && in_o)
            bat[nb++] = ta.label[d];
        else if (in_b)
            con[nc++] = ta.label[d];
        else
            ak[na++] = ta.label[d];
    }
    for (int d = 0; d < tb.n; d++)
        if (find_label(&ta, tb.label[d]) < 0)
            bk[nk++] = tb.label[d];
    int order_a[TG_MAX_DIMS], order_b[TG_MAX_DIMS], order_r[TG_MAX_DIMS];
    memcpy(order_a, bat, (size_t)nb * sizeof(int));
    memcpy(order_a + nb, ak, (size_t)na * sizeof(int));
    memcpy(order_a + nb + na, con, (size_t)nc * sizeof(int));
    memcpy(order_b, bat, (size_t)nb * sizeof(int));
    memcpy(order_b + nb, con, (size_t)nc * sizeof(int));
    memcpy(order_b + nb + nc, bk, (size_t)nk * sizeof(int));
    int64_t B = product(&ta, bat, nb), M = product(&ta, ak, na), K = product(&ta, con, nc);
    int64_t N = product(&tb, bk, nk);
    tg_graph *g = b->g;
    tg_tensor *a3 = tg_reshape(g, permute(b, x, &ta, order_a), tg_shape3(B, M, K));
    tg_tensor *b3 = tg_reshape(g, permute(b, y, &tb, order_b), tg_shape3(B, K, N));
    tg_tensor *r = tg_matmul(g, a3, b3, false, false);
    /* [batch, a-kept, b-kept] back to their dims, then the output's order */
    term tr = {0};
    memcpy(order_r, bat, (size_t)nb * sizeof(int));
    memcpy(order_r + nb, ak, (size_t)na * sizeof(int));
    memcpy(order_r + nb + na, bk, (size_t)nk * sizeof(int));
    tr.n = nb + na + nk;
    tg_shape rs = tg_shape_of(0, NULL);
    rs.ndim = tr.n;
    for (int d = 0; d < tr.n; d++) {
        tr.label[d] = order_r[d];
        tr.size[d] = rs.dim[d] = o->size[find_label(o, order_r[d])];
    }
    r = r ? tg_reshape(g, r, rs) : NULL;
    return ob_set(b, 0, r ? permute(b, r, &tr, o->label) : NULL);
}

tg_status ob_map_einsum(onnx_builder *b)
{
    char eq[EQ_MAX], raw[EQ_MAX];
    const char *e = ob_attr_string(b, "equation", raw, sizeof raw);
    size_t n = 0;
    for (const char *c = e; *c && n + 1 < sizeof eq; c++)
        if (!isspace((unsigned char)*c))
            eq[n++] = *c;
    eq[n] = '\0';
    const char *arrow = strstr(eq, "->"), *comma = strchr(eq, ',');
    size_t lhs = arrow ? (size_t)(arrow - eq) : n;
    int n_in = (int)b->node->n_input;
    if (n_in < 1 || n_in > 2 || (comma && strchr(comma + 1, ',')) || (n_in == 2) != (comma != NULL))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "equation \"%s\" with %d operands (one or two are implemented)", eq, n_in);
    tg_tensor *x[2] = {ob_tensor(b, 0), n_in == 2 ? ob_tensor(b, 1) : NULL};
    if (!x[0] || (n_in == 2 && !x[1]))
        return TG_ERR_UNSUPPORTED;
    term in[2], o;
    size_t len0 = comma && comma < eq + lhs ? (size_t)(comma - eq) : lhs;
    TG_TRY(parse_term(b, eq, eq, len0, tg_tensor_shape(x[0]), false, 0, &in[0]));
    if (n_in == 2)
        TG_TRY(
            parse_term(b, eq, comma + 1, lhs - len0 - 1, tg_tensor_shape(x[1]), false, 0, &in[1]));
    /* the ellipsis' dims: the most any operand has, aligned on the right */
    int ell = 0;
    for (int k = 0; k < n_in; k++) {
        int m = 0;
        for (int d = 0; d < in[k].n; d++)
            m += in[k].label[d] >= 52;
        ell = m > ell ? m : ell;
    }
    for (int k = 0; k < n_in; k++) { /* renumber each operand's from the right */
        int m = 0;
        for (int d = 0; d < in[k].n; d++)
            m += in[k].label[d] >= 52;
        for (int d = 0, j = 0; d < in[k].n; d++)
            if (in[k].label[d] >= 52)
                in[k].label[d] = 52 + ell - m + j++;
    }
    TG_TRY(output_term(b, eq, arrow, in, n_in, ell, &o));
    TG_TRY(sizes_agree(b, eq, in, n_in, &o));
    if (n_in == 1) {
        tg_tensor *r = sum_unused(b, x[0], &in[0], &o, NULL);
        return ob_set(b, 0, permute(b, r, &in[0], o.label));
    }
    term ta = in[0], tb = in[1];
    tg_tensor *a = sum_unused(b, x[0], &ta, &o, &in[1]);
    tg_tensor *c = sum_unused(b, x[1], &tb, &o, &in[0]);
    return contract(b, a, ta, c, tb, &o);
}
