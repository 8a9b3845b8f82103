/* compile/layout.h - which activations the program keeps in the blocked
 * layout (nChw16c, ops/op.h TG_CHANNEL_BLOCK) instead of NCHW.
 *
 * oneDNN's convolutions compute in nChw16c; a convolution between NCHW
 * tensors reorders its input in and its output out on every call (17% of
 * ResNet-50's convolution time). The pass keeps a tensor blocked when every
 * op that writes or reads it can work on the blocked layout: the oneDNN
 * convolutions, batch norm, pooling and same-shape element-wise ops. Ops
 * that tie their operands (an element-wise add reads and writes one layout)
 * join them into a group, and a group is blocked only when all of it can
 * be and some convolution reads or writes it; anything else (graph inputs
 * and outputs, parameters, gradients of parameters, a broadcast, a kernel
 * without a blocked variant, any op the pass does not know) keeps NCHW, and
 * so does the input of a view (reshape, flatten: a node with no step that
 * reads its input's bytes in NCHW order), which is also what
 * checkpoints, reads and writes see. A 4-D tensor with a 1x1 map and
 * channels a multiple of the block is the same memory in both layouts. An
 * inference program also blocks channel counts that are no whole blocks,
 * padded (tg_layout_padded), where the ops around them take the padding.
 *
 * TG_LAYOUT=plain in the environment turns the pass off (every tensor NCHW),
 * to compare; the tiled targets never use it.
 */
#ifndef TG_COMPILE_LAYOUT_H
#define TG_COMPILE_LAYOUT_H

#include "compile/program.h"

#include <stdbool.h>

enum {
    TG_LAYOUT_BLOCKED = 1u << 0,    /* the value is stored blocked */
    TG_LAYOUT_OP_BLOCKED = 1u << 1, /* the op's own kernel runs its blocked variant */
};

/* Fill p->layout (one byte per node) from the graph, the homes made so far
 * and the kernels the convolutions will get. Call before planning kernels. */
tg_status tg_layout_assign(tg_program *p);

/* Whether t's memory may be read as blocked: kept blocked, or a 1x1 map
 * whose channels are a multiple of the block (the same bytes either way). */
bool tg_layout_reads_blocked(const tg_program *p, const tg_tensor *t);

/* Whether t is kept blocked with channels that are no whole blocks (an
 * inference program's 24, 40, 72...: oneDNN's nChw16c with the channels
 * padded to the next block, the padding's contents finite and never read
 * into a real channel, layout.c's padding_safe). Its buffer holds the
 * padded size; the engine runs a tied op on padded operands with their
 * shapes padded (runtime/engine_passes.c). */
bool tg_layout_padded(const tg_program *p, const tg_tensor *t);
/* t's shape as stored: its channels padded to whole blocks when
 * tg_layout_padded, else its own. */
tg_shape tg_layout_stored_shape(const tg_program *p, const tg_tensor *t);
/* Give every padded value's buffer its padded size (compile, after the
 * layout pass and before the memory plan); loaded: check instead that the
 * file's buffers have it (TG_ERR_FORMAT naming the value when not). */
tg_status tg_layout_size_buffers(tg_program *p, bool loaded);

/* Tensors kept blocked, and ops running a blocked variant (for the compile
 * summary). */
void tg_layout_counts(const tg_program *p, int *tensors, int *ops);

/* For tests only: true makes the pass overlook views again, as it did when
 * a flatten after a convolution read nChw16c bytes as NCHW (issue 28), so
 * the differential tests can show they catch the wrong numbers that gave.
 * False by default; set it only while no compile runs on another thread. */
extern bool tg_layout_test_ignore_views;

#endif
