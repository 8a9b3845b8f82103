/* compile/placement.h - which stage, and so which device, runs each node.
 *
 * Blocks come from the graph's annotations (tg_block_begin), or from split
 * points given by layer name (the option "split", like PopTorch's
 * BeginBlock: "layer3.8" starts a new block at the first op of layer3.8).
 * Stages group blocks (the option "stages": "B1,B2|B3,B4"); by default each
 * block is its own stage, in the order the blocks first appear, on the device
 * given by tg_block_begin_on or else device = stage index.
 *
 * Nodes outside any block follow their inputs; leaves (weights, inputs) go
 * where they are first consumed; backward ops go with the forward op they
 * derive from, and updates with their parameter, so each device updates its
 * own weights.
 */
#ifndef TG_COMPILE_PLACEMENT_H
#define TG_COMPILE_PLACEMENT_H

#include "graph/node.h"
#include "core/config.h"

typedef struct tg_placement {
    int n_stages, n_devices;
    /* executionStrategy phased: the stages are phases, in order, each on
     * one device (consecutive phases share a device) */
    int n_phases;
    int *stage_of; /* per node id; -1 for nodes nothing needs */
    int *device_of_stage;
    /* per stage (NULL: none): the stage hands the input gradient of its
     * first convolution to the stage before (compile/stages.h, "B1|<B2") */
    bool *handoff;
    /* with stages or split "auto": the chosen split as the options would
     * give it ("B1|B2,B3,B4" or split points), else "" */
    char auto_spec[256];
} tg_placement;

/* `needed` marks the nodes that run (from the schedule); c's strategy has
 * "auto" resolved (core/config.c). Errors name the block, stage, device or
 * node at fault. */
tg_status tg_place(const tg_graph *g, const tg_config *c, const bool *needed, tg_placement *out);
void tg_placement_free(tg_placement *p);
/* Whether c's strategy is phased (each stage a phase, run one after another). */
bool tg_placement_phased(const tg_config *c);

#endif
