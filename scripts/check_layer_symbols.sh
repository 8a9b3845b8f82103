#!/bin/sh
# scripts/check_layer_symbols.sh - calls point one way (docs/architecture.md),
# read from the compiled objects rather than the #include lines:
#   core -> trace -> graph -> ops, data -> backend -> onnx -> models -> target -> compile
#   -> profile -> runtime -> report -> analyse -> tools
# (ops: what an op is; backend: the kernels that run it, src/backend/cpu/)
# Each object's undefined symbols (nm) are looked up among the symbols the
# other objects define; a call from an object of one layer to a function or
# variable defined in a higher layer fails (exit 1), naming the caller, the
# symbol and where it is defined. scripts/check_layers.sh checks the includes,
# where a public header (include/tilegraph/) or a declaration in a low
# layer's header lets an upward call through; the linker sees every call.
#
# Two lists say what may still point up:
#   INTERFACES: headers of a low layer that declare functions a higher one
#     defines (graph/op_rules.h: the op table's rules, defined by
#     ops/registry.c). Such a function counts as the header's layer: that is
#     the dependency turned round on purpose, a table passed down.
#   KNOWN: "caller.c:symbol", each an upward call that is still there, with
#     the reason; any other fails. Remove an entry when its call goes.
# tools/ objects are also checked against libtilegraph.so when it is built:
# the command links the shared library through include/tilegraph/ only, so a
# call to a library function it does not export (no TG_API) fails, named
# here before the linker reports an undefined reference.
#
# usage: scripts/check_layer_symbols.sh BUILD_DIR [SOURCE_DIR]
# (BUILD_DIR: a CMake build of the library and the command, made first;
# NM overrides nm.)
build=${1:?usage: check_layer_symbols.sh BUILD_DIR [SOURCE_DIR]}
src=${2:-$(dirname "$0")/..}
NM=${NM:-nm}

INTERFACES="graph/op_rules.h"
# Upward calls still there, as "caller.c:symbol": none. graph/nn.c's layer
# builders moved to ops/ (backend43) and core/options.c no longer asks the
# target registry (tools43); a new one fails the check.
KNOWN=""

lib=CMakeFiles/tilegraph_objects.dir
cli=CMakeFiles/tilegraph_cli.dir
if ! [ -d "$build/$lib" ]; then
    echo "check_layer_symbols: no objects in $build/$lib: build the library first" >&2
    exit 2
fi
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

# "file symbol type" for every symbol of every object (file: the source,
# src/core/options.c), one nm over all of them; an object nm cannot read
# fails the check.
# An object whose source is gone (a file moved or deleted since this build
# tree last built it) is stale: it is skipped, saying so, not checked.
(cd "$build" && find "$lib/src" "$lib/models" "$cli/tools" -name '*.o' 2>/dev/null | sort) |
    while read -r o; do
        f=${o%.o}
        f=${f#"$lib/"}
        f=${f#"$cli/"}
        if [ -f "$src/$f" ]; then
            echo "$o"
        else
            echo "check_layer_symbols: skipping $o: $f is gone (a stale object)" >&2
        fi
    done >"$tmp/objects"
if [ -s "$tmp/objects" ]; then
    (cd "$build" && xargs "$NM" -P -A <"$tmp/objects") >"$tmp/nm" 2>"$tmp/err" || {
        echo "check_layer_symbols: $NM failed: $(cat "$tmp/err")" >&2
        exit 2
    }
fi
awk -v lib="$lib/" -v cli="$cli/" 'NF >= 3 {
    f = $1; sub(/:$/, "", f); sub(/\.o$/, "", f)
    if (index(f, lib) == 1) f = substr(f, length(lib) + 1)
    if (index(f, cli) == 1) f = substr(f, length(cli) + 1)
    print f, $2, $3
}' "$tmp/nm" >"$tmp/syms" 2>/dev/null
if ! [ -s "$tmp/syms" ]; then

    echo "check_layer_symbols: no symbols read from the objects of $build" >&2
    exit 2
fi

# functions declared in the interface headers: "name header-layer"
for h in $INTERFACES; do
    sed -nE 's/^[a-z_ ]*[ *]+(tg_[a-z0-9_]+)\(.*/\1/p' "$src/src/$h" |
        awk -v l="${h%%/*}" '{ print $1, l }'
done >"$tmp/interfaces"
[ -n "$INTERFACES" ] && ! [ -s "$tmp/interfaces" ] &&
    echo "check_layer_symbols: no declarations read from $INTERFACES under $src/src" >&2 && exit 2

if [ -f "$build/libtilegraph.so" ]; then
    "$NM" -D --defined-only "$build/libtilegraph.so" | awk '{ print $NF }' >"$tmp/exports"
fi

echo "$KNOWN" | tr ' ' '\n' >"$tmp/known"

awk -v exports="$tmp/exports" -v interfaces="$tmp/interfaces" -v known="$tmp/known" \
    -v used_out="$tmp/used" '
function layer(f, p) {
    split(f, p, "/")
    return p[1] == "src" ? p[2] : p[1]
}
function rank(l) {
    return (l in ranks) ? ranks[l] : 0
}
BEGIN {
    nr = split("core trace graph ops,data backend onnx models target compile profile runtime report " \
               "analyse tools", order, " ")
    for (r = 1; r <= nr; r++) {
        m = split(order[r], same, ",")
        for (k = 1; k <= m; k++) ranks[same[k]] = r
    }
    while ((getline line < interfaces) > 0) { split(line, w, " "); iface[w[1]] = w[2] }
    while ((getline line < known) > 0) if (line != "") ok[line] = 1
    have_exports = 0
    while ((getline line < exports) > 0) { exported[line] = 1; have_exports = 1 }
}
# defined, global: T text, D data, B bss, R read-only, C common, V/W weak
$3 ~ /^[TDBRCVWG]$/ { def[$2] = $1; next }
$3 == "U" { n++; uf[n] = $1; us[n] = $2 }
END {
    bad = 0
    for (i = 1; i <= n; i++) {
        f = uf[i]; s = us[i]
        if (!(s in def) || def[s] == f)
            continue
        from = layer(f); to = (s in iface) ? iface[s] : layer(def[s])
        if (rank(from) > 0 && rank(to) > rank(from)) {
            if ((f ":" s) in ok) { used[f ":" s] = 1; continue }
            printf "%s: %s (%s) calls %s, defined in %s (%s, a higher layer)\n", f, from,
                   rank(from), s, def[s], to
            bad++
        }
        if (from == "tools" && have_exports && !(s in exported) && layer(def[s]) != "tools") {
            printf "%s: tools calls %s (%s), which libtilegraph.so does not export (no TG_API)\n",
                   f, s, def[s]
            bad++
        }
    }
    for (k in ok) if (!(k in used)) print "check_layer_symbols: KNOWN " k " is no longer called: remove it" > "/dev/stderr"
    print bad > used_out
}' "$tmp/syms" >"$tmp/report" || exit 2

bad=$(cat "$tmp/used")
if [ "$bad" != 0 ]; then

    sort "$tmp/report"
    echo "check_layer_symbols: $bad calls point up a layer or past the public API"
    exit 1
fi
echo "check_layer_symbols: every call points down or sideways ($(cut -d' ' -f1 "$tmp/syms" |
    sort -u | wc -l) objects; $(grep -c . "$tmp/known") known upward calls)"
exit 0

