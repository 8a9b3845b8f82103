#!/bin/sh
# The speed story of seed 003 on this machine: the same steps as mk2.sh, each a
# training run, on torchvision's ResNet-18 (sized for a 2-core CPU) split at
# layer3.0 over 2 cpu devices of one thread each. --data defaults to the
# synthetic CIFAR-shaped set; pass cifar10:DIR to use CIFAR-10's binary batches.
# bench/bench_journey measures the same steps in one run and prints the table.
#
#   examples/journey/cpu.sh [path/to/tilegraph] [data]
set -u
TG=${1:-./build/tilegraph}
DATA=${2:-synthetic}
BASE="train --model resnet18 --data $DATA --stem imagenet --split layer3.0 --threads 1 --batch-size 16 --optimizer adamw --lr 0.001 --flip 0.5 --epochs 1 --train-limit 3072 --test-limit 512"
# Half precision as this target computes it: bf16 (oneDNN on AVX512_BF16).
# The seed's 16.16 is the tile processor's native half; on a CPU without f16
# arithmetic it is only converted (docs/precision.md has both measured).
HALF="--precision bf16.bf16 --accum-type bf16 --first-moment-type bf16"

step() {
    name=$1; shift
    printf '\n== %s: tilegraph %s\n' "$name" "$*"
    "$TG" "$@" 2>&1 | grep -E "^(epoch [0-9]+:|  loss scale|training:)"
}

step "base"                    $BASE --gradient-accumulation 3
step "bf16.bf16"               $BASE $HALF --gradient-accumulation 3
step "gradient accumulation 8" $BASE $HALF --gradient-accumulation 8
step "device iterations 4"     $BASE $HALF --gradient-accumulation 8 --device-iterations 4
step "8-bit I/O"               $BASE $HALF --gradient-accumulation 8 --device-iterations 4 --eight-bit-io
step "async loader"            $BASE $HALF --gradient-accumulation 8 --device-iterations 4 --eight-bit-io --loader async --workers 1
