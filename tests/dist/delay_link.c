/* tests/dist/delay_link.c - a slow network link in user space, for the
 * multi-host tests (tests/dist/netns_hosts.sh, docs/distributed.md "A link
 * with a delay"). Not part of libtilegraph.
 *
 * This machine's kernel has no netem (and no modules to load), so a link's
 * delay cannot be added by tc. This program stands in for a cable: it
 * attaches to two TAP devices, usually one in a host's network namespace
 * (the host's eth0) and one in the bridge's (the bridge's port), and copies
 * every Ethernet frame read from one to the other after holding it for a
 * fixed time, separately in each direction (like `netem delay` on each
 * side's egress), optionally at a limited rate (like `netem rate`: a frame
 * leaves no sooner than the previous one's last bit). The devices are made
 * persistent beforehand (`ip tuntap add ... mode tap`), so a new forwarder
 * with another delay can take over a link whose addresses and bridge port
 * stay as they are.
 *
 *   tg_delay_link [-d MS] [-D MS] [-r MBIT] [-l FRAMES] NS_A:DEV_A NS_B:DEV_B
 *
 * -d: the delay of frames from A to B (ms, fractions allowed; default 0);
 * -D: from B to A (default: -d's); -r: the rate of each direction in Mbit/s
 * (default: none); -l: the frames held in each direction before new ones
 * are dropped (netem's limit; default 4096). NS is a network namespace's
 * name (under /var/run/netns) or a path to one. It prints "ready" once both
 * devices are attached, then runs until SIGTERM or SIGINT (its counts on
 * stderr) or until the process that started it ends (PR_SET_PDEATHSIG), and
 * stays in NS_A's namespace, so that whatever ends the processes of that
 * namespace ends it too.
 *
 * Each direction is a FIFO of frames with the time each may leave; the
 * times never decrease (a constant delay, a rate that only pushes them
 * later), so frames keep their order. It sleeps in poll(2) on the two
 * devices, a timerfd set to the earliest frame's time, and a signalfd:
 * no spinning, whatever the load. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* an Ethernet frame of a 1500-byte MTU, with a VLAN tag, fits; a TAP
 * without IFF_VNET_HDR is given no larger (no GSO) */
#define FRAME_MAX 1536
/* frames read from one device before the other is looked at */
#define READ_BATCH 64

typedef struct {
    uint64_t due_ns; /* when it may leave (CLOCK_MONOTONIC) */
    uint16_t len;
    unsigned char data[FRAME_MAX];
} frame;

/* one direction of the link: a ring of frames waiting for their time */
typedef struct {
    const char *name; /* "A->B", for the counts */
    int in, out;      /* the device read from, the one written to */
    frame *ring;      /* limit slots */
    size_t limit, head, count;
    uint64_t delay_ns;  /* how long each frame is held */
    double ns_per_byte; /* 0: no rate limit */
    uint64_t free_ns;   /* with a rate: when the last frame's last bit has left */
    uint64_t passed, dropped, failed;
} direction;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "tg_delay_link: %s%s%s: %s\n", what, detail ? " " : "", detail ? detail : "",
            strerror(errno));
    exit(1);
}

/* attach to TAP device DEV in network namespace NS ("NS:DEV") */
static int attach(const char *spec)
{
    char ns[512], path[600];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || !colon[1] || (size_t)(colon - spec) >= sizeof ns ||
        strlen(colon + 1) >= IFNAMSIZ) {
        fprintf(stderr, "tg_delay_link: '%s' is not NETNS:DEVICE (e.g. tgh1-h1:eth0)\n", spec);
        exit(2);
    }
    memcpy(ns, spec, (size_t)(colon - spec));
    ns[colon - spec] = '\0';
    snprintf(path, sizeof path, "%s%s", strchr(ns, '/') ? "" : "/var/run/netns/", ns);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0)
        die("cannot open the network namespace", path);
    if (setns(nsfd, CLONE_NEWNET) != 0)
        die("cannot enter the network namespace", path);
    close(nsfd);
    /* the device belongs to the namespace the file was opened in */
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        die("cannot open", "/dev/net/tun");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    strcpy(ifr.ifr_name, colon + 1);
    if (ioctl(fd, TUNSETIFF, &ifr) != 0)
        die("cannot attach to the TAP device", spec);
    return fd;
}

static void direction_init(direction *d, const char *name, int in, int out, double delay_ms,
                           double rate_mbit, size_t limit)
{
    memset(d, 0, sizeof *d);
    d->name = name;
    d->in = in;
    d->out = out;
    d->limit = limit;
    d->delay_ns = (uint64_t)(delay_ms * 1e6 + 0.5);
    d->ns_per_byte = rate_mbit > 0 ? 8e3 / rate_mbit : 0;
    d->ring = malloc(limit * sizeof *d->ring);
    if (!d->ring) {
        fprintf(stderr, "tg_delay_link: no memory for %zu frames\n", limit);
        exit(1);
    }
}

/* read what the device has (up to a batch), each frame due after the delay;
 * a full ring drops it, as a full queue would (read all the same: an unread
 * device would keep poll returning at once) */
static void direction_read(direction *d)
{
    static unsigned char scratch[FRAME_MAX];
    for (int i = 0; i < READ_BATCH; i++) {
        frame *f = d->count < d->limit ? &d->ring[(d->head + d->count) % d->limit] : NULL;
        ssize_t n = read(d->in, f ? f->data : scratch, FRAME_MAX);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n < 0)
            die("cannot read a frame", d->name);
        if (!f || n == 0 || n >= FRAME_MAX) { /* full, or larger than an MTU's frame */
            d->dropped++;
            continue;
        }
        uint64_t due = now_ns() + d->delay_ns;
        if (d->ns_per_byte > 0) {
            if (due < d->free_ns)
                due = d->free_ns;
            d->free_ns = due + (uint64_t)(d->ns_per_byte * (double)n);
        }
        f->due_ns = due;
        f->len = (uint16_t)n;
        d->count++;
    }
}

/* send the frames whose time has come, in order */
static void direction_send(direction *d, uint64_t now)
{
    while (d->count > 0 && d->ring[d->head].due_ns <= now) {
        frame *f = &d->ring[d->head];
        /* a device that is down refuses frames (EIO): lost, like on a cable */
        if (write(d->out, f->data, f->len) == (ssize_t)f->len)
            d->passed++;
        else
            d->failed++;
        d->head = (d->head + 1) % d->limit;
        d->count--;
    }
}

/* the timer at the earliest waiting frame's time, or off */
static void timer_set(int tfd, const direction *a, const direction *b)
{
    uint64_t due = UINT64_MAX;
    if (a->count > 0)
        due = a->ring[a->head].due_ns;
    if (b->count > 0 && b->ring[b->head].due_ns < due)
        due = b->ring[b->head].due_ns;
    struct itimerspec t;
    memset(&t, 0, sizeof t);
    if (due != UINT64_MAX) { /* 0 would disarm it: a due time is never 0 */
        t.it_value.tv_sec = (time_t)(due / 1000000000u);
        t.it_value.tv_nsec = (long)(due % 1000000000u);
    }
    if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &t, NULL) != 0)
        die("cannot set the timer", NULL);
}

static void report(const direction *d)
{
    fprintf(stderr,
            "tg_delay_link: %s: %llu frames passed, %llu dropped (queue full), %llu lost "
            "(device refused)\n",
            d->name, (unsigned long long)d->passed, (unsigned long long)d->dropped,
            (unsigned long long)d->failed);
}

static int usage(void)
{
    fprintf(stderr, "usage: tg_delay_link [-d MS] [-D MS] [-r MBIT] [-l FRAMES] NS_A:DEV_A "
                    "NS_B:DEV_B\n");
    return 2;
}

static double number(const char *opt, const char *s, double max)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0 && v <= max)) {
        fprintf(stderr, "tg_delay_link: %s takes a number from 0 to %g, not '%s'\n", opt, max, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    double delay_ab = 0, delay_ba = -1, rate = 0, limit = 4096;
    int opt;
    while ((opt = getopt(argc, argv, "d:D:r:l:")) != -1) {
        if (opt == 'd')
            delay_ab = number("-d (ms)", optarg, 60000);
        else if (opt == 'D')
            delay_ba = number("-D (ms)", optarg, 60000);
        else if (opt == 'r')
            rate = number("-r (Mbit/s)", optarg, 1e6);
        else if (opt == 'l')
            limit = number("-l (frames)", optarg, 1 << 20);
        else
            return usage();
    }
    if (argc - optind != 2 || limit < 1)
        return usage();
    if (delay_ba < 0)
        delay_ba = delay_ab;
    /* end with whoever started it (a test whose trap did not run) */
    pid_t parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) {
        fprintf(stderr, "tg_delay_link: the process that started it has already ended\n");
        return 1;
    }
    int b = attach(argv[optind + 1]);
    int a = attach(argv[optind]); /* last: it stays in A's namespace */

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (sfd < 0 || tfd < 0)
        die("cannot make the signal or timer descriptor", NULL);
    direction ab, ba;
    direction_init(&ab, "A->B", a, b, delay_ab, rate, (size_t)limit);
    direction_init(&ba, "B->A", b, a, delay_ba, rate, (size_t)limit);
    printf("ready\n");
    fflush(stdout);

    struct pollfd p[4] = {{a, POLLIN, 0}, {b, POLLIN, 0}, {tfd, POLLIN, 0}, {sfd, POLLIN, 0}};
    for (;;) {
        if (poll(p, 4, -1) < 0) {
            if (errno == EINTR)
                continue;
            die("poll", NULL);
        }
        if (p[3].revents)
            break;
        if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL) ||
            p[1].revents & (POLLERR | POLLHUP | POLLNVAL)) {
            fprintf(stderr, "tg_delay_link: a device went away\n");
            return 1;
        }
        if (p[2].revents) {
            uint64_t expirations;
            if (read(tfd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
                die("cannot read the timer", NULL);
        }
        if (p[0].revents & POLLIN)
            direction_read(&ab);
        if (p[1].revents & POLLIN)
            direction_read(&ba);
        uint64_t now = now_ns();
        direction_send(&ab, now);
        direction_send(&ba, now);
        timer_set(tfd, &ab, &ba);
    }
    report(&ab);
    report(&ba);
    free(ab.ring);
    free(ba.ring);
    return 0;
}
