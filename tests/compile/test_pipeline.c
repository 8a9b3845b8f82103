/* tests/compile/test_pipeline.c - pipeline schedules: every micro-batch's
 * forward and backward (and W, split) exactly once per device, no deadlock, stash depths as
 * documented, and busy fractions against theory. */
#include "tg_test.h"

#include "compile/pipeline.h"

#include <string.h>

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* Every micro-batch's forward, backward and (split) weight pass once per
 * device, each pass in micro-batch order, W(j) after B(j). */
static void check_complete(const tg_pipe_schedule *s)
{
    bool split = tg_pipe_schedule_splits(s);
    for (int d = 0; d < s->n_devices; d++) {
        int last[3] = {-1, -1, -1};
        for (int k = 0; k < s->n_ops[d]; k++) {
            tg_pipe_op op = s->ops[d][k];
            TG_CHECK(op.micro_batch == last[op.pass] + 1);
            last[op.pass] = op.micro_batch;
            if (op.pass == TG_PASS_WEIGHT)
                TG_CHECK(last[TG_PASS_BACKWARD] >= op.micro_batch);
        }
        int m = s->micro_batches;
        TG_CHECK(last[TG_PASS_FORWARD] == m - 1);
        TG_CHECK(last[TG_PASS_BACKWARD] == (s->training ? m - 1 : -1));
        TG_CHECK(last[TG_PASS_WEIGHT] == (split ? m - 1 : -1));
    }
}

static void test_depths_follow_the_formulas(void)
{
    for (int n = 1; n <= 6; n++)
        for (int m = 1; m <= 24; m += 5) {
            for (int k = 0; k < TG_SCHEDULE_COUNT; k++) {
                tg_pipe_schedule s;
                TG_CHECK_OK(tg_pipe_schedule_build((tg_schedule_kind)k, n, m, true, &s));
                check_complete(&s);
                TG_CHECK(tg_pipe_schedule_simulate(&s, NULL) > 0);
                for (int d = 0; d < n; d++) {
                    int want = 0;
                    switch (k) {
                    case TG_SCHEDULE_GROUPED:
                        want = min_int(2 * (n - d) + 1, m);
                        break;
                    case TG_SCHEDULE_INTERLEAVED:
                        want = min_int(n - d + 1, m);
                        break;
                    case TG_SCHEDULE_1F1B:
                    case TG_SCHEDULE_ZB_H1: /* 1f1b's memory, the point of H1 */
                        want = min_int(n - d, m);
                        break;
                    case TG_SCHEDULE_ZB_H2:
                        want = min_int(2 * n - d - 1, m);
                        break;
                    case TG_SCHEDULE_GPIPE:
                        want = m;
                        break;
                    case TG_SCHEDULE_SHARDED:
                        want = 1;
                        break;
                    }
                    if (s.stash_depth[d] != want)
                        tg_test_fail(
                            __FILE__, __LINE__, "%s N=%d m=%d device %d: depth %d, want %d",
                            tg_schedule_name((tg_schedule_kind)k), n, m, d, s.stash_depth[d], want);
                }
                tg_pipe_schedule_free(&s);
            }
        }
}

static void test_busy_fraction(void)
{
    /* fill-drain with unit-time passes: busy = m / (m + N - 1) on every device */
    tg_pipe_schedule s;
    double busy[4];
    TG_CHECK_OK(tg_pipe_schedule_build(TG_SCHEDULE_GPIPE, 4, 10, true, &s));
    int cycles = tg_pipe_schedule_simulate(&s, busy);
    TG_CHECK(cycles == 2 * (10 + 4 - 1));
    for (int d = 0; d < 4; d++)
        TG_CHECK_NEAR(busy[d], 10.0 / 13.0, 1e-12);
    tg_pipe_schedule_free(&s);
    /* sharded: one device at a time, so busy fractions sum to 1 */
    TG_CHECK_OK(tg_pipe_schedule_build(TG_SCHEDULE_SHARDED, 4, 10, true, &s));
    tg_pipe_schedule_simulate(&s, busy);
    TG_CHECK_NEAR(busy[0] + busy[1] + busy[2] + busy[3], 1.0, 1e-12);
    tg_pipe_schedule_free(&s);
}

/* The zero-bubble schedules on the unit clock (F, B and W a cycle each):
 * every device idles 2(N-1) cycles under zb-h1 and N-1 under zb-h2, where
 * a 1f1b backward of two cycles idles 3(N-1); every shape runs deadlock-free
 * (the simulator says -1 if not). */
static void check_unit_bubble(tg_schedule_kind kind, int idle)
{
    for (int n = 1; n <= 8; n++)
        for (int m = n; m <= 3 * n + 5; m++) {
            tg_pipe_schedule s;
            double busy[8];
            TG_CHECK_OK(tg_pipe_schedule_build(kind, n, m, true, &s));
            TG_CHECK(tg_pipe_schedule_splits(&s));
            check_complete(&s);
            int cycles = tg_pipe_schedule_simulate(&s, busy);
            int want = 3 * m + idle * (n - 1);
            if (cycles != want)
                tg_test_fail(__FILE__, __LINE__, "%s N=%d m=%d: %d cycles, want %d",
                             tg_schedule_name(kind), n, m, cycles, want);
            for (int d = 0; d < n; d++)
                TG_CHECK_NEAR(busy[d], 3.0 * m / cycles, 1e-12);
            tg_pipe_schedule_free(&s);
        }
}

static void test_zero_bubble(void)
{
    check_unit_bubble(TG_SCHEDULE_ZB_H1, 2);
    check_unit_bubble(TG_SCHEDULE_ZB_H2, 1);
    /* zb-h1: the last device runs F, B, W back to back, the first fills
     * with 4 forwards, and no W waits behind another pass */
    tg_pipe_schedule s;
    TG_CHECK_OK(tg_pipe_schedule_build(TG_SCHEDULE_ZB_H1, 4, 8, true, &s));
    for (int k = 0; k < 6; k++)
        TG_CHECK(s.ops[3][k].pass == (tg_pipe_pass)(k % 3) && s.ops[3][k].micro_batch == k / 3);
    for (int k = 0; k < 4; k++)
        TG_CHECK(s.ops[0][k].pass == TG_PASS_FORWARD);
    TG_CHECK(s.ops[0][4].pass == TG_PASS_BACKWARD);
    for (int d = 0; d < 4; d++)
        TG_CHECK(!tg_pipe_schedule_defers_weight(&s, d));
    tg_pipe_schedule_free(&s);
    /* zb-h2 defers W: device 0 runs B0 W0 B1 F7 B2 W1, device 3 F0 B0 F1 B1 */
    TG_CHECK_OK(tg_pipe_schedule_build(TG_SCHEDULE_ZB_H2, 4, 8, true, &s));
    TG_CHECK(tg_pipe_schedule_defers_weight(&s, 0) && tg_pipe_schedule_defers_weight(&s, 3));
    TG_CHECK(s.ops[0][9].pass == TG_PASS_BACKWARD && s.ops[0][10].pass == TG_PASS_FORWARD);
    tg_pipe_schedule_free(&s);
    /* inference has nothing to split */
    TG_CHECK_OK(tg_pipe_schedule_build(TG_SCHEDULE_ZB_H1, 3, 5, false, &s));
    TG_CHECK(!tg_pipe_schedule_splits(&s) && !tg_pipe_schedule_defers_weight(&s, 0));
    check_complete(&s);
    tg_pipe_schedule_free(&s);
}

/* A schedule that waits for itself is reported as a deadlock, not run forever. */
static void test_deadlock_is_found(void)
{
    tg_pipe_schedule s;
    TG_CHECK_OK(tg_pipe_schedule_build(TG_SCHEDULE_ZB_H1, 2, 2, true, &s));
    tg_pipe_op first = s.ops[1][0];
    s.ops[1][0] = s.ops[1][1]; /* device 1 starts with B(0) before F(0) */
    s.ops[1][1] = first;
    TG_CHECK(tg_pipe_schedule_simulate(&s, NULL) == -1);
    tg_pipe_schedule_free(&s);
}

static void test_inference_and_errors(void)
{
    tg_pipe_schedule s;
    TG_CHECK_OK(tg_pipe_schedule_build(TG_SCHEDULE_GROUPED, 3, 5, false, &s));
    check_complete(&s);
    TG_CHECK(s.stash_depth[0] == 1);
    tg_pipe_schedule_free(&s);
    TG_CHECK(tg_pipe_schedule_build(TG_SCHEDULE_GPIPE, 0, 5, true, &s) == TG_ERR_CONFIG);
    TG_CHECK(tg_schedule_parse("1f1b") == TG_SCHEDULE_1F1B);
    TG_CHECK(tg_schedule_parse("zb-h1") == TG_SCHEDULE_ZB_H1);
    TG_CHECK(tg_schedule_parse("zb-h2") == TG_SCHEDULE_ZB_H2);
    TG_CHECK(strcmp(tg_pipe_pass_name(TG_PASS_WEIGHT), "weight") == 0);
    TG_CHECK(tg_schedule_parse("zigzag") == -1);
}

int main(void)
{
    TG_RUN(test_depths_follow_the_formulas);
    TG_RUN(test_busy_fraction);
    TG_RUN(test_zero_bubble);
    TG_RUN(test_deadlock_is_found);
    TG_RUN(test_inference_and_errors);
    return tg_test_finish();
}
