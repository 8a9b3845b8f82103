"""tests/dist/wire_error.py - how far bf16 gradients on the wire
(distributed.gradientWireType=bfloat16) take a training from float32's.

usage: wire_error.py F32.safetensors BF16.safetensors INITIAL.safetensors BOUND

For every f32 tensor: |w_bf16 - w_f32| / |w_f32 - w_initial| (L2 norms: the
error against the training's own movement). Prints each, and fails (exit 1)
when one is above BOUND, when all are 0 (nothing was rounded: the wire was
not bf16) or when the training did not move a tensor. Pure Python (struct,
array), run by Debian's /usr/bin/python3 from tests/dist/mpi_test.sh.
"""
import array
import json
import math
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, v in header.items():
        if name == "__metadata__" or v["dtype"] != "F32":
            continue
        a = array.array("f")
        begin, end = v["data_offsets"]
        a.frombytes(data[8 + n + begin:8 + n + end])
        out[name] = a
    return out


def dist(a, b):
    return math.sqrt(sum((x - y) * (x - y) for x, y in zip(a, b)))


def main():
    f32, bf16, init = (load(p) for p in sys.argv[1:4])
    bound = float(sys.argv[4])
    worst, ok = 0.0, True
    for name in sorted(f32):
        moved = dist(f32[name], init[name])
        if moved == 0:
            print(f"{name}: the training did not move it")
            ok = False
            continue
        r = dist(bf16[name], f32[name]) / moved
        worst = max(worst, r)
        print(f"{name}: {len(f32[name])} values, bf16 wire vs f32: {r:.2e} of the training's movement")
        ok = ok and r <= bound
    print(f"worst {worst:.2e} (bound {bound:g})")
    if worst == 0:
        print("the bf16 run is float32's bit for bit: no gradient was rounded")
        ok = False
    sys.exit(0 if ok else 1)


main()
