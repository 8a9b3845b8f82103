/* tests/onnx/test_onnx_einsum.c - src/onnx/onnx_einsum.c: the Einsum forms
 * the importer builds (matmul, batch matmul with an ellipsis, inner and
 * outer products, a letter summed in one operand only, transposes and sums
 * of one operand), their values against a plain double-precision einsum
 * written here, their gradients against finite differences and kernels
 * against the reference; and the equations it refuses, by name.
 *
 * TG_TEST_LABELS: onnx
 */
#include "onnx_node_model.h"

#include "runtime/interp.h"

#include <math.h>
#include <string.h>

typedef struct {
    const char *eq;
    onnx_node_input a, b; /* b.name NULL: one operand */
} einsum_case;

static const einsum_case cases[] = {
    {"ij,jk->ik", F32("a", 2, 3, 4), F32("b", 2, 4, 2)},
    {"bij, bjk -> bik", F32("a", 3, 2, 3, 4), F32("b", 3, 2, 4, 5)},
    {"...ij,...jk", F32("a", 4, 2, 2, 3, 4), F32("b", 4, 2, 2, 4, 2)},
    {"i,i", F32("a", 1, 5), F32("b", 1, 5)},
    {"i,j->ij", F32("a", 1, 3), F32("b", 1, 4)},
    {"ijk,jl->li", F32("a", 3, 2, 3, 4), F32("b", 2, 3, 2)},
    {"bhqd,bhkd->bhqk", F32("a", 4, 2, 2, 3, 4), F32("b", 4, 2, 2, 5, 4)},
    {"ij->ji", F32("a", 2, 3, 4), {0}},
    {"ijk->ki", F32("a", 3, 2, 3, 4), {0}},
    {"ij", F32("a", 2, 3, 4), {0}},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static onnx_node node_of(const einsum_case *c)
{
    onnx_node nd = {.op_type = "Einsum", .opset = 12, .n_outputs = 1, .in = {c->a, c->b}};
    nd.attr[0] = (onnx_node_attr)STR("equation", c->eq);
    return nd;
}

/* A plain einsum in double: every assignment of the letters, summed. */
static void einsum_ref(const char *eq, const onnx_node_input *in, int n_in, const double *const *x,
                       double *out, int64_t n_out)
{
    char terms[3][16] = {{0}};
    int t = 0, len = 0;
    bool arrow = false;
    for (const char *c = eq; *c; c++) {
        if (*c == ',' || *c == '-') {
            t += *c == '-' ? 2 - t : 1;
            arrow |= *c == '-';
            len = 0;
            c += *c == '-';
        } else if (*c == '.') {
            for (int e = 0; e < in[0].ndim - 2; e++) /* the ellipsis cases have 2 letters */
                terms[t][len++] = (char)('A' + e);
            c += 2;
        } else if (*c != ' ') {
            terms[t][len++] = *c;
        }
    }
    if (!arrow) { /* implicit: the ellipsis, then the letters used once, in order */
        len = 0;
        for (char l = 'A'; l <= 'Z'; l++)
            if (strchr(terms[0], l))
                terms[2][len++] = l;
        for (char l = 'a'; l <= 'z'; l++)
            if ((strchr(terms[0], l) != NULL) + (n_in > 1 && strchr(terms[1], l) != NULL) == 1)
                terms[2][len++] = l;
    }
    int64_t size[128] = {0};
    char letters[32];
    int n_letters = 0;
    for (int k = 0; k < n_in; k++)
        for (int d = 0; terms[k][d]; d++)
            if (!size[(int)terms[k][d]]) {
                size[(int)terms[k][d]] = in[k].dim[d];
                letters[n_letters++] = terms[k][d];
            }
    for (int64_t k = 0; k < n_out; k++)
        out[k] = 0;
    int64_t val[128] = {0}, total = 1;
    for (int l = 0; l < n_letters; l++)
        total *= size[(int)letters[l]];
    for (int64_t it = 0; it < total; it++) {
        for (int64_t l = n_letters - 1, r = it; l >= 0; l--) {
            val[(int)letters[l]] = r % size[(int)letters[l]];
            r /= size[(int)letters[l]];
        }
        double p = 1;
        for (int k = 0; k < n_in; k++) {
            int64_t off = 0;
            for (int d = 0; terms[k][d]; d++)
                off = off * in[k].dim[d] + val[(int)terms[k][d]];
            p *= x[k][off];
        }
        int64_t o = 0;
        for (int d = 0; terms[2][d]; d++)
            o = o * size[(int)terms[2][d]] + val[(int)terms[2][d]];
        out[o] += p;
    }
}

static void test_values(void)
{
    for (int i = 0; i < N_CASES; i++) {
        onnx_node nd = node_of(&cases[i]);
        tg_graph *g = tg_graph_create();
        tg_tensor *y = onnx_node_build(g, &nd);
        tg_interp *ip = NULL;
        if (!y || tg_interp_create(g, 0, &ip) != TG_OK) {
            tg_test_fail(__FILE__, __LINE__, "%s: not built", cases[i].eq);
            tg_graph_destroy(g);
            continue;
        }
        int n_in = cases[i].b.name ? 2 : 1;
        const double *x[2];
        for (int k = 0; k < n_in; k++) {
            const char *name = k ? cases[i].b.name : cases[i].a.name;
            for (int t = 0; t < tg_graph_tensor_count(g); t++)
                if (!strcmp(tg_tensor_name(tg_graph_tensor(g, t)), name))
                    x[k] = tg_interp_data(ip, tg_graph_tensor(g, t));
        }
        TG_CHECK_OK(tg_interp_run(ip, 0));
        int64_t n = tg_shape_numel(tg_tensor_shape(y));
        double want[256];
        einsum_ref(cases[i].eq, (onnx_node_input[]){cases[i].a, cases[i].b}, n_in, x, want, n);
        const double *got = tg_interp_data(ip, y);
        for (int64_t k = 0; k < n; k++)
            if (!(fabs(got[k] - want[k]) <= 1e-12 * (1 + fabs(want[k]))))
                TG_CHECK_NEAR(got[k], want[k], 1e-12);
        tg_interp_destroy(ip);
        tg_graph_destroy(g);
    }
}

static void test_gradients(void)
{
    for (int i = 0; i < N_CASES; i++) {
        onnx_node nd = node_of(&cases[i]);
        onnx_node_check(cases[i].eq, &nd, 1e-5);
    }
}

static void expect_refused(const char *eq, onnx_node_input a, onnx_node_input b, onnx_node_input c,
                           const char *part)
{
    onnx_node nd = {.op_type = "Einsum", .opset = 12, .n_outputs = 1, .in = {a, b, c}};
    nd.attr[0] = (onnx_node_attr)STR("equation", eq);
    const char *msg = onnx_node_refusal(&nd);
    if (!strstr(msg, part))
        tg_test_fail(__FILE__, __LINE__, "%s: expected a refusal with \"%s\", got \"%s\"", eq, part,
                     msg);
}

static void test_refused(void)
{
    onnx_node_input none = {0};
    expect_refused("ii->i", (onnx_node_input)F32("a", 2, 3, 3), none, none,
                   "equation \"ii->i\": a letter twice in one term (a diagonal)");
    expect_refused("i,i,i->i", (onnx_node_input)F32("a", 1, 3), (onnx_node_input)F32("b", 1, 3),
                   (onnx_node_input)F32("c", 1, 3), "with 3 operands (one or two are implemented)");
    expect_refused("ij,jk->ik", (onnx_node_input)F32("a", 2, 3, 4),
                   (onnx_node_input)F32("b", 2, 1, 2), none,
                   "one letter has sizes 4 and 1 (broadcasting is not implemented)");
    expect_refused("ij->k", (onnx_node_input)F32("a", 2, 3, 4), none, none,
                   "an output letter no operand has");
    expect_refused("ijk->i", (onnx_node_input)F32("a", 2, 3, 4), none, none,
                   "a term of 3 letters for 2 dims");
}

int main(void)
{
    TG_RUN(test_values);
    TG_RUN(test_gradients);
    TG_RUN(test_refused);
    return tg_test_finish();
}
