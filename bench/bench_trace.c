/* bench/bench_trace.c - what a traced region costs: ns per TG_TRACE_SCOPE
 * (begin + end) around a trivial body when tracing is off, when tracing is on
 * but the region's channel is not, and when its channel records, each against
 * the same loop without instrumentation measured in the same run. Prints one
 * JSON line; the "off" overhead is the price every instrumented call site
 * pays in a normal run.
 */
#include "bench_util.h"
#include "tilegraph/trace.h"

#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* The body every loop runs: a store the compiler must keep. */
static volatile uint64_t sink;

/* noinline so every variant is the same call from the same place. */
__attribute__((noinline)) static void plain_loop(long n)
{
    for (long i = 0; i < n; i++)
        sink = (uint64_t)i;
}

__attribute__((noinline)) static void traced_loop(tg_trace_channel *ch, long n)
{
    for (long i = 0; i < n; i++)
        TG_TRACE_SCOPE(ch, "region")
        {
            sink = (uint64_t)i;
        }
}

/* Best of `reps` runs, in ns per iteration. */
static double best_ns(tg_trace_channel *ch, long n, int reps, int traced)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        tg_trace_clear(); /* recording runs start from empty buffers */
        double t0 = bench_now();
        if (traced)
            traced_loop(ch, n);
        else
            plain_loop(n);
        double dt = (bench_now() - t0) * 1e9 / (double)n;
        best = dt < best ? dt : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    int usage = bench_usage(argc, argv, 0,
                            "usage: bench_trace\nWhat a traced region costs (ns per scope) with "
                            "tracing off, on with its channel off, and recording, against the same "
                            "loop without instrumentation. One JSON line.\n");
    if (usage >= 0)
        return usage;
    const long n_off = 20 * 1000 * 1000, n_on = 200 * 1000;
    const int reps = 7;
    tg_trace_channel *ch = tg_trace_channel_get("bench");
    tg_trace_channel *other = tg_trace_channel_get("bench.other");
    if (!ch || !other || tg_trace_configure("{\"enable\":\"false\"}", "bench") != TG_OK) {
        fprintf(stderr, "bench_trace: %s\n", tg_error_message());
        return 1;
    }

    double empty = best_ns(ch, n_off, reps, 0);
    double off = best_ns(ch, n_off, reps, 1);

    tg_trace_configure("{\"enable\":\"true\",\"channels\":[\"bench.other\"]}", "bench");
    double empty2 = best_ns(ch, n_off / 4, reps, 0);
    double other_on = best_ns(ch, n_off / 4, reps, 1);

    tg_trace_configure("{\"enable\":\"true\",\"channels\":[\"bench\"]}", "bench");
    double empty3 = best_ns(ch, n_on, reps, 0);
    double on = best_ns(ch, n_on, reps, 1);
    tg_trace_stats st = tg_trace_get_stats();
    tg_trace_disable();
    tg_trace_clear();

    int ok = st.events == (uint64_t)n_on && st.dropped == 0;
    printf("{\"bench\":\"trace\",\"regions_off\":%ld,\"regions_on\":%ld,"
           "\"empty_loop_ns\":%.3f,\"off_ns\":%.3f,\"off_overhead_ns\":%.3f,"
           "\"other_channel_on_ns\":%.3f,\"other_channel_overhead_ns\":%.3f,"
           "\"on_ns\":%.3f,\"on_overhead_ns\":%.3f,\"on_events_recorded\":%llu,\"ok\":%s}\n",
           n_off, n_on, empty, off, off - empty, other_on, other_on - empty2, on, on - empty3,
           (unsigned long long)st.events, ok ? "true" : "false");
    return ok ? 0 : 1;
}
