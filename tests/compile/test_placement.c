/* tests/compile/test_placement.c - blocks to stages to devices: each block
 * its own stage by default, blocks grouped by "stages", split points by
 * layer name; backward ops with their forward op, weights and their
 * optimizer state with their first user; and the messages for specs that
 * name what the model does not have or that run against the data flow. */
#include "tg_test.h"

#include "compile/placement.h"
#include "compile/program.h"
#include "core/alloc.h"
#include "tilegraph/optim.h"

#include <string.h>

/* Three layers (scopes layer1..3), in blocks B1..B3 unless `blocks` is
 * false, trained with momentum SGD. */
typedef struct {
    tg_graph *g;
    tg_tensor *x, *labels, *w1, *w3, *h1, *h2, *loss;
} chain;

static chain build_chain(bool blocks, const int *devices)
{
    chain c;
    tg_graph *g = c.g = tg_graph_create();
    c.x = tg_input(g, "x", TG_F32, tg_shape2(4, 6));
    c.labels = tg_input(g, "labels", TG_I32, tg_shape1(4));
    tg_init init = {TG_INIT_FAN_IN_UNIFORM, 8, 0};
    const char *names[] = {"B1", "B2", "B3"}, *scopes[] = {"layer1", "layer2", "layer3"};
    tg_tensor *h = c.x;
    for (int k = 0; k < 3; k++) {
        if (blocks && devices)
            tg_block_begin_on(g, names[k], devices[k]);
        else if (blocks)
            tg_block_begin(g, names[k]);
        tg_scope_push(g, scopes[k]);
        tg_tensor *w = tg_param(g, "w", tg_shape2(k == 2 ? 3 : 8, k == 0 ? 6 : 8), init);
        h = tg_linear(g, h, w, NULL);
        if (k < 2)
            h = tg_relu(g, h);
        tg_scope_pop(g);
        c.w1 = k == 0 ? w : c.w1;
        c.w3 = k == 2 ? w : c.w3;
        c.h1 = k == 0 ? h : c.h1;
        c.h2 = k == 1 ? h : c.h2;
    }
    if (blocks)
        tg_block_end(g);
    c.loss = tg_cross_entropy(g, h, c.labels);
    tg_tensor_mark_output(c.loss);
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.9f);
    TG_CHECK_OK(tg_graph_backward(g, c.loss));
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    TG_CHECK_OK(tg_graph_status(g));
    return c;
}

/* tg_place with the options kv over the nodes the schedule runs. */
static tg_status place(const tg_graph *g, const char *const *kv, tg_placement *pl)
{
    tg_options *o = tg_options_create();
    tg_test_options_set(o, kv);
    int *order = NULL, n = 0;
    TG_CHECK_OK(tg_schedule(g, &order, &n));
    bool *needed = tg_calloc((size_t)g->n_nodes + 1, sizeof *needed);
    for (int k = 0; k < n; k++)
        needed[order[k]] = true;
    tg_config c;
    tg_status s = tg_config_read(o, &c);
    if (s == TG_OK)
        s = tg_place(g, &c, needed, pl);
    tg_config_free(&c);
    tg_free(needed);
    tg_free(order);
    tg_options_destroy(o);
    return s;
}

/* The weight update of parameter w (the node that mutates it). */
static const tg_tensor *update_of(const tg_graph *g, const tg_tensor *w)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (tg_is_weight_update(g->nodes[i]) && g->nodes[i]->in[0] == w)
            return g->nodes[i];
    return NULL;
}

/* Backward nodes derive their stage from their forward op, updates and
 * optimizer state from their parameter: checked for every node. */
static void check_followers(const tg_graph *g, const tg_placement *pl)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if ((t->flags & TG_NODE_BACKWARD) && t->forward_of && pl->stage_of[i] >= 0 &&
            pl->stage_of[i] != pl->stage_of[t->forward_of->id])
            tg_test_fail(__FILE__, __LINE__, "'%s' is on stage %d, its forward op '%s' on %d",
                         t->name, pl->stage_of[i], t->forward_of->name,
                         pl->stage_of[t->forward_of->id]);
        if (tg_is_weight_update(t))
            for (int k = 0; k < t->n_mutated; k++)
                if (pl->stage_of[t->in[k]->id] != pl->stage_of[i])
                    tg_test_fail(__FILE__, __LINE__, "update '%s' on stage %d, '%s' on %d", t->name,
                                 pl->stage_of[i], t->in[k]->name, pl->stage_of[t->in[k]->id]);
    }
}

static void test_each_block_its_own_stage(void)
{
    chain c = build_chain(true, NULL);
    tg_placement pl;
    TG_CHECK_OK(place(c.g, (const char *[]){"executionStrategy", "pipelined", NULL}, &pl));
    TG_CHECK(pl.n_stages == 3 && pl.n_devices == 3);
    for (int st = 0; st < pl.n_stages; st++)
        TG_CHECK(pl.device_of_stage[st] == st);
    TG_CHECK(pl.stage_of[c.h1->id] == 0 && pl.stage_of[c.h2->id] == 1);
    TG_CHECK(pl.stage_of[c.loss->id] == 2); /* outside any block: follows its input */
    /* leaves go where they are first used: x by layer1, labels by the loss */
    TG_CHECK(pl.stage_of[c.x->id] == 0 && pl.stage_of[c.labels->id] == 2);
    TG_CHECK(pl.stage_of[c.w1->id] == 0 && pl.stage_of[c.w3->id] == 2);
    const tg_tensor *u1 = update_of(c.g, c.w1), *u3 = update_of(c.g, c.w3);
    TG_CHECK(u1 && u3 && u1->n_mutated == 2); /* the weight and its momentum */
    TG_CHECK(u1 && pl.stage_of[u1->id] == 0 && pl.stage_of[u1->in[1]->id] == 0);
    TG_CHECK(u3 && pl.stage_of[u3->id] == 2 && pl.stage_of[u3->in[1]->id] == 2);
    TG_CHECK(c.w1->grad && pl.stage_of[c.w1->grad->id] == 0);
    check_followers(c.g, &pl);
    tg_placement_free(&pl);
    /* strategy auto with blocks and nothing that divides: one device */
    TG_CHECK_OK(place(c.g, (const char *[]){NULL}, &pl));
    TG_CHECK(pl.n_stages == 1 && pl.n_devices == 1 && pl.stage_of[c.loss->id] == 0);
    tg_placement_free(&pl);
    tg_graph_destroy(c.g);
}

static void test_stages_group_blocks(void)
{
    chain c = build_chain(true, NULL);
    tg_placement pl;
    /* spaces after a comma are allowed */
    TG_CHECK_OK(place(c.g, (const char *[]){"stages", "B1, B2|B3", NULL}, &pl));
    TG_CHECK(pl.n_stages == 2 && pl.n_devices == 2);
    TG_CHECK(pl.stage_of[c.h1->id] == 0 && pl.stage_of[c.h2->id] == 0);
    TG_CHECK(pl.stage_of[c.loss->id] == 1 && pl.stage_of[c.w3->id] == 1);
    check_followers(c.g, &pl);
    tg_placement_free(&pl);
    TG_CHECK_OK(place(c.g, (const char *[]){"stages", "B1|B2,B3", NULL}, &pl));
    TG_CHECK(pl.n_stages == 2 && pl.stage_of[c.h1->id] == 0 && pl.stage_of[c.h2->id] == 1);
    tg_placement_free(&pl);
    tg_graph_destroy(c.g);
}

static void expect_error(const tg_graph *g, const char *const *kv, const char *want1,
                         const char *want2)
{
    tg_placement pl;
    tg_status s = place(g, kv, &pl);
    const char *msg = tg_error_message();
    if (s != TG_ERR_CONFIG || !strstr(msg, want1) || (want2 && !strstr(msg, want2)))
        tg_test_fail(__FILE__, __LINE__, "%s \"%s\": %s, \"%s\" (wanted \"%s\")", kv[0], kv[1],
                     tg_status_name(s), msg, want1);
    if (s == TG_OK)
        tg_placement_free(&pl);
    else
        TG_CHECK(pl.stage_of == NULL && pl.device_of_stage == NULL); /* freed on error */
}

static void test_stage_spec_errors(void)
{
    chain c = build_chain(true, NULL);
    expect_error(c.g, (const char *[]){"stages", "B1|B4,B2|B3", NULL},
                 "stage 1 names block 'B4', which the model does not have",
                 "(its blocks: B1, B2, B3)");
    expect_error(c.g, (const char *[]){"stages", "B1,B2|B2,B3", NULL},
                 "block 'B2' is in two stages", NULL);
    expect_error(c.g, (const char *[]){"stages", "B1|B2", NULL}, "block 'B3' is in no stage", NULL);
    expect_error(c.g, (const char *[]){"stages", "B2|B1|B3", NULL},
                 "stage order runs against the data flow", "(stage 0, block B2)");
    expect_error(c.g, (const char *[]){"devices", "2", "executionStrategy", "pipelined", NULL},
                 "the model needs device 2 but only 2 devices are available", NULL);
    expect_error(c.g, (const char *[]){"executionStrategy", "single", "stages", "B1|B2,B3", NULL},
                 "stages cannot apply with executionStrategy single", NULL);
    tg_graph_destroy(c.g);
    /* a model without blocks has nothing to group */
    c = build_chain(false, NULL);
    expect_error(c.g, (const char *[]){"stages", "B1|B2", NULL},
                 "the model has no blocks to group into stages", NULL);
    expect_error(c.g, (const char *[]){"devices", "3", NULL},
                 "devices 3: the model has no blocks to put on several devices", NULL);
    /* devices counted for the whole pod (16 replicas x 1 device) */
    expect_error(c.g, (const char *[]){"devices", "16", "replicationFactor", "16", NULL},
                 "option devices counts the devices of one replica", "drop --devices");
    tg_graph_destroy(c.g);
}

static void test_blocks_on_given_devices(void)
{
    chain c = build_chain(true, (const int[]){0, 1, 2});
    tg_placement pl;
    TG_CHECK_OK(place(c.g, (const char *[]){"executionStrategy", "pipelined", NULL}, &pl));
    TG_CHECK(pl.n_devices == 3 && pl.device_of_stage[2] == 2);
    tg_placement_free(&pl);
    tg_graph_destroy(c.g);
    c = build_chain(true, (const int[]){0, 2, 3});
    expect_error(c.g, (const char *[]){"executionStrategy", "pipelined", NULL},
                 "3 stages on devices up to 3: leave no device between stages unused", NULL);
    tg_graph_destroy(c.g);
    c = build_chain(true, (const int[]){1, 0, 2});
    expect_error(c.g, (const char *[]){"executionStrategy", "pipelined", NULL},
                 "stage 1 is on device 0, before stage 0's device 1", NULL);
    tg_graph_destroy(c.g);
    c = build_chain(true, (const int[]){0, 1, 1});
    expect_error(c.g, (const char *[]){"executionStrategy", "pipelined", NULL},
                 "stages 1 and 2 are both on device 1", NULL);
    tg_graph_destroy(c.g);
}

static void test_split_points(void)
{
    chain c = build_chain(false, NULL);
    tg_placement pl;
    TG_CHECK_OK(place(c.g, (const char *[]){"split", "layer2,layer3", NULL}, &pl));
    TG_CHECK(pl.n_stages == 3 && pl.n_devices == 3);
    TG_CHECK(pl.stage_of[c.h1->id] == 0 && pl.stage_of[c.h2->id] == 1);
    TG_CHECK(pl.stage_of[c.loss->id] == 2 && pl.stage_of[c.w3->id] == 2);
    check_followers(c.g, &pl);
    tg_placement_free(&pl);
    /* split points name layers even where the model has blocks; parsing
     * twice gives the same (the parser keeps no state between calls) */
    tg_graph_destroy(c.g);
    c = build_chain(true, NULL);
    for (int k = 0; k < 2; k++) {
        TG_CHECK_OK(place(c.g, (const char *[]){"split", "layer3", NULL}, &pl));
        TG_CHECK(pl.n_stages == 2 && pl.stage_of[c.h2->id] == 0 && pl.stage_of[c.loss->id] == 1);
        tg_placement_free(&pl);
    }
    /* the blocks split points make are S0, S1, ..: stages can name them */
    TG_CHECK_OK(
        place(c.g, (const char *[]){"split", "layer2,layer3", "stages", "S0|S1,S2", NULL}, &pl));
    TG_CHECK(pl.n_stages == 2 && pl.stage_of[c.h1->id] == 0 && pl.stage_of[c.h2->id] == 1);
    tg_placement_free(&pl);
    expect_error(c.g, (const char *[]){"split", "layer9", NULL},
                 "split point 'layer9' matches no op of the model", NULL);
    /* points must come in model order: layer2 is never met after layer3 */
    expect_error(c.g, (const char *[]){"split", "layer3,layer2", NULL},
                 "split point 'layer2' matches no op", NULL);
    /* "layer" is a prefix of names, not a layer: no match */
    expect_error(c.g, (const char *[]){"split", "layer", NULL}, "split point 'layer' matches",
                 NULL);
    expect_error(c.g, (const char *[]){"executionStrategy", "single", "split", "layer2", NULL},
                 "split cannot apply with executionStrategy single", NULL);
    tg_graph_destroy(c.g);
}

static void test_execution_strategy(void)
{
    const struct {
        const char *kv[5];
        const char *want;
    } cases[] = {
        {{NULL}, "single"},
        {{"devices", "2", NULL}, "pipelined"},
        {{"split", "layer2", NULL}, "pipelined"},
        {{"stages", "B1|B2", NULL}, "pipelined"},
        {{"executionStrategy", "sharded", NULL}, "sharded"},
        {{"executionStrategy", "single", "devices", "2", NULL}, "single"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tg_options *o = tg_options_create();
        tg_test_options_set(o, cases[k].kv);
        tg_config c;
        TG_CHECK_OK(tg_config_read(o, &c));
        if (strcmp(c.pipeline.strategy, cases[k].want) != 0)
            tg_test_fail(__FILE__, __LINE__, "case %zu: %s, wanted %s", k, c.pipeline.strategy,
                         cases[k].want);
        tg_config_free(&c);
        tg_options_destroy(o);
    }
}

int main(void)
{
    TG_RUN(test_each_block_its_own_stage);
    TG_RUN(test_stages_group_blocks);
    TG_RUN(test_stage_spec_errors);
    TG_RUN(test_blocks_on_given_devices);
    TG_RUN(test_split_points);
    TG_RUN(test_execution_strategy);
    return tg_test_finish();
}
