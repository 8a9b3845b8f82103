#!/bin/sh
# bench/bench_multihost.sh - the gradient exchange of 4 instances of
# mnist-pipeline over 1, 2 and 4 network hosts of the bench's own
# (tests/dist/netns_hosts.sh), each host's link limited to RATE (tc tbf) and,
# with DELAY_MS, holding what its host sends for that long (this kernel has
# no netem: tg_delay_link, tests/dist/delay_link.c, from $HOSTS_DELAY_LINK or
# beside the binary in tests/; between two hosts the round trip grows by
# 2 x DELAY_MS), with f32 and bf16 gradients on the wire
# (distributed.gradientWireType) and gradient buckets sent during the
# backward (the default) and without (distributed.gradientBucketBytes=0).
# First a line with the round trip h1 -> h2 (ping, when there is one).
# One JSON line per case, from the profiles of the run (analyse's instances
# view, instance 0, the mean of 15 recorded host steps after the first):
# host step, all-reduce, the exchange with the instances inside it, the time
# buckets were in flight during the backward (the overlap), with the CPU
# model and the kernels' ISA. Twelve runs of 512 samples each, a few minutes.
# Root; run it on a quiet machine:
#   sh bench/bench_multihost.sh build/tilegraph [RATE, default 100mbit] [DELAY_MS, default none]
T=$(readlink -f "$1")
RATE=${2:-100mbit}
DELAY=${3:-}
. "$(dirname "$0")/../tests/dist/netns_hosts.sh"
why=$(hosts_can) || { echo "no network hosts here: $why" >&2; exit 77; }
if [ -n "$DELAY" ]; then
    HOSTS_DELAY_LINK=$(readlink -f "${HOSTS_DELAY_LINK:-$(dirname "$T")/tests/tg_delay_link}")
    why=$(host_delay_can) || { echo "no delay link here: $why" >&2; exit 77; }
    HOSTS_DELAY_MS=$DELAY
fi
hosts_workdir
hosts_up 4 "$W" || exit 1
for k in 1 2 3 4; do
    host_rate $k "$RATE" || exit 1
done
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
if command -v ping >/dev/null 2>&1; then # the round trip over the links, in ms
    on_host 1 ping -c 1 -W 5 h2 >/dev/null 2>&1 # the neighbours found (ARP) first
    on_host 1 ping -c 10 -i 0.2 -q h2 | sed -n 's|^rtt min/avg/max/mdev = \([0-9.]*\)/\([0-9.]*\)/\([0-9.]*\)/.*|\1 \2 \3|p' |
        awk -v r="$RATE" -v d="${DELAY:-0}" -v l="$(cut -d' ' -f1 /proc/loadavg)" -v c="$cpu" '{
            printf "{\"bench\":\"multihost_rtt\",\"from\":\"h1\",\"to\":\"h2\",\"rate\":\"%s\",\"delay_ms\":%s,\"rtt_min_ms\":%s,\"rtt_avg_ms\":%s,\"rtt_max_ms\":%s,\"load\":%s,\"cpu\":\"%s\"}\n",
                r, d, $1, $2, $3, l, c }'
fi
M="--model mnist-pipeline --epochs 1 --batch-size 16 --train-limit 512 --test-limit 16 --quiet"
M="$M --engine-option autoReport.executionProfileProgramRunCount=16"
MA=""
for a in $HOSTS_MPI; do
    MA="$MA --mpi-arg $a"
done
for hosts in h1 h1,h2 h1,h2,h3,h4; do
    for wire in float32 bfloat16; do
        for bucket in default 0; do
            opt="--engine-option distributed.gradientWireType=$wire"
            [ $bucket = 0 ] && opt="$opt --engine-option distributed.gradientBucketBytes=0"
            rm -rf prof
            on_host 1 "$T" run --host $hosts --num-instances 4 --num-replicas 4 $MA -- train $M $opt \
                --profile-dir prof >run.log 2>&1 || { echo "failed: $hosts" >&2; tail run.log >&2; exit 1; }
            isa=$(sed -n 's/.*(ISA \([a-z0-9_]*\)).*/\1/p' run.log | head -1)
            "$T" analyse prof instances --json >inst.json || exit 1
            load=$(cut -d' ' -f1 /proc/loadavg)
            tr '{' '\n' <inst.json |
                sed -n 's/^"instance":0,.*"host steps":\([0-9]*\),"mean step":\([0-9.e+]*\),"all-reduce":\([0-9.e+]*\),"with instances":\([0-9.e+]*\),.*"in the backward":\([0-9.e+]*\),.*/\1 \2 \3 \4 \5/p' |
                awk -v h="$hosts" -v b="$bucket" -v w="$wire" -v r="$RATE" -v d="${DELAY:-0}" -v c="$cpu" -v i="$isa" -v l="$load" '{
                    n = split(h, x, ",");
                    printf "{\"bench\":\"multihost\",\"hosts\":%d,\"instances\":4,\"rate\":\"%s\",\"delay_ms\":%s,\"wire\":\"%s\",\"buckets\":\"%s\",\"steps\":%d,\"host_step_ms\":%.2f,\"allreduce_ms\":%.2f,\"exchange_ms\":%.2f,\"in_backward_ms\":%.2f,\"load\":%s,\"cpu\":\"%s\",\"isa\":\"%s\"}\n",
                        n, r, d, w, b, $1, $2 / 1e6, $3 / 1e6, $4 / 1e6, $5 / 1e6, l, c, i }'
        done
    done
done
