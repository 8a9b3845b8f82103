#!/bin/sh
# The memory story of seed 003 on the simulated tile processor: torchvision's
# ResNet-101 on 32x32 CIFAR-10 images, split at layer3.8 over 2 devices, micro-batch
# 64. Every step is one more flag; the compile report alone says whether it fits
# (each compile takes well under a second: nothing runs).
#
#   examples/journey/mk2.sh [path/to/tilegraph]
set -u
TG=${1:-./build/tilegraph}
BASE="compile --optimizer adamw --lr 0.001 --target mk2 --model resnet101 --input 3x32x32 --stem imagenet --split layer3.8 --batch-size 64"
HALF="--precision 16.16 --loss-scaling static --loss-scale 1000 --accum-type f16 --first-moment-type f16"

step() {
    name=$1; shift
    printf '\n== %s: tilegraph %s\n' "$name" "$*"
    "$TG" "$@" 2>&1 | grep -E "^(memory|weights|optimizer state|gradient accumulators|host-stream|pipeline stash|activations|total)|max tile|out of|needs" | cut -c1-160
}

step "base (32.32, out of memory)"   $BASE --precision 32.32 --gradient-accumulation 3
step "16.16 (fits)"                  $BASE $HALF --gradient-accumulation 3
step "gradient accumulation 8"       $BASE $HALF --gradient-accumulation 8
step "device iterations 4"           $BASE $HALF --gradient-accumulation 8 --device-iterations 4
step "8-bit I/O"                     $BASE $HALF --gradient-accumulation 8 --device-iterations 4 --eight-bit-io
# What the analyser suggests for the base, each remedy re-planned:
printf '\n== insights for the base\n'
"$TG" $BASE --precision 32.32 --gradient-accumulation 3 --engine-option debug.allowOutOfMemory=true |
    sed -n '/^insights/,$p'
