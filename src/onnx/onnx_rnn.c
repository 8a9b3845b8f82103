/* onnx/onnx_rnn.c - the recurrent ops LSTM, GRU and RNN, unrolled over their
 * static sequence length into ordinary graph ops.
 *
 * Unrolling keeps everything downstream unchanged: autodiff gives
 * backpropagation through time from the ops' own gradient rules, and the
 * memory plan and liveness see every step. The input projection of all
 * steps and both directions is one linear op (X [seq * batch, input] times
 * W^T); only the recurrent product h R^T is made per step. An initial state
 * that is absent or known to be zero (the exporter's Expand of zeros) skips
 * the first step's recurrent product.
 *
 * Taken: layouts 0 and 1, directions forward, reverse and bidirectional,
 * biases, initial_h / initial_c as constants or tensors, LSTM peepholes,
 * GRU's linear_before_reset 0 and 1, the activations Sigmoid, Tanh and Relu
 * in any position, sequence_lens equal to the sequence length. Refused,
 * naming the attribute: other activations (and activation_alpha/beta),
 * a finite clip, LSTM's input_forget, sequence_lens shorter than the
 * sequence.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <float.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef enum { RNN_SIMPLE, RNN_GRU, RNN_LSTM } rnn_kind;

typedef tg_tensor *(*act_fn)(tg_graph *, tg_tensor *);

/* What one node asks for, read and checked once. */
typedef struct rnn_spec {
    rnn_kind kind;
    int gates;        /* blocks of H rows in W and R: 1 (RNN), 3 (GRU), 4 (LSTM) */
    int n_act;        /* activations per direction: 1, 2, 3 */
    int dirs;         /* 1 or 2 */
    bool reverse;     /* one direction, run from the last step */
    bool batch_first; /* layout 1 */
    bool lbr;         /* GRU linear_before_reset */
    int64_t seq, batch, input, hidden;
    act_fn act[2][3]; /* per direction: f, g, h (as ONNX names them) */
} rnn_spec;

/* Inputs by position, as ONNX numbers them for all three ops. */
enum { IN_X, IN_W, IN_R, IN_B, IN_SEQ_LENS, IN_H0, IN_C0, IN_P };

/* ---- attributes ---------------------------------------------------------- */

static tg_status read_direction(onnx_builder *b, rnn_spec *sp)
{
    char buf[32];
    const char *d = ob_attr_string(b, "direction", buf, sizeof buf);
    sp->dirs = 1;
    sp->reverse = false;
    if (!strcmp(d, "bidirectional"))
        sp->dirs = 2;
    else if (!strcmp(d, "reverse"))
        sp->reverse = true;
    else if (d[0] && strcmp(d, "forward"))
        return ob_fail(b, TG_ERR_INVALID_ARG,
                       "direction '%s' is unknown (forward, reverse or bidirectional)", d);
    return TG_OK;
}

static act_fn act_named(const char *name, size_t len)
{
    if (len == 7 && !strncasecmp(name, "Sigmoid", len))
        return tg_sigmoid;
    if (len == 4 && !strncasecmp(name, "Tanh", len))
        return tg_tanh;
    if (len == 4 && !strncasecmp(name, "Relu", len))
        return tg_relu;
    return NULL;
}

/* The activations: the defaults (Sigmoid for gates, Tanh otherwise) or a
 * list of n_act per direction from Sigmoid, Tanh and Relu. */
static tg_status read_activations(onnx_builder *b, rnn_spec *sp)
{
    static const act_fn dflt[3][3] = {
        {tg_tanh}, {tg_sigmoid, tg_tanh}, {tg_sigmoid, tg_tanh, tg_tanh}};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < sp->n_act; k++)
            sp->act[d][k] = dflt[sp->kind][k];
    if (ob_attr(b, "activation_alpha") || ob_attr(b, "activation_beta"))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "attribute 'activation_alpha'/'activation_beta': parameterised "
                       "activations are not supported (Sigmoid, Tanh and Relu are)");
    const Onnx__AttributeProto *a = ob_attr(b, "activations");
    if (!a || a->n_strings == 0)
        return TG_OK;
    if ((int)a->n_strings != sp->n_act * sp->dirs)
        return ob_fail(b, TG_ERR_INVALID_ARG,
                       "attribute 'activations' has %zu names; %s with %d direction%s takes %d",
                       a->n_strings, b->node->op_type, sp->dirs, sp->dirs == 1 ? "" : "s",
                       sp->n_act * sp->dirs);
    for (int d = 0; d < sp->dirs; d++)
        for (int k = 0; k < sp->n_act; k++) {
            const ProtobufCBinaryData *s = &a->strings[d * sp->n_act + k];
            sp->act[d][k] = act_named((const char *)s->data, s->len);
            if (!sp->act[d][k])
                return ob_fail(b, TG_ERR_UNSUPPORTED,
                               "attribute 'activations': '%.*s' is not supported (Sigmoid, "
                               "Tanh and Relu are)",
                               (int)s->len, (const char *)s->data);
        }
    return TG_OK;
}

static tg_status read_attrs(onnx_builder *b, rnn_spec *sp)
{
    TG_TRY(read_direction(b, sp));
    TG_TRY(read_activations(b, sp));
    const Onnx__AttributeProto *clip = ob_attr(b, "clip");
    if (clip && clip->has_f && clip->f < FLT_MAX)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "attribute 'clip' (%g): cell clipping is not supported", (double)clip->f);
    int64_t layout = ob_attr_int(b, "layout", 0);
    if (layout != 0 && layout != 1)
        return ob_fail(b, TG_ERR_INVALID_ARG, "attribute 'layout' is %lld (0 or 1)",
                       (long long)layout);
    sp->batch_first = layout == 1;
    if (sp->kind == RNN_LSTM && ob_attr_int(b, "input_forget", 0))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "attribute 'input_forget' (coupled input and forget gates) is not "
                       "supported");
    sp->lbr = sp->kind == RNN_GRU && ob_attr_int(b, "linear_before_reset", 0) != 0;
    return TG_OK;
}

/* ---- inputs -------------------------------------------------------------- */

static tg_status shape_is(onnx_builder *b, tg_tensor *t, const char *what, int ndim,
                          const int64_t *dim)
{
    tg_shape s = tg_tensor_shape(t);
    bool ok = s.ndim == ndim;
    for (int d = 0; ok && d < ndim; d++)
        ok = s.dim[d] == dim[d];
    if (ok)
        return TG_OK;
    char have[96], want[96];
    return ob_fail(b, TG_ERR_SHAPE, "%s is %s; expected %s", what,
                   tg_shape_str(s, have, sizeof have),
                   tg_shape_str(tg_shape_of(ndim, dim), want, sizeof want));
}

/* X, W and R: their shapes give seq, batch, input and hidden. */
static tg_status read_sizes(onnx_builder *b, rnn_spec *sp, tg_tensor *x, tg_tensor *w, tg_tensor *r)
{
    tg_shape xs = tg_tensor_shape(x), rs = tg_tensor_shape(r);
    if (xs.ndim != 3)
        return ob_fail(b, TG_ERR_SHAPE, "X has %d dimensions (3: sequence, batch, input)", xs.ndim);
    sp->seq = xs.dim[sp->batch_first ? 1 : 0];
    sp->batch = xs.dim[sp->batch_first ? 0 : 1];
    sp->input = xs.dim[2];
    if (rs.ndim != 3)
        return ob_fail(b, TG_ERR_SHAPE, "R has %d dimensions (3)", rs.ndim);
    sp->hidden = ob_attr_int(b, "hidden_size", rs.dim[2]);
    if (sp->seq < 1 || sp->batch < 1 || sp->hidden < 1)
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "an empty sequence, batch or hidden state (%lld, %lld, %lld)",
                       (long long)sp->seq, (long long)sp->batch, (long long)sp->hidden);
    int64_t gh = sp->gates * sp->hidden;
    int64_t wd[3] = {sp->dirs, gh, sp->input}, rd[3] = {sp->dirs, gh, sp->hidden};
    TG_TRY(shape_is(b, w, "W", 3, wd));
    return shape_is(b, r, "R", 3, rd);
}

/* sequence_lens may only say that every sequence is whole. */
static tg_status check_seq_lens(onnx_builder *b, const rnn_spec *sp)
{
    if (!ob_has_input(b, IN_SEQ_LENS))
        return TG_OK;
    if (!ob_is_const(b, IN_SEQ_LENS))
        return ob_fail(b, TG_ERR_UNSUPPORTED,
                       "input 'sequence_lens' depends on the model's inputs; only sequences "
                       "of the full length %lld (sequence_lens absent or constant) are "
                       "supported",
                       (long long)sp->seq);
    const tg_onnx_data *d = ob_const(b, IN_SEQ_LENS);
    if (!d)
        return TG_ERR_UNSUPPORTED;
    if (d->n == 0)
        return TG_OK;
    if (d->n != sp->batch)
        return ob_fail(b, TG_ERR_SHAPE, "sequence_lens has %lld values for a batch of %lld",
                       (long long)d->n, (long long)sp->batch);
    for (int64_t k = 0; k < d->n; k++) {
        double v = d->f ? d->f[k] : (double)d->i[k];
        if (v != (double)sp->seq)
            return ob_fail(b, TG_ERR_UNSUPPORTED,
                           "sequence_lens[%lld] is %g; variable-length sequences are not "
                           "supported (every length must be the sequence length %lld)",
                           (long long)k, v, (long long)sp->seq);
    }
    return TG_OK;
}

/* An optional input known to be all zeros (absent, or a zero constant):
 * the step that reads it can skip it. */
static bool known_zero(onnx_builder *b, int i)
{
    if (!ob_has_input(b, i))
        return true;
    if (!ob_is_const(b, i))
        return false;
    const tg_onnx_data *d = ob_const(b, i);
    if (!d || !d->f)
        return false;
    for (int64_t k = 0; k < d->n; k++)
        if (d->f[k] != 0.0f)
            return false;
    return true;
}

/* Input i as a graph tensor of the given shape (checked), or NULL after
 * ob_fail. */
static tg_tensor *input_of(onnx_builder *b, int i, const char *what, int ndim, const int64_t *dim)
{
    tg_tensor *t = ob_tensor(b, i);
    if (!t || shape_is(b, t, what, ndim, dim) != TG_OK)
        return NULL;
    return t;
}

/* initial_h or initial_c as [dirs, batch, H] (layout 1 gives [batch, dirs,
 * H]), or NULL after ob_fail. */
static tg_tensor *state_input(onnx_builder *b, const rnn_spec *sp, int i, const char *what)
{
    int64_t dim[3] = {sp->dirs, sp->batch, sp->hidden};
    if (sp->batch_first) {
        dim[0] = sp->batch;
        dim[1] = sp->dirs;
    }
    tg_tensor *t = input_of(b, i, what, 3, dim);
    if (!t || !sp->batch_first)
        return t;
    static const int perm[3] = {1, 0, 2};
    return tg_transpose(b->g, t, perm);
}

/* ---- building ------------------------------------------------------------ */

/* The d-th entry of a [dirs, ...] tensor, without its first dimension. */
static tg_tensor *of_dir(tg_graph *g, tg_tensor *t, const rnn_spec *sp, int d)
{
    tg_shape s = tg_tensor_shape(t), o = tg_shape_of(s.ndim - 1, &s.dim[1]);
    tg_tensor *part = sp->dirs == 1 ? t : tg_slice(g, t, 0, d, d + 1);
    return tg_reshape(g, part, o);
}

/* Concatenation of any number of tensors (concat takes at most 8). */
static tg_tensor *concat_many(tg_graph *g, tg_tensor **xs, int n, int axis)
{
    enum { MAX_IN = 8 };
    if (n <= MAX_IN)
        return n == 1 ? xs[0] : tg_concat(g, xs, n, axis);
    tg_tensor *groups[MAX_IN];
    int per = (n + MAX_IN - 1) / MAX_IN, n_groups = 0;
    for (int k = 0; k < n; k += per) {
        int m = n - k < per ? n - k : per;
        groups[n_groups++] = concat_many(g, xs + k, m, axis);
    }
    return concat_many(g, groups, n_groups, axis);
}

/* The state one direction carries and what it leaves. */
typedef struct rnn_dir {
    tg_tensor *r;       /* [gates * H, H] */
    tg_tensor *rbias;   /* GRU with linear_before_reset: Rb [gates * H]; else NULL */
    tg_tensor *peep[3]; /* LSTM peepholes i, o, f [H], or NULL */
    tg_tensor *h, *c;   /* the state: [B, H], NULL while known zero */
    tg_tensor **ys;     /* h after each input position */
} rnn_dir;

static tg_tensor *cols(tg_graph *g, tg_tensor *x, int64_t from, int64_t to)
{
    return tg_slice(g, x, 1, from, to);
}

/* h R^T (plus Rb), or NULL while h is zero and there is no Rb. */
static tg_tensor *recurrent(tg_graph *g, const rnn_dir *st, tg_tensor *r)
{
    if (st->h)
        return tg_linear(g, st->h, r, st->rbias);
    if (!st->rbias)
        return NULL;
    /* [1, gates * H]: broadcasts over the batch */
    return tg_reshape(g, st->rbias, tg_shape2(1, tg_tensor_shape(st->rbias).dim[0]));
}

static tg_tensor *add_opt(tg_graph *g, tg_tensor *a, tg_tensor *b)
{
    return b ? tg_add(g, a, b) : a;
}

/* One LSTM step; z is x W^T + Wb + Rb for this step, gates i, o, f, c. */
static void lstm_step(tg_graph *g, const rnn_spec *sp, const act_fn *act, rnn_dir *st, tg_tensor *z)
{
    int64_t H = sp->hidden;
    z = add_opt(g, z, recurrent(g, st, st->r));
    tg_tensor *i, *o, *f;
    bool peep = st->peep[0] != NULL;
    if (!peep) { /* i, o and f are adjacent: one activation for the three */
        tg_tensor *s = act[0](g, cols(g, z, 0, 3 * H));
        i = cols(g, s, 0, H);
        o = cols(g, s, H, 2 * H);
        f = cols(g, s, 2 * H, 3 * H);
    } else {
        tg_tensor *zi = cols(g, z, 0, H), *zf = cols(g, z, 2 * H, 3 * H);
        if (st->c) {
            zi = tg_add(g, zi, tg_mul(g, st->peep[0], st->c));
            zf = tg_add(g, zf, tg_mul(g, st->peep[2], st->c));
        }
        i = act[0](g, zi);
        f = act[0](g, zf);
        o = NULL; /* needs the new cell state */
    }
    tg_tensor *cand = act[1](g, cols(g, z, 3 * H, 4 * H));
    tg_tensor *c = tg_mul(g, i, cand);
    if (st->c)
        c = tg_add(g, tg_mul(g, f, st->c), c);
    if (peep)
        o = act[0](g, tg_add(g, cols(g, z, H, 2 * H), tg_mul(g, st->peep[1], c)));
    st->c = c;
    st->h = tg_mul(g, o, act[2](g, c));
}

/* One GRU step; z is x W^T plus the biases the input side carries, gates
 * z, r, h. */
static void gru_step(tg_graph *g, const rnn_spec *sp, const act_fn *act, rnn_dir *st, tg_tensor *x)
{
    int64_t H = sp->hidden;
    tg_tensor *zr, *cand;
    if (sp->lbr) { /* h~ = g(x Wh + Wbh + r (h Rh + Rbh)) */
        tg_tensor *hr = recurrent(g, st, st->r);
        zr = act[0](g, add_opt(g, cols(g, x, 0, 2 * H), hr ? cols(g, hr, 0, 2 * H) : NULL));
        tg_tensor *r = cols(g, zr, H, 2 * H), *xh = cols(g, x, 2 * H, 3 * H);
        cand = act[1](g, hr ? tg_add(g, xh, tg_mul(g, r, cols(g, hr, 2 * H, 3 * H))) : xh);
    } else { /* h~ = g(x Wh + (r h) Rh + Wbh + Rbh) */
        tg_tensor *rzr = st->h ? tg_slice(g, st->r, 0, 0, 2 * H) : NULL;
        tg_tensor *rh = st->h ? tg_slice(g, st->r, 0, 2 * H, 3 * H) : NULL;
        tg_tensor *xzr = cols(g, x, 0, 2 * H), *xh = cols(g, x, 2 * H, 3 * H);
        zr = act[0](g, st->h ? tg_add(g, xzr, tg_linear(g, st->h, rzr, NULL)) : xzr);
        tg_tensor *r = cols(g, zr, H, 2 * H);
        cand = act[1](g, st->h ? tg_add(g, xh, tg_linear(g, tg_mul(g, r, st->h), rh, NULL)) : xh);
    }
    tg_tensor *u = cols(g, zr, 0, H);
    /* h = (1 - z) h~ + z h_prev = h~ + z (h_prev - h~) */
    st->h = st->h ? tg_add(g, cand, tg_mul(g, u, tg_sub(g, st->h, cand)))
                  : tg_sub(g, cand, tg_mul(g, u, cand));
}

static void rnn_step(tg_graph *g, const act_fn *act, rnn_dir *st, tg_tensor *z)
{
    st->h = act[0](g, add_opt(g, z, recurrent(g, st, st->r)));
}

/* Everything one direction needs beyond the projected inputs. */
static tg_status dir_setup(onnx_builder *b, const rnn_spec *sp, int d, rnn_dir *st)
{
    tg_graph *g = b->g;
    int64_t gh = sp->gates * sp->hidden, H = sp->hidden;
    memset(st, 0, sizeof *st);
    /* R only once a step has a state: a single step from zero never reads it */
    if (sp->seq > 1 || !known_zero(b, IN_H0))
        st->r = of_dir(g, ob_tensor(b, IN_R), sp, d);
    if (sp->lbr && ob_has_input(b, IN_B)) {
        tg_tensor *bias = ob_tensor(b, IN_B);
        st->rbias = tg_slice(g, of_dir(g, bias, sp, d), 0, gh, 2 * gh);
    }
    if (!known_zero(b, IN_H0)) {
        tg_tensor *h0 = state_input(b, sp, IN_H0, "initial_h");
        if (!h0)
            return TG_ERR_SHAPE;
        st->h = of_dir(g, h0, sp, d);
    }
    if (sp->kind == RNN_LSTM && !known_zero(b, IN_C0)) {
        tg_tensor *c0 = state_input(b, sp, IN_C0, "initial_c");
        if (!c0)
            return TG_ERR_SHAPE;
        st->c = of_dir(g, c0, sp, d);
    }
    if (sp->kind == RNN_LSTM && ob_has_input(b, IN_P)) {
        int64_t pd[2] = {sp->dirs, 3 * H};
        tg_tensor *p = input_of(b, IN_P, "P (peepholes)", 2, pd);
        if (!p)
            return TG_ERR_SHAPE;
        tg_tensor *pdir = tg_reshape(g, of_dir(g, p, sp, d), tg_shape2(1, 3 * H));
        for (int k = 0; k < 3; k++)
            st->peep[k] = cols(g, pdir, k * H, (k + 1) * H);
    }
    return TG_OK;
}

/* The input-side bias of all directions, [dirs * gates * H]: Wb + Rb, or
 * Wb alone where Rb is applied inside the reset gate; NULL without B. */
static tg_tensor *input_bias(onnx_builder *b, const rnn_spec *sp)
{
    if (!ob_has_input(b, IN_B))
        return NULL;
    int64_t gh = sp->gates * sp->hidden, bd[2] = {sp->dirs, 2 * gh};
    tg_tensor *bias = input_of(b, IN_B, "B", 2, bd);
    if (!bias)
        return NULL;
    tg_graph *g = b->g;
    tg_tensor *wb = cols(g, bias, 0, gh);
    if (!sp->lbr)
        wb = tg_add(g, wb, cols(g, bias, gh, 2 * gh));
    return tg_reshape(g, wb, tg_shape1(sp->dirs * gh));
}

/* x W^T + bias for every step and direction: [seq * batch, dirs * gates * H]. */
static tg_tensor *project_inputs(onnx_builder *b, const rnn_spec *sp, tg_tensor *x)
{
    tg_graph *g = b->g;
    int64_t gh = sp->gates * sp->hidden;
    if (sp->batch_first) {
        static const int perm[3] = {1, 0, 2};
        x = tg_transpose(g, x, perm);
    }
    tg_tensor *x2 = tg_reshape(g, x, tg_shape2(sp->seq * sp->batch, sp->input));
    tg_tensor *w = tg_reshape(g, ob_tensor(b, IN_W), tg_shape2(sp->dirs * gh, sp->input));
    tg_tensor *bias = input_bias(b, sp);
    if (ob_has_input(b, IN_B) && !bias)
        return NULL;
    return tg_linear(g, x2, w, bias);
}

/* Run direction d over the sequence; st->ys[t] is h after position t. */
static void run_dir(onnx_builder *b, const rnn_spec *sp, tg_tensor *xw, int d, rnn_dir *st)
{
    tg_graph *g = b->g;
    int64_t gh = sp->gates * sp->hidden;
    bool backwards = sp->reverse || d == 1;
    for (int64_t k = 0; k < sp->seq && tg_graph_status(g) == TG_OK; k++) {
        int64_t t = backwards ? sp->seq - 1 - k : k;
        tg_tensor *z = tg_slice(g, xw, 0, t * sp->batch, (t + 1) * sp->batch);
        if (sp->dirs > 1)
            z = cols(g, z, d * gh, (d + 1) * gh);
        if (sp->kind == RNN_LSTM)
            lstm_step(g, sp, sp->act[d], st, z);
        else if (sp->kind == RNN_GRU)
            gru_step(g, sp, sp->act[d], st, z);
        else
            rnn_step(g, sp->act[d], st, z);
        st->ys[t] = st->h;
    }
}

/* Y [seq, dirs, batch, H] (layout 0) or [batch, seq, dirs, H] (layout 1)
 * from each direction's per-step h. */
static tg_tensor *y_output(tg_graph *g, const rnn_spec *sp, rnn_dir *st)
{
    tg_tensor *per_dir[2];
    tg_shape one = tg_shape_of(4, (int64_t[]){1, 1, sp->batch, sp->hidden});
    for (int d = 0; d < sp->dirs; d++) {
        for (int64_t t = 0; t < sp->seq; t++)
            st[d].ys[t] = tg_reshape(g, st[d].ys[t], one);
        per_dir[d] = concat_many(g, st[d].ys, (int)sp->seq, 0);
    }
    tg_tensor *y = concat_many(g, per_dir, sp->dirs, 1);
    if (!sp->batch_first)
        return y;
    static const int perm[4] = {2, 0, 1, 3};
    return tg_transpose(g, y, perm);
}

/* Y_h or Y_c: [dirs, batch, H] (layout 0) or [batch, dirs, H] (layout 1). */
static tg_tensor *last_output(tg_graph *g, const rnn_spec *sp, tg_tensor **last)
{
    tg_tensor *parts[2];
    for (int d = 0; d < sp->dirs; d++)
        parts[d] = tg_reshape(g, last[d], tg_shape_of(3, (int64_t[]){1, sp->batch, sp->hidden}));
    tg_tensor *y = concat_many(g, parts, sp->dirs, 0);
    if (!sp->batch_first)
        return y;
    static const int perm[3] = {1, 0, 2};
    return tg_transpose(g, y, perm);
}

static bool wants_output(const onnx_builder *b, int k)
{
    return k < (int)b->node->n_output && b->node->output[k][0];
}

/* Output k; a reshape (one step, one direction) is a view of a step's
 * value and gets a buffer of its own, as a graph output must. */
static tg_status set_output(onnx_builder *b, int k, tg_tensor *t, bool view)
{
    return ob_set(b, k, view && t ? tg_scale(b->g, t, 1.0f, 0.0f) : t);
}

static tg_status set_outputs(onnx_builder *b, const rnn_spec *sp, rnn_dir *st)
{
    tg_graph *g = b->g;
    bool one_dir = sp->dirs == 1 && !sp->batch_first;
    tg_tensor *hs[2], *cs[2];
    for (int d = 0; d < sp->dirs; d++) {
        hs[d] = st[d].h;
        cs[d] = st[d].c;
    }
    if (wants_output(b, 1))
        TG_TRY(set_output(b, 1, last_output(g, sp, hs), one_dir));
    if (sp->kind == RNN_LSTM && wants_output(b, 2))
        TG_TRY(set_output(b, 2, last_output(g, sp, cs), one_dir));
    if (wants_output(b, 0))
        TG_TRY(set_output(b, 0, y_output(g, sp, st), one_dir && sp->seq == 1));
    return TG_OK;
}

static tg_status map_recurrent(onnx_builder *b, rnn_kind kind)
{
    static const int gates[] = {1, 3, 4};
    rnn_spec sp = {.kind = kind, .gates = gates[kind], .n_act = (int)kind + 1};
    TG_TRY(read_attrs(b, &sp));
    tg_tensor *x = ob_tensor(b, IN_X);
    tg_tensor *w = x ? ob_tensor(b, IN_W) : NULL, *r = w ? ob_tensor(b, IN_R) : NULL;
    if (!r)
        return TG_ERR_UNSUPPORTED;
    TG_TRY(read_sizes(b, &sp, x, w, r));
    TG_TRY(check_seq_lens(b, &sp));
    if (sp.seq > 100000)
        return ob_fail(b, TG_ERR_UNSUPPORTED, "a sequence of %lld steps (unrolled: at most 100000)",
                       (long long)sp.seq);
    tg_tensor *xw = project_inputs(b, &sp, x);
    if (!xw)
        return tg_graph_status(b->g) ? ob_fail(b, tg_graph_status(b->g), "%s", tg_graph_error(b->g))
                                     : TG_ERR_SHAPE;
    rnn_dir st[2];
    tg_tensor **ys = tg_calloc((size_t)(2 * sp.seq), sizeof *ys);
    if (!ys)
        return ob_fail(b, TG_ERR_NOMEM, "out of memory");
    tg_status s = TG_OK;
    for (int d = 0; d < sp.dirs && s == TG_OK; d++) {
        s = dir_setup(b, &sp, d, &st[d]);
        st[d].ys = ys + d * sp.seq;
        if (s == TG_OK)
            run_dir(b, &sp, xw, d, &st[d]);
    }
    if (s == TG_OK && tg_graph_status(b->g) == TG_OK)
        s = set_outputs(b, &sp, st);
    tg_free(ys);
    return s;
}

tg_status ob_map_lstm(onnx_builder *b)
{
    return map_recurrent(b, RNN_LSTM);
}

tg_status ob_map_gru(onnx_builder *b)
{
    return map_recurrent(b, RNN_GRU);
}

tg_status ob_map_rnn(onnx_builder *b)
{
    return map_recurrent(b, RNN_SIMPLE);
}
