/* tests/tg_random_graph.c - random graphs for differential tests
 * (tg_random_graph.h). */
#include "backend/backend.h"
#include "tg_random_graph.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_POOL = 64, MAX_CHANNELS = 96, MAX_ELEMENTS = 1 << 15 };

typedef struct gen {
    const tg_rg_spec *spec;
    size_t pos;
    uint64_t rng;
    tg_graph *g;
    tg_tensor *pool[MAX_POOL]; /* every value made so far */
    int n_pool;
    int first; /* the oldest value ops may use: a block's stage sees only its own and the last
                * value of the block before (an input read by two stages is refused) */
    int params;
    tg_random_graph *out;
} gen;

static unsigned pick(gen *r, unsigned n)
{
    if (n <= 1)
        return 0;
    if (r->spec->data && r->pos < r->spec->size)
        return r->spec->data[r->pos++] % n;
    r->rng ^= r->rng >> 12, r->rng ^= r->rng << 25, r->rng ^= r->rng >> 27;
    return (unsigned)((r->rng * 0x2545F4914F6CDD1Dull) >> 33) % n;
}

static int64_t dim(const tg_tensor *t, int i)
{
    return tg_tensor_shape(t).dim[i];
}

static int index_of(const gen *r, const tg_tensor *t)
{
    for (int i = 0; i < r->n_pool; i++)
        if (r->pool[i] == t)
            return i;
    return -1;
}

static void note(gen *r, tg_tensor *t, const char *fmt, ...)
{
    char *buf = r->out->listing;
    size_t len = strlen(buf), cap = sizeof r->out->listing;
    if (len + 1 >= cap || !t)
        return;
    len += (size_t)snprintf(buf + len, cap - len, "  t%d = ", r->n_pool);
    va_list ap;
    va_start(ap, fmt);
    if (len < cap)
        len += (size_t)vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
    tg_shape s = tg_tensor_shape(t);
    for (int i = 0; i < s.ndim && len < cap; i++)
        len +=
            (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : " [", (long long)s.dim[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]\n");
}

static void push(gen *r, tg_tensor *t)
{
    if (t && r->n_pool < MAX_POOL)
        r->pool[r->n_pool++] = t;
}

/* A 4-D value to build on: mostly the newest, sometimes an older one. */
static tg_tensor *operand(gen *r)
{
    for (int tries = 0; tries < 4; tries++) {
        int i =
            pick(r, 4) ? r->n_pool - 1 : r->first + (int)pick(r, (unsigned)(r->n_pool - r->first));
        if (tg_tensor_shape(r->pool[i]).ndim == 4)
            return r->pool[i];
    }
    for (int i = r->n_pool - 1; i >= r->first; i--)
        if (tg_tensor_shape(r->pool[i]).ndim == 4)
            return r->pool[i];
    return NULL;
}

/* Another value of t's shape (for add, mul), or NULL. */
static tg_tensor *same_shape(gen *r, const tg_tensor *t)
{
    tg_shape s = tg_tensor_shape(t);
    for (int i = r->n_pool - 1; i >= r->first; i--) {
        tg_shape o = tg_tensor_shape(r->pool[i]);
        if (r->pool[i] != t && o.ndim == s.ndim && !memcmp(o.dim, s.dim, sizeof(int64_t) * 4) &&
            !pick(r, 2))
            return r->pool[i];
    }
    return NULL;
}

static const int channel_choices[] = {3, 8, 12, 16, 17, 24, 32, 48, 64};

static tg_tensor *conv(gen *r, tg_tensor *x)
{
    int cin = (int)dim(x, 1), k = pick(r, 2) ? 3 : 1;
    int cout = channel_choices[pick(r, sizeof channel_choices / sizeof *channel_choices)];
    int stride = dim(x, 2) >= 4 && !pick(r, 4) ? 2 : 1, pad = k / 2;
    int groups = cin % 2 == 0 && cout % 2 == 0 && !pick(r, 5) ? 2 : 1;
    char name[32];
    snprintf(name, sizeof name, "conv%d", r->params++);
    tg_nn_conv2d_config c = {cin, cout, k, stride, pad, 1, groups, true};
    tg_tensor *y = groups == 1 ? tg_nn_conv2d(r->g, x, name, cin, cout, k, stride, pad)
                               : tg_nn_conv2d_ex(r->g, x, name, &c);
    note(r, y, "conv2d(t%d, %d, k%d s%d p%d g%d)", index_of(r, x), cout, k, stride, pad, groups);
    return y;
}

/* A transposed convolution (a decoder's upsampling): stride 2 doubles a
 * small map, output padding picks among the sizes the stride allows. */
static tg_tensor *conv_transpose(gen *r, tg_tensor *x)
{
    int cin = (int)dim(x, 1), k = 2 + (int)pick(r, 2),
        stride = dim(x, 2) <= 8 && pick(r, 2) ? 2 : 1;
    int cout = channel_choices[pick(r, sizeof channel_choices / sizeof *channel_choices)];
    int pad = pick(r, 2) ? k / 2 : 0, dil = k == 2 && !pick(r, 4) ? 2 : 1;
    int out_pad = stride > 1 ? (int)pick(r, 2) : 0;
    int groups = cin % 2 == 0 && cout % 2 == 0 && !pick(r, 5) ? 2 : 1;
    int64_t oh = (dim(x, 2) - 1) * stride - 2 * pad + dil * (k - 1) + 1 + out_pad;
    int64_t ow = (dim(x, 3) - 1) * stride - 2 * pad + dil * (k - 1) + 1 + out_pad;
    if (oh < 1 || ow < 1)
        return conv(r, x);
    char name[32];
    snprintf(name, sizeof name, "deconv%d", r->params++);
    tg_scope_push(r->g, name);
    tg_init init = {TG_INIT_FAN_IN_UNIFORM, (double)(cout / groups * k * k), 0};
    tg_tensor *w = tg_param(r->g, "weight", tg_shape4(cin, cout / groups, k, k), init);
    tg_tensor *b = pick(r, 2) ? tg_param(r->g, "bias", tg_shape1(cout), init) : NULL;
    tg_conv2d_params p = {stride, stride, pad, pad, dil, dil, groups};
    tg_tensor *y = tg_conv_transpose2d(r->g, x, w, b, p, out_pad, out_pad);
    tg_scope_pop(r->g);
    note(r, y, "conv_transpose2d(t%d, %d, k%d s%d p%d d%d op%d g%d%s)", index_of(r, x), cout, k,
         stride, pad, dil, out_pad, groups, b ? "" : ", no bias");
    return y;
}

static tg_tensor *batch_norm(gen *r, tg_tensor *x)
{
    char name[32];
    snprintf(name, sizeof name, "bn%d", r->params++);
    tg_tensor *y = tg_nn_batch_norm2d(r->g, x, name, (int)dim(x, 1));
    note(r, y, "batch_norm(t%d)", index_of(r, x));
    return y;
}

static tg_tensor *unary(gen *r, tg_tensor *x)
{
    /* erf, abs, exp, sqrt and log share ReLU's element-wise kernel and layout;
     * sqrt and log read sigmoid's (0, 1), exp tanh's [-1, 1], so that neither
     * a domain nor an overflow decides the result */
    static const char *names[] = {"relu",  "gelu",       "sigmoid",      "tanh",       "leaky_relu",
                                  "scale", "hard_swish", "mish",         "elu",        "erf",
                                  "abs",   "exp_tanh",   "sqrt_sigmoid", "log_sigmoid"};
    unsigned k = pick(r, 14);
    tg_graph *g = r->g;
    tg_tensor *y = k == 0    ? tg_relu(g, x)
                   : k == 1  ? tg_gelu(g, x)
                   : k == 2  ? tg_sigmoid(g, x)
                   : k == 3  ? tg_tanh(g, x)
                   : k == 4  ? tg_leaky_relu(g, x, 0.1f)
                   : k == 5  ? tg_scale(g, x, 0.5f, 0.25f)
                   : k == 6  ? tg_hard_swish(g, x)
                   : k == 7  ? tg_mish(g, x)
                   : k == 8  ? tg_elu(g, x, 1.0f)
                   : k == 9  ? tg_erf(g, x)
                   : k == 10 ? tg_abs(g, x)
                   : k == 11 ? tg_exp(g, tg_tanh(g, x))
                   : k == 12 ? tg_sqrt(g, tg_sigmoid(g, x))
                             : tg_log(g, tg_sigmoid(g, x));
    note(r, y, "%s(t%d)", names[k], index_of(r, x));
    return y;
}

static tg_tensor *pool2d(gen *r, tg_tensor *x)
{
    if (dim(x, 2) < 2 || dim(x, 3) < 2)
        return unary(r, x);
    unsigned kind = pick(r, 3);
    if (kind == 2) { /* a resize: linear shrinking or nearest enlarging by half */
        bool linear = pick(r, 2);
        int64_t h = dim(x, 2), w = dim(x, 3);
        tg_resize_params p = {linear ? TG_RESIZE_LINEAR : TG_RESIZE_NEAREST,
                              (tg_resize_coord)pick(r, 4),
                              (tg_resize_nearest)pick(r, 4),
                              linear ? (h + 1) / 2 : h * 3 / 2,
                              linear ? (w + 1) / 2 : w * 3 / 2,
                              0,
                              0};
        tg_tensor *y = tg_resize(r->g, x, &p);
        note(r, y, "resize(t%d, %s, coord %d, round %d, %lldx%lld)", index_of(r, x),
             linear ? "linear" : "nearest", (int)p.coord, (int)p.nearest, (long long)p.out_h,
             (long long)p.out_w);
        return y;
    }
    bool max = kind == 0;
    int k = pick(r, 2) ? 2 : 3, stride = k == 2 ? 2 : 1, pad = k == 3 ? 1 : 0;
    tg_tensor *y =
        max ? tg_maxpool2d(r->g, x, k, stride, pad) : tg_avgpool2d(r->g, x, k, stride, pad);
    note(r, y, "%s(t%d, k%d s%d p%d)", max ? "maxpool" : "avgpool", index_of(r, x), k, stride, pad);
    return y;
}

/* pow(0.5 + sigmoid(x), 1 + tanh(o) / 2): a base in (0.5, 1.5) and an
 * exponent in (0.5, 1.5), so that neither a domain nor an overflow decides
 * the result, and its gradient's log(base) stays finite. */
static tg_tensor *bounded_pow(gen *r, tg_tensor *x, tg_tensor *o)
{
    tg_graph *g = r->g;
    return tg_pow(g, tg_scale(g, tg_sigmoid(g, x), 1.0f, 0.5f),
                  tg_scale(g, tg_tanh(g, o), 0.5f, 1.0f));
}

/* add, mul, pow, maximum or minimum of x and another value of its shape.
 * Without one, add and mul become a unary op; pow, maximum and minimum
 * (whose backward ops POW_BWD and MINMAX_BWD are element-wise too) take
 * 0.25 - x, so that they are checked as often as the other element-wise
 * ops (maximum(x, 0.25 - x) bends at 0.125, where ties are unlikely). */
static tg_tensor *binary(gen *r, tg_tensor *x)
{
    static const char *names[] = {"add", "add", "mul", "pow_bounded", "maximum", "minimum"};
    tg_tensor *o = same_shape(r, x);
    unsigned k = pick(r, 5);
    k = k == 4 ? 4 + pick(r, 2) : k;
    if (!o && k < 3)
        return unary(r, x);
    char other[16];
    snprintf(other, sizeof other, "0.25 - t%d", index_of(r, x));
    if (o)
        snprintf(other, sizeof other, "t%d", index_of(r, o));
    else
        o = tg_scale(r->g, x, -1.0f, 0.25f);
    tg_tensor *y = k < 2    ? tg_add(r->g, x, o)
                   : k == 2 ? tg_mul(r->g, x, o)
                   : k == 3 ? bounded_pow(r, x, o)
                   : k == 4 ? tg_maximum(r->g, x, o)
                            : tg_minimum(r->g, x, o);
    note(r, y, "%s(t%d, %s)", names[k], index_of(r, x), other);
    return y;
}

static tg_tensor *concat(gen *r, tg_tensor *x)
{
    for (int i = r->n_pool - 1; i >= r->first; i--) {
        tg_tensor *o = r->pool[i];
        if (tg_tensor_shape(o).ndim == 4 && dim(o, 0) == dim(x, 0) && dim(o, 2) == dim(x, 2) &&
            dim(o, 3) == dim(x, 3) && dim(o, 1) + dim(x, 1) <= MAX_CHANNELS && !pick(r, 2)) {
            tg_tensor *xs[2] = {x, o};
            tg_tensor *y = tg_concat(r->g, xs, 2, 1);
            note(r, y, "concat(t%d, t%d, axis 1)", index_of(r, x), index_of(r, o));
            return y;
        }
    }
    return conv(r, x);
}

static tg_tensor *slice(gen *r, tg_tensor *x)
{
    int64_t c = dim(x, 1);
    if (c < 2)
        return conv(r, x);
    int64_t a = pick(r, (unsigned)(c / 2 + 1)), b = a + 1 + pick(r, (unsigned)(c - a));
    if (b > c)
        b = c;
    tg_tensor *y = tg_slice(r->g, x, 1, a, b);
    note(r, y, "slice(t%d, axis 1, %lld:%lld)", index_of(r, x), (long long)a, (long long)b);
    return y;
}

/* ShuffleNet's channel shuffle: view as [N, 2, C/2, H, W], swap 1 and 2, view back. */
static tg_tensor *shuffle(gen *r, tg_tensor *x)
{
    int64_t n = dim(x, 0), c = dim(x, 1), h = dim(x, 2), w = dim(x, 3);
    if (c % 2)
        return conv(r, x);
    static const int perm[5] = {0, 2, 1, 3, 4};
    tg_tensor *v = tg_reshape(r->g, x, tg_shape_of(5, (int64_t[]){n, 2, c / 2, h, w}));
    tg_tensor *y = tg_reshape(r->g, tg_transpose(r->g, v, perm), tg_shape4(n, c, h, w));
    note(r, y, "channel_shuffle(t%d, 2)", index_of(r, x));
    return y;
}

/* Views that reinterpret the bytes: flatten and back, or fold H into C. */
static tg_tensor *view(gen *r, tg_tensor *x)
{
    int64_t n = dim(x, 0), c = dim(x, 1), h = dim(x, 2), w = dim(x, 3);
    unsigned k = pick(r, 3);
    tg_tensor *y;
    if (k == 0) {
        y = tg_reshape(r->g, tg_flatten(r->g, x, 1), tg_shape4(n, c, h, w));
        note(r, y, "reshape(flatten(t%d))", index_of(r, x));
    } else if (k == 1 && h % 2 == 0 && c * 2 <= MAX_CHANNELS) {
        y = tg_reshape(r->g, x, tg_shape4(n, c * 2, h / 2, w));
        note(r, y, "reshape(t%d, C*2, H/2)", index_of(r, x));
    } else {
        static const int perm[4] = {0, 1, 3, 2};
        y = tg_transpose(r->g, x, perm);
        note(r, y, "transpose(t%d, 0,1,3,2)", index_of(r, x));
    }
    return y;
}

/* flatten -> linear -> a 4-D view again: a matmul between the convolutions. */
static tg_tensor *dense(gen *r, tg_tensor *x)
{
    int64_t n = dim(x, 0), features = tg_shape_numel(tg_tensor_shape(x)) / n;
    int64_t c = (int64_t)channel_choices[pick(r, 9)], hw = 1 + pick(r, 3);
    char name[32];
    snprintf(name, sizeof name, "fc%d", r->params++);
    tg_tensor *h =
        tg_nn_linear(r->g, tg_flatten(r->g, x, 1), name, (int)features, (int)(c * hw * hw), true);
    tg_tensor *y = tg_reshape(r->g, h, tg_shape4(n, c, hw, hw));
    note(r, y, "reshape(linear(flatten(t%d)), %lld x %lld x %lld)", index_of(r, x), (long long)c,
         (long long)hw, (long long)hw);
    return y;
}

/* Attention over x's rows, each [N, C] pair a sequence of H tokens of W
 * features: softmax(x x^T / sqrt(W) + mask) x, the 4-D batched products
 * of a transformer (oneDNN's batched matmul) and softmax over the last
 * axis, then sometimes a layer norm over the features (BERT's). */
static tg_tensor *attention(gen *r, tg_tensor *x)
{
    int64_t h = dim(x, 2), w = dim(x, 3);
    tg_tensor *s = tg_scale(r->g, tg_matmul(r->g, x, x, false, true), 1.0f / sqrtf((float)w), 0);
    bool masked = h > 1 && pick(r, 2);
    if (masked) { /* the last token is padding, as an additive mask */
        float *m = calloc((size_t)h, sizeof *m);
        if (!m)
            return NULL;
        m[h - 1] = -10000.0f;
        s = tg_add(r->g, s, tg_constant_data(r->g, "mask", tg_shape4(1, 1, 1, h), m));
        free(m);
    }
    tg_tensor *y = tg_matmul(r->g, tg_softmax(r->g, s, -1), x, false, false);
    bool norm = pick(r, 2);
    if (norm) {
        char name[32];
        snprintf(name, sizeof name, "ln%d", r->params++);
        tg_scope_push(r->g, name);
        tg_tensor *gamma =
            tg_param(r->g, "weight", tg_shape1(w), (tg_init){TG_INIT_UNIFORM, 0.5, 1.5});
        tg_tensor *beta =
            tg_param(r->g, "bias", tg_shape1(w), (tg_init){TG_INIT_UNIFORM, -0.5, 0.5});
        y = tg_layer_norm(r->g, y, 1, gamma, beta, 1e-5f);
        tg_scope_pop(r->g);
    }
    note(r, y, "%sattention(t%d%s)", norm ? "layer_norm " : "", index_of(r, x),
         masked ? ", masked" : "");
    return y;
}

static tg_tensor *global_pool(gen *r, tg_tensor *x)
{
    tg_tensor *y = tg_global_avgpool(r->g, x);
    note(r, y, "global_avgpool(t%d)", index_of(r, x));
    return y;
}

/* Integer ops on the way: a gather of channels by constant i32 indices
 * (repeats and reorders: its gradient scatter-adds), or a select by a
 * comparison (where(x > o, x, o / 4), with its gradient routed by the mask). */
/* Each sample's first lens[n] rows (or columns) reversed: the op defined
 * by its reference kernel alone (ops/reverse_sequence.c), run by the
 * engine through tg_op_forward under every fast path around it. */
static tg_tensor *reverse_sequence(gen *r, tg_tensor *x)
{
    int axis = 2 + (int)pick(r, 2);
    int64_t n = dim(x, 0), steps = dim(x, axis);
    float lens[8];
    char list[64] = "";
    if (n > 8)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        lens[i] = (float)pick(r, (unsigned)steps + 1);
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", i ? "," : "",
                 (int)lens[i]);
    }
    tg_tensor *l = tg_cast(r->g, tg_constant_data(r->g, "lens", tg_shape1(n), lens), TG_I32);
    tg_tensor *y = tg_reverse_sequence(r->g, x, l, 0, axis);
    note(r, y, "reverse_sequence(t%d, batch 0, time %d, [%s])", index_of(r, x), axis, list);
    return y;
}

static tg_tensor *gather_or_select(gen *r, tg_tensor *x)
{
    int64_t c = dim(x, 1);
    if (!pick(r, 2))
        return reverse_sequence(r, x);
    tg_tensor *o = same_shape(r, x);
    if (o && pick(r, 2)) {
        tg_tensor *y = tg_where(r->g, tg_greater(r->g, x, o), x, tg_scale(r->g, o, 0.25f, 0.0f));
        note(r, y, "where(t%d > t%d, t%d, t%d / 4)", index_of(r, x), index_of(r, o), index_of(r, x),
             index_of(r, o));
        return y;
    }
    int64_t k = 1 + pick(r, (unsigned)(c < MAX_CHANNELS / 2 ? 2 * c : c));
    float idx[MAX_CHANNELS];
    char list[MAX_CHANNELS * 4] = "";
    for (int64_t i = 0; i < k; i++) {
        idx[i] = (float)pick(r, (unsigned)c);
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", i ? "," : "",
                 (int)idx[i]);
    }
    tg_tensor *ids = tg_cast(r->g, tg_constant_data(r->g, "ids", tg_shape1(k), idx), TG_I32);
    tg_tensor *y = tg_gather(r->g, x, ids, 1);
    note(r, y, "gather(t%d, axis 1, [%s])", index_of(r, x), list);
    return y;
}

static tg_tensor *one_op(gen *r)
{
    tg_tensor *x = operand(r);
    if (!x)
        return NULL;
    switch (pick(r, 14)) {
    case 0:
        return conv(r, x);
    case 1:
        return pick(r, 3) ? conv(r, x) : conv_transpose(r, x);
    case 2:
        return tg_shape_numel(tg_tensor_shape(x)) / dim(x, 1) > 1 ? batch_norm(r, x) : unary(r, x);
    case 3:
        return pick(r, 3) ? unary(r, x) : binary(r, x);
    case 4:
        return pool2d(r, x);
    case 5:
        return binary(r, x);
    case 6:
        return concat(r, x);
    case 7:
        return slice(r, x);
    case 8:
        return shuffle(r, x);
    case 9:
        return view(r, x);
    case 10:
        return dense(r, x);
    case 11:
        return gather_or_select(r, x);
    case 12:
        return attention(r, x);
    default:
        return dim(x, 2) * dim(x, 3) > 1 && !pick(r, 3) ? global_pool(r, x) : conv(r, x);
    }
}

static void head(gen *r, tg_random_graph *rg, tg_tensor *x)
{
    int64_t n = dim(x, 0), features = tg_shape_numel(tg_tensor_shape(x)) / n;
    rg->classes = 5;
    rg->logits =
        tg_nn_linear(r->g, tg_flatten(r->g, x, 1), "head", (int)features, rg->classes, true);
    note(r, rg->logits, "linear(flatten(t%d), %d)", index_of(r, x), rg->classes);
    tg_tensor_mark_output(rg->logits);
    if (r->spec->training) {
        rg->labels = tg_input(r->g, "labels", TG_I32, tg_shape1(n));
        rg->loss = tg_cross_entropy(r->g, rg->logits, rg->labels);
        tg_tensor_mark_output(rg->loss);
    }
}

tg_status tg_random_graph_build(const tg_rg_spec *spec, tg_random_graph *rg)
{
    memset(rg, 0, sizeof *rg);
    gen r = {.spec = spec, .rng = spec->seed * 0x9E3779B97F4A7C15ull + 7, .out = rg};
    r.g = rg->graph = tg_graph_create();
    if (!r.g)
        return tg_error_set(TG_ERR_NOMEM, "random graph: out of memory");
    int64_t n = 1 + pick(&r, 4), c = channel_choices[pick(&r, 9)], hw = 3 + pick(&r, 6);
    rg->x = tg_input(r.g, "x", TG_F32, tg_shape4(n, c, hw, hw));
    snprintf(rg->listing, sizeof rg->listing, "  t0 = input [%lld,%lld,%lld,%lld]\n", (long long)n,
             (long long)c, (long long)hw, (long long)hw);
    push(&r, rg->x);
    int per_block = spec->blocks > 1 ? (spec->max_ops + spec->blocks - 1) / spec->blocks : 0;
    for (int i = 0; i < spec->max_ops && tg_graph_status(r.g) == TG_OK; i++) {
        if (per_block && i % per_block == 0) {
            char name[16];
            snprintf(name, sizeof name, "B%d", i / per_block + 1);
            if (i)
                tg_block_end(r.g);
            tg_block_begin(r.g, name);
            r.first = r.n_pool - 1;
        }
        tg_tensor *y = one_op(&r);
        if (y && tg_shape_numel(tg_tensor_shape(y)) <= MAX_ELEMENTS)
            push(&r, y);
        rg->ops++;
    }
    if (tg_graph_status(r.g) == TG_OK)
        head(&r, rg, r.pool[r.n_pool - 1]);
    if (per_block)
        tg_block_end(r.g);
    tg_status st = tg_graph_status(r.g);
    if (st == TG_OK && spec->training)
        st = tg_graph_backward(r.g, rg->loss);
    tg_optimizer opt = tg_optimizer_sgd(0.1f, spec->momentum);
    if (st == TG_OK && spec->training)
        st = tg_graph_add_optimizer(r.g, &opt);
    if (st != TG_OK)
        return tg_error_set(st, "random graph: %s\n%s",
                            tg_graph_error(r.g) ? tg_graph_error(r.g) : tg_error_message(),
                            rg->listing);
    return TG_OK;
}

void tg_random_graph_destroy(tg_random_graph *rg)
{
    tg_graph_destroy(rg->graph);
    rg->graph = NULL;
}

tg_status tg_random_graph_feed(tg_session *s, const tg_random_graph *rg, uint64_t seed)
{
    int64_t runs = tg_session_samples_per_run(s, rg->x) / dim(rg->x, 0);
    int64_t n = runs * tg_shape_numel(tg_tensor_shape(rg->x)), m = runs * dim(rg->x, 0);
    float *x = malloc((size_t)n * sizeof(float));
    int32_t *y = malloc((size_t)m * sizeof(int32_t));
    uint64_t k = seed * 0x9E3779B97F4A7C15ull + 3;
    for (int64_t i = 0; x && i < n; i++) {
        k ^= k >> 12, k ^= k << 25, k ^= k >> 27;
        x[i] = (float)((double)((k * 0x2545F4914F6CDD1Dull) >> 11) * 0x1p-53 * 2 - 1);
    }
    for (int64_t i = 0; y && i < m; i++)
        y[i] = (int32_t)((uint64_t)(i * 7 + (int64_t)seed) % (uint64_t)rg->classes);
    tg_status st = x && y ? tg_session_write(s, rg->x, x, (size_t)n * sizeof(float))
                          : tg_error_set(TG_ERR_NOMEM, "random graph: out of memory");
    if (st == TG_OK && rg->labels)
        st = tg_session_write(s, rg->labels, y, (size_t)m * sizeof(int32_t));
    free(x);
    free(y);
    return st;
}

tg_status tg_random_graph_check(tg_random_graph *rg, const tg_options *opts, uint64_t data_seed,
                                int *beyond, char *why, size_t cap)
{
    tg_session *s = NULL;
    *beyond = -1;
    why[0] = '\0';
    tg_status st = tg_session_create(rg->graph, opts, &s);
    if (st == TG_OK)
        st = tg_random_graph_feed(s, rg, data_seed);
    if (st == TG_OK)
        st = tg_session_verify_next_run(s);
    if (st == TG_OK)
        st = tg_session_run(s);
    if (st == TG_OK) {
        const tg_verify_report *r = tg_session_verify_report(s);
        *beyond = tg_verify_first_beyond(r);
        const tg_verify_row *w = tg_verify_row_at(r, *beyond);
        if (w)
            snprintf(why, cap,
                     "'%s' (%s, %lld elements): error %.3g, %.3g relative, tolerance %.3g", w->name,
                     w->op, (long long)w->elements, w->max_abs, w->max_rel, w->tolerance);
    }
    tg_session_destroy(s);
    return st;
}
