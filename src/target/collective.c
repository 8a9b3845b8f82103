/* target/collective.c - the gradient all-reduce's time over a pod's
 * IPU-Links and gateways (target/collective.h says the model). */
#include "target/collective.h"

double tg_ring_allreduce_cycles(double bytes, int n, double bytes_per_cycle, double step_cycles)
{
    if (n < 2 || bytes <= 0 || bytes_per_cycle <= 0)
        return 0;
    double steps = 2.0 * (n - 1);
    return steps / n * bytes / bytes_per_cycle + steps * step_cycles;
}

/* Replicas per link domain: as many whole replicas as its devices hold (at
 * least one: a replica wider than a domain still reduces over IPU-Links to
 * its neighbours' stages), at most all of them. A description without a
 * domain or a gateway (0) puts every replica in one domain. */
static int replicas_per_domain(const tg_target_desc *t, int replicas, int devices_per_replica)
{
    if (t->link_domain_devices <= 0 || t->gateway_bytes_per_cycle <= 0)
        return replicas;
    int per = t->link_domain_devices / (devices_per_replica > 0 ? devices_per_replica : 1);
    if (per < 1)
        per = 1;
    return per < replicas ? per : replicas;
}

tg_allreduce_cost tg_allreduce_cost_of(const tg_target_desc *t, double bytes, int replicas,
                                       int devices_per_replica)
{
    tg_allreduce_cost c = {replicas, replicas, 1, 0, 0, 0};
    if (replicas < 2 || bytes <= 0)
        return c;
    c.per_domain = replicas_per_domain(t, replicas, devices_per_replica);
    c.domains = (replicas + c.per_domain - 1) / c.per_domain;
    c.link_cycles =
        tg_ring_allreduce_cycles(bytes, c.per_domain, t->link_bytes_per_cycle, t->sync_cycles);
    if (c.domains > 1) {
        /* every device of a machine sends its piece through the machine's
         * one gateway at once */
        int sharing = t->devices_per_machine > 0 ? t->devices_per_machine : 1;
        c.gateway_cycles =
            tg_ring_allreduce_cycles(bytes / c.per_domain, c.domains,
                                     t->gateway_bytes_per_cycle / sharing, t->gateway_step_cycles);
    }
    c.cycles = c.link_cycles + c.gateway_cycles;
    return c;
}

double tg_allgather_cycles(const tg_target_desc *t, double bytes, int replicas,
                           int devices_per_replica)
{
    return tg_allreduce_cost_of(t, bytes, replicas, devices_per_replica).cycles / 2;
}
