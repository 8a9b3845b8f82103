/* target/collective.h - the time of the collectives between the devices of
 * a pod on a tiled target: the gradient all-reduce between replicas, as a
 * ring over the IPU-Links inside a link domain (the devices IPU-Links join:
 * an IPU-POD64 rack in the published design) and, when the replicas span
 * several domains, a second ring between the domains over the gateways'
 * GW-Links. docs/distributed.md ("A pod-sized plan") gives the figures and
 * their sources.
 *
 * Model (bandwidth plus a fixed cost per ring step; no contention beyond the
 * gateway's, which its machine's devices share):
 *   ring of n over links of B bytes/cycle, step cost s:
 *     2(n - 1)/n * bytes / B + 2(n - 1) * s
 *   (a reduce-scatter then an all-gather, each n - 1 steps of bytes / n);
 *   replicas over D domains, r per domain: the inner ring's reduce-scatter,
 *   the outer ring's all-reduce of each device's 1/r piece over the
 *   gateway (its machine's GW-Link bandwidth shared by the machine's
 *   devices), then the inner ring's all-gather. Every stage of a pipelined
 *   replica reduces its own gradients on its own devices at the same time,
 *   so the step's all-reduce is the slowest stage's.
 */
#ifndef TG_TARGET_COLLECTIVE_H
#define TG_TARGET_COLLECTIVE_H

#include "target/tiled.h"

typedef struct tg_allreduce_cost {
    int replicas;          /* in the all-reduce */
    int per_domain;        /* replicas per link domain: the inner ring */
    int domains;           /* link domains the replicas span: the outer ring */
    double link_cycles;    /* the inner ring over IPU-Links */
    double gateway_cycles; /* the outer ring over the gateways (0 in one domain) */
    double cycles;         /* link_cycles + gateway_cycles */
} tg_allreduce_cost;

/* Cycles of a ring all-reduce of `bytes` over n participants whose links
 * move bytes_per_cycle, each of its 2(n - 1) steps costing step_cycles more;
 * 0 when n < 2 or bytes <= 0. */
double tg_ring_allreduce_cycles(double bytes, int n, double bytes_per_cycle, double step_cycles);

/* The all-reduce of `bytes` (one device's gradients) between `replicas`
 * replicas of `devices_per_replica` devices each, replica k on devices
 * [k * devices_per_replica, (k + 1) * devices_per_replica), on target t. */
tg_allreduce_cost tg_allreduce_cost_of(const tg_target_desc *t, double bytes, int replicas,
                                       int devices_per_replica);

/* Cycles of the all-gather of `bytes` (a sharded weight, each replica
 * holding 1/replicas of it) over the same rings: half the all-reduce's
 * (an all-reduce is a reduce-scatter and an all-gather of equal cost, at
 * each level of the two rings). */
double tg_allgather_cycles(const tg_target_desc *t, double bytes, int replicas,
                           int devices_per_replica);

#endif
