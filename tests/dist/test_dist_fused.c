/* tests/dist/test_dist_fused.c - MPI instances run an inference program
 * fused (compile/fuse.c): instance 0 compiles it and sends the others its
 * program as executable-file bytes (runtime/session_dist.c), which now
 * hold the fusion, so every instance runs the convolutions with the batch
 * norm and ReLU folded in, and all give the same bytes. Until the file held
 * it, fusion was off in MPI instances.
 *
 * Run by CTest, it starts itself as 2 instances under mpirun (bounded by
 * timeout(1)) with a compile trace, and checks that one instance compiled
 * and the other loaded (the trace of only one holds the memory plan), that
 * both fused both convolutions and that their outputs are equal.
 * Skipped (77) without mpirun. TG_TEST_LABELS: mpi */
#include "tg_test.h"

#include "compile/program.h"
#include "backend/cpu/dnnl_util.h"
#include "runtime/session_internal.h"
#include "tilegraph/dist.h"
#include "tilegraph/session.h"
#include "tilegraph/status.h"
#include "tilegraph/trace.h"

#include "runtime/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define BOUND_S 60

typedef struct net {
    tg_graph *g;
    tg_tensor *x, *y, *stats[2];
} net;

/* x -> (conv -> batch norm -> ReLU) x 2: both convolutions fuse. */
static net build(void)
{
    net n = {.g = tg_graph_create()};
    tg_graph_set_training(n.g, false);
    tg_tensor *h = n.x = tg_input(n.g, "x", TG_F32, tg_shape4(2, 16, 6, 6));
    for (int l = 0; l < 2; l++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", l);
        tg_tensor *w =
            tg_param(n.g, name, tg_shape4(16, 16, 3, 3), (tg_init){TG_INIT_FAN_IN_UNIFORM, 144, 0});
        snprintf(name, sizeof name, "stats%d", l);
        n.stats[l] = tg_state(n.g, name, tg_shape2(2, 16), (tg_init){TG_INIT_NORM_STATS, 0, 0});
        h = tg_conv2d(n.g, h, w, NULL, (tg_conv2d_params){1, 1, 1, 1, 1, 1, 1});
        h = tg_relu(n.g, tg_batch_norm(n.g, h, NULL, NULL, n.stats[l], 1e-5f));
    }
    n.y = h;
    tg_tensor_mark_output(h);
    return n;
}

/* One instance: prints "instance K: fused N, output crc C". */
static int instance_main(void)
{
    if (tg_dist_init(NULL, NULL) != TG_OK || tg_dist_instances() != 2) {
        fprintf(stderr, "test_dist_fused: not 2 instances: %s\n", tg_error_message());
        return 3;
    }
    tg_dnnl_force_mode(TG_DNNL_ALWAYS, true); /* the convolutions fuse on any CPU */
    net n = build();
    tg_options *o = tg_options_create();
    tg_options_set_int(o, "threadsPerDevice", 1);
    tg_options_set_int(o, "randomSeed", 3);
    tg_options_set_int(o, "replicationFactor", 2); /* one replica per instance */
    tg_session *s = NULL;
    tg_status st = tg_graph_status(n.g);
    if (st == TG_OK)
        st = tg_session_create(n.g, o, &s);
    float stats[32], x[2 * 16 * 6 * 6], y[2 * 16 * 6 * 6];
    for (int k = 0; k < 16; k++)
        stats[k] = 0.1f * (float)(k % 5) - 0.2f, stats[16 + k] = 0.5f + 0.1f * (float)k;
    for (int i = 0; i < (int)(sizeof x / sizeof x[0]); i++)
        x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int l = 0; l < 2 && st == TG_OK; l++)
        st = tg_session_write(s, n.stats[l], stats, sizeof stats);
    if (st == TG_OK)
        st = tg_session_write(s, n.x, x, sizeof x);
    if (st == TG_OK)
        st = tg_session_run(s);
    if (st == TG_OK)
        st = tg_session_read(s, n.y, y, sizeof y);
    if (st != TG_OK) {
        fprintf(stderr, "instance %d: %s\n", tg_dist_instance(), tg_error_message());
        tg_dist_abort(1);
    }
    const tg_program *p = tg_session_program(s);
    int fused = 0;
    for (int i = 0; p->fused_tail && i < p->graph->n_nodes; i++)
        fused += p->fused_tail[i] >= 0;
    printf("instance %d: fused %d, output crc %08lx\n", tg_dist_instance(), fused,
           crc32(0, (const Bytef *)y, sizeof y));
    fflush(stdout);
    tg_session_destroy(s);
    tg_options_destroy(o);
    tg_graph_destroy(n.g);
    tg_trace_flush(); /* the compile trace: compiled here, or received */
    tg_dist_finalize();
    return 0;
}

/* How many of the job's compile traces in dir/tr hold `what`. */
static int traces_with(const char *dir, const char *what)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "grep -l '%s' %s/tr/tilegraph-*[0-9].trace.json 2>/dev/null | wc -l",
             what, dir);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f && fscanf(f, "%d", &n) != 1)
        n = -1;
    if (f)
        pclose(f);
    return n;
}

static void test_instances_run_fused(void)
{
    char dir[] = "/tmp/tg_dist_fused_XXXXXX";
    static char out[1 << 16];
    TG_CHECK(TG_MKDTEMP(dir) != NULL);
    char env[600];
    snprintf(env, sizeof env,
             "TILEGRAPH_MONITOR=0 TILEGRAPH_TRACE='{\"enable\":\"true\",\"directory\":\"%s/tr\","
             "\"channels\":[\"compile\"]}'",
             dir);
    int code = tg_test_mpi_self(dir, env, "instance", BOUND_S, out, sizeof out);
    unsigned long crc[2] = {0, 1};
    int fused[2] = {-1, -1};
    for (int k = 0; k < 2; k++) {
        char head[32];
        snprintf(head, sizeof head, "instance %d: fused", k);
        const char *at = strstr(out, head);
        if (!at || sscanf(at + strlen(head), " %d, output crc %lx", &fused[k], &crc[k]) != 2)
            fused[k] = -1;
    }
    if (code != 0 || fused[0] != 2 || fused[1] != 2 || crc[0] != crc[1])
        tg_test_fail(__FILE__, __LINE__,
                     "expected both instances to fuse 2 convolutions and agree (exit %d, fused "
                     "%d and %d):\n%s",
                     code, fused[0], fused[1], out);
    /* instance 1 ran instance 0's program, not one it compiled itself */
    int planned = traces_with(dir, "\"memory plan\""), sent = traces_with(dir, "from instance 0");
    if (planned != 1 || sent != 1)
        tg_test_fail(__FILE__, __LINE__,
                     "expected one instance compiling and one loading (%d traces with a memory "
                     "plan, %d with the program from instance 0)",
                     planned, sent);
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    TG_CHECK(system(rm) == 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "instance") == 0)
        return instance_main();
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("skipped: no mpirun (openmpi-bin)\n");
        return 77;
    }
    TG_RUN(test_instances_run_fused);
    return tg_test_finish();
}
