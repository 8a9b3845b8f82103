/* runtime/dist_alive.c - instances lost between hosts (issue 44).
 *
 * A link that goes down between two hosts, or a host that stops, breaks no
 * TCP connection at once: MPI's transfers are retransmitted for many
 * minutes, and every instance would wait in its collective as long, the
 * ones on the far side too. So each instance beats: a thread sends a small
 * UDP datagram every tenth of a second to every other instance (to each
 * address its host has) and notes when it last heard each of them. The
 * thread beats while the instance computes, compiles or waits, so only a
 * process that is gone or stopped, or a network between that is down, falls
 * silent. An instance that waits in a collective (dist.c) asks whether some
 * instance has been silent longer than the timeout, and fails naming it and
 * its host; the failure ends the job (tg_dist_abort). Kept outside MPI on
 * purpose: MPI's own traffic over the dead link is what hangs.
 */
#define _DEFAULT_SOURCE /* getifaddrs, IFF_UP */
#include "runtime/dist_alive.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/error.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const double beat_s = 0.1;

typedef tg_alive_beat beat;

static struct {
    int fd;
    int rank, size;
    uint64_t job;
    double timeout_s;
    tg_alive_card *cards;
    double *heard; /* per instance, under lock */
    bool *gone;    /* per instance, under lock: said it left, never lost */
    /* while ending (tg_dist_alive_guard): called by the beating thread when
     * an instance falls silent, since no wait of dist.c asks then */
    void (*guard)(const char *why);
    pthread_t thread;
    bool running;
    int stop; /* atomic */
} alive = {.fd = -1, .size = 1};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* This host's IPv4 addresses, loopback only when it has no other or every
 * instance is on this host (the beats then never leave it). */
static void own_addresses(tg_alive_card *c, bool one_host)
{
    struct ifaddrs *all = NULL;
    c->n_addr = 0;
    if (!one_host && getifaddrs(&all) == 0) {
        for (struct ifaddrs *i = all; i && c->n_addr < TG_ALIVE_ADDRS; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
                (i->ifa_flags & IFF_LOOPBACK))
                continue;
            c->addr[c->n_addr++] = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
        }
        freeifaddrs(all);
    }
    if (!c->n_addr)
        c->addr[c->n_addr++] = htonl(INADDR_LOOPBACK);
}

tg_status tg_dist_alive_open(tg_alive_card *mine, bool one_host)
{
    memset(mine, 0, sizeof *mine);
    alive.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    if (alive.fd < 0 || bind(alive.fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(alive.fd, (struct sockaddr *)&a, &len))
        return tg_error(TG_ERR_IO, "MPI: cannot open the instances' heartbeat socket: %s",
                        strerror(errno));
    mine->port = ntohs(a.sin_port);
    own_addresses(mine, one_host);
    if (gethostname(mine->host, sizeof mine->host - 1))
        snprintf(mine->host, sizeof mine->host, "?");
    return TG_OK;
}

static void send_beats(uint32_t gone)
{
    beat b = {TG_ALIVE_MAGIC, (uint32_t)alive.rank, alive.job, gone, 0};
    for (int i = 0; i < alive.size; i++) {
        const tg_alive_card *c = &alive.cards[i];
        for (uint32_t k = 0; i != alive.rank && k < c->n_addr && k < TG_ALIVE_ADDRS; k++) {
            struct sockaddr_in to = {.sin_family = AF_INET,
                                     .sin_port = htons((uint16_t)c->port),
                                     .sin_addr.s_addr = c->addr[k]};
            /* a dead link may refuse or drop it: silence is what counts */
            (void)sendto(alive.fd, &b, sizeof b, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof to);
        }
    }
}

static void read_beats(void)
{
    beat b;
    ssize_t got;
    while ((got = recv(alive.fd, &b, sizeof b, MSG_DONTWAIT)) >= 0 || errno == EINTR) {
        if (got != (ssize_t)sizeof b || b.magic != TG_ALIVE_MAGIC || b.job != alive.job ||
            b.rank >= (uint32_t)alive.size)
            continue;
        pthread_mutex_lock(&lock);
        alive.heard[b.rank] = tg_clock_seconds();
        alive.gone[b.rank] |= b.gone != 0;
        pthread_mutex_unlock(&lock);
    }
}

static void *beating(void *arg)
{
    (void)arg;
    double next = 0;
    while (!__atomic_load_n(&alive.stop, __ATOMIC_ACQUIRE)) {
        double now = tg_clock_seconds();
        if (now >= next) {
            send_beats(0);
            next = now + beat_s;
            void (*guard)(const char *) = __atomic_load_n(&alive.guard, __ATOMIC_ACQUIRE);
            char why[512];
            if (guard && tg_dist_alive_lost(why, sizeof why))
                guard(why); /* does not return */
        }
        struct pollfd p = {alive.fd, POLLIN, 0};
        int wait_ms = (int)((next - now) * 1e3) + 1;
        if (poll(&p, 1, wait_ms < 1 ? 1 : wait_ms) > 0)
            read_beats();
    }
    return NULL;
}

tg_status tg_dist_alive_start(const tg_alive_card *cards, int rank, int size, uint64_t job,
                              double timeout_s)
{
    alive.rank = rank, alive.size = size, alive.job = job, alive.timeout_s = timeout_s;
    alive.cards = tg_malloc((size_t)size * sizeof *alive.cards);
    alive.heard = tg_malloc((size_t)size * sizeof *alive.heard);
    alive.gone = tg_calloc((size_t)size, sizeof *alive.gone);
    alive.guard = NULL;
    if (!alive.cards || !alive.heard || !alive.gone)
        return tg_error(TG_ERR_NOMEM, "MPI: out of memory for the heartbeats of %d instances",
                        size);
    memcpy(alive.cards, cards, (size_t)size * sizeof *cards);
    double now = tg_clock_seconds(); /* every instance has the timeout to be heard first */
    for (int i = 0; i < size; i++) {
        alive.cards[i].host[TG_ALIVE_HOST - 1] = 0;
        alive.heard[i] = now;
    }
    __atomic_store_n(&alive.stop, 0, __ATOMIC_RELEASE);
    if (pthread_create(&alive.thread, NULL, beating, NULL))
        return tg_error(TG_ERR_IO, "MPI: cannot start the instances' heartbeat thread");
    alive.running = true;
    return TG_OK;
}

bool tg_dist_alive_lost(char *why, size_t cap)
{
    if (!alive.running || alive.timeout_s <= 0)
        return false;
    double now = tg_clock_seconds(), silent = 0;
    int lost = -1, n_lost = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < alive.size; i++)
        if (i != alive.rank && !alive.gone[i] && now - alive.heard[i] > alive.timeout_s) {
            if (lost < 0)
                lost = i, silent = now - alive.heard[i];
            n_lost++;
        }
    pthread_mutex_unlock(&lock);
    if (lost < 0)
        return false;
    char more[64] = "";
    if (n_lost > 1)
        snprintf(more, sizeof more, " (and %d other instance%s)", n_lost - 1,
                 n_lost > 2 ? "s" : "");
    snprintf(why, cap,
             "MPI: instance %d on host %s%s has not been heard from for %.1f s, while instance "
             "%d on host %s waits for it: that host, its instance or the network link to it "
             "is down (TILEGRAPH_DIST_TIMEOUT=%g s); ending the job, resume it from the last "
             "checkpoint",
             lost, alive.cards[lost].host, more, silent, alive.rank, alive.cards[alive.rank].host,
             alive.timeout_s);
    return true;
}

const char *tg_dist_alive_host(int rank)
{
    return alive.cards && rank >= 0 && rank < alive.size ? alive.cards[rank].host : "";
}

void tg_dist_alive_guard(void (*on_lost)(const char *why))
{
    __atomic_store_n(&alive.guard, on_lost, __ATOMIC_RELEASE);
}

void tg_dist_alive_stop(void)
{
    if (alive.running) {
        __atomic_store_n(&alive.stop, 1, __ATOMIC_RELEASE);
        pthread_join(alive.thread, NULL);
        alive.running = false;
        /* the others, maybe still ending, must not take this silence for a
         * loss: said a few times, as a datagram may be dropped */
        for (int k = 0; k < 3; k++)
            send_beats(1);
    }
    if (alive.fd >= 0)
        close(alive.fd);
    alive.fd = -1;
    tg_free(alive.cards);
    tg_free(alive.heard);
    tg_free(alive.gone);
    alive.cards = NULL;
    alive.heard = NULL;
    alive.gone = NULL;
    alive.guard = NULL;
}
