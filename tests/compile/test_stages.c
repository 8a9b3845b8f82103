/* tests/compile/test_stages.c - automatic stages: the dynamic programme
 * equals an exhaustive search over every split of ResNet-50's layer scopes
 * on the cost model (2 and 4 devices, pipelined and sharded, with and
 * without a memory limit, cpu and mk2 costs); on mk2 a memory limit where
 * the uniform split does not fit the plan and the automatic one does; user
 * splits parsed and printed back; errors for what cannot be divided.
 * Costs use the fixed default rates (TILEGRAPH_CALIBRATION=off): no timing. */
#include "tg_test.h"

#include "compile/program.h"
#include "compile/stages.h"
#include "core/error.h"
#include "tilegraph/models.h"
#include "tilegraph/nn.h"
#include "tilegraph/optim.h"
#include "tilegraph/predict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static tg_model_graph resnet50(void)
{
    tg_model_graph mg = {0};
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("resnet50"), 4, &opt, &mg));
    return mg;
}

static tg_options *options(int devices, const char *strategy, const char *target)
{
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set_int(o, "devices", devices));
    TG_CHECK_OK(tg_options_set(o, "split", "auto"));
    TG_CHECK_OK(tg_options_set(o, "executionStrategy", strategy));
    TG_CHECK_OK(tg_options_set(o, "pipelineSchedule", "1f1b"));
    TG_CHECK_OK(tg_options_set_int(o, "Training.gradientAccumulation", 8));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    TG_CHECK_OK(tg_options_set(o, "target", target));
    return o;
}

/* The least objective over every split of atoms [from, n) into stages
 * k.., by brute force; counts the splits tried. */
static double exhaustive(const tg_stage_atoms *a, const tg_stage_goal *goal, int *first, int k,
                         int from, long *tried)
{
    if (k == goal->n_stages - 1) {
        first[k] = from;
        tg_stage_plan p;
        tg_stage_plan_eval(a, goal, first, &p);
        (*tried)++;
        return p.objective;
    }
    double best = INFINITY;
    first[k] = from;
    for (int next = from + 1; next <= a->n - (goal->n_stages - k - 1); next++) {
        double v = exhaustive(a, goal, first, k + 1, next, tried);
        best = v < best ? v : best;
    }
    return best;
}

/* tg_stage_plan_auto with the options read as the compiler reads them. */
static tg_status plan_auto(const tg_graph *g, const tg_options *o, int n_stages, bool scopes,
                           tg_stage_atoms *atoms, tg_stage_goal *goal, tg_stage_plan *plan)
{
    tg_config c;
    TG_TRY(tg_config_read(o, &c));
    tg_status s = tg_stage_plan_auto(g, &c, n_stages, scopes, "auto", atoms, goal, plan);
    tg_config_free(&c);
    return s;
}

static long binomial(int n, int k)
{
    long r = 1;
    for (int i = 1; i <= k; i++)
        r = r * (n - k + i) / i;
    return r;
}

static void check_dp_exact(const tg_graph *g, int devices, const char *strategy, const char *target)
{
    tg_options *o = options(devices, strategy, target);
    tg_stage_atoms a;
    tg_stage_goal goal;
    tg_stage_plan plan;
    TG_CHECK_OK(plan_auto(g, o, devices, true, &a, &goal, &plan));
    TG_CHECK(a.n == 18); /* conv1, bn1 (with relu and pool), 16 bottlenecks (last with fc) */
    /* without a limit, then with one that rules the unconstrained best out */
    for (int limited = 0; limited < 2; limited++) {
        if (limited) {
            double most = 0;
            for (int k = 0; k < plan.n_stages; k++)
                most = plan.memory[k] > most ? plan.memory[k] : most;
            goal.capacity = most * 0.97;
        }
        int first[TG_STAGES_MAX + 1];
        long tried = 0;
        double brute = exhaustive(&a, &goal, first, 0, 0, &tried);
        TG_CHECK(tried == binomial(a.n - 1, devices - 1));
        tg_stage_plan dp;
        tg_status s = tg_stage_plan_best(&a, &goal, &dp);
        if (isinf(brute)) {
            TG_CHECK(s == TG_ERR_CAPACITY);
            continue;
        }
        TG_CHECK_OK(s);
        if (fabs(dp.objective - brute) > 1e-12 * brute)
            tg_test_fail(__FILE__, __LINE__, "%s %s, %d devices%s: DP %.12g, exhaustive %.12g",
                         target, strategy, devices, limited ? ", limited" : "", dp.objective,
                         brute);
        for (int k = 0; limited && k < dp.n_stages; k++)
            TG_CHECK(dp.memory[k] <= goal.capacity);
        if (!limited)
            plan = dp;
    }
    tg_stage_atoms_free(&a);
    tg_options_destroy(o);
}

static void test_dp_equals_exhaustive_search(void)
{
    tg_model_graph mg = resnet50();
    const char *targets[] = {"cpu", "mk2"}, *strategies[] = {"pipelined", "sharded"};
    for (int t = 0; t < 2; t++)
        for (int st = 0; st < 2; st++) {
            check_dp_exact(mg.graph, 2, strategies[st], targets[t]);
            check_dp_exact(mg.graph, 4, strategies[st], targets[t]);
        }
    tg_model_graph_destroy(&mg);
}

/* mk2, 4 devices, 286 MiB per device: the uniform split (as many scopes per
 * stage) needs more on its last device, and the automatic one fits; both
 * checked by the compiled program's memory plan, not the estimate. */
static void test_mk2_fits_where_uniform_does_not(void)
{
    tg_model_graph mg = resnet50();
    tg_options *o = options(4, "pipelined", "mk2");
    TG_CHECK_OK(tg_options_set_int(o, "memoryPerDevice", 300000000));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
    TG_CHECK(p && p->n_devices == 4);
    for (int d = 0; p && d < 4; d++)
        TG_CHECK(p->devices[d].arena_bytes <= 300000000);
    tg_program_destroy(p);
    /* uniform: 18 scopes, stages from scopes 0, 4, 9, 13 */
    TG_CHECK_OK(tg_options_set(o, "split", "layer1.2,layer3.0,layer3.4"));
    p = NULL;
    TG_CHECK(tg_program_compile(mg.graph, o, &p) == TG_ERR_CAPACITY);
    TG_CHECK(strstr(tg_error_message(), "device 3") != NULL);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

static void test_specs_round_trip(void)
{
    tg_model_graph mg = resnet50();
    tg_options *o = options(4, "pipelined", "cpu");
    tg_split_prediction best, again;
    TG_CHECK_OK(tg_predict_split(mg.graph, o, 4, "auto", &best));
    TG_CHECK(!best.blocks && best.n_stages == 4 && best.fits);
    TG_CHECK(!best.calibrated && !best.cycle_model); /* TILEGRAPH_CALIBRATION=off, cpu */
    TG_CHECK_OK(tg_predict_split(mg.graph, o, 4, best.spec, &again));
    TG_CHECK(strcmp(best.spec, again.spec) == 0);
    TG_CHECK_NEAR(again.step_seconds, best.step_seconds, 1e-12);
    /* the best is no slower than the uniform split by the same model */
    TG_CHECK_OK(tg_predict_split(mg.graph, o, 4, "layer1.2,layer3.0,layer3.4", &again));
    double worst_best = 0, worst_uniform = 0;
    for (int k = 0; k < 4; k++) {
        worst_best = fmax(worst_best, best.stage_seconds[k]);
        worst_uniform = fmax(worst_uniform, again.stage_seconds[k]);
    }
    TG_CHECK(worst_best <= worst_uniform);
    /* bad splits name the fault */
    TG_CHECK(tg_predict_split(mg.graph, o, 4, "layer9.9", &again) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "layer9.9") && strstr(tg_error_message(), "layer1.0"));
    TG_CHECK(tg_predict_split(mg.graph, o, 4, "layer3.0,layer2.0,layer4.0", &again) ==
             TG_ERR_CONFIG);
    TG_CHECK(tg_predict_split(mg.graph, o, 4, "layer3.0", &again) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "2 stages") != NULL);
    tg_schedule_prediction sched[8];
    int n = 0;
    TG_CHECK_OK(tg_predict_schedules(mg.graph, o, 4, "auto", sched, 8, &n));
    TG_CHECK(n == TG_SCHEDULE_COUNT);
    for (int k = 0; k < n; k++) /* sharded keeps one micro-batch, gpipe all 8 */
        if (strcmp(sched[k].name, "sharded") == 0 || strcmp(sched[k].name, "gpipe") == 0)
            TG_CHECK(sched[k].peak_stash[0] == (sched[k].name[0] == 's' ? 1 : 8));
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

static void test_blocks_and_errors(void)
{
    tg_model_graph mg;
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 8, &opt, &mg));
    tg_options *o = options(2, "pipelined", "cpu");
    TG_CHECK_OK(tg_options_set(o, "split", ""));
    TG_CHECK_OK(tg_options_set(o, "stages", "auto"));
    tg_split_prediction sp;
    TG_CHECK_OK(tg_predict_split(mg.graph, o, 2, "B1,B2|B3,B4", &sp));
    TG_CHECK(sp.blocks && strcmp(sp.spec, "B1,B2|B3,B4") == 0);
    TG_CHECK(tg_predict_split(mg.graph, o, 2, "B2|B1,B3,B4", &sp) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "out of order") != NULL);
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
    TG_CHECK(p && p->n_devices == 2);
    tg_split_prediction best;
    TG_CHECK_OK(tg_predict_split(mg.graph, o, 2, "auto", &best));
    TG_CHECK(p && strcmp(p->auto_stages, best.spec) == 0); /* compiled what was predicted */
    tg_program_destroy(p);
    /* more devices than blocks, no device count, a split that is not auto */
    TG_CHECK_OK(tg_options_set_int(o, "devices", 5));
    TG_CHECK(tg_program_compile(mg.graph, o, &p) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "only 4 blocks") != NULL);
    TG_CHECK_OK(tg_options_set_int(o, "devices", 0));
    TG_CHECK(tg_program_compile(mg.graph, o, &p) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "--devices") != NULL);
    TG_CHECK_OK(tg_options_set_int(o, "devices", 2));
    TG_CHECK_OK(tg_options_set(o, "split", "layer2"));
    TG_CHECK(tg_program_compile(mg.graph, o, &p) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "--split auto") != NULL);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

/* The backward pass and SGD's updates after a test graph's loss. */
static void train_with_sgd(tg_graph *g, tg_tensor *loss)
{
    tg_tensor_mark_output(loss);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
}

/* Three blocks of a small MLP: what each atom holds and what crosses each
 * boundary, against the graph itself. */
static void test_atom_bytes_and_costs(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(8, 16));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(8));
    tg_block_begin(g, "B1");
    tg_tensor *h1 = tg_relu(g, tg_nn_linear(g, x, "l1", 16, 32, true));
    tg_block_begin(g, "B2");
    tg_tensor *h2 = tg_relu(g, tg_nn_linear(g, h1, "l2", 32, 32, true));
    tg_block_begin(g, "B3");
    tg_tensor *out = tg_nn_linear(g, h2, "l3", 32, 10, true);
    tg_tensor *loss = tg_cross_entropy(g, out, labels);
    tg_block_end(g);
    train_with_sgd(g, loss);
    tg_options *o = options(3, "pipelined", "cpu");
    TG_CHECK_OK(tg_options_set(o, "split", ""));
    tg_stage_atoms a;
    tg_stage_goal goal;
    tg_stage_plan plan;
    TG_CHECK_OK(plan_auto(g, o, 3, false, &a, &goal, &plan));
    tg_stage_atoms_free(&a); /* may hold parts of blocks: the blocks alone */
    bool needed[64];
    TG_CHECK(g->n_nodes <= 64);
    for (int i = 0; i < g->n_nodes && i < 64; i++)
        needed[i] = true;
    TG_CHECK_OK(tg_stage_atoms_build(g, needed, false, &goal.cost, true, &a));
    TG_CHECK_OK(tg_stage_plan_best(&a, &goal, &plan));
    TG_CHECK(a.n == 3 && a.from_blocks && strcmp(a.names[1], "B2") == 0);
    /* one [8, 32] activation crosses each boundary; nothing after the last */
    TG_CHECK_NEAR(a.cut[0], 8 * 32 * 4, 0);
    TG_CHECK_NEAR(a.cut[1], 8 * 32 * 4, 0);
    TG_CHECK_NEAR(a.cut[2], 0, 0);
    /* weights and biases (doubled: accumulation 8 adds an accumulator) */
    TG_CHECK_NEAR(a.persistent[0], 2.0 * (16 * 32 + 32) * 4, 0);
    TG_CHECK_NEAR(a.persistent[2], 2.0 * (32 * 10 + 10) * 4, 0);
    /* every forward op's cost lands in exactly one atom */
    double fwd = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->n_in > 0 && !(t->flags & (TG_NODE_BACKWARD | TG_NODE_OPTIMIZER)))
            fwd += tg_cost_node_seconds(&goal.cost, t);
    }
    TG_CHECK_NEAR(a.forward[0] + a.forward[1] + a.forward[2], fwd, 1e-15);
    /* and the update is the optimizer's ops alone (not forward or B again) */
    double upd = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->flags & TG_NODE_OPTIMIZER)
            upd += tg_cost_node_seconds(&goal.cost, g->nodes[i]);
    TG_CHECK(upd > 0);
    TG_CHECK_NEAR(a.update[0] + a.update[1] + a.update[2], upd, 1e-15);
    TG_CHECK(a.backward[0] > 0 && a.backward[2] > 0 && a.kept[1] > 0);
    /* the weight gradient (W): all of the first block's backward (no block
     * before it waits), part of a later block's (the rest feeds the block
     * before: B) */
    TG_CHECK_NEAR(a.weight[0], a.backward[0], 1e-15);
    for (int k = 1; k < 3; k++)
        TG_CHECK(a.weight[k] > 0 && a.weight[k] < a.backward[k]);
    /* three devices, three blocks: one each */
    TG_CHECK(plan.first[0] == 0 && plan.first[1] == 1 && plan.first[2] == 2);
    (void)h2;
    tg_stage_atoms_free(&a);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

/* Block A, one small linear layer, then block B, four larger ones; with
 * *mask, an input B adds after its first and its third layer. */
static tg_graph *light_then_heavy(tg_tensor **mask)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(8, 16));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(8));
    tg_tensor *m = mask ? (*mask = tg_input(g, "mask", TG_F32, tg_shape2(8, 256))) : NULL;
    tg_block_begin(g, "A");
    tg_tensor *h = tg_relu(g, tg_nn_linear(g, x, "l1", 16, 32, true));
    tg_block_begin(g, "B");
    h = tg_nn_linear(g, h, "l2", 32, 256, true);
    h = m ? tg_add(g, h, m) : tg_relu(g, h);
    h = tg_relu(g, tg_nn_linear(g, h, "l3", 256, 256, true));
    h = tg_nn_linear(g, h, "l4", 256, 256, true);
    h = m ? tg_add(g, h, m) : tg_relu(g, h);
    tg_tensor *loss = tg_cross_entropy(g, tg_nn_linear(g, h, "l5", 256, 10, true), labels);
    tg_block_end(g);
    train_with_sgd(g, loss);
    return g;
}

/* Automatic stages over 2 devices, pipelined. */
static tg_options *auto_over_2(void)
{
    tg_options *o = options(2, "pipelined", "cpu");
    TG_CHECK_OK(tg_options_set(o, "split", ""));
    TG_CHECK_OK(tg_options_set(o, "stages", "auto"));
    return o;
}

/* A light block and a heavy one over 2 devices: no block boundary balances
 * them, so the split begins the second stage inside the heavy block
 * ("A,B|B:OP,..."), predicted faster than the blocks' split; the spec reads
 * back, compiles to the ops' devices, and names what is wrong in a bad one. */
static void test_stages_inside_a_block(void)
{
    tg_graph *g = light_then_heavy(NULL);
    tg_options *o = auto_over_2();
    tg_stage_atoms a, blocks;
    tg_stage_goal goal;
    tg_stage_plan plan, by_blocks;
    TG_CHECK_OK(plan_auto(g, o, 2, false, &a, &goal, &plan));
    TG_CHECK(a.from_blocks && a.n > 2 && a.part[plan.first[1]]);
    /* the blocks alone: A|B, predicted slower */
    bool *needed = calloc((size_t)g->n_nodes, sizeof(bool));
    for (int i = 0; i < g->n_nodes; i++)
        needed[i] = true;
    TG_CHECK_OK(tg_stage_atoms_build(g, needed, false, &goal.cost, true, &blocks));
    TG_CHECK_OK(tg_stage_plan_best(&blocks, &goal, &by_blocks));
    TG_CHECK(blocks.n == 2 && by_blocks.first[1] == 1);
    TG_CHECK(plan.objective < by_blocks.objective * (1 - TG_STAGE_PART_GAIN));
    /* the parts divide the blocks' costs: nothing lost or counted twice */
    double fa = 0, fb = blocks.forward[0] + blocks.forward[1];
    double ba = 0, bb = blocks.backward[0] + blocks.backward[1];
    for (int k = 0; k < a.n; k++)
        fa += a.forward[k], ba += a.backward[k];
    TG_CHECK_NEAR(fa, fb, 1e-15);
    TG_CHECK_NEAR(ba, bb, 1e-15);
    tg_split_prediction best, again;
    TG_CHECK_OK(tg_predict_split(g, o, 2, "auto", &best));
    TG_CHECK(best.blocks && strncmp(best.spec, "A,B|B:", 6) == 0);
    TG_CHECK_OK(tg_predict_split(g, o, 2, best.spec, &again));
    TG_CHECK(strcmp(best.spec, again.spec) == 0);
    TG_CHECK_NEAR(again.step_seconds, best.step_seconds, 1e-12);
    /* compiled as predicted: the op the stage begins at on device 1, the
     * block's first weight on device 0 */
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    if (p) {
        TG_CHECK(p->n_devices == 2 && strcmp(p->auto_stages, best.spec) == 0);
        const tg_tensor *first = tg_graph_find(g, strchr(best.spec, ':') + 1);
        TG_CHECK(first && p->device_of[first->id] == 1);
        TG_CHECK(p->device_of[tg_graph_find(g, "l2/weight")->id] == 0);
    }
    tg_program_destroy(p);
    TG_CHECK(tg_predict_split(g, o, 2, "A,B|B:nope", &again) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "block 'B' has no forward op 'nope'") != NULL);
    TG_CHECK(tg_predict_split(g, o, 2, "A,B|C:l3", &again) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "block 'C'") != NULL);
    free(needed);
    tg_stage_atoms_free(&blocks);
    tg_stage_atoms_free(&a);
    tg_cost_model_free(&goal.cost);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

/* A stage handing its convolution's input gradient back ("B1|<B2,B3,B4"
 * on mnist-pipeline): the atoms know B2's conv2d_bwd_data alone, the
 * evaluation moves exactly its seconds from stage 1's input gradient to
 * stage 0's and sends dy and the weight back instead of dx, the spec
 * round-trips, --stages auto takes it exactly when it is better by
 * TG_STAGE_PART_GAIN, and an atom with nothing to hand back is refused. */
static void test_handed_back_input_gradient(void)
{
    tg_model_graph mg = {0};
    tg_optimizer opt = tg_optimizer_adamw(0.001f);
    TG_CHECK_OK(tg_model_graph_create(tg_model_find("mnist-pipeline"), 40, &opt, &mg));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "executionStrategy", "pipelined"));
    TG_CHECK_OK(tg_options_set(o, "pipelineSchedule", "1f1b"));
    TG_CHECK_OK(tg_options_set_int(o, "Training.gradientAccumulation", 16));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    tg_config c;
    TG_CHECK_OK(tg_config_read(o, &c));
    tg_stage_atoms a;
    tg_stage_goal goal;
    tg_stage_plan plain, back, again, chosen;
    TG_CHECK_OK(tg_stage_plan_auto(mg.graph, &c, 2, false, "B1|B2,B3,B4", &a, &goal, &plain));
    TG_CHECK(a.n == 4 && a.handoff[0] == 0 && a.handoff[1] > 0 && a.handoff[2] == 0 &&
             a.handoff[3] == 0);
    double dx = 0, in = 0, sec = 0;
    const tg_graph *g = mg.graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const tg_tensor *t = g->nodes[i];
        if (t->op == TG_OP_CONV2D_BWD_DATA && t->forward_of &&
            strcmp(t->forward_of->in[1]->name, "layer2/conv/weight") == 0) {
            sec += tg_cost_node_seconds(&goal.cost, t);
            dx += (double)tg_nbytes(t);
            in += (double)(tg_nbytes(t->in[0]) + tg_nbytes(t->in[1]));
        }
    }
    TG_CHECK(sec > 0 && a.handoff[1] == sec && a.handoff_dx[1] == dx && a.handoff_in[1] == in);
    TG_CHECK_OK(tg_stage_plan_parse(&a, &goal, "B1|<B2,B3,B4", &back));
    TG_CHECK(back.handoff[1] && !plain.handoff[1] && back.first[1] == 1);
    TG_CHECK_NEAR(back.costs[0].time[TG_SIM_BACKWARD], plain.costs[0].time[TG_SIM_BACKWARD] + sec,
                  1e-15);
    TG_CHECK_NEAR(back.costs[1].time[TG_SIM_BACKWARD], plain.costs[1].time[TG_SIM_BACKWARD] - sec,
                  1e-15);
    TG_CHECK_NEAR(back.costs[1].send_backward, tg_cost_copy_seconds(&goal.cost, a.cut[0] - dx + in),
                  1e-15);
    char spec[256];
    tg_stage_plan_spec(&a, &back, spec, sizeof spec);
    TG_CHECK(strcmp(spec, "B1|<B2,B3,B4") == 0);
    TG_CHECK_OK(tg_stage_plan_parse(&a, &goal, spec, &again));
    TG_CHECK_NEAR(again.objective, back.objective, 1e-15);
    /* the search over the handed-back splits takes it when it pays */
    chosen = plain;
    TG_CHECK_OK(tg_stage_plan_handoffs(&a, &goal, &chosen));
    bool pays = back.objective < plain.objective * (1 - TG_STAGE_PART_GAIN);
    TG_CHECK(chosen.handoff[1] == pays || (chosen.handoff[1] && chosen.first[1] != 1));
    TG_CHECK(chosen.objective <= (pays ? back.objective : plain.objective));
    /* B3 begins with no convolution reading B2 */
    TG_CHECK(tg_stage_plan_parse(&a, &goal, "B1,B2|<B3,B4", &again) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "'<B3'") != NULL);
    TG_CHECK(tg_stage_plan_parse(&a, &goal, "<B1|B2,B3,B4", &again) == TG_ERR_CONFIG);
    /* weights off chip are not copied: the search keeps the plain split,
     * and a user's '<' fails to compile naming the weight */
    goal.weight_copies = false;
    chosen = plain;
    TG_CHECK_OK(tg_stage_plan_handoffs(&a, &goal, &chosen));
    TG_CHECK(!chosen.handoff[1]);
    TG_CHECK_OK(tg_options_set(o, "stages", "B1|<B2,B3,B4"));
    TG_CHECK_OK(tg_options_set(o, "TensorLocations.weight.onChip", "false"));
    tg_program *p = NULL;
    TG_CHECK(tg_program_compile(mg.graph, o, &p) == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "'layer2/conv/weight' is copied") != NULL);
    tg_program_destroy(p);
    tg_stage_atoms_free(&a);
    tg_cost_model_free(&goal.cost);
    tg_config_free(&c);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

/* Two blocks of convolutions; with `shortcut` block B adds its input to
 * its convolution's output (a residual), so A's output has two readers. */
static tg_graph *two_conv_blocks(bool shortcut)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape4(2, 3, 8, 8));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(2));
    tg_block_begin(g, "A");
    tg_tensor *h = tg_relu(g, tg_nn_conv2d(g, x, "c1", 3, 8, 3, 1, 1));
    tg_block_begin(g, "B");
    tg_tensor *y = tg_nn_conv2d(g, h, "c2", 8, 8, 3, 1, 1);
    y = tg_relu(g, shortcut ? tg_add(g, y, h) : y);
    tg_tensor *loss =
        tg_cross_entropy(g, tg_nn_linear(g, tg_flatten(g, y, 1), "fc", 512, 10, true), labels);
    tg_block_end(g);
    train_with_sgd(g, loss);
    return g;
}

/* A convolution whose input another op of its stage reads too (a residual
 * shortcut) keeps its input gradient: autodiff sums the two contributions
 * on the convolution's stage, which would then wait for the stage before
 * in the backward: a gradient flowing forward, which no schedule orders
 * (by the engine's dependencies, a deadlock; not run). Without the
 * shortcut the same convolution's gradient may be handed back. */
static void test_no_handoff_of_a_shared_input(void)
{
    for (int shortcut = 0; shortcut < 2; shortcut++) {
        tg_graph *g = two_conv_blocks(shortcut);
        tg_options *o = options(2, "pipelined", "cpu");
        TG_CHECK_OK(tg_options_set(o, "split", ""));
        tg_config c;
        TG_CHECK_OK(tg_config_read(o, &c));
        tg_stage_atoms a;
        tg_stage_goal goal;
        tg_stage_plan plan;
        TG_CHECK_OK(tg_stage_plan_auto(g, &c, 2, false, "A|B", &a, &goal, &plan));
        TG_CHECK(a.n == 2 && (a.handoff[1] > 0) == !shortcut);
        tg_status st = tg_stage_plan_parse(&a, &goal, "A|<B", &plan);
        TG_CHECK(st == (shortcut ? TG_ERR_CONFIG : TG_OK));
        TG_CHECK(!shortcut || strstr(tg_error_message(), "'<B'") != NULL);
        if (!shortcut) { /* it compiles, the gradient on device 0 */
            TG_CHECK_OK(tg_options_set(o, "stages", "A|<B"));
            tg_program *p = NULL;
            TG_CHECK_OK(tg_program_compile(g, o, &p));
            for (int i = 0; p && i < g->n_nodes; i++)
                if (g->nodes[i]->op == TG_OP_CONV2D_BWD_DATA)
                    TG_CHECK(p->device_of[i] == 0);
            tg_program_destroy(p);
        }
        tg_stage_atoms_free(&a);
        tg_cost_model_free(&goal.cost);
        tg_config_free(&c);
        tg_options_destroy(o);
        tg_graph_destroy(g);
    }
}

/* An input read at both ends of the heavy block (as each layer of the
 * encoder reads its mask): no stage begins between its readers, since a
 * stage cannot read an input another reads, and the split compiles. */
static void test_no_cut_between_a_leafs_readers(void)
{
    tg_tensor *mask = NULL;
    tg_graph *g = light_then_heavy(&mask);
    tg_options *o = auto_over_2();
    tg_stage_atoms a;
    tg_stage_goal goal;
    tg_stage_plan plan;
    TG_CHECK_OK(plan_auto(g, o, 2, false, &a, &goal, &plan));
    int readers[2] = {-1, -1}; /* the two adds reading the mask */
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            if (g->nodes[i]->in[k] == mask && !(g->nodes[i]->flags & TG_NODE_BACKWARD))
                readers[readers[0] < 0 ? 0 : 1] = i;
    TG_CHECK(readers[0] >= 0 && readers[1] > readers[0]);
    if (readers[1] > 0)
        TG_CHECK(a.atom_of[readers[0]] == a.atom_of[readers[1]] ||
                 (a.atom_of[readers[0]] >= plan.first[1]) ==
                     (a.atom_of[readers[1]] >= plan.first[1]));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(g, o, &p));
    if (p)
        TG_CHECK(p->device_of[readers[0]] == p->device_of[readers[1]]);
    tg_program_destroy(p);
    tg_stage_atoms_free(&a);
    tg_cost_model_free(&goal.cost);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

/* Layer scopes below containers (Hugging Face's bert/encoder/layer/N) are
 * atoms of their own, named as --split takes them; ResNet's layer3/8 and a
 * scope without a numbered module keep their old keys. */
static void test_scopes_below_containers(void)
{
    tg_graph *g = tg_graph_create();
    tg_tensor *x = tg_input(g, "x", TG_F32, tg_shape2(4, 8));
    tg_tensor *labels = tg_input(g, "labels", TG_I32, tg_shape1(4));
    tg_scope_push(g, "bert");
    tg_scope_push(g, "embeddings");
    tg_tensor *h = tg_relu(g, tg_nn_linear(g, x, "dense", 8, 8, true));
    tg_scope_pop(g);
    tg_scope_push(g, "encoder");
    tg_scope_push(g, "layer");
    for (int k = 0; k < 3; k++) {
        char n[8];
        snprintf(n, sizeof n, "%d", k);
        tg_scope_push(g, n);
        tg_scope_push(g, "attention");
        h = tg_relu(g, tg_nn_linear(g, h, "dense", 8, 8, true));
        tg_scope_pop(g);
        tg_scope_pop(g);
    }
    tg_scope_pop(g);
    tg_scope_pop(g);
    tg_scope_pop(g);
    tg_scope_push(g, "qa_outputs");
    tg_tensor *out = tg_nn_linear(g, h, "dense", 8, 3, true);
    tg_scope_pop(g);
    tg_tensor *loss = tg_cross_entropy(g, out, labels);
    tg_tensor_mark_output(loss);
    TG_CHECK_OK(tg_graph_backward(g, loss));
    tg_optimizer opt = tg_optimizer_sgd(0.1f, 0.0f);
    TG_CHECK_OK(tg_graph_add_optimizer(g, &opt));
    tg_options *o = options(2, "pipelined", "cpu");
    TG_CHECK_OK(tg_options_set(o, "split", "auto"));
    tg_stage_atoms a;
    tg_stage_goal goal;
    tg_stage_plan plan;
    TG_CHECK_OK(plan_auto(g, o, 2, true, &a, &goal, &plan));
    TG_CHECK(a.n == 5);
    if (a.n == 5) {
        TG_CHECK(strcmp(a.names[0], "bert") == 0);
        TG_CHECK(strcmp(a.names[1], "bert.encoder.layer.0") == 0);
        TG_CHECK(strcmp(a.names[3], "bert.encoder.layer.2") == 0);
        TG_CHECK(strcmp(a.names[4], "qa_outputs") == 0);
    }
    tg_stage_atoms_free(&a);
    tg_options_destroy(o);
    tg_graph_destroy(g);
}

int main(void)
{
    setenv("TILEGRAPH_CALIBRATION", "off", 1);
    TG_RUN(test_dp_equals_exhaustive_search);
    TG_RUN(test_mk2_fits_where_uniform_does_not);
    TG_RUN(test_specs_round_trip);
    TG_RUN(test_blocks_and_errors);
    TG_RUN(test_atom_bytes_and_costs);
    TG_RUN(test_stages_inside_a_block);
    TG_RUN(test_handed_back_input_gradient);
    TG_RUN(test_no_handoff_of_a_shared_input);
    TG_RUN(test_no_cut_between_a_leafs_readers);
    TG_RUN(test_scopes_below_containers);
    return tg_test_finish();
}
