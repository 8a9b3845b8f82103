#!/bin/sh
# tests/tools/check_layer_symbols_test.sh - scripts/check_layer_symbols.sh
# fails on an upward call and passes calls that point down: run over scratch
# build trees of a few tiny objects compiled here, each tree one call.
# Must fail, naming the caller and the symbol: core calling trace, target
# calling compile (target sits below compile), graph calling an ops function
# that no interface header declares, ops calling the cpu backend's engine
# (backend sits above ops), core/options.c calling tg_target_count
# (no longer in KNOWN: the target check moved to where the config meets the
# targets), a tools object calling a function the scratch libtilegraph.so
# does not export. Must pass: trace calling core, graph calling a function
# graph/op_rules.h declares and ops defines (the interface), the backend
# calling an ops function, tools calling an exported function.
# The linker must refuse the same: a program calling a function the scratch
# libtilegraph.so does not export fails to link, naming it, and one calling an
# exported function links. Given BUILD_DIR (a build of the library and the
# command), the same with the real libtilegraph.so: a program calling an
# internal function (tg_an_build, which tools/cmd_analyse.c called before the
# public analyser API; tg_target_find) fails to link, one calling the public
# API (tg_view_count) links, and the tilegraph command needs libtilegraph.so.
# usage: check_layer_symbols_test.sh SOURCE_DIR [BUILD_DIR]
set -u
script=$1/scripts/check_layer_symbols.sh
CC=${CC:-cc}
tmp=$(mktemp -d) || { echo "check_layer_symbols_test: mktemp failed" >&2; exit 1; }
trap 'rm -rf "$tmp"' EXIT
command -v "$CC" >/dev/null || { echo "check_layer_symbols_test: no C compiler ($CC)"; exit 77; }
fails=0

# obj DIR/FILE.c CODE: compile CODE into the scratch build's object for FILE
# (library sources under src/ and models/, the command's under tools/).
obj() {
    case $1 in
    tools/*) o=$tmp/build/CMakeFiles/tilegraph_cli.dir/$1.o ;;
    *) o=$tmp/build/CMakeFiles/tilegraph_objects.dir/$1.o ;;
    esac
    mkdir -p "$(dirname "$o")" "$tmp/c" "$(dirname "$tmp/src/$1")"
    : >"$tmp/src/$1" # its source, so the check does not take it for stale
    printf '%s\n' "$2" >"$tmp/c/one.c"
    "$CC" -c -fPIC -fvisibility=hidden -o "$o" "$tmp/c/one.c" || {
        echo "check_layer_symbols_test: cannot compile $1" >&2
        exit 1
    }
}
# tree CALLER CALLEE SYMBOL: CALLER calls SYMBOL, which CALLEE defines (plus
# an unrelated core object, so every tree has a lower layer too).
tree() {
    rm -rf "$tmp/build" && mkdir -p "$tmp/build"
    obj src/core/alloc.c 'int tg_core_fn(void); int tg_core_fn(void) { return 1; }'
    obj "$2" "__attribute__((visibility(\"default\"))) int $3(void); int $3(void) { return 2; }"
    obj "$1" "int $3(void); int caller(void); int caller(void) { return $3(); }"
}
# a libtilegraph.so of the library objects, exporting only what says so
shared() {
    "$CC" -shared -o "$tmp/build/libtilegraph.so" \
        $(find "$tmp/build/CMakeFiles/tilegraph_objects.dir" -name '*.o')
}
# expect fail|pass CALLER CALLEE SYMBOL: run the check over the scratch tree;
# a failure must name the caller and the symbol.
expect() {
    want=$1
    shift
    if out=$(sh "$script" "$tmp/build" "$tmp/src" 2>&1); then
        [ "$want" = pass ] && return
        echo "check_layer_symbols_test: $1 calling $3 ($2) passed, expected a failure" >&2
        fails=$((fails + 1))
    elif [ "$want" = pass ]; then
        echo "check_layer_symbols_test: $1 calling $3 ($2) failed, expected to pass: $out" >&2
        fails=$((fails + 1))
    elif ! echo "$out" | grep -q "^$1: .*calls $3"; then
        echo "check_layer_symbols_test: $1 calling $3 failed without naming them: $out" >&2
        fails=$((fails + 1))
    fi
}
# the interface header of the scratch source tree
mkdir -p "$tmp/src/src/graph"
printf '/* scratch */\nconst char *tg_op_name(int op);\n' >"$tmp/src/src/graph/op_rules.h"

while read -r want caller callee symbol; do
    tree "$caller" "$callee" "$symbol" && expect "$want" "$caller" "$callee" "$symbol"
done <<CASES
fail src/core/alloc.c src/trace/trace.c tg_trace_fn
fail src/target/tilesim.c src/compile/pipeline.c tg_pipe_fn
fail src/graph/autodiff.c src/ops/binary.c tg_add
fail src/ops/conv.c src/backend/cpu/conv_dnnl.c tg_conv_dnnl_run
pass src/backend/cpu/conv_kernels.c src/ops/conv.c tg_conv_geom_of
pass src/trace/trace.c src/core/alloc2.c tg_alloc_fn
pass src/graph/graph.c src/ops/registry.c tg_op_name
fail src/core/options.c src/target/targets.c tg_target_count
pass tools/cmd_x.c src/report/plan.c tg_report_fn
CASES
# a stale object (its source moved away since the build) is skipped, saying
# so: graph/nn.c's old object calling an ops builder after it moved to ops/
tree src/graph/nn.c src/ops/conv.c tg_conv2d
rm -f "$tmp/src/src/graph/nn.c"
if ! out=$(sh "$script" "$tmp/build" "$tmp/src" 2>&1); then
    echo "check_layer_symbols_test: a stale object failed the check: $out" >&2
    fails=$((fails + 1))
elif ! echo "$out" | grep -q "skipping .*src/graph/nn.c.o"; then
    echo "check_layer_symbols_test: a stale object was skipped without a word: $out" >&2
    fails=$((fails + 1))
fi
# with a libtilegraph.so: the command calling a function it does not export
obj src/report/hidden.c 'int tg_hidden_fn(void); int tg_hidden_fn(void) { return 3; }'
obj tools/cmd_y.c 'int tg_hidden_fn(void); int use(void); int use(void) { return tg_hidden_fn(); }'
shared
expect fail tools/cmd_y.c src/report/hidden.c tg_hidden_fn
# link_main LIB_DIR SYMBOL: link a program calling SYMBOL against LIB_DIR's
# libtilegraph.so; prints the linker's complaint, fails as the linker does.
link_main() {
    printf 'int %s(void);\nint main(void) { return %s() == 12345; }\n' "$2" "$2" >"$tmp/c/main.c"
    "$CC" -o "$tmp/c/main" "$tmp/c/main.c" -L"$1" -ltilegraph 2>&1
}
# expect_link fail|pass LIB_DIR SYMBOL: a failure must name SYMBOL.
expect_link() {
    if out=$(link_main "$2" "$3"); then
        [ "$1" = pass ] && return
        echo "check_layer_symbols_test: a program calling $3 linked against $2/libtilegraph.so," \
            "expected an undefined reference" >&2
        fails=$((fails + 1))
    elif [ "$1" = pass ]; then
        echo "check_layer_symbols_test: a program calling $3 did not link against" \
            "$2/libtilegraph.so: $out" >&2
        fails=$((fails + 1))
    elif ! echo "$out" | grep -q "undefined reference to .$3"; then
        echo "check_layer_symbols_test: linking a call to $3 failed without naming it: $out" >&2
        fails=$((fails + 1))
    fi
}
obj src/report/shown.c \
    '__attribute__((visibility("default"))) int tg_shown_fn(void); int tg_shown_fn(void) { return 4; }'
shared
expect_link fail "$tmp/build" tg_hidden_fn
expect_link pass "$tmp/build" tg_shown_fn
cases=11
if [ -n "${2:-}" ]; then
    [ -f "$2/libtilegraph.so" ] || {
        echo "check_layer_symbols_test: no $2/libtilegraph.so: build it first" >&2
        exit 1
    }
    expect_link fail "$2" tg_an_build
    expect_link fail "$2" tg_target_find
    expect_link pass "$2" tg_view_count
    # the command is linked against the shared library, not a copy of it
    if ! readelf -d "$2/tilegraph" 2>/dev/null | grep -q 'NEEDED.*\[libtilegraph\.so'; then
        echo "check_layer_symbols_test: $2/tilegraph does not link libtilegraph.so" >&2
        fails=$((fails + 1))
    fi
    cases=15
fi
# ...and a build with no objects is an error, not a pass
rm -rf "$tmp/build" && mkdir -p "$tmp/build"
if sh "$script" "$tmp/build" "$tmp/src" >/dev/null 2>&1; then
    echo "check_layer_symbols_test: an empty build passed" >&2
    fails=$((fails + 1))
fi
[ "$fails" -eq 0 ] || exit 1
echo "check_layer_symbols_test: $cases cases as expected"
