/* tests/runtime/test_dist_alive.c - the instances' heartbeats
 * (runtime/dist_alive.c) without MPI: this process is instance 0 of a job
 * of 2 whose instance 1 is a UDP socket of the test's. While the test beats
 * as instance 1, it is not lost; beats of another job or rank do not count;
 * once it falls silent it is lost, and the sentence names it and its host;
 * instance 0's own beats reach instance 1's socket.
 * TG_TEST_LABELS: quick */
#include "tg_test.h"

#include "runtime/dist_alive.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { JOB = 4242 };

typedef tg_alive_beat beat;

static void sleep_ms(long ms)
{
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000}, NULL);
}

static void send_beat(int fd, uint32_t port, uint32_t rank, uint64_t job)
{
    beat b = {TG_ALIVE_MAGIC, rank, job, 0, 0};
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    (void)sendto(fd, &b, sizeof b, 0, (struct sockaddr *)&to, sizeof to);
}

/* Lost within `ms`, beating meanwhile as (rank, job) unless rank < 0. */
static bool lost_within(int fd, uint32_t port, int rank, uint64_t job, long ms, char *why,
                        size_t cap)
{
    for (long t = 0; t < ms; t += 20) {
        if (rank >= 0)
            send_beat(fd, port, (uint32_t)rank, job);
        if (tg_dist_alive_lost(why, cap))
            return true;
        sleep_ms(20);
    }
    return false;
}

static void test_silence_is_lost(void)
{
    tg_alive_card cards[2];
    TG_CHECK_OK(tg_dist_alive_open(&cards[0], true));
    TG_CHECK(cards[0].n_addr == 1 && cards[0].addr[0] == htonl(INADDR_LOOPBACK));
    /* instance 1: a socket of the test's on loopback */
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    TG_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    memset(&cards[1], 0, sizeof cards[1]);
    cards[1].addr[0] = htonl(INADDR_LOOPBACK);
    cards[1].n_addr = 1;
    cards[1].port = ntohs(a.sin_port);
    snprintf(cards[1].host, sizeof cards[1].host, "far-host");
    /* a generous timeout: a loaded machine may not run the beating thread
     * for a while, and no check here depends on how soon it runs */
    TG_CHECK_OK(tg_dist_alive_start(cards, 0, 2, JOB, 1.0));
    char why[512] = "";
    TG_CHECK(!lost_within(fd, cards[0].port, 1, JOB, 1500, why, sizeof why));
    TG_CHECK(strcmp(tg_dist_alive_host(1), "far-host") == 0);
    /* instance 0 beats to instance 1 */
    beat got;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    TG_CHECK(recv(fd, &got, sizeof got, 0) == (ssize_t)sizeof got && got.rank == 0 &&
             got.job == JOB);
    /* another job's beats, or another rank's, do not keep instance 1 alive */
    TG_CHECK(lost_within(fd, cards[0].port, 1, JOB + 1, 10000, why, sizeof why));
    TG_CHECK(strstr(why, "instance 1 on host far-host has not been heard from") != NULL);
    TG_CHECK(strstr(why, "TILEGRAPH_DIST_TIMEOUT=1 s") != NULL);
    tg_dist_alive_stop();
    close(fd);
}

/* A timeout of 0 never gives an instance up. */
static void test_no_timeout(void)
{
    tg_alive_card cards[2];
    TG_CHECK_OK(tg_dist_alive_open(&cards[0], true));
    cards[1] = cards[0]; /* a rank that never beats */
    cards[1].port = 9;   /* discard: nothing listens */
    TG_CHECK_OK(tg_dist_alive_start(cards, 0, 2, JOB, 0));
    char why[512];
    TG_CHECK(!lost_within(-1, 0, -1, JOB, 300, why, sizeof why));
    tg_dist_alive_stop();
}

int main(void)
{
    TG_RUN(test_silence_is_lost);
    TG_RUN(test_no_timeout);
    return tg_test_finish();
}
