/* backend/cpu/conv_dnnl_state.h - the state of one node's oneDNN convolution,
 * shared by its planning (conv_dnnl.c: descriptors, layouts, reorders,
 * the primitive) and its running (conv_dnnl_run.c: parts of the batch,
 * slices, conversions). Internal to those two files. */
#ifndef TG_BACKEND_CPU_CONV_DNNL_STATE_H
#define TG_BACKEND_CPU_CONV_DNNL_STATE_H

#include "backend/cpu/conv_dw_bf16.h"
#include "backend/cpu/conv_pw_bf16.h"
#include "backend/cpu/conv_wgrad_mm.h"
#include "backend/cpu/dnnl_util.h"
#include "backend/cpu/weight_cache.h"

#include <stdbool.h>
#include <stddef.h>

/* One thread's share of a reorder that all parts need: a slice of the
 * tensor along its first dimension (submemory descriptors, whose offsets
 * place it in the whole tensor). */
typedef struct reorder_slice {
    dnnl_primitive_t prim;
    dnnl_memory_desc_t user, inner, scratch_md;
} reorder_slice;

struct conv_state;

/* One part of a convolution split over its output channels into
 * primitives of their own (conv_dnnl.c's chan_parts): a whole state over
 * channels [k0, k0 + its K), and where its operands start in the node's. */
typedef struct conv_chan_part {
    struct conv_state *st;
    int64_t k0;
    size_t in_off[3], out_off; /* bytes into x, w, b and y */
    size_t scratch_off, scratch_bytes;
} conv_chan_part;

typedef struct conv_state {
    dnnl_primitive_t prim;
    /* The same convolution with its fused ReLU as oneDNN's max post-op,
     * tried first where it is exact (conv_dnnl.c's fast_relu); NULL: prim
     * alone. */
    dnnl_primitive_t fast;
    /* The same convolution as oneDNN's Winograd one (conv_dnnl.c's
     * winograd_fits), a whole state of its own (its weights layout, kept
     * weights, scratch regions as large as this one's), which the run tries
     * first where the part's input and the weights are finite and falls back
     * from to this exact one where they are not or the thread's overflow or
     * invalid flag went up (conv_dnnl_run.c's run_checked); NULL: none. */
    struct conv_state *wino;
    /* The Winograd state's: bytes into its kept weights of the word saying
     * whether the weights version it holds is finite (set when filled). */
    size_t finite_off;
    int n_args;                  /* roles: in[0], in[1], (in[2]), out; see roles_of */
    int arg[4];                  /* oneDNN argument of each role */
    dnnl_memory_desc_t user[4];  /* the plain layout the graph holds */
    dnnl_memory_desc_t inner[4]; /* the layout the primitive takes */
    dnnl_primitive_t reorder[4]; /* user <-> inner where they differ, else NULL */
    size_t buf_off[4];           /* of the inner copy in scratch */
    dnnl_memory_desc_t scratch_md, reorder_scratch_md[4];
    size_t reorder_scratch_off;
    int n_threads;
    int weight_role;      /* the role that is the weights or their gradient */
    size_t weight_offset; /* floats from the full weights to the first live tap */
    size_t weight_bytes;  /* of the full weights (zeroed before a cropped gradient) */
    bool cropped;
    size_t elem[4];  /* bytes per element of each role as stored */
    bool blocked[4]; /* the role is stored in the blocked layout (nChw16c) */
    /* Roles stored in bf16 that the primitive takes in f32 (no bf16
     * arithmetic on this CPU): converted here (core/convert.h) into or out
     * of an f32 copy in the stored layout, which oneDNN reorders as f32.
     * oneDNN's own bf16 <-> f32 reorders are its generic ones without
     * AVX-512 (10-13 ms for a 16x64x7x7 activation, 200x its f32 reorder
     * of the same; see bench_dnnl_conv): they took 90% of a bf16 ResNet-18
     * training step on an AVX2 machine. */
    bool convert[4];
    dnnl_memory_desc_t user32[4]; /* user[k] in f32 */
    size_t span[4];               /* elements from the first stored to the last */
    size_t copy_off[4];           /* of the f32 copy in scratch, when a reorder follows it */
    /* The weight gradient as one matmul (backend/cpu/conv_wgrad_mm.h) where that
     * wins (matmul_wins): then nothing else here is used. */
    tg_wgrad_mm *mm;
    /* The own depthwise kernel over bf16 nChw16c (backend/cpu/conv_dw_bf16.h)
     * where it applies: then nothing else here is used. */
    tg_conv_dw *dw;
    /* The own bf16 1x1 kernel (backend/cpu/conv_pw_bf16.h) where it
     * applies: then nothing else here is used. */
    tg_conv_pw *pw;
    /* Parts of the output channels (and of the input's, depthwise) that
     * the threads do not divide in equal blocks: one state each, run one
     * per thread; then nothing else here is used. of_parts: a part's state
     * knows how many there are (for its kernel name). */
    conv_chan_part *chan;
    int n_chan, of_parts;
    /* Batch split (see the header comment): the primitive is made for
     * N / parts samples and runs once per part; parts = 1 without split. */
    int parts;
    bool split_k;      /* the parts are of the output channels (one sample), not the batch */
    size_t part_bytes; /* of one part's scratch (all of it without split) */
    /* Scratch regions of part_bytes: one per part, or (regions > 0) one per
     * thread, which runs its parts one after another in it. */
    int regions;
    size_t batch_step[4]; /* bytes from one part's samples of a role to the next; 0: shared */
    bool sum_out;         /* the weight gradient: parts' sums added in part 0's buffer */
    /* With parts, the reorders of the shared weights and of the summed
     * weight gradient in `parts` slices, one per thread, where the layout
     * allows (else NULL: one thread reorders the whole). */
    reorder_slice *slices[4];
    /* An inference program's forward convolution whose weights need a
     * reorder or a conversion: the weights in the primitive's layout, kept
     * from run to run while the host writes none (backend/cpu/weight_cache.h);
     * NULL otherwise. */
    tg_weight_cache *cache;
    /* The batch norm this convolution computes (compile/fuse.c), whose
     * folded weights and bias the cache holds (the bias kept_bias_off bytes
     * in; the weights kept_offset bytes before the first live tap when they
     * need no reorder), and the activation it applies as a post-op; NULL
     * where absent. */
    const tg_tensor *fold;
    const tg_tensor *post_act;
    /* The residual add it computes (compile/fuse.c) as a binary post-op,
     * number residual_po, reading in[TG_FUSE_IN_RESIDUAL] laid out as the
     * output (user[n_args - 1]); NULL where absent. */
    const tg_tensor *post_add;
    int residual_po;
    size_t kept_bias_off, kept_offset;
    int64_t k_out;    /* output channels the primitive (or split_k's parts together) computes */
    size_t kept_step; /* split_k: bytes from one part's kept weights to the next */
} conv_state;

/* The side of role k's reorder that is not the primitive's: the stored
 * tensor, or its f32 copy where the role is converted. */
static inline const dnnl_memory_desc_t *tg_conv_reorder_user(const conv_state *st, int k)
{
    return st->convert[k] ? &st->user32[k] : &st->user[k];
}

#endif
