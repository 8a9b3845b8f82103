/* ops/broadcast.c - broadcasting rules, merged strided views and the sum
 * reduction kernels behind SUM_TO and REDUCE_SUM. */
#include "ops/broadcast.h"

#include "core/error.h"

#include <string.h>

void tg_par_for(tg_pool *pool, int64_t n, int64_t work, tg_pool_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (work < TG_PARALLEL_MIN || tg_pool_threads(pool) == 1)
        fn(ctx, 0, n, 0);
    else
        tg_pool_for(pool, n, fn, ctx);
}

/* ---- shapes ------------------------------------------------------------------ */

tg_shape tg_shape_pad_left(tg_shape s, int ndim)
{
    tg_shape r = tg_shape_of(0, NULL);
    r.ndim = ndim;
    int lead = ndim - s.ndim;
    for (int i = 0; i < ndim; i++)
        r.dim[i] = i < lead ? 1 : s.dim[i - lead];
    return r;
}

tg_status tg_broadcast_shape(tg_shape a, tg_shape b, tg_shape *out)
{
    int nd = a.ndim > b.ndim ? a.ndim : b.ndim;
    tg_shape pa = tg_shape_pad_left(a, nd), pb = tg_shape_pad_left(b, nd);
    tg_shape r = tg_shape_pad_left(tg_shape_of(0, NULL), nd);
    for (int i = 0; i < nd; i++) {
        if (pa.dim[i] == pb.dim[i] || pb.dim[i] == 1)
            r.dim[i] = pa.dim[i];
        else if (pa.dim[i] == 1)
            r.dim[i] = pb.dim[i];
        else {
            char sa[96], sb[96];
            return tg_error(TG_ERR_SHAPE, "cannot broadcast %s with %s",
                            tg_shape_str(a, sa, sizeof sa), tg_shape_str(b, sb, sizeof sb));
        }
    }
    *out = r;
    return TG_OK;
}

bool tg_broadcasts_to(tg_shape from, tg_shape to)
{
    if (from.ndim > to.ndim)
        return false;
    tg_shape p = tg_shape_pad_left(from, to.ndim);
    for (int i = 0; i < to.ndim; i++)
        if (p.dim[i] != to.dim[i] && p.dim[i] != 1)
            return false;
    return true;
}

void tg_params_put_shape(tg_node_params *p, int at, tg_shape s)
{
    p->i[at] = s.ndim;
    for (int d = 0; d < s.ndim; d++)
        p->i[at + 1 + d] = s.dim[d];
}

tg_shape tg_params_get_shape(const tg_node_params *p, int at)
{
    int nd = (int)p->i[at];
    if (nd < 0 || nd > TG_MAX_DIMS || at + 1 + nd > TG_MAX_IPARAMS)
        nd = 0;
    return tg_shape_of(nd, &p->i[at + 1]);
}

tg_status tg_params_check_shape(const tg_node_params *p, int at)
{
    int64_t nd = p->i[at];
    if (nd < 0 || nd > TG_MAX_DIMS || at + 1 + nd > TG_MAX_IPARAMS)
        return tg_error(TG_ERR_INVALID_ARG, "target shape has %lld dimensions (at most %d)",
                        (long long)nd, TG_MAX_DIMS);
    for (int d = 0; d < nd; d++)
        if (p->i[at + 1 + d] < 0)
            return tg_error(TG_ERR_SHAPE, "target dimension %d is negative (%lld)", d,
                            (long long)p->i[at + 1 + d]);
    return TG_OK;
}

/* ---- strided views --------------------------------------------------------------- */

void tg_bcast_init(tg_bcast *bc, tg_shape out, int n_in, const tg_shape *in)
{
    int64_t dim[TG_MAX_DIMS], st[2][TG_MAX_DIMS];
    int nd = 0;
    /* Row-major strides of each input padded to out's rank, 0 where stretched;
     * output dims of size 1 are dropped (nothing moves along them). */
    for (int k = 0; k < 2; k++) {
        tg_shape p = k < n_in ? tg_shape_pad_left(in[k], out.ndim) : out;
        int64_t s = 1;
        for (int d = out.ndim - 1; d >= 0; d--) {
            st[k][d] = p.dim[d] == 1 ? 0 : s;
            s *= p.dim[d];
        }
    }
    for (int d = 0; d < out.ndim; d++) {
        if (out.dim[d] == 1)
            continue;
        dim[nd] = out.dim[d];
        st[0][nd] = st[0][d];
        st[1][nd] = st[1][d];
        nd++;
    }
    /* Merge dim i into the previous kept one when both inputs step regularly
     * across the pair: stride_outer == stride_inner * dim_inner. */
    bc->ndim = 0;
    for (int d = 0; d < nd; d++) {
        int m = bc->ndim;
        if (m > 0 && st[0][d] * dim[d] == bc->stride[0][m - 1] &&
            st[1][d] * dim[d] == bc->stride[1][m - 1] &&
            /* a stretched dim next to a real one must stay apart */
            (st[0][d] == 0) == (bc->stride[0][m - 1] == 0) &&
            (st[1][d] == 0) == (bc->stride[1][m - 1] == 0)) {
            bc->dim[m - 1] *= dim[d];
            bc->stride[0][m - 1] = st[0][d];
            bc->stride[1][m - 1] = st[1][d];
            continue;
        }
        bc->dim[m] = dim[d];
        bc->stride[0][m] = st[0][d];
        bc->stride[1][m] = st[1][d];
        bc->ndim++;
    }
    if (bc->ndim == 0) {
        bc->ndim = 1;
        bc->dim[0] = 1;
        bc->stride[0][0] = bc->stride[1][0] = 0;
    }
}

void tg_bcast_offsets(const tg_bcast *bc, int64_t flat, int64_t off[2])
{
    off[0] = off[1] = 0;
    for (int d = bc->ndim - 1; d >= 0; d--) {
        int64_t i = flat % bc->dim[d];
        flat /= bc->dim[d];
        off[0] += i * bc->stride[0][d];
        off[1] += i * bc->stride[1][d];
    }
}

int64_t tg_bcast_ref_offset(tg_shape out, tg_shape in, int64_t flat)
{
    int64_t off = 0, stride = 1;
    for (int d = out.ndim - 1, e = in.ndim - 1; d >= 0; d--, e--) {
        int64_t i = flat % out.dim[d];
        flat /= out.dim[d];
        if (e < 0)
            continue;
        if (in.dim[e] != 1)
            off += i * stride;
        stride *= in.dim[e];
    }
    return off;
}

/* ---- sum reduction ------------------------------------------------------------------- */

/* The input split into kept dims (which index the output, row-major) and
 * summed dims, after dropping size-1 dims and merging neighbours of the same
 * kind. in_stride are element strides into the contiguous input. */
typedef struct sum_plan {
    int nk, nr;
    int64_t kdim[TG_MAX_DIMS], kstride[TG_MAX_DIMS];
    int64_t rdim[TG_MAX_DIMS], rstride[TG_MAX_DIMS];
    int64_t n_out, n_red;
    bool inner_kept; /* innermost input dim is kept (column sums) */
    const float *in;
    float *out;
} sum_plan;

static void sum_plan_init(sum_plan *sp, tg_shape in, tg_shape keep)
{
    int64_t dim[TG_MAX_DIMS], stride[TG_MAX_DIMS];
    bool kept[TG_MAX_DIMS];
    int n = 0;
    int64_t s = 1;
    for (int d = in.ndim - 1; d >= 0; d--) {
        if (in.dim[d] != 1) {
            bool k = keep.dim[d] != 1;
            if (n > 0 && kept[n - 1] == k) { /* contiguous neighbour of the same kind */
                dim[n - 1] *= in.dim[d];
            } else {
                dim[n] = in.dim[d];
                stride[n] = s;
                kept[n] = k;
                n++;
            }
        }
        s *= in.dim[d];
    }
    /* dims were collected innermost first; store outermost first */
    sp->nk = sp->nr = 0;
    sp->n_out = sp->n_red = 1;
    for (int j = n - 1; j >= 0; j--) {
        if (kept[j]) {
            sp->kdim[sp->nk] = dim[j];
            sp->kstride[sp->nk++] = stride[j];
            sp->n_out *= dim[j];
        } else {
            sp->rdim[sp->nr] = dim[j];
            sp->rstride[sp->nr++] = stride[j];
            sp->n_red *= dim[j];
        }
    }
    sp->inner_kept = n > 0 && kept[0];
}

/* Input offset of the kept multi-index of output element o. */
static int64_t kept_offset(const sum_plan *sp, int64_t o, int upto)
{
    int64_t off = 0;
    for (int d = upto - 1; d >= 0; d--) {
        off += (o % sp->kdim[d]) * sp->kstride[d];
        o /= sp->kdim[d];
    }
    return off;
}

/* Step an odometer over the first `n` reduced dims; returns the new offset. */
static int64_t red_next(const sum_plan *sp, int n, int64_t *idx, int64_t off)
{
    for (int d = n - 1; d >= 0; d--) {
        off += sp->rstride[d];
        if (++idx[d] < sp->rdim[d])
            return off;
        off -= idx[d] * sp->rstride[d];
        idx[d] = 0;
    }
    return off;
}

static void sum_range(void *ctx, int64_t begin, int64_t end, int t)
{
    const sum_plan *sp = ctx;
    const float *in = sp->in;
    float *out = sp->out;
    if (sp->inner_kept) {
        /* Column sums: for each run of the innermost kept dim (in blocks of
         * COL_BLOCK), add every reduced slice's run into a double
         * accumulator: contiguous, vectorisable, and accurate over long
         * batches where float sums would drift. */
        enum {
            COL_BLOCK = 2048
        }; /* 16 KiB of accumulators: whole rows of a bias gradient stream in order */
        double acc[COL_BLOCK];
        int64_t K = sp->kdim[sp->nk - 1];
        for (int64_t o = begin; o < end;) {
            int64_t j = o % K, n = K - j < end - o ? K - j : end - o;
            if (n > COL_BLOCK)
                n = COL_BLOCK;
            int64_t base = kept_offset(sp, o / K, sp->nk - 1) + j;
            for (int64_t q = 0; q < n; q++)
                acc[q] = 0;
            int64_t idx[TG_MAX_DIMS] = {0}, roff = 0;
            for (int64_t r = 0; r < sp->n_red; r++) {
                const float *src = in + base + roff;
                for (int64_t q = 0; q < n; q++)
                    acc[q] += src[q];
                roff = red_next(sp, sp->nr, idx, roff);
            }
            for (int64_t q = 0; q < n; q++)
                out[o + q] = (float)acc[q];
            o += n;
        }
        return;
    }
    /* Row sums: each output is a sum of contiguous runs of the innermost
     * reduced dim, accumulated in double (four independent chains, so the
     * adds overlap) because a float sum of a long row drifts visibly. */
    int64_t R = sp->nr ? sp->rdim[sp->nr - 1] : 1;
    int64_t outer = sp->n_red / R;
    for (int64_t o = begin; o < end; o++) {
        int64_t base = kept_offset(sp, o, sp->nk);
        int64_t idx[TG_MAX_DIMS] = {0}, roff = 0;
        double acc = 0;
        for (int64_t r = 0; r < outer; r++) {
            const float *src = in + base + roff;
            double part[4] = {0, 0, 0, 0};
            int64_t q = 0;
            for (; q + 4 <= R; q += 4) {
                part[0] += src[q];
                part[1] += src[q + 1];
                part[2] += src[q + 2];
                part[3] += src[q + 3];
            }
            for (; q < R; q++)
                part[0] += src[q];
            acc += (part[0] + part[1]) + (part[2] + part[3]);
            roff = red_next(sp, sp->nr - 1, idx, roff);
        }
        out[o] = (float)acc;
    }
}

void tg_sum_f32(tg_pool *pool, tg_shape in_shape, tg_shape keep, const float *in, float *out)
{
    sum_plan sp;
    sum_plan_init(&sp, in_shape, keep);
    sp.in = in;
    sp.out = out;
    int64_t n_in = tg_shape_numel(in_shape);
    if (n_in == 0) {
        memset(out, 0, (size_t)tg_shape_numel(keep) * sizeof *out);
        return;
    }
    tg_par_for(pool, sp.n_out, n_in, sum_range, &sp);
}

void tg_sum_ref(tg_shape in_shape, tg_shape keep, const double *in, double *out)
{
    int64_t n_out = tg_shape_numel(keep), n_in = tg_shape_numel(in_shape);
    for (int64_t o = 0; o < n_out; o++)
        out[o] = 0;
    for (int64_t i = 0; i < n_in; i++) {
        int64_t rest = i, o = 0, stride = 1;
        for (int d = in_shape.ndim - 1; d >= 0; d--) {
            int64_t idx = rest % in_shape.dim[d];
            rest /= in_shape.dim[d];
            if (keep.dim[d] != 1)
                o += idx * stride;
            stride *= keep.dim[d];
        }
        out[o] += in[i];
    }
}
