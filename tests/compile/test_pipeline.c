/* tests/compile/test_pipeline.c - pipeline schedules: every micro-batch's
 * forward and backward exactly once per device, no deadlock, stash depths as
 * documented, and busy fractions against theory. */
#include "tg_test.h"

#include "compile/pipeline.h"

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

static void check_complete(const tg_pipe_schedule *s)
{
    for (int d = 0; d < s->n_devices; d++) {
        int f = 0, b = 0;
        for (int k = 0; k < s->n_ops[d]; k++)
            s->ops[d][k].backward ? b++ : f++;
        TG_CHECK(f == s->micro_batches);
        TG_CHECK(b == (s->training ? s->micro_batches : 0));
        /* backwards and forwards each in micro-batch order */
        int last_f = -1, last_b = -1;
        for (int k = 0; k < s->n_ops[d]; k++) {
            int *last = s->ops[d][k].backward ? &last_b : &last_f;
            TG_CHECK(s->ops[d][k].micro_batch == *last + 1);
            *last = s->ops[d][k].micro_batch;
        }
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
                        want = min_int(n - d, m);
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

static void test_inference_and_errors(void)
{
    tg_pipe_schedule s;
    TG_CHECK_OK(tg_pipe_schedule_build(TG_SCHEDULE_GROUPED, 3, 5, false, &s));
    check_complete(&s);
    TG_CHECK(s.stash_depth[0] == 1);
    tg_pipe_schedule_free(&s);
    TG_CHECK(tg_pipe_schedule_build(TG_SCHEDULE_GPIPE, 0, 5, true, &s) == TG_ERR_CONFIG);
    TG_CHECK(tg_schedule_parse("1f1b") == TG_SCHEDULE_1F1B);
    TG_CHECK(tg_schedule_parse("zigzag") == -1);
}

int main(void)
{
    TG_RUN(test_depths_follow_the_formulas);
    TG_RUN(test_busy_fraction);
    TG_RUN(test_inference_and_errors);
    return tg_test_finish();
}
