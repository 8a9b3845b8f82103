/* tests/compile/test_simulate.c - the schedule simulator against timelines
 * worked out by hand: fill-drain with equal stages (bubble (S-1)/(m+S-1)),
 * sharded as a sum of stages and copies, an unbalanced pipeline whose slow
 * stage sets the pace, updates at the end, zero-bubble schedules' idle time
 * with equal F, B and W, and bad costs refused. */
#include "tg_test.h"

#include "compile/simulate.h"

static void equal_costs(tg_stage_cost *c, int n, double f, double b)
{
    for (int d = 0; d < n; d++)
        c[d] = (tg_stage_cost){{f, b}, 0, 0, 0};
}

static void test_equal_stages_bubble(void)
{
    tg_stage_cost c[8];
    int kinds[] = {TG_SCHEDULE_GPIPE, TG_SCHEDULE_1F1B};
    for (int k = 0; k < 2; k++)
        for (int n = 2; n <= 4; n++)
            for (int m = n; m <= 16; m += 3) {
                tg_pipe_schedule s;
                tg_sim_result r;
                TG_CHECK_OK(tg_pipe_schedule_build((tg_schedule_kind)kinds[k], n, m, true, &s));
                equal_costs(c, n, 1.0, 2.0);
                TG_CHECK_OK(tg_schedule_simulate_costs(&s, c, &r));
                /* (m + S - 1) slots of forward and of backward */
                TG_CHECK_NEAR(r.step_time, (m + n - 1) * 3.0, 1e-9);
                TG_CHECK_NEAR(r.bubble, (double)(n - 1) / (m + n - 1), 1e-12);
                for (int d = 0; d < n; d++) {
                    TG_CHECK_NEAR(r.busy_time[d], m * 3.0, 1e-9);
                    TG_CHECK(r.peak_stash[d] == s.stash_depth[d]);
                }
                tg_sim_result_free(&r);
                tg_pipe_schedule_free(&s);
            }
}

/* F, B and W a second each: 1f1b runs B and W as one backward of 2 s and
 * idles 3(N-1) s per device, zb-h1 2(N-1) s and zb-h2 N-1 s (the unit
 * clock's figures, compile/pipeline.h), each within its stash depth. */
static void test_zero_bubble_equal_stages(void)
{
    tg_schedule_kind kinds[] = {TG_SCHEDULE_1F1B, TG_SCHEDULE_ZB_H1, TG_SCHEDULE_ZB_H2};
    int idle[] = {3, 2, 1};
    tg_stage_cost c[8];
    for (int k = 0; k < 3; k++)
        for (int n = 2; n <= 6; n++)
            for (int m = n; m <= 20; m += 3) {
                tg_pipe_schedule s;
                tg_sim_result r;
                TG_CHECK_OK(tg_pipe_schedule_build(kinds[k], n, m, true, &s));
                for (int d = 0; d < n; d++)
                    c[d] = (tg_stage_cost){{1, 1, 1}, 0, 0, 0};
                TG_CHECK_OK(tg_schedule_simulate_costs(&s, c, &r));
                TG_CHECK_NEAR(r.step_time, 3.0 * m + idle[k] * (n - 1), 1e-9);
                TG_CHECK_NEAR(r.bubble, idle[k] * (n - 1) / (3.0 * m + idle[k] * (n - 1)), 1e-12);
                for (int d = 0; d < n; d++)
                    TG_CHECK(r.peak_stash[d] == s.stash_depth[d]);
                /* W's timeline is recorded in split schedules only */
                TG_CHECK((r.op_end[TG_SIM_WEIGHT] >= 0) == tg_pipe_schedule_splits(&s));
                tg_sim_result_free(&r);
                tg_pipe_schedule_free(&s);
            }
}

static void test_sharded_is_a_sum(void)
{
    tg_stage_cost c[3] = {{{1, 2}, 0.5, 0.25, 0}, {{3, 1}, 0.5, 0.25, 0}, {{2, 2}, 0, 0.25, 0}};
    tg_pipe_schedule s;
    tg_sim_result r;
    TG_CHECK_OK(tg_pipe_schedule_build(TG_SCHEDULE_SHARDED, 3, 5, true, &s));
    TG_CHECK_OK(tg_schedule_simulate_costs(&s, c, &r));
    /* per micro-batch: every stage's F and B (11) + two forward copies (1) +
     * two backward copies (0.5; the first stage's is never sent) */
    TG_CHECK_NEAR(r.step_time, 5 * 12.5, 1e-9);
    for (int d = 0; d < 3; d++)
        TG_CHECK(r.peak_stash[d] == 1);
    TG_CHECK_NEAR(r.bubble, 1 - 5 * 11.0 / (3 * 62.5), 1e-12);
    tg_sim_result_free(&r);
    tg_pipe_schedule_free(&s);
}

static void test_slow_stage_sets_the_pace(void)
{
    /* gpipe, m = 4: device 1's forwards run 1..13, its backwards 13..25,
     * device 0's last backward 25..26, then device 0's update 26..28 */
    tg_stage_cost c[2] = {{{1, 1}, 0, 0, 2}, {{3, 3}, 0, 0, 1}};
    tg_pipe_schedule s;
    tg_sim_result r;
    TG_CHECK_OK(tg_pipe_schedule_build(TG_SCHEDULE_GPIPE, 2, 4, true, &s));
    TG_CHECK_OK(tg_schedule_simulate_costs(&s, c, &r));
    TG_CHECK_NEAR(r.step_time, 28, 1e-9);
    TG_CHECK_NEAR(r.finish_time[1], 26, 1e-9);
    TG_CHECK_NEAR(r.busy_time[0], 10, 1e-9);
    TG_CHECK_NEAR(r.busy_time[1], 25, 1e-9);
    TG_CHECK_NEAR(r.busy[1], 25.0 / 28, 1e-12);
    TG_CHECK(r.peak_stash[0] == 4 && r.peak_stash[1] == 4);
    /* the timeline: device 1's F0 runs 1..4, device 0's B3 25..26 */
    TG_CHECK(r.micro_batches == 4);
    TG_CHECK_NEAR(r.op_start[(1 * 4 + 0) * TG_SIM_KIND_COUNT + TG_SIM_FORWARD], 1, 1e-12);
    TG_CHECK_NEAR(r.op_end[(1 * 4 + 0) * TG_SIM_KIND_COUNT + TG_SIM_FORWARD], 4, 1e-12);
    TG_CHECK_NEAR(r.op_start[(0 * 4 + 3) * TG_SIM_KIND_COUNT + TG_SIM_BACKWARD], 25, 1e-12);
    TG_CHECK_NEAR(r.op_end[(0 * 4 + 3) * TG_SIM_KIND_COUNT + TG_SIM_BACKWARD], 26, 1e-12);
    tg_sim_result_free(&r);
    tg_pipe_schedule_free(&s);
}

static void test_copies_delay_the_next_stage(void)
{
    /* 1f1b, 2 stages, m = 2, forward copy 1 and backward copy 1:
     * d0 F0 0-1, F1 1-2; d1 F0 2-3, B0 3-4, F1 4-5 (F1 arrived at 3), B1 5-6;
     * d0 B0 5-6 (arrives 4+1), B1 7-8 */
    tg_stage_cost c[2] = {{{1, 1}, 1, 1, 0}, {{1, 1}, 1, 1, 0}};
    tg_pipe_schedule s;
    tg_sim_result r;
    TG_CHECK_OK(tg_pipe_schedule_build(TG_SCHEDULE_1F1B, 2, 2, true, &s));
    TG_CHECK_OK(tg_schedule_simulate_costs(&s, c, &r));
    TG_CHECK_NEAR(r.step_time, 8, 1e-9);
    TG_CHECK_NEAR(r.finish_time[1], 6, 1e-9);
    tg_sim_result_free(&r);
    tg_pipe_schedule_free(&s);
}

static void test_bad_costs(void)
{
    tg_stage_cost c[2] = {{{1, 1}, 0, 0, 0}, {{-1, 1}, 0, 0, 0}};
    tg_pipe_schedule s;
    tg_sim_result r;
    TG_CHECK_OK(tg_pipe_schedule_build(TG_SCHEDULE_1F1B, 2, 2, true, &s));
    TG_CHECK(tg_schedule_simulate_costs(&s, c, &r) == TG_ERR_INVALID_ARG);
    c[1].time[0] = NAN;
    TG_CHECK(tg_schedule_simulate_costs(&s, c, &r) == TG_ERR_INVALID_ARG);
    tg_pipe_schedule_free(&s);
}

int main(void)
{
    TG_RUN(test_equal_stages_bubble);
    TG_RUN(test_zero_bubble_equal_stages);
    TG_RUN(test_sharded_is_a_sum);
    TG_RUN(test_slow_stage_sets_the_pace);
    TG_RUN(test_copies_delay_the_next_stage);
    TG_RUN(test_bad_costs);
    return tg_test_finish();
}
