#!/bin/sh
# tests/backend/check_kernel_table_test.sh SOURCE_DIR - scripts/check_kernel_table.sh
# fails naming a kernel a family object defines and the table leaves out,
# and passes when the table lists every one: over a scratch build tree of
# three tiny objects compiled here.
set -u
script=$1/scripts/check_kernel_table.sh
CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "check_kernel_table_test: no C compiler ($CC)"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
objs=$tmp/build/CMakeFiles/tilegraph_objects.dir/src
mkdir -p "$objs/backend/cpu" "$objs/ops"
# obj FILE CODE: the scratch object of FILE
obj() { printf '%s\n' "$2" >"$tmp/one.c" && "$CC" -c -o "$objs/$1.o" "$tmp/one.c" || exit 1; }
obj ops/relu.c 'const int tg_cpu_kernel_RELU = 1; const int tg_cpu_kernel_ELU = 2;'
obj backend/cpu/kernels.c 'extern const int tg_cpu_kernel_RELU; const int *t[] = {&tg_cpu_kernel_RELU};'
if out=$(sh "$script" "$tmp/build" 2>&1); then
    echo "check_kernel_table_test: ELU left out of the table passed" >&2
    exit 1
fi
echo "$out" | grep -q "tg_cpu_kernel_ELU is defined but not in" || {
    echo "check_kernel_table_test: the failure does not name ELU: $out" >&2
    exit 1
}
obj backend/cpu/kernels.c 'extern const int tg_cpu_kernel_RELU, tg_cpu_kernel_ELU;
const int *t[] = {&tg_cpu_kernel_RELU, &tg_cpu_kernel_ELU};'
out=$(sh "$script" "$tmp/build" 2>&1) || {
    echo "check_kernel_table_test: a full table failed: $out" >&2
    exit 1
}
echo "check_kernel_table_test: 2 cases as expected"
