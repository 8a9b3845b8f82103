/* tests/target/test_collective.c - the all-reduce model of a pod
 * (target/collective.c): a ring's time grows with the bytes and carries the
 * 2(n - 1)/n factor, replicas past a link domain go through the gateway,
 * which is slower than the IPU-Links, and a replicated plan's update pays
 * its all-reduce (the update's copies without it do not change with the
 * replicas); a sharded weight's all-gather is half an all-reduce. */
#include "tg_test.h"

#include "compile/program.h"
#include "target/collective.h"
#include "tilegraph/models.h"
#include "tilegraph/optim.h"

#include <math.h>

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b));
}

static void test_ring_factor(void)
{
    double bytes = 1 << 20, bw = 48;
    TG_CHECK(tg_ring_allreduce_cycles(bytes, 1, bw, 200) == 0);
    TG_CHECK(tg_ring_allreduce_cycles(0, 8, bw, 200) == 0);
    for (int n = 2; n <= 64; n *= 2) {
        /* without a step cost: the bytes each device sends, 2(n - 1)/n of
         * them, at the link's rate; the step cost adds 2(n - 1) steps */
        double pure = tg_ring_allreduce_cycles(bytes, n, bw, 0);
        TG_CHECK(near(pure, 2.0 * (n - 1) / n * bytes / bw));
        TG_CHECK(near(tg_ring_allreduce_cycles(bytes, n, bw, 200) - pure, 2.0 * (n - 1) * 200));
        /* below twice the bytes over the link however many replicas */
        TG_CHECK(pure < 2 * bytes / bw);
        TG_CHECK(pure > tg_ring_allreduce_cycles(bytes, n / 2, bw, 0) || n == 2);
    }
    /* more bytes, more time; a faster link, less */
    TG_CHECK(tg_ring_allreduce_cycles(2 * bytes, 4, bw, 200) >
             tg_ring_allreduce_cycles(bytes, 4, bw, 200));
    TG_CHECK(tg_ring_allreduce_cycles(bytes, 4, 2 * bw, 200) <
             tg_ring_allreduce_cycles(bytes, 4, bw, 200));
}

static void test_domains_and_gateway(void)
{
    tg_target_desc t;
    tg_target_mk2(&t);
    /* the published figures: the gateway's share per device is below an IPU-Link's */
    TG_CHECK(t.gateway_bytes_per_cycle / (double)t.devices_per_machine < t.link_bytes_per_cycle);
    double bytes = 64 << 20;
    /* 16 replicas of 4 devices fill one domain of 64: IPU-Links only */
    tg_allreduce_cost one = tg_allreduce_cost_of(&t, bytes, 16, 4);
    TG_CHECK(one.domains == 1 && one.per_domain == 16 && one.gateway_cycles == 0);
    TG_CHECK(near(one.cycles,
                  tg_ring_allreduce_cycles(bytes, 16, t.link_bytes_per_cycle, t.sync_cycles)));
    /* the same over domains of 16 devices (4 x IPU-POD16): 4 replicas a
     * domain, 4 domains over the gateways, slower than one domain */
    t.link_domain_devices = 16;
    tg_allreduce_cost four = tg_allreduce_cost_of(&t, bytes, 16, 4);
    TG_CHECK(four.domains == 4 && four.per_domain == 4 && four.gateway_cycles > 0);
    TG_CHECK(near(four.cycles, four.link_cycles + four.gateway_cycles));
    TG_CHECK(four.cycles > one.cycles);
    /* the gateway ring moves a quarter of the bytes (each device's piece
     * after the inner reduce-scatter) at the machine's rate shared by 4 */
    TG_CHECK(near(four.gateway_cycles,
                  tg_ring_allreduce_cycles(bytes / 4, 4, t.gateway_bytes_per_cycle / 4,
                                           t.gateway_step_cycles)));
    /* a slower gateway: a slower all-reduce; a replica wider than a domain
     * still has a ring of one replica a domain */
    t.gateway_bytes_per_cycle /= 2;
    TG_CHECK(tg_allreduce_cost_of(&t, bytes, 16, 4).cycles > four.cycles);
    tg_allreduce_cost wide = tg_allreduce_cost_of(&t, bytes, 2, 32);
    TG_CHECK(wide.per_domain == 1 && wide.domains == 2 && wide.link_cycles == 0);
    /* a sharded weight's all-gather: half the all-reduce at each level, so
     * (R - 1)/R of the weight over the link in one domain */
    TG_CHECK(near(tg_allgather_cycles(&t, bytes, 16, 4),
                  tg_allreduce_cost_of(&t, bytes, 16, 4).cycles / 2));
    tg_target_desc one_domain;
    tg_target_mk2(&one_domain);
    one_domain.sync_cycles = 0;
    TG_CHECK(near(tg_allgather_cycles(&one_domain, bytes, 4, 1),
                  3.0 / 4 * bytes / one_domain.link_bytes_per_cycle));
    TG_CHECK(tg_allgather_cycles(&t, bytes, 16, 4) >
             tg_allgather_cycles(&one_domain, bytes, 16, 4));
    /* one replica: nothing to reduce */
    TG_CHECK(tg_allreduce_cost_of(&t, bytes, 1, 4).cycles == 0);
}

/* mnist-pipeline over 2 stages on mk2 with `replicas`: each device's update
 * copies and all-reduce cycles. */
static void update_copies(int replicas, double copies[2], double allreduce[2], double bytes[2])
{
    tg_model_graph mg = {0};
    tg_optimizer opt = tg_optimizer_sgd(0.01f, 0);
    TG_CHECK_OK(tg_model_graph_create_ex(tg_model_find("mnist-pipeline"), 4, &opt, NULL, &mg));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "target", "mk2"));
    TG_CHECK_OK(tg_options_set(o, "executionStrategy", "pipelined"));
    TG_CHECK_OK(tg_options_set(o, "stages", "B1,B2|B3,B4"));
    TG_CHECK_OK(tg_options_set_int(o, "Training.gradientAccumulation", 4));
    TG_CHECK_OK(tg_options_set_int(o, "replicationFactor", replicas));
    TG_CHECK_OK(tg_options_set_int(o, "threadsPerDevice", 1));
    tg_program *p = NULL;
    TG_CHECK_OK(tg_program_compile(mg.graph, o, &p));
    for (int d = 0; p && d < 2; d++) {
        const tg_tile_device *td = &p->tile_plan->devices[d];
        copies[d] = td->copy_cycles[TG_PHASE_UPDATE];
        allreduce[d] = td->allreduce_cycles;
        bytes[d] = td->allreduce_bytes;
    }
    TG_CHECK(p && p->n_devices == 2);
    tg_program_destroy(p);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

static void test_plan_pays_allreduce(void)
{
    double c1[2], a1[2], b1[2], c2[2], a2[2], b2[2], c4[2], a4[2], b4[2];
    update_copies(1, c1, a1, b1);
    update_copies(2, c2, a2, b2);
    update_copies(4, c4, a4, b4);
    tg_target_desc t;
    tg_target_mk2(&t);
    for (int d = 0; d < 2; d++) {
        TG_CHECK(a1[d] == 0 && b2[d] > 0 && b2[d] == b4[d]);
        TG_CHECK(near(a2[d], tg_allreduce_cost_of(&t, b2[d], 2, 2).cycles));
        TG_CHECK(a4[d] > a2[d]);
        /* the update's other copies do not depend on the replicas: the
         * all-reduce is what the replicas add (plus one barrier when the
         * update had no copies before) */
        double base = c1[d] > 0 ? 0 : t.sync_cycles;
        TG_CHECK(near(c2[d] - a2[d], c1[d] + base));
        TG_CHECK(near(c4[d] - a4[d], c1[d] + base));
    }
}

int main(void)
{
    TG_RUN(test_ring_factor);
    TG_RUN(test_domains_and_gateway);
    TG_RUN(test_plan_pays_allreduce);
    return tg_test_finish();
}
