/* tests/tools/test_run.c - `tilegraph run` (tools/cmd_run.c) without MPI:
 * its plan and its errors through --dry-run, and its exit code when it is
 * stopped, with a stand-in for mpirun (--mpirun) that exits 1 on a signal
 * as OpenMPI's does. The real job is tests/dist/mpi_test.sh's.
 * TG_TEST_LABELS: quick */
#include "tg_test.h"
#include "tg_test_cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256];

#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

static void write_file(const char *name, const char *text, int executable)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    TG_CHECK(f != NULL);
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    if (executable)
        chmod(path, 0755);
}

/* A missing hostfile is run's error (exit 2, naming the file), not
 * OpenMPI's "internal error"; so is one that names no host. */
static void test_hostfile_checked(void)
{
    EXPECT("run --instances 2 --replicas 2 --hostfile /nonexistent --dry-run -- train", 2,
           "cannot read --hostfile /nonexistent: No such file");
    write_file("empty_hosts", "# nothing\n\n", 0);
    char args[512];
    snprintf(args, sizeof args,
             "run --instances 2 --replicas 2 --hostfile %s/empty_hosts --dry-run -- train", tmpdir);
    EXPECT(args, 2, "names no host");
}

/* The plan names the host of each instance as OpenMPI's by-slot mapping
 * places it, and says so when the hostfile leaves the placement to mpirun. */
static void test_hostfile_plan(void)
{
    write_file("hosts", "# two hosts\nnode1 slots=2\nnode2 slots=2 max_slots=4\n", 0);
    char args[512];
    snprintf(args, sizeof args,
             "run --instances 4 --replicas 8 --hostfile %s/hosts --dry-run -- train", tmpdir);
    EXPECT(args, 0, "instance 1 on node1: replicas 2..3");
    TG_CHECK(strstr(tg_cli_output, "instance 2 on node2: replicas 4..5") != NULL);
    TG_CHECK(strstr(tg_cli_output, " on (") == NULL);
    write_file("bare", "node1\nnode2\n", 0);
    snprintf(args, sizeof args,
             "run --instances 2 --replicas 2 --hostfile %s/bare --dry-run -- train", tmpdir);
    EXPECT(args, 0, "instance 0 on a host of ");
    TG_CHECK(strstr(tg_cli_output, "bare (mpirun places it): replicas 0..0") != NULL);
}

/* Each error names the argument at fault, not others that are fine. */
static void test_errors_name_the_fault(void)
{
    EXPECT("run --instances 2 --replicas 2 -- infer --model x.onnx", 2, "got '-- infer'");
    TG_CHECK(strstr(tg_cli_output, "--instances 2 --replicas 2)") == NULL);
    EXPECT("run --instances 2 --replicas 2", 2, "got nothing after '--'");
    EXPECT("run --instances 2 --replicas 3 -- train", 2, "got --instances 2 --replicas 3");
    EXPECT("run --instances 2 --replicas 2 -- train --replicas 4", 2, "got train --replicas 4");
    EXPECT("run --instances 2 --replicas 2 --host h1,,h2 -- train", 2, "got --host 'h1,,h2'");
    EXPECT("run --instances 2 --replicas 2 --host h1, -- train", 2, "none of them empty");
    EXPECT("run --instances 2 --replicas 2 --host ,h1 -- train", 2, "none of them empty");
    EXPECT("run --instances 2 --replicas 2 --host a --hostfile h -- train", 2,
           "got --host a --hostfile h");
}

/* Start run with the stand-in mpirun, send it `sig` once the stand-in has
 * started; run's exit code. */
static int stopped_run(int sig)
{
    char started[512], args[1024];
    snprintf(started, sizeof started, "%s/started", tmpdir);
    unlink(started);
    snprintf(args, sizeof args, "run --instances 2 --replicas 2 --mpirun %s/fake_mpirun -- train",
             tmpdir);
    int pid = tg_cli_spawn(tmpdir, "stop.txt", NULL, NULL, args);
    for (int i = 0; i < 200 && access(started, F_OK); i++)
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    TG_CHECK(access(started, F_OK) == 0);
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Whether the stand-in mpirun wrote `what` as the signal it got. */
static bool signalled_with(const char *path, const char *what)
{
    char got[32] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(got, sizeof got, f) && strncmp(got, what, strlen(what)) == 0;
    fclose(f);
    return ok;
}

/* A stopped job ends 130 (SIGINT) or 143 (SIGTERM), as docs/distributed.md
 * says, though mpirun exits 1 when signalled; mpirun gets train's stop
 * request (SIGUSR2, which it passes on to the instances; its own SIGINT or
 * SIGTERM would kill them before their checkpoint); a job that ends by
 * itself keeps mpirun's code. */
static void test_stop_exit_code(void)
{
    write_file("fake_mpirun",
               "#!/bin/sh\n"
               "trap 'echo usr2 >signalled; exit 1' USR2\n"
               "trap 'echo int-or-term >signalled; exit 1' INT TERM\n"
               "touch started\n"
               "i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done\n"
               "exit 0\n",
               1);
    char signalled[512];
    snprintf(signalled, sizeof signalled, "%s/signalled", tmpdir);
    unlink(signalled);
    TG_CHECK(stopped_run(SIGINT) == 130);
    TG_CHECK(signalled_with(signalled, "usr2")); /* passed on to mpirun as the stop request */
    unlink(signalled);
    TG_CHECK(stopped_run(SIGTERM) == 143);
    TG_CHECK(signalled_with(signalled, "usr2"));
    write_file("exit3", "#!/bin/sh\nexit 3\n", 1);
    char args[512];
    snprintf(args, sizeof args, "run --instances 2 --replicas 2 --mpirun %s/exit3 -- train",
             tmpdir);
    EXPECT(args, 3, "mpirun line:");
    EXPECT("run --instances 2 --replicas 2 --mpirun /nonexistent/mpirun -- train", 1,
           "cannot start /nonexistent/mpirun");
}

/* PopRun's spellings: --num-instances, --num-replicas, and
 * --replicas-per-instance K for R = N x K (refused when R disagrees). */
static void test_poprun_flags(void)
{
    EXPECT("run --num-instances 2 --num-replicas 4 --dry-run -- train", 0,
           "instance 1 on this host: replicas 2..3");
    EXPECT("run --num-instances 2 --replicas-per-instance 3 --dry-run -- train", 0,
           "2 instances x 3 replicas = 6 replicas");
    TG_CHECK(strstr(tg_cli_output, "--replicas 6") != NULL); /* passed on to train */
    /* any other program runs as the instances, each with its POPDIST_* set */
    EXPECT("run --num-instances 2 --num-replicas 4 --ipus-per-replica 2 --dry-run -- python3 "
           "t.py",
           0, "run --as-instance 4 2 -- python3 t.py");
    EXPECT("run --as-instance 4 1 -- true", 2, "run's own way to start an instance");
    EXPECT("run --num-instances 2 --num-replicas 2 --ipus-per-replica 4 -- train", 2,
           "got --ipus-per-replica 4 -- train");
    EXPECT("run --instances 2 --replicas 4 --replicas-per-instance 3 -- train", 2,
           "got --instances 2 --replicas 4 --replicas-per-instance 3");
}

/* Across hosts, each line of mpirun's (--tag-output) comes out tagged by the
 * host the plan gives its rank; a line without a tag is left as it is. */
static void test_lines_tagged_by_host(void)
{
    write_file("tag_mpirun",
               "#!/bin/sh\n"
               "for a in \"$@\"; do [ \"$a\" = --tag-output ] && tagged=1; done\n"
               "[ -n \"$tagged\" ] || { echo 'no --tag-output'; exit 5; }\n"
               "echo '[1,0]<stdout>:epoch 1: done'\n"
               "echo '[1,1]<stderr>:tilegraph train: trouble' >&2\n"
               "echo 'plain line'\n"
               "printf '[1,3]<stdout>:no newline'\n",
               1);
    char args[512];
    snprintf(args, sizeof args,
             "run --host a,b --instances 4 --replicas 4 --mpirun %s/tag_mpirun -- train", tmpdir);
    EXPECT(args, 0, "[a:0] epoch 1: done\n");
    TG_CHECK(strstr(tg_cli_output, "[b:1] tilegraph train: trouble\n") != NULL);
    TG_CHECK(strstr(tg_cli_output, "\nplain line\n") != NULL);
    TG_CHECK(strstr(tg_cli_output, "[b:3] no newline") != NULL);
    TG_CHECK(strstr(tg_cli_output, "<stdout>") == NULL);
}

/* An instance on run's host that lost another (SIGUSR1, runtime/dist.c):
 * mpirun, which would wait for the lost host's daemon for ever (here: a
 * stand-in that ignores signals), is ended after a grace period, and the
 * job exits 1. */
static void test_lost_instance_ends_mpirun(void)
{
    write_file("stuck_mpirun",
               "#!/bin/sh\n"
               "trap '' INT TERM\n"
               "touch started\n"
               "i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done\n"
               "exit 0\n",
               1);
    char started[512], args[1024];
    snprintf(started, sizeof started, "%s/started", tmpdir);
    unlink(started);
    snprintf(args, sizeof args,
             "run --host a --instances 1 --replicas 1 --mpirun %s/stuck_mpirun -- train", tmpdir);
    int pid = tg_cli_spawn(tmpdir, "lost.txt", NULL, NULL, args);
    for (int i = 0; i < 200 && access(started, F_OK); i++)
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    TG_CHECK(access(started, F_OK) == 0);
    kill(pid, SIGUSR1);
    int status = 0;
    waitpid(pid, &status, 0); /* the stand-in alone would take 60 s */
    TG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_run_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_hostfile_checked);
    TG_RUN(test_hostfile_plan);
    TG_RUN(test_errors_name_the_fault);
    TG_RUN(test_stop_exit_code);
    TG_RUN(test_poprun_flags);
    TG_RUN(test_lines_tagged_by_host);
    TG_RUN(test_lost_instance_ends_mpirun);
    return tg_test_finish();
}
