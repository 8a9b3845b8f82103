#!/bin/sh
# tests/tools/check_layers_test.sh - scripts/check_layers.sh fails on a back
# edge and passes a tree whose includes point down: run over small scratch
# trees, one include each, around the trace layer (core -> trace -> graph)
# and the report layer (runtime -> report -> analyse): core including trace/,
# trace including graph/ and report including analyse/ must fail, naming the
# file and line; trace including core/, graph including trace/, analyse
# including report/ and report including compile/ must pass; and around the
# backend layer (ops -> backend -> compile): ops including backend/ fails,
# backend including ops/ and compile including backend/ pass.
# usage: check_layers_test.sh SOURCE_DIR
set -u
script=$1/scripts/check_layers.sh
tmp=$(mktemp -d) || { echo "check_layers_test: mktemp failed" >&2; exit 1; }
trap 'rm -rf "$tmp"' EXIT
fails=0

# tree FILE INCLUDE: a scratch tree holding one file with one include.
tree() {
    rm -rf "$tmp/src" && mkdir -p "$tmp/src/$(dirname "$1")" &&
        printf '/* scratch */\n#include "%s"\n' "$2" >"$tmp/src/$1"
}
expect_fail() {
    tree "$1" "$2"
    if out=$(sh "$script" "$tmp"); then
        echo "check_layers_test: $1 including $2 passed, expected a back edge" >&2
        fails=$((fails + 1))
    elif ! echo "$out" | grep -q "^src/$1:2: "; then
        echo "check_layers_test: $1 including $2 failed without naming src/$1:2: $out" >&2
        fails=$((fails + 1))
    fi
}
expect_pass() {
    tree "$1" "$2"
    if ! out=$(sh "$script" "$tmp"); then
        echo "check_layers_test: $1 including $2 failed, expected to pass: $out" >&2
        fails=$((fails + 1))
    fi
}

expect_fail core/alloc.c trace/trace_internal.h
expect_fail trace/trace.c graph/graph.h
expect_fail trace/chrome_trace.c profile/profile.h
expect_fail report/plan.c analyse/analyse.h
expect_fail ops/conv.c backend/cpu/conv_dnnl_state.h
expect_pass trace/trace.c core/alloc.h
expect_pass graph/graph.c trace/trace_internal.h
expect_pass data/loader.c trace/trace_internal.h
expect_pass analyse/views_memory.c report/memory_table.h
expect_pass report/plan.c compile/program.h
expect_pass backend/cpu/conv_kernels.c ops/conv.h
expect_pass compile/layout.c backend/backend.h
[ "$fails" -eq 0 ] || exit 1
echo "check_layers_test: 12 cases as expected"
