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
# a call to a library function the shared library does not export (no
# TG_API) must be in KNOWN_TOOLS, the internal functions the command still
# reaches (analyse/ and report/), which keep it from linking the shared library.
#
# usage: scripts/check_layer_symbols.sh BUILD_DIR [SOURCE_DIR]
# (BUILD_DIR: a CMake build of the library and the command, made first;
# NM overrides nm.)
build=${1:?usage: check_layer_symbols.sh BUILD_DIR [SOURCE_DIR]}
src=${2:-$(dirname "$0")/..}
NM=${NM:-nm}

INTERFACES="graph/op_rules.h"
# core/options.c checks an option's target name against the registry when it
# is set (tg_target_count/tg_target_name): needs the registry passed down or
# the check moved to where the config meets the targets.
KNOWN="src/core/options.c:tg_target_count src/core/options.c:tg_target_name"
# The analyser and report API the command calls without TG_API (issue 43
# item 3: the command to link libtilegraph.so through include/tilegraph/ only).
KNOWN_TOOLS="tg_an_build tg_an_check_comparable tg_an_close tg_an_compare tg_an_filter_defaults
tg_an_format tg_an_meta tg_an_open tg_an_open_instance tg_an_path tg_an_print_json
tg_an_print_record tg_an_print_text tg_an_report_json tg_an_report_json_free
tg_an_table_truncate tg_an_view_free tg_an_view_known tg_an_view_list tg_an_views
tg_an_write_report_page tg_report_insights tg_report_insights_wanted tg_report_plan_json
tg_report_plan_text tg_report_predictions tg_report_write_graph_profile"

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
(cd "$build" && find "$lib/src" "$lib/models" "$cli/tools" -name '*.o' 2>/dev/null | sort) \
    >"$tmp/objects"
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
echo "$KNOWN_TOOLS" | tr ' ' '\n' >"$tmp/known_tools"

awk -v exports="$tmp/exports" -v interfaces="$tmp/interfaces" -v known="$tmp/known" \
    -v known_tools="$tmp/known_tools" -v used_out="$tmp/used" '
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
    while ((getline line < known_tools) > 0) if (line != "") ok_tools[line] = 1
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
            if (s in ok_tools) { used_tools[s] = 1; continue }
            printf "%s: tools calls %s (%s), which libtilegraph.so does not export (no TG_API)\n",
                   f, s, def[s]
            bad++
        }
    }
    for (k in ok) if (!(k in used)) print "check_layer_symbols: KNOWN " k " is no longer called: remove it" > "/dev/stderr"
    if (have_exports)
        for (k in ok_tools) if (!(k in used_tools)) print "check_layer_symbols: KNOWN_TOOLS " k " is no longer called: remove it" > "/dev/stderr"
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

