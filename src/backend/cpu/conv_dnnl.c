/* backend/cpu/conv_dnnl.c - the three convolution ops through oneDNN primitives,
 * created once per node when the program is compiled (the op table's plan
 * hook) and run by the op's forward kernel (conv_dnnl_run.c; the state the
 * two share is conv_dnnl_state.h).
 *
 * Memory stays plain NCHW / OIHW (GOIHW with groups) between ops, as every
 * other op reads it. The primitive itself is created with "any" formats so
 * that oneDNN picks its fast blocked implementation (e.g. nChw16c with
 * AVX-512); where the format it wants differs from the plain one, a reorder
 * primitive (also created at compile time) converts the operand into a
 * buffer, and the output back. The primitive's scratchpad (user-managed),
 * those buffers and the reorders' scratchpad make up the node's planned
 * kernel scratch, so the memory plan stays exact and the profile shows it.
 * Keeping blocked layouts across ops (no reorders between two convs) is the
 * next step: the compiler choosing formats for the whole graph.
 *
 * Taps that only ever read padding are left out: on a small input (ResNet's
 * last stage at 32x32 images has 1x1 maps, where a 3x3 conv with padding 1
 * reads only its centre tap) the primitive is made for the live taps alone,
 * over a strided view of the full weights, with the padding reduced to
 * match; the weight gradient of the dead taps is zero. The result is the
 * same sum without the products of zeros (9x fewer FLOPs in that case).
 *
 * Which nodes use oneDNN (TG_DNNL_AUTO; TG_KERNELS=own|dnnl forces):
 *  - not where conv.c's rule picks the direct kernels (stride 1, few
 *    channels: the tutorial's 1->10 and 10->20 layers, ResNet's 64-channel
 *    3x3 layers): there they run in L1 with no layout conversion. Measured
 *    by bench/bench_dnnl_conv in one run on a loaded 2-core AVX-512 machine,
 *    1 thread, forward / data / weight GFLOP/s, own vs oneDNN: 64->64 3x3 at
 *    8x8 52.7/38.1/26.7 vs 24.9/40.8/37.1; the tutorial's 1->10 layer fell
 *    to oneDNN's gemm:jit at 13 ms per weight gradient (direct: 0.27 ms);
 *  - everywhere else (strides, 1x1, 128+ channels, groups), where the own
 *    kernels are im2col + sgemm: oneDNN was 1.1-3.9x faster on most ResNet-18
 *    shapes in that run (a few below 1x: the figures need a quiet machine);
 *  - at more than one thread per device, everywhere too when the batch
 *    splits evenly over the threads (below), and in an inference program's
 *    forward convolution at any batch (split_parts: output channels in
 *    parts, or one thread); otherwise only if OpenMP threads sleep when
 *    idle (OMP_WAIT_POLICY=passive; tg_dnnl_passive_wait says why).
 *
 * Threads. With T > 1 threads per device and a batch that T divides, the
 * primitive is made for N / T samples and one OpenMP thread, and runs T
 * times, once per part of the batch, as a loop over the device's own pool
 * (each part with its own scratch: primitive scratchpad, reorder buffers).
 * The weights are reordered once into part 0's buffer that every part
 * reads; the weight gradient's parts each sum into their own buffer, added
 * into part 0's and reordered out afterwards. Those two reorders run in
 * slices along the first dimension, one per thread, where the blocked
 * layout allows the cut (ResNet-50's late weights are MiBs). So
 * no OpenMP team exists: nothing spins after a primitive (no need for
 * OMP_WAIT_POLICY=passive), devices start no threads beyond their pools,
 * and a part not yet started is claimed by whichever thread is free.
 * Measured on the shared 2-core AVX-512 machine at 2 threads against the
 * OpenMP team it replaces (best runs of several, alternating; bench_resnet
 * and `tilegraph train`): ResNet-18 32x32 batch 64 training 720-737
 * samples/s (team: 654-676), inference 2,610-2,753 (2,173-2,371);
 * ResNet-50 64x64 batch 32 training 74 (71), inference 276-277 (223-261).
 * Slicing the weights' reorders over the threads took ResNet-50 training
 * from 54.5-64.8 to 62.6-74.1 in one alternating run. Under a busy loop on
 * one core, --threads 2 trained ResNet-18 at 353-378 against 390-399 with
 * --threads 1 (team: 349-366 against 390): the other ops' loops still wait
 * for the slower thread; the default thread count counts the busy core and
 * is 1 there. Finer parts (4 for 2 threads, claimed one by one) were no
 * faster, with or without the busy loop. docs/ops.md has bench_resnet's
 * figures against PyTorch.
 */
#include "ops/conv.h"
#include "backend/cpu/conv_dnnl_state.h"

#include "core/alloc.h"
#include "core/process.h"
#include "ops/unary.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The taps [r0, r1) x [s0, s1) that read the input for some output, and
 * the padding of the cropped convolution (before, after; may differ). */
typedef struct live_taps {
    int64_t r0, r1, s0, s1;
    int64_t pad_l[2], pad_r[2];
} live_taps;

/* Whether tap t along one axis reads the input for some output position. */
static bool tap_live(int64_t t, int64_t in, int64_t out, int64_t stride, int64_t pad, int64_t dil)
{
    for (int64_t o = 0; o < out; o++) {
        int64_t i = o * stride - pad + t * dil;
        if (i >= 0 && i < in)
            return true;
    }
    return false;
}

/* The live range of one axis and the padding that keeps the output size:
 * false if nothing is cut or the cut would need negative padding. */
static bool crop_axis(int64_t k, int64_t in, int64_t out, int64_t stride, int64_t pad, int64_t dil,
                      int64_t *t0, int64_t *t1, int64_t *pl, int64_t *pr)
{
    *t0 = 0, *t1 = k;
    while (*t0 < k && !tap_live(*t0, in, out, stride, pad, dil))
        (*t0)++;
    while (*t1 > *t0 && !tap_live(*t1 - 1, in, out, stride, pad, dil))
        (*t1)--;
    *pl = pad - *t0 * dil;
    *pr = (out - 1) * stride + (*t1 - *t0 - 1) * dil + 1 - in - *pl;
    return *t1 > *t0 && *pl >= 0 && *pr >= 0;
}

static bool live_taps_of(const tg_conv_geom *g, live_taps *lt)
{
    bool rows = crop_axis(g->R, g->H, g->OH, g->sh, g->ph, g->dh, &lt->r0, &lt->r1, &lt->pad_l[0],
                          &lt->pad_r[0]);
    bool cols = crop_axis(g->S, g->W, g->OW, g->sw, g->pw, g->dw, &lt->s0, &lt->s1, &lt->pad_l[1],
                          &lt->pad_r[1]);
    if (!rows)
        lt->r0 = 0, lt->r1 = g->R, lt->pad_l[0] = lt->pad_r[0] = g->ph;
    if (!cols)
        lt->s0 = 0, lt->s1 = g->S, lt->pad_l[1] = lt->pad_r[1] = g->pw;
    return (rows || cols) && lt->pad_r[0] >= 0 && lt->pad_r[1] >= 0 &&
           (lt->r1 - lt->r0 < g->R || lt->s1 - lt->s0 < g->S);
}

/* oneDNN's dims of the conv's tensors. */
static void conv_dims(const tg_conv_geom *g, dnnl_dims_t x, dnnl_dims_t w, int *w_nd, dnnl_dims_t y)
{
    x[0] = g->N, x[1] = g->C, x[2] = g->H, x[3] = g->W;
    y[0] = g->N, y[1] = g->K, y[2] = g->OH, y[3] = g->OW;
    if (g->G > 1) {
        *w_nd = 5;
        w[0] = g->G, w[1] = g->K / g->G, w[2] = g->C / g->G, w[3] = g->R, w[4] = g->S;
    } else {
        *w_nd = 4;
        w[0] = g->K, w[1] = g->C, w[2] = g->R, w[3] = g->S;
    }
}

typedef struct conv_mds {
    dnnl_memory_desc_t x, w, b, y; /* plain */
    dnnl_memory_desc_t ax, aw, ay; /* format "any": oneDNN's choice, in the op's types */
    dnnl_memory_desc_t fx, fw, fy; /* the same for the forward hint of a backward op */
    dnnl_dims_t strides, dilates, pad_l, pad_r;
    bool winograd; /* the forward as oneDNN's Winograd convolution (winograd_fits) */
    bool nhwc;     /* x and y as nhwc inside, for oneDNN's brgemm kernel (brgemm_fits) */
} conv_mds;

/* Format "any" descriptors of x, w, y: the multiplied operands in `mul`,
 * the op's result in f32 (y for the forward, x for the data gradient, w for
 * the weight gradient); `hint` has all three in `mul`. */
static dnnl_status_t any_mds(tg_op op, bool hint, dnnl_data_type_t mul, const dnnl_dims_t x,
                             const dnnl_dims_t w, int w_nd, const dnnl_dims_t y,
                             dnnl_memory_desc_t out[3])
{
    dnnl_data_type_t dt[3] = {mul, mul, mul};
    if (!hint)
        dt[op == TG_OP_CONV2D ? 2 : op == TG_OP_CONV2D_BWD_DATA ? 0 : 1] = dnnl_f32;
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&out[0], 4, x, dt[0], dnnl_format_tag_any);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_tag(&out[1], w_nd, w, dt[1], dnnl_format_tag_any);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_tag(&out[2], 4, y, dt[2], dnnl_format_tag_any);
    return s;
}

/* The weights' plain descriptor: over the live taps only, with the
 * strides of the full [K, C/G, R, S] array, when the kernel is cropped. */
static dnnl_status_t weight_md(const tg_conv_geom *g, const dnnl_dims_t w, int w_nd, bool cropped,
                               dnnl_memory_desc_t *md)
{
    if (!cropped)
        return tg_dnnl_plain_md(md, w_nd, w, dnnl_f32);
    dnnl_dims_t st;
    st[w_nd - 1] = 1;
    st[w_nd - 2] = g->S;
    st[w_nd - 3] = g->R * g->S;
    st[w_nd - 4] = (g->C / g->G) * g->R * g->S;
    if (w_nd == 5)
        st[0] = (g->K / g->G) * st[1];
    return dnnl_memory_desc_init_by_strides(md, w_nd, w, dnnl_f32, st);
}

/* An activation's descriptor as the graph stores it: NCHW, or nChw16c
 * where the compiler keeps it blocked (ops/op.h, TG_CHANNEL_BLOCK). */
static dnnl_status_t activation_md(dnnl_memory_desc_t *md, const dnnl_dims_t dims,
                                   dnnl_data_type_t dt, bool blocked)
{
    return blocked ? dnnl_memory_desc_init_by_tag(md, 4, dims, dt, dnnl_nChw16c)
                   : tg_dnnl_plain_md(md, 4, dims, dt);
}

static tg_status make_mds(const tg_conv_geom *full, const live_taps *lt, bool cropped, tg_op op,
                          dnnl_data_type_t mul, const bool blocked_xy[2], conv_mds *m)
{
    tg_conv_geom g = *full;
    g.R = lt->r1 - lt->r0, g.S = lt->s1 - lt->s0;
    dnnl_dims_t x, w, y, b = {g.K};
    int w_nd;
    conv_dims(&g, x, w, &w_nd, y);
    dnnl_status_t s = activation_md(&m->x, x, dnnl_f32, blocked_xy[0]);
    if (s == dnnl_success)
        s = weight_md(full, w, w_nd, cropped, &m->w);
    if (s == dnnl_success)
        s = tg_dnnl_plain_md(&m->b, 1, b, dnnl_f32);
    if (s == dnnl_success)
        s = activation_md(&m->y, y, dnnl_f32, blocked_xy[1]);
    dnnl_memory_desc_t a[3], f[3];
    if (s == dnnl_success)
        s = any_mds(op, false, mul, x, w, w_nd, y, a);
    if (s == dnnl_success)
        s = any_mds(op, true, mul, x, w, w_nd, y, f);
    m->ax = a[0], m->aw = a[1], m->ay = a[2];
    m->fx = f[0], m->fw = f[1], m->fy = f[2];
    m->strides[0] = g.sh, m->strides[1] = g.sw;
    m->dilates[0] = g.dh - 1, m->dilates[1] = g.dw - 1; /* oneDNN counts the gaps */
    for (int d = 0; d < 2; d++)
        m->pad_l[d] = lt->pad_l[d], m->pad_r[d] = lt->pad_r[d];
    return tg_dnnl_check(s, "conv2d memory descriptors");
}

static dnnl_status_t fwd_pd(const conv_mds *m, bool hint, bool bias,
                            const_dnnl_primitive_attr_t attr, dnnl_engine_t eng,
                            dnnl_primitive_desc_t *pd)
{
    dnnl_convolution_desc_t d;
    /* forward_training also with a fused ReLU post-op: forward_inference
     * picks oneDNN's brgconv kernels, whose scratchpad took ResNet-50's at
     * batch 32 from 9 to 147 MiB. The Winograd kernel keeps its weights
     * transformed only for forward_inference. */
    bool wino = m->winograd && !hint;
    dnnl_status_t s = dnnl_dilated_convolution_forward_desc_init(
        &d, wino || (m->nhwc && !hint) ? dnnl_forward_inference : dnnl_forward_training,
        wino ? dnnl_convolution_winograd : dnnl_convolution_direct, hint ? &m->fx : &m->ax,
        hint ? &m->fw : &m->aw, bias ? &m->b : NULL, hint ? &m->fy : &m->ay, m->strides, m->dilates,
        m->pad_l, m->pad_r);
    return s == dnnl_success ? dnnl_primitive_desc_create(pd, &d, attr, eng, NULL) : s;
}

/* The primitive descriptor of node's kind; the backward ones need the
 * forward's as a hint. */
static dnnl_status_t make_pd(tg_op op, const conv_mds *m, bool bias,
                             const_dnnl_primitive_attr_t attr, dnnl_engine_t eng,
                             dnnl_primitive_desc_t *pd)
{
    if (op == TG_OP_CONV2D)
        return fwd_pd(m, false, bias, attr, eng, pd);
    dnnl_primitive_desc_t hint;
    dnnl_status_t s = fwd_pd(m, true, false, NULL, eng, &hint);
    if (s != dnnl_success)
        return s;
    dnnl_convolution_desc_t d;
    if (op == TG_OP_CONV2D_BWD_DATA)
        s = dnnl_dilated_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &m->ax,
                                                             &m->aw, &m->ay, m->strides, m->dilates,
                                                             m->pad_l, m->pad_r);
    else
        s = dnnl_dilated_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct, &m->ax,
                                                                &m->aw, NULL, &m->ay, m->strides,
                                                                m->dilates, m->pad_l, m->pad_r);
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(pd, &d, attr, eng, hint);
    dnnl_primitive_desc_destroy(hint);
    return s;
}

/* Which plain descriptor and oneDNN argument each of in[0], in[1], (in[2])
 * and out is, in that order. */
static void roles_of(tg_op op, bool bias, const conv_mds *m, conv_state *st)
{
    if (op == TG_OP_CONV2D) {
        st->user[0] = m->x, st->arg[0] = DNNL_ARG_SRC;
        st->user[1] = m->w, st->arg[1] = DNNL_ARG_WEIGHTS;
        if (bias) {
            st->user[2] = m->b, st->arg[2] = DNNL_ARG_BIAS;
            st->user[3] = m->y, st->arg[3] = DNNL_ARG_DST;
            st->n_args = 4;
        } else {
            st->user[2] = m->y, st->arg[2] = DNNL_ARG_DST;
            st->n_args = 3;
        }
        return;
    }
    st->user[0] = m->y, st->arg[0] = DNNL_ARG_DIFF_DST;
    st->n_args = 3;
    if (op == TG_OP_CONV2D_BWD_DATA) {
        st->user[1] = m->w, st->arg[1] = DNNL_ARG_WEIGHTS;
        st->user[2] = m->x, st->arg[2] = DNNL_ARG_DIFF_SRC;
    } else {
        st->user[1] = m->x, st->arg[1] = DNNL_ARG_SRC;
        st->user[2] = m->w, st->arg[2] = DNNL_ARG_DIFF_WEIGHTS;
    }
}

/* Elements from md's first element to its last: what a conversion covers.
 * A cropped weight's view skips the dead taps between its rows, and its
 * descriptor's size counts from the whole tensor's start. */
static size_t span_of(const dnnl_memory_desc_t *md)
{
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    if (b->inner_nblks > 0)
        return dnnl_memory_desc_get_size(md) / dnnl_data_type_size(md->data_type);
    size_t last = 0;
    for (int d = 0; d < md->ndims; d++)
        last += (size_t)(md->dims[d] - 1) * (size_t)b->strides[d];
    return last + 1;
}

/* Whether role k is converted between bf16 storage and the primitive's
 * f32, and then its f32 descriptor and span. */
static void plan_conversion(conv_state *st, int k)
{
    st->convert[k] = st->user[k].data_type == dnnl_bf16 && st->inner[k].data_type == dnnl_f32;
    if (!st->convert[k])
        return;
    st->user32[k] = st->user[k];
    st->user32[k].data_type = dnnl_f32;
    st->span[k] = span_of(&st->user[k]);
}

/* A reorder between the plain and the primitive's layout of role k (into
 * the primitive for inputs, out of it for the output), its scratchpad
 * user-managed too. */
static dnnl_status_t make_reorder(conv_state *st, int k, dnnl_engine_t eng,
                                  const_dnnl_primitive_attr_t attr)
{
    bool out = k == st->n_args - 1;
    const dnnl_memory_desc_t *from = out ? &st->inner[k] : tg_conv_reorder_user(st, k);
    const dnnl_memory_desc_t *to = out ? tg_conv_reorder_user(st, k) : &st->inner[k];
    return tg_dnnl_reorder_create(from, to, eng, attr, &st->reorder[k], &st->reorder_scratch_md[k]);
}

/* Role k's reorder cut into st->parts slices along dimension 0 (weights:
 * output channels, or groups), each with the same direction as the whole;
 * false (nothing kept) where oneDNN cannot describe a slice (the cut is
 * not a multiple of the layout's block). *scratch: the largest slice's. */
static bool make_slices(conv_state *st, int k, dnnl_engine_t eng, const_dnnl_primitive_attr_t attr,
                        size_t *scratch)
{
    const dnnl_memory_desc_t *u = tg_conv_reorder_user(st, k);
    if (u->dims[0] % st->parts != 0)
        return false;
    reorder_slice *sl = tg_calloc((size_t)st->parts, sizeof *sl);
    if (!sl)
        return false;
    bool out = k == st->n_args - 1, ok = true;
    for (int p = 0; p < st->parts && ok; p++) {
        dnnl_dims_t dims, offs = {0};
        memcpy(dims, u->dims, sizeof dims);
        dims[0] /= st->parts;
        offs[0] = dims[0] * p;
        ok = dnnl_memory_desc_init_submemory(&sl[p].user, u, dims, offs) == dnnl_success &&
             dnnl_memory_desc_init_submemory(&sl[p].inner, &st->inner[k], dims, offs) ==
                 dnnl_success;
        ok = ok && tg_dnnl_reorder_create(out ? &sl[p].inner : &sl[p].user,
                                          out ? &sl[p].user : &sl[p].inner, eng, attr, &sl[p].prim,
                                          &sl[p].scratch_md) == dnnl_success;
        size_t b = ok ? dnnl_memory_desc_get_size(&sl[p].scratch_md) : 0;
        *scratch = b > *scratch ? b : *scratch;
    }
    if (ok)
        st->slices[k] = sl;
    for (int p = 0; !ok && p < st->parts; p++)
        if (sl[p].prim)
            dnnl_primitive_destroy(sl[p].prim);
    if (!ok)
        tg_free(sl);
    return ok;
}

/* The forward's descriptor writing a bf16-stored output itself where one
 * of oneDNN's JIT kernels can (its result rounded once, as the conversion
 * after it rounded): an f32 result converted after was an extra pass over
 * the output, mobilenet_v3_large's f32 stem under bf16 storage took 4.8
 * ms per run against 3.8 in f32 (batch 32, 1 thread, under load).
 * Elsewhere (and for the other ops) the result in f32, m->ay kept so. */
static dnnl_status_t result_pd(tg_op op, const conv_state *st, conv_mds *m, bool bias,
                               const_dnnl_primitive_attr_t attr, dnnl_engine_t eng,
                               dnnl_primitive_desc_t *pd)
{
    if (op == TG_OP_CONV2D && st->user[st->n_args - 1].data_type == dnnl_bf16) {
        m->ay.data_type = dnnl_bf16;
        if (make_pd(op, m, bias, attr, eng, pd) == dnnl_success) {
            const char *impl = "";
            dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &impl);
            if (strncmp(impl, "jit", 3) == 0 || strncmp(impl, "brg", 3) == 0)
                return dnnl_success;
            dnnl_primitive_desc_destroy(*pd);
            *pd = NULL;
        }
        m->ay.data_type = dnnl_f32;
    }
    return make_pd(op, m, bias, attr, eng, pd);
}

/* The layouts the primitive chose, the reorders to them, and the scratch
 * layout: primitive scratchpad, inner copies, one shared reorder scratchpad. */
static dnnl_status_t plan_layouts(conv_state *st, const_dnnl_primitive_desc_t pd, dnnl_engine_t eng,
                                  const_dnnl_primitive_attr_t attr, size_t *bytes)
{
    st->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t off = tg_conv_align(dnnl_memory_desc_get_size(&st->scratch_md)), reorder_scratch = 0;
    dnnl_status_t s = dnnl_success;
    for (int k = 0; k < st->n_args && s == dnnl_success; k++) {
        st->inner[k] = *dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, st->arg[k]);
        plan_conversion(st, k);
        bool summed = st->sum_out && k == st->n_args - 1; /* each part needs its own sums */
        if (!summed && dnnl_memory_desc_equal(&st->inner[k], tg_conv_reorder_user(st, k))) {
            if (st->convert[k]) { /* the f32 copy is what the primitive takes */
                st->buf_off[k] = off;
                off += tg_conv_align(st->span[k] * sizeof(float));
            }
            continue;
        }
        if (st->convert[k]) {
            st->copy_off[k] = off;
            off += tg_conv_align(st->span[k] * sizeof(float));
        }
        s = make_reorder(st, k, eng, attr);
        st->buf_off[k] = off;
        off += tg_conv_align(dnnl_memory_desc_get_size(&st->inner[k]));
        size_t rs = dnnl_memory_desc_get_size(&st->reorder_scratch_md[k]);
        reorder_scratch = rs > reorder_scratch ? rs : reorder_scratch;
        bool shared = st->parts > 1 && !st->split_k &&
                      (summed || (k < st->n_args - 1 && k == st->weight_role));
        if (s == dnnl_success && shared)
            make_slices(st, k, eng, attr, &reorder_scratch);
    }
    st->reorder_scratch_off = off;
    st->part_bytes = tg_conv_align(off + reorder_scratch);
    *bytes = st->part_bytes * (size_t)(st->regions ? st->regions : st->parts);
    return s;
}

/* The operands' plain descriptors in their stored types when every one is
 * f32 or bf16 (oneDNN reads and writes both; its reorders convert): the
 * node then reads its storage as it is (tg_kernel_plan.native_storage). */
static dnnl_status_t storage_types(const tg_tensor *node, const tg_plan_opts *o, conv_state *st,
                                   bool *native)
{
    *native = false;
    for (int k = 0; k < st->n_args; k++) {
        tg_dtype t = k == st->n_args - 1 ? o->out_storage : o->in_storage[k];
        if (t != TG_F32 && t != TG_BF16)
            return dnnl_success;
    }
    (void)node;
    for (int k = 0; k < st->n_args; k++) {
        tg_dtype t = k == st->n_args - 1 ? o->out_storage : o->in_storage[k];
        st->elem[k] = t == TG_BF16 ? 2 : 4;
        if (t == TG_F32)
            continue;
        dnnl_memory_desc_t md = st->user[k];
        dnnl_status_t s =
            st->blocked[k]
                ? activation_md(&st->user[k], md.dims, dnnl_bf16, true)
                : dnnl_memory_desc_init_by_strides(&st->user[k], md.ndims, md.dims, dnnl_bf16,
                                                   md.format_desc.blocking.strides);
        if (s != dnnl_success)
            return s;
    }
    *native = true;
    return dnnl_success;
}

/* Bytes from one part's samples of each batch role (x, y and their
 * gradients, plain NCHW: a part's samples are contiguous) to the next; with
 * parts of the output channels, from one part's weights, bias and output
 * to the next (the input is shared). */
static void batch_steps(conv_state *st)
{
    if (st->split_k) {
        const dnnl_memory_desc_t *w = &st->user[st->weight_role];
        for (int k = 0; k < st->n_args; k++)
            st->batch_step[k] = k == 0 ? 0 : dnnl_memory_desc_get_size(&st->user[k]);
        /* the weights' view has the full weights' strides (weight_md) */
        st->batch_step[st->weight_role] =
            (size_t)w->dims[0] * (size_t)w->format_desc.blocking.strides[0] * st->elem[1];
        return;
    }
    for (int k = 0; k < st->n_args; k++)
        st->batch_step[k] = st->parts > 1 && k != st->weight_role && st->user[k].ndims == 4
                                ? dnnl_memory_desc_get_size(&st->user[k])
                                : 0;
}

static void name_kernel(const_dnnl_primitive_desc_t pd, const conv_state *st, const live_taps *lt,
                        dnnl_data_type_t mul, tg_kernel_plan *plan)
{
    const char *impl = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    char taps[48] = "", parts[32] = "";
    if (st->cropped)
        snprintf(taps, sizeof taps, ", %lldx%lld live taps", (long long)(lt->r1 - lt->r0),
                 (long long)(lt->s1 - lt->s0));
    if (st->parts > 1)
        snprintf(parts, sizeof parts, ", %s in %d parts", st->split_k ? "out channels" : "batch",
                 st->parts);
    if (st->of_parts > 1)
        snprintf(parts, sizeof parts, ", channels in %d parts", st->of_parts);
    bool blocked = false;
    for (int k = 0; k < st->n_args; k++)
        blocked |= st->blocked[k];
    snprintf(plan->kernel, sizeof plan->kernel, "oneDNN %s%s%s%s%s", impl,
             mul == dnnl_bf16 ? " (bf16)" : "", taps, parts, blocked ? ", nChw16c" : "");
}

/* Whether x and y (or their gradients) are blocked, from the operands:
 * forward (x, w[, b]) -> y; data gradient (dy, w) -> dx; weight gradient
 * (dy, x) -> dw. */
static void blocked_xy(tg_op op, const tg_plan_opts *o, bool xy[2])
{
    xy[1] = op == TG_OP_CONV2D ? o->out_blocked : o->in_blocked[0];
    xy[0] = op == TG_OP_CONV2D            ? o->in_blocked[0]
            : op == TG_OP_CONV2D_BWD_DATA ? o->out_blocked
                                          : o->in_blocked[1];
}

/* An inference program's weights change only when the host writes them:
 * its forward convolutions reorder (or convert) them once per write into a
 * cache instead of at every run. ResNet-50's weights are 25.5M floats, read
 * and written by their reorders at every run of batch 1 before. */
static tg_status keep_weights(const tg_tensor *node, const tg_plan_opts *o, conv_state *st,
                              bool finite_word, tg_kernel_plan *plan)
{
    int k = st->weight_role;
    bool fold = st->fold != NULL; /* the folded weights live only here */
    if (!fold && (!o->inference || node->op != TG_OP_CONV2D ||
                  !(st->reorder[k] || st->convert[k]) || !tg_process_keep_weights()))
        return TG_OK;
    /* with parts of the output channels, each part's weights one after
     * another, kept_step bytes apart */
    int copies = st->split_k ? st->parts : 1;
    size_t bytes = st->reorder[k]   ? dnnl_memory_desc_get_size(&st->inner[k])
                   : st->convert[k] ? st->span[k] * sizeof(float)
                                    : st->weight_bytes / (size_t)copies;
    st->kept_step = st->split_k ? bytes : 0;
    bytes *= (size_t)copies;
    if (fold && !st->reorder[k])
        st->kept_offset = st->weight_offset * st->elem[k];
    st->kept_bias_off = tg_conv_align(bytes);
    if (fold)
        bytes = st->kept_bias_off + (size_t)st->k_out * sizeof(float);
    if (finite_word) { /* the Winograd state's (conv_state.finite_off) */
        st->finite_off = tg_conv_align(bytes);
        bytes = st->finite_off + sizeof(int);
    }
    if (!(st->cache = tg_weight_cache_create(bytes)))
        return tg_error(TG_ERR_NOMEM, "conv2d: out of memory for the weight cache");
    plan->kept_bytes = tg_conv_align(bytes);
    size_t n = strlen(plan->kernel);
    snprintf(plan->kernel + n, sizeof plan->kernel - n, "%s, weights kept",
             fold ? ", batch norm folded" : "");
    return TG_OK;
}

/* What a fused convolution computes after it (compile/fuse.c) as oneDNN's
 * post-ops: a residual added (a binary post-op reading it where it lies,
 * laid out as the output, so no copy of it into the output first, as the
 * sum post-op would need), then the activation as eltwise post-ops: ReLU;
 * hard swish (x relu6(x + 3) / 6, oneDNN 2.6 has no parameters for it),
 * also where the graph writes it as a Mul of x and its hard sigmoid; hard
 * sigmoid as alpha x + beta clipped to [0, 1]. `fast`: the ReLU as
 * oneDNN's max with 0 (fast_relu below), else as ELU with alpha 0. */
static dnnl_status_t post_ops(conv_state *st, dnnl_primitive_attr_t attr, bool fast)
{
    dnnl_post_ops_t ops;
    dnnl_status_t s = dnnl_post_ops_create(&ops);
    if (s != dnnl_success)
        return s;
    const tg_tensor *act = st->post_act;
    if (st->post_add) {
        st->residual_po = dnnl_post_ops_len(ops);
        s = dnnl_post_ops_append_binary(ops, dnnl_binary_add, &st->user[st->n_args - 1]);
    }
    if (s != dnnl_success || !act) {
    } else if (act->op == TG_OP_RELU) {
        /* ReLU as ELU with alpha 0: x > 0 ? x : 0 * (exp(x) - 1), which is
         * the project's ReLU (ops/unary.c) on every input: a NaN passes on
         * (to be reported; PyTorch's ReLU passes it too), -inf gives 0.
         * oneDNN's ReLU post-op is a max with 0 and gives 0 for NaN; with
         * a tiny alpha, applied twice, it keeps NaN but gives -inf for
         * -inf; clip and a binary max lose NaN like the ReLU. ELU's exp
         * costs about 5% of ResNet-50's run (docs/performance.md), hence
         * the max first where it gives the same (fast_relu). */
        s = dnnl_post_ops_append_eltwise(ops, 1.0f, fast ? dnnl_eltwise_relu : dnnl_eltwise_elu,
                                         0.0f, 0.0f);
    } else if (tg_is_hard_swish(act) || act->op == TG_OP_MUL) {
        s = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_hardswish, 0.0f, 0.0f);
    } else {
        s = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_linear, tg_act_a(act),
                                         tg_act_b(act));
        if (s == dnnl_success)
            s = dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_clip, 0.0f, 1.0f);
    }
    if (s == dnnl_success)
        s = dnnl_primitive_attr_set_post_ops(attr, ops);
    dnnl_post_ops_destroy(ops);
    return s;
}

/* The fused ReLU with oneDNN's max post-op, which the run (conv_dnnl_run.c)
 * tries first: its output equals the ELU one's wherever the value before
 * the ReLU is no NaN, and a max that meets a NaN raises the x86 invalid
 * flag (MAXPS signals it for every NaN operand; an inf - inf or 0 * inf in
 * the sums raises it too), so a run whose thread sees no invalid flag is
 * the exact one, and one that sees it runs the ELU primitive again over
 * the same operands. Only for a one-thread primitive, whose flags are the
 * calling thread's (oneDNN runs a team of one there), and where both
 * primitives take the same layouts and scratchpad, so they share the kept
 * weights; else st->fast stays NULL and the ELU primitive runs alone. */
static dnnl_status_t fast_relu(conv_state *st, tg_op op, const conv_mds *m, bool bias,
                               const_dnnl_primitive_attr_t attr, dnnl_engine_t eng,
                               const_dnnl_primitive_desc_t exact)
{
    const char *impl = "";
    dnnl_primitive_desc_query(exact, dnnl_query_impl_info_str, 0, &impl);
    /* oneDNN's JIT kernels (jit, jit_1x1, brgconv, jit_wino) compute the
     * post-ops with its eltwise injector, whose ReLU is a plain vmaxps (the
     * flag not suppressed): those, checked by tests/compile/test_fuse.c and
     * (brgconv at stride 2; the Winograd kernel runs its max alone,
     * add_winograd) tests/backend/cpu/test_conv_dnnl.c */
    bool injector = strncmp(impl, "jit", 3) == 0 || strncmp(impl, "brg", 3) == 0;
    if (!st->post_act || st->post_act->op != TG_OP_RELU || st->n_threads != 1 || !injector)
        return dnnl_success;
    dnnl_primitive_attr_t fast_attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_primitive_attr_clone(&fast_attr, attr);
    if (s == dnnl_success)
        s = post_ops(st, fast_attr, true);
    if (s == dnnl_success)
        s = make_pd(op, m, bias, fast_attr, eng, &pd);
    bool same = s == dnnl_success;
    dnnl_query_t q[] = {dnnl_query_exec_arg_md, dnnl_query_scratchpad_md};
    for (int k = 0; same && k < st->n_args; k++)
        same = dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, q[0], st->arg[k]),
                                      dnnl_primitive_desc_query_md(exact, q[0], st->arg[k]));
    same = same && dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, q[1], 0),
                                          dnnl_primitive_desc_query_md(exact, q[1], 0));
    if (same)
        s = dnnl_primitive_create(&st->fast, pd);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (fast_attr)
        dnnl_primitive_attr_destroy(fast_attr);
    /* no fast primitive is no error: the exact one runs */
    if (s != dnnl_success)
        st->fast = NULL;
    return dnnl_success;
}

/* The post-op's name for the kernel's, after keep_weights's. */
static void name_post_op(const conv_state *st, tg_kernel_plan *plan)
{
    size_t n = strlen(plan->kernel);
    if (st->post_add)
        snprintf(plan->kernel + n, sizeof plan->kernel - n, ", residual add");
    if (!st->post_act)
        return;
    const char *what = st->post_act->op == TG_OP_RELU ? st->fast ? "ReLU (max, ELU on NaN)" : "ReLU"
                       : tg_is_hard_swish(st->post_act) || st->post_act->op == TG_OP_MUL
                           ? "hard swish"
                           : "hard sigmoid";
    n = strlen(plan->kernel);
    snprintf(plan->kernel + n, sizeof plan->kernel - n, ", %s post-op", what);
}

/* How the primitive shares the device's threads. A batch that the threads
 * divide: one part of it each. Otherwise (only in an inference program,
 * own_reason): one sample of an ungrouped convolution whose output
 * channels the threads divide (in whole blocks where the output is
 * blocked), whose weights are not cropped: one part of the output channels
 * each, every part reading the whole input; for one sample a part's
 * output channels are contiguous in NCHW and in nChw16c alike. Anything
 * else runs on one thread: an OpenMP team of the device's threads would
 * spin beside the pool's (at batch 1 on 2 threads the own im2col kernels
 * this replaces took ResNet-50 from 41 ms to 94-167 ms a run). */
static void split_parts(const tg_tensor *node, const tg_conv_geom *g, const tg_plan_opts *o,
                        dnnl_data_type_t mul, bool y_blocked, conv_state *st)
{
    int t = o->n_threads;
    st->split_k = false;
    st->parts = t > 1 && g->N % t == 0 ? t : 1;
    st->n_threads = st->parts > 1 ? 1 : t;
    /* an f32 result stored in bf16 (the stem, result_pd) is converted after
     * the primitive: one sample a part, each thread's parts in one scratch
     * region, so that the f32 copy is converted while in cache */
    if (o->inference && node->op == TG_OP_CONV2D && mul == dnnl_f32 && o->out_storage == TG_BF16 &&
        (t <= 1 || g->N % t == 0)) {
        st->parts = (int)g->N;
        st->regions = t > 1 ? t : 1;
        st->n_threads = 1;
        return;
    }
    if (t <= 1 || g->N % t == 0 || !o->inference || node->op != TG_OP_CONV2D)
        return;
    int64_t unit = y_blocked ? (int64_t)TG_CHANNEL_BLOCK * t : t;
    st->split_k = g->N == 1 && g->G == 1 && g->K % unit == 0 && !st->cropped;
    st->parts = st->split_k ? t : 1;
    st->n_threads = 1;
}

/* Whether node runs as oneDNN's Winograd convolution first, where
 * tg_process_winograd asks (on by default): oneDNN 2.6 has it for f32
 * forward inference, 3x3 and stride 1, on AVX-512 (jit_wino_4x3:
 * F(4x4, 3x3) on 6x6 tiles). Its post-ops are ReLU and sum only: no
 * residual add as a binary post-op, no other activation, and no ELU: its
 * ReLU is the max, exact where no NaN can arise (add_winograd). Non-finite
 * values spread over its tiles (an inf - inf in its transforms gives NaN),
 * so the direct state stays beside it for those. On ResNet-50's 13 such
 * convolutions at batch 32, one thread, it took 199 ms against the direct
 * kernel's 382, its error against float64 1.2-2.8e-6 of the largest
 * output against 2.2-2.7e-7 (docs/performance.md, "ResNet-50 at batch 32").
 * Not where memoryPerDevice is set (tg_plan_opts.memory_limited): its
 * transformed weights are 4x the direct ones and both are kept, and a
 * phased ResNet-50's evaluation on a 90 MB device no longer fitted. */
static bool winograd_fits(const tg_tensor *node, const tg_conv_geom *g, const tg_plan_opts *o,
                          dnnl_data_type_t mul, const conv_state *st)
{
    return tg_process_winograd() && o->inference && !o->memory_limited &&
           node->op == TG_OP_CONV2D && mul == dnnl_f32 && g->G == 1 && g->R == 3 && g->S == 3 &&
           g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && !st->cropped && !st->post_add &&
           (!st->post_act || st->post_act->op == TG_OP_RELU);
}

/* Whether an inference program's forward 3x3 stride-2 f32 convolution,
 * its input and output blocked, runs oneDNN's brgemm kernel (brgconv),
 * which takes nhwc only: x reordered to nhwc before it, y back to nChw16c
 * after it (plan_layouts makes both reorders). ResNet-50's three at batch
 * 32, one thread, CPU time: 142.5 ms on nChw16c (jit) against 98.6 for
 * brgconv and 8.4 for the reorders; at batch 8 24.4 against 21.9 with the
 * reorders; at batch 1 3.0 against 2.4. Not with parts of the output
 * channels (a part of a blocked tensor), nor with a fused residual add
 * (read in the output's stored layout), nor cropped taps. */
static bool brgemm_fits(const tg_tensor *node, const tg_conv_geom *g, const tg_plan_opts *o,
                        dnnl_data_type_t mul, const conv_state *st)
{
    return o->inference && node->op == TG_OP_CONV2D && mul == dnnl_f32 && g->G == 1 && g->R == 3 &&
           g->S == 3 && g->sh == 2 && g->sw == 2 && g->dh == 1 && g->dw == 1 && !st->cropped &&
           !st->post_add && !st->split_k && st->of_parts <= 1 && o->in_blocked[0] && o->out_blocked;
}

/* x's and y's descriptors inside the primitive: nhwc, or oneDNN's choice. */
static dnnl_status_t inner_xy(conv_mds *m, bool nhwc)
{
    dnnl_format_tag_t tag = nhwc ? dnnl_nhwc : dnnl_format_tag_any;
    m->nhwc = nhwc;
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&m->ax, 4, m->ax.dims, dnnl_f32, tag);
    return s == dnnl_success ? dnnl_memory_desc_init_by_tag(&m->ay, 4, m->ay.dims, dnnl_f32, tag)
                             : s;
}

static bool impl_is(const_dnnl_primitive_desc_t pd, const char *prefix)
{
    const char *impl = "";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return strncmp(impl, prefix, strlen(prefix)) == 0;
}

/* The convolution's primitive descriptor, its post-ops set in attr;
 * where oneDNN has no Winograd kernel for m (no AVX-512), the direct one;
 * where nhwc gets no brgemm kernel, oneDNN's choice of layouts. */
static dnnl_status_t conv_pd(tg_op op, conv_state *st, conv_mds *m, bool bias,
                             dnnl_primitive_attr_t attr, dnnl_engine_t eng,
                             dnnl_primitive_desc_t *pd)
{
    dnnl_status_t s = dnnl_success;
    if (st->post_act || st->post_add)
        s = post_ops(st, attr, m->winograd);
    if (s == dnnl_success)
        s = result_pd(op, st, m, bias, attr, eng, pd);
    if (s == dnnl_success && m->nhwc && !impl_is(*pd, "brg")) {
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
        s = dnnl_unimplemented;
    }
    if (s != dnnl_unimplemented || !(m->winograd || m->nhwc))
        return s;
    m->winograd = false;
    s = m->nhwc ? inner_xy(m, false) : dnnl_success;
    return s == dnnl_success ? conv_pd(op, st, m, bias, attr, eng, pd) : s;
}

static tg_status add_winograd(const tg_tensor *node, const tg_conv_geom *g, const tg_plan_opts *o,
                              dnnl_data_type_t mul, conv_state *st, tg_kernel_plan *plan);

/* The state of node's convolution; `wino`: as oneDNN's Winograd one (else
 * the direct one, with the Winograd state beside it where it fits). */
static tg_status create_state(const tg_tensor *node, const tg_conv_geom *g, const tg_plan_opts *o,
                              dnnl_data_type_t mul, conv_state *st, tg_kernel_plan *plan, bool wino)
{
    tg_status ts;
    dnnl_engine_t eng = tg_dnnl_engine(&ts);
    if (!eng)
        return ts;
    live_taps lt;
    st->cropped = live_taps_of(g, &lt);
    bool xy[2];
    blocked_xy(node->op, o, xy);
    /* several threads: one-thread primitives over parts of the batch, or
     * of the output channels, or one thread (split_parts) */
    split_parts(node, g, o, mul, xy[1], st);
    st->sum_out = st->parts > 1 && node->op == TG_OP_CONV2D_BWD_WEIGHT;
    tg_conv_geom part = *g;
    part.N = st->split_k ? g->N : g->N / st->parts;
    part.K = st->split_k ? g->K / st->parts : g->K;
    conv_mds m = {0};
    TG_TRY(make_mds(&part, &lt, st->cropped, node->op, mul, xy, &m));
    st->k_out = g->K;
    st->fold = node->op == TG_OP_CONV2D ? o->fold_norm : NULL;
    st->post_act = node->op == TG_OP_CONV2D ? o->post_act : NULL;
    st->post_add = node->op == TG_OP_CONV2D ? o->post_add : NULL;
    bool bias = node->op == TG_OP_CONV2D && (node->n_in == 3 || st->fold);
    roles_of(node->op, bias, &m, st);
    st->weight_role = node->op == TG_OP_CONV2D_BWD_WEIGHT ? 2 : 1;
    for (int k = 0; k < st->n_args; k++)
        st->blocked[k] = k != st->weight_role && st->user[k].ndims == 4 &&
                         (k == st->n_args - 1 ? o->out_blocked : o->in_blocked[k]);
    st->weight_offset = st->cropped ? (size_t)(lt.r0 * g->S + lt.s0) : 0;
    for (int k = 0; k < 4; k++)
        st->elem[k] = 4;
    TG_TRY(tg_dnnl_check(storage_types(node, o, st, &plan->native_storage),
                         "conv2d storage descriptors"));
    batch_steps(st);
    st->weight_bytes = (size_t)(g->K * (g->C / g->G) * g->R * g->S) * st->elem[st->weight_role];
    dnnl_primitive_attr_t attr;
    TG_TRY(tg_dnnl_check(dnnl_primitive_attr_create(&attr), "conv2d attributes"));
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    /* the convolution's own: with the ReLU post-op, which no reorder takes */
    dnnl_primitive_attr_t conv_attr = NULL;
    if (s == dnnl_success)
        s = dnnl_primitive_attr_clone(&conv_attr, attr);
    /* the scratchpad and the implementation depend on the team size */
    tg_dnnl_threads(st->n_threads);
    dnnl_primitive_desc_t pd = NULL;
    m.winograd = wino;
    if (s == dnnl_success && brgemm_fits(node, g, o, mul, st))
        s = inner_xy(&m, true);
    if (s == dnnl_success)
        s = conv_pd(node->op, st, &m, bias, conv_attr, eng, &pd);
    if (s == dnnl_success) {
        name_kernel(pd, st, &lt, mul, plan);
        s = plan_layouts(st, pd, eng, attr, &plan->scratch);
    }
    if (s == dnnl_success)
        s = dnnl_primitive_create(&st->prim, pd);
    if (s == dnnl_success && !wino) /* Winograd's ReLU is the max already */
        s = fast_relu(st, node->op, &m, bias, conv_attr, eng, pd);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (conv_attr)
        dnnl_primitive_attr_destroy(conv_attr);
    dnnl_primitive_attr_destroy(attr);
    TG_TRY(tg_dnnl_check(s, "creating the conv2d primitives"));
    /* the residual is read as the output is stored (compile/fuse.c fuses
     * it only into a blocked output, which oneDNN takes as it is) */
    if (st->post_add && st->reorder[st->n_args - 1])
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: oneDNN wants its output in another layout than the fused residual "
                        "add's (report the shapes)",
                        node->name);
    TG_TRY(keep_weights(node, o, st, wino, plan));
    name_post_op(st, plan);
    if (!wino)
        TG_TRY(add_winograd(node, g, o, mul, st, plan));
    return TG_OK;
}

/* The Winograd state beside st (conv_state.wino), where it fits and the
 * run can fall back from it exactly: one-thread primitives over parts of
 * the batch (the thread's flags are the primitive's, as for fast_relu),
 * the input stored in f32 (scanned as it lies), the Winograd weights kept
 * (the finite word is theirs). With a finite input and finite weights, and
 * no overflow in the transforms, no NaN can arise, so its max ReLU is the
 * exact one. Both states' scratch regions take the larger size: a part
 * falls back in the same region. Where oneDNN offers no such state the
 * direct one runs alone (no error); out of memory is an error, as for the
 * direct state, so that a plan never depends on an allocation's luck (an
 * executable's file names the scratch its plan needs). */
static tg_status add_winograd(const tg_tensor *node, const tg_conv_geom *g, const tg_plan_opts *o,
                              dnnl_data_type_t mul, conv_state *st, tg_kernel_plan *plan)
{
    if (!winograd_fits(node, g, o, mul, st) || st->n_threads != 1 || st->split_k ||
        st->convert[0] || st->elem[0] != 4)
        return TG_OK;
    conv_state *w = tg_calloc(1, sizeof *w);
    if (!w)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for its Winograd state", node->name);
    tg_kernel_plan wp = {0};
    tg_status s = create_state(node, g, o, mul, w, &wp, true);
    if (s == TG_ERR_NOMEM) {
        tg_conv_dnnl_free(w);
        return s;
    }
    if (s != TG_OK || !strstr(wp.kernel, "wino") || !w->cache || w->parts != st->parts ||
        w->regions != st->regions || w->n_threads != 1) {
        tg_conv_dnnl_free(w);
        return TG_OK;
    }
    size_t part = st->part_bytes > w->part_bytes ? st->part_bytes : w->part_bytes;
    st->part_bytes = w->part_bytes = part;
    plan->scratch = part * (size_t)(st->regions ? st->regions : st->parts);
    plan->kept_bytes += wp.kept_bytes;
    st->wino = w;
    const_dnnl_primitive_desc_t pd = NULL;
    const char *impl = "wino";
    if (dnnl_primitive_get_primitive_desc(w->prim, &pd) == dnnl_success)
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    size_t n = strlen(plan->kernel);
    snprintf(plan->kernel + n, sizeof plan->kernel - n, "; first oneDNN %s where finite", impl);
    return TG_OK;
}

/* Weight gradients over output maps of at most 4 pixels: oneDNN's
 * convolution kernels split their work by pixels and run at 35-66 GFLOP/s
 * there in f32 and 63-95 in bf16 (bench_dnnl_conv, 1 thread, ResNet-50's
 * layer4 at 64x64 images), a matmul over the whole batch's pixels at
 * 90-110 in f32 and about 200 in bf16 (backend/cpu/conv_wgrad_mm.c). Not a 1x1 map
 * read by one live tap: the convolution is cropped to that tap, a matrix
 * product already, where oneDNN's 1x1 kernel reaches 250.
 * TG_KERNELS=dnnl keeps oneDNN's convolution. */
static bool matmul_wins(tg_op op, const tg_conv_geom *g)
{
    live_taps lt;
    bool cropped = live_taps_of(g, &lt);
    int64_t taps = cropped ? (lt.r1 - lt.r0) * (lt.s1 - lt.s0) : g->R * g->S;
    int64_t pixels = g->OH * g->OW;
    return op == TG_OP_CONV2D_BWD_WEIGHT && tg_wgrad_mm_applies(g) && !(pixels == 1 && taps == 1) &&
           tg_dnnl_mode_get() == TG_DNNL_AUTO;
}

/* Whether an inference convolution of one sample runs in parts of its
 * output channels with a primitive each (chan_parts), where split_parts
 * would leave it on one thread: a depthwise one (its input channels cut
 * with the output's), or an ungrouped one whose channels the threads do
 * not divide in equal parts (blocked output: in 16-channel blocks, as
 * mobilenet_v3_large's 80, 112 and 240; plain: an odd count). The parts
 * are whole 16-channel blocks, the last one short: for one sample a
 * block-aligned run of channels is a dense tensor of its own in NCHW and
 * in nChw16c alike (the last block's padding included). */
static bool wants_chan_parts(const tg_tensor *node, const tg_conv_geom *g, const tg_plan_opts *o)
{
    int t = o->n_threads;
    live_taps lt;
    if (t <= 1 || !o->inference || node->op != TG_OP_CONV2D || g->N != 1 || live_taps_of(g, &lt))
        return false;
    bool depthwise = g->G == g->C && g->K == g->G;
    int64_t unit = o->out_blocked ? (int64_t)TG_CHANNEL_BLOCK * t : t;
    bool split_k = g->G == 1 && g->K % unit == 0; /* split_parts's equal parts */
    return (depthwise || g->G == 1) && !split_k && tg_channel_blocks(g->K) >= t;
}

/* Part p of t of the output channels, in whole 16-channel blocks: its
 * geometry (depthwise: its input channels and groups too) and offsets. */
static tg_conv_geom chan_part_geom(const tg_conv_geom *g, int p, int t, int64_t *k0)
{
    int64_t blocks = tg_channel_blocks(g->K);
    int64_t b0 = blocks * p / t, b1 = blocks * (p + 1) / t;
    int64_t k1 = b1 * TG_CHANNEL_BLOCK < g->K ? b1 * TG_CHANNEL_BLOCK : g->K;
    tg_conv_geom pg = *g;
    *k0 = b0 * TG_CHANNEL_BLOCK;
    pg.K = k1 - *k0;
    if (g->G > 1)
        pg.C = pg.G = pg.K;
    return pg;
}

/* The parts' states (one thread each), their scratch one after another,
 * their weight caches summed; the kernel named after part 0's. */
static tg_status chan_parts(const tg_tensor *node, const tg_conv_geom *g, const tg_plan_opts *o,
                            dnnl_data_type_t mul, conv_state *st, tg_kernel_plan *plan)
{
    int t = o->n_threads;
    if (!(st->chan = tg_calloc((size_t)t, sizeof *st->chan)))
        return tg_error(TG_ERR_NOMEM, "conv2d plan: out of memory");
    tg_plan_opts one = *o;
    one.n_threads = 1;
    plan->scratch = plan->kept_bytes = 0;
    for (int p = 0; p < t; p++) {
        conv_chan_part *cp = &st->chan[p];
        tg_conv_geom pg = chan_part_geom(g, p, t, &cp->k0);
        tg_kernel_plan pp = {0};
        if (!(cp->st = tg_calloc(1, sizeof *cp->st)))
            return tg_error(TG_ERR_NOMEM, "conv2d plan: out of memory");
        st->n_chan = p + 1;
        cp->st->of_parts = t;
        TG_TRY(create_state(node, &pg, &one, mul, cp->st, &pp, false));
        const conv_state *s = cp->st;
        int64_t per = (g->C / g->G) * g->R * g->S, o_hw = g->OH * g->OW;
        cp->in_off[0] = g->G > 1 ? (size_t)(cp->k0 * g->H * g->W) * s->elem[0] : 0;
        cp->in_off[1] = (size_t)(cp->k0 * per) * s->elem[1];
        cp->in_off[2] = node->n_in == 3 ? (size_t)cp->k0 * s->elem[2] : 0;
        cp->out_off = (size_t)(cp->k0 * o_hw) * s->elem[s->n_args - 1];
        cp->scratch_off = plan->scratch;
        cp->scratch_bytes = pp.scratch;
        plan->scratch += tg_conv_align(pp.scratch);
        plan->kept_bytes += pp.kept_bytes;
        plan->native_storage = pp.native_storage;
        if (p == 0)
            memcpy(plan->kernel, pp.kernel, sizeof plan->kernel);
    }
    return TG_OK;
}

/* A fresh state in `mul`; TG_ERR_UNSUPPORTED when oneDNN has no
 * implementation for it. */
static tg_status try_state(const tg_tensor *node, const tg_conv_geom *g, const tg_plan_opts *o,
                           dnnl_data_type_t mul, tg_kernel_plan *plan)
{
    conv_state *st = tg_calloc(1, sizeof *st);
    if (!st)
        return tg_error(TG_ERR_NOMEM, "conv2d plan: out of memory");
    /* the matmul reads f32 and bf16 storage only: f16 takes the convolution */
    tg_status s =
        matmul_wins(node->op, g) ? tg_wgrad_mm_create(node, o, plan, &st->mm) : TG_ERR_UNSUPPORTED;
    if (s == TG_ERR_UNSUPPORTED)
        s = tg_conv_dw_create(node, o, plan, &st->dw);
    if (s == TG_ERR_UNSUPPORTED && wants_chan_parts(node, g, o))
        s = chan_parts(node, g, o, mul, st, plan);
    else if (s == TG_ERR_UNSUPPORTED)
        s = create_state(node, g, o, mul, st, plan, false);
    if (s == TG_OK)
        plan->state = st;
    else
        tg_conv_dnnl_free(st);
    return s;
}

/* The own direct kernels keep the layers with few channels (the
 * tutorial's 1->10 and 10->20): oneDNN's blocked kernels need 16 channels
 * to fill a vector. From 16 in and out oneDNN wins even with its reorders
 * (bench_dnnl_conv, 1 thread, forward / data / weight GFLOP/s: ResNet-18's
 * 64->64 3x3 at 8x8, batch 64, 129/125/109 against 87/85/73 direct;
 * ResNet-50's at 16x16, batch 32, 111/115/103 against 96/93/79), and by
 * more with blocked activations (no reorders). */
static bool own_direct_wins(const tg_conv_geom *g, tg_conv_method own)
{
    return own == TG_CONV_DIRECT && (g->C < 16 || g->K < 16);
}

/* Why the plan hook leaves node to the own kernels (NULL: it does not). An
 * inference program's forward convolution keeps oneDNN at any batch: its
 * primitive runs on the device's pool in parts of the output channels, or
 * on one thread (create_state), never with an OpenMP team. */
static const char *own_reason(const tg_tensor *node, int n_threads, bool inference)
{
    tg_conv_geom g = tg_conv_geom_of(node);
    tg_dnnl_mode mode = tg_dnnl_mode_get();
    if (mode == TG_DNNL_NEVER)
        return "";
    if (mode == TG_DNNL_AUTO && own_direct_wins(&g, tg_conv_method_for(node->op, &g)))
        return "";
    /* the matmul runs one-thread bands: no OpenMP team either */
    if (mode == TG_DNNL_AUTO && n_threads > 1 && g.N % n_threads != 0 && !tg_dnnl_passive_wait() &&
        !matmul_wins(node->op, &g) && !(inference && node->op == TG_OP_CONV2D))
        return "oneDNN with several threads needs OMP_WAIT_POLICY=passive";
    return NULL;
}

static bool any_blocked(const tg_plan_opts *o)
{
    bool any = o->out_blocked;
    for (int k = 0; k < TG_MAX_INPUTS; k++)
        any |= o->in_blocked[k];
    return any;
}

/* An inference stem (fewer than 4 input channels a group, as an image's
 * 3): oneDNN's bf16 kernels pair input channels, so with 3 of them half
 * their work is padding, and mobilenet_v3_large's stem took twice its f32
 * time in bf16 (6.3 -> 13.1 ms per run at batch 32, 1 thread, under
 * load). It computes in f32, its output converted to the stored bf16. */
static bool few_input_channels(const tg_tensor *node, const tg_conv_geom *g, const tg_plan_opts *o)
{
    return o->inference && node->op == TG_OP_CONV2D && g->C / g->G < 4 && g->G == 1;
}

/* The own bf16 1x1 kernel for few input channels where it applies
 * (backend/cpu/conv_pw_bf16.c says why); TG_ERR_UNSUPPORTED elsewhere. */
static tg_status try_pointwise(const tg_tensor *node, const tg_plan_opts *o, tg_kernel_plan *plan)
{
    tg_conv_pw *pw;
    TG_TRY(tg_conv_pw_plan(node, o, plan, &pw));
    if (!pw)
        return TG_ERR_UNSUPPORTED;
    conv_state *st = tg_calloc(1, sizeof *st);
    if (!st) {
        tg_conv_pw_free(pw);
        return tg_error(TG_ERR_NOMEM, "conv2d plan: out of memory");
    }
    st->pw = pw;
    plan->state = st;
    return TG_OK;
}

bool tg_conv_dnnl_chosen(const tg_tensor *node, int n_threads, bool inference)
{
    return own_reason(node, n_threads, inference) == NULL;
}

tg_status tg_conv_dnnl_plan(const tg_tensor *node, const tg_plan_opts *opts, tg_kernel_plan *plan)
{
    tg_conv_geom g = tg_conv_geom_of(node);
    tg_conv_method own = tg_conv_method_for(node->op, &g);
    const char *own_name = own == TG_CONV_DIRECT ? "own direct" : "own im2col+sgemm";
    const char *why = own_reason(node, opts->n_threads, opts->inference);
    if (why) {
        if (why[0])
            snprintf(plan->kernel, sizeof plan->kernel, "%s (%s)", own_name, why);
        else
            snprintf(plan->kernel, sizeof plan->kernel, "%s", own_name);
        return TG_OK;
    }
    /* bf16 needs AVX-512 (native with AVX512_BF16): elsewhere f32 */
    tg_status s = opts->compute == TG_BF16 ? try_pointwise(node, opts, plan) : TG_ERR_UNSUPPORTED;
    if (s == TG_ERR_UNSUPPORTED && opts->compute == TG_BF16 && !few_input_channels(node, &g, opts))
        s = try_state(node, &g, opts, dnnl_bf16, plan);
    if (s == TG_ERR_UNSUPPORTED)
        s = try_state(node, &g, opts, dnnl_f32, plan);
    if (s == TG_OK)
        return TG_OK;
    plan->scratch = 0;
    plan->native_storage = false;
    /* oneDNN lacking an implementation is no error: the own kernels run,
     * unless an operand is blocked, which only this kernel reads */
    if (s == TG_ERR_UNSUPPORTED && any_blocked(opts))
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: oneDNN has no kernel for its blocked operands (run with "
                        "TG_LAYOUT=plain and report the shapes)",
                        node->name);
    if (s == TG_ERR_UNSUPPORTED) {
        snprintf(plan->kernel, sizeof plan->kernel, "%s (no oneDNN implementation)", own_name);
        return TG_OK;
    }
    return s;
}

void tg_conv_dnnl_free(void *state)
{
    conv_state *st = state;
    if (!st)
        return;
    tg_wgrad_mm_free(st->mm);
    tg_conv_dw_free(st->dw);
    tg_conv_pw_free(st->pw);
    tg_conv_dnnl_free(st->wino);
    for (int p = 0; p < st->n_chan; p++)
        tg_conv_dnnl_free(st->chan[p].st);
    tg_free(st->chan);
    tg_weight_cache_destroy(st->cache);
    if (st->prim)
        dnnl_primitive_destroy(st->prim);
    if (st->fast)
        dnnl_primitive_destroy(st->fast);
    for (int k = 0; k < 4; k++)
        if (st->reorder[k])
            dnnl_primitive_destroy(st->reorder[k]);
    for (int k = 0; k < 4; k++) {
        for (int p = 0; st->slices[k] && p < st->parts; p++)
            dnnl_primitive_destroy(st->slices[k][p].prim);
        tg_free(st->slices[k]);
    }
    tg_free(st);
}
