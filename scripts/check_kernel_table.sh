#!/bin/sh
# scripts/check_kernel_table.sh BUILD_DIR - every cpu kernel a family file
# defines (`const tg_kernel_def tg_cpu_kernel_<ENUM>`) is in the cpu
# backend's table (src/backend/cpu/kernels.c): a definition left out of the
# table compiles, links and is never run, and the op runs its reference
# kernel through doubles without a word. Read from the objects: the table's
# object refers to each kernel it lists (an undefined symbol), the family
# objects define them. Exits 1 naming each kernel defined but not listed,
# 2 when the objects cannot be read.
set -u
build=${1:?usage: check_kernel_table.sh BUILD_DIR}
NM=${NM:-nm}
objs=$build/CMakeFiles/tilegraph_objects.dir/src
table=$objs/backend/cpu/kernels.c.o
[ -f "$table" ] || { echo "check_kernel_table: no $table: build the library first" >&2; exit 2; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
"$NM" -u "$table" | awk '$NF ~ /^tg_cpu_kernel_/ { print $NF }' | sort -u >"$tmp/listed"
find "$objs" -name '*.o' ! -path "$table" -exec "$NM" --defined-only {} + 2>"$tmp/err" |
    awk '$NF ~ /^tg_cpu_kernel_/ { print $NF }' | sort -u >"$tmp/defined" || {
    echo "check_kernel_table: $NM failed: $(cat "$tmp/err")" >&2
    exit 2
}
[ -s "$tmp/defined" ] || { echo "check_kernel_table: no tg_cpu_kernel_* defined under $objs" >&2; exit 2; }
missing=$(comm -23 "$tmp/defined" "$tmp/listed")
if [ -n "$missing" ]; then
    for k in $missing; do
        echo "check_kernel_table: $k is defined but not in src/backend/cpu/kernels.c's table:" \
            "add X(${k#tg_cpu_kernel_}) there, or the op runs its reference kernel" >&2
    done
    exit 1
fi
echo "check_kernel_table: $(wc -l <"$tmp/defined") kernels defined, all in the table"
