/* runtime/dist_alive.h - instances lost between hosts, found by a heartbeat
 * of their own (dist_alive.c). Internal to dist.c, which gathers the cards
 * over MPI. */
#ifndef TG_RUNTIME_DIST_ALIVE_H
#define TG_RUNTIME_DIST_ALIVE_H

#include "tilegraph/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { TG_ALIVE_ADDRS = 4, TG_ALIVE_HOST = 64 };

/* The heartbeat datagram, as sent; a datagram of another size is not one. */
enum { TG_ALIVE_MAGIC = 0x54474842 }; /* "TGHB" */
typedef struct tg_alive_beat {
    uint32_t magic, rank;
    uint64_t job;   /* two jobs on one host never count each other's beats */
    uint32_t gone;  /* the instance has left the job (tg_dist_alive_stop) */
    uint32_t spare; /* (padding, zero) */
} tg_alive_beat;

/* Where an instance hears heartbeats: its host's IPv4 addresses (network
 * order) and a UDP port, and its host's name for messages. */
typedef struct tg_alive_card {
    uint32_t addr[TG_ALIVE_ADDRS];
    uint32_t n_addr;
    uint32_t port;
    char host[TG_ALIVE_HOST];
} tg_alive_card;

/* Open this instance's socket and fill its card; `one_host`: every
 * instance runs on this host (loopback is enough). */
tg_status tg_dist_alive_open(tg_alive_card *mine, bool one_host);
/* Start beating to every other instance and listening to them (a thread),
 * once every instance's card is known. `timeout_s` <= 0: never lost. */
tg_status tg_dist_alive_start(const tg_alive_card *cards, int rank, int size, uint64_t job,
                              double timeout_s);
/* Whether some instance has not been heard from for the timeout: true and
 * a sentence naming it and its host in why. */
bool tg_dist_alive_lost(char *why, size_t cap);
/* The host instance `rank` said it runs on ("" before the start). */
const char *tg_dist_alive_host(int rank);
/* While the instance ends (every instance leaving the job, MPI_Finalize),
 * when nothing of dist.c waits and asks: the beating thread calls on_lost
 * with the sentence once some instance has been silent for the timeout
 * (on_lost ends the process). NULL: off. */
void tg_dist_alive_guard(void (*on_lost)(const char *why));
/* Stop beating, after telling every other instance that this one left the
 * job (its silence from then on is no loss). */
void tg_dist_alive_stop(void);

#endif
