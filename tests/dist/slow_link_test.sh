#!/bin/sh
# tests/dist/slow_link_test.sh - a slow link between two network hosts:
# 20 ms of delay and 100 Mbit/s (issue 44's "netem delay 20 ms, rate 100
# Mbit"; docs/distributed.md "A link with a delay"). This kernel has no
# netem, so each host's link is a pair of TAP devices joined by
# tg_delay_link (tests/dist/delay_link.c), which holds every frame the host
# sends (tests/dist/netns_hosts.sh, HOSTS_DELAY_MS); tbf limits the rate.
#  1. the round trip h1 -> h2 (ping) grows by twice the delay: at least
#     2 x 20 ms, and less than the 4 x 20 of frames held in both directions;
#  2. 2 hosts x 1 instance of mnist-pipeline complete over the 100 Mbit/s
#     links with no delay and with 20 ms (twice each, in turn), and instance
#     0's all-reduce (analyse's instances view, from the profile; the faster
#     run of each pair) is at least 15 ms a host step longer with the delay.
#     Each host step's gradients cross the link each way, and OpenMPI's
#     rendezvous for blocks over its eager limit adds a round trip, so the
#     delay adds about one and a half round trips to every exchange
#     (measured under load: 60 ms), while the faster of two runs on the same
#     links differs by a few ms (DELAY_MS 0: -2 measured, and the test
#     fails, as it must without the delay). One instance a host: two
#     processes on two cores, not four, so the load's noise stays small.
# usage: slow_link_test.sh TILEGRAPH_BINARY TG_DELAY_LINK [DELAY_MS, default 20]
# (exit 77: skipped, saying why). Runs as root (.ci/run does); about 15 s.
T=$(readlink -f "$1")
HOSTS_DELAY_LINK=$(readlink -f "$2")
D=${3:-20}
command -v mpirun >/dev/null 2>&1 || { echo "no mpirun (openmpi-bin): skipped"; exit 77; }
command -v ping >/dev/null 2>&1 || { echo "no ping (iputils-ping): skipped"; exit 77; }
. "$(dirname "$0")/netns_hosts.sh"
why=$(hosts_can) || { echo "no network hosts here: $why: skipped"; exit 77; }
why=$(host_delay_can) || { echo "no delay link here: $why: skipped"; exit 77; }
hosts_workdir
HOSTS_DELAY_MS=0
hosts_up 2 "$W" || fail "could not make the hosts"
why=$(host_rate_can) || { echo "no rate limit here: $why: skipped"; exit 77; }

# 1. the round trip h1 -> h2, without the delay and with it ("min avg", ms)
rtt() {
    on_host 1 ping -c 1 -W 5 h2 >/dev/null 2>&1 # the neighbours found (ARP) first
    on_host 1 ping -c 5 -i 0.2 -q h2 >ping.log 2>&1 || fail "ping h1 -> h2"
    sed -n 's|^rtt min/avg/max/mdev = \([0-9.]*\)/\([0-9.]*\)/.*|\1 \2|p' ping.log
}
rtt >plain.rtt
host_delay 1 "$D" && host_delay 2 "$D" || fail "could not set the delay"
rtt >slow.rtt
plain_rtt=$(cat plain.rtt)
slow_rtt=$(cat slow.rtt)
echo "round trip h1 -> h2 (ping, min and mean of 5): $plain_rtt ms without the delay," \
    "$slow_rtt ms with $D ms on each host's link"
awk -v r="$slow_rtt" -v d="$D" 'BEGIN { split(r, x, " "); exit !(x[1] >= 2 * d && x[1] < 4 * d + 5) }' ||
    fail "a round trip of $slow_rtt ms over two links of $D ms each (expected from $((2 * D)) ms)"

# 2. the job over the plain links and over the delayed ones, both at 100 Mbit/s
host_rate 1 100mbit && host_rate 2 100mbit || fail "tc could not limit the links"
MPI_ARGS=""
for a in $HOSTS_MPI; do
    MPI_ARGS="$MPI_ARGS --mpi-arg $a"
done
S="--model mnist-pipeline --epochs 1 --batch-size 8 --train-limit 192 --test-limit 48 --seed 5"
S="$S --quiet --max-steps 6 --engine-option distributed.gradientBucketBytes=0"
S="$S --engine-option autoReport.executionProfileProgramRunCount=6" # 5 steps after the first
# a job of 1 instance on each host, profiled into NAME; NAME.ms: instance
# 0's all-reduce a host step (analyse's instances view), in ms
job() { # NAME
    on_host 1 timeout 120 "$T" run --host h1,h2 --num-instances 2 --num-replicas 2 $MPI_ARGS -- \
        train $S --profile-dir "$1" >"$1.log" 2>&1 || fail "the job over the $1 links"
    "$T" analyse "$1" instances >>"$1.log" 2>&1 &&
        "$T" analyse "$1" instances --json >"$1.json" || fail "analyse instances of $1"
    tr '{' '\n' <"$1.json" | sed -n 's/^"instance":0,.*"all-reduce":\([0-9.e+]*\),.*/\1/p' |
        awk '{ printf "%.1f", $1 / 1e6 }' >"$1.ms"
}
# twice each, in turn, and the faster of each pair compared: the load only
# ever lengthens a run, so the faster of two is the nearer to the link's own
for r in 1 2; do
    host_delay 1 0 && host_delay 2 0 || fail "could not take the delay off"
    job plain$r
    host_delay 1 "$D" && host_delay 2 "$D" || fail "could not set the delay"
    job slow$r
done
for f in plain1 plain2 slow1 slow2; do
    [ -s $f.ms ] || fail "no all-reduce time in $(cat $f.json)"
done
grep -A3 '^Instances' plain1.log slow1.log
min() { awk -v a="$(cat "$1")" -v b="$(cat "$2")" 'BEGIN { print (a < b ? a : b) }'; }
plain=$(min plain1.ms plain2.ms)
slow=$(min slow1.ms slow2.ms)
echo "all-reduce of instance 0 a host step over 100 Mbit/s links: $(cat plain1.ms) and" \
    "$(cat plain2.ms) ms without delay, $(cat slow1.ms) and $(cat slow2.ms) ms with $D ms each way"
awk -v p="$plain" -v s="$slow" 'BEGIN { exit !(s >= p + 15) }' ||
    fail "the all-reduce took $slow ms a host step with $D ms of delay, $plain ms without:" \
        "not 15 ms longer"
echo "slow_link_test: passed (round trip $plain_rtt -> $slow_rtt ms;" \
    "all-reduce $plain -> $slow ms a host step)"
