#!/bin/sh
# scripts/check_tools_api.sh - tools/ is a client of the library (issue 16,
# docs/architecture.md): a file under tools/ may include only the public API
# (tilegraph/*.h: the analyser's views and the compiled program's plan too,
# tilegraph/analyse.h and tilegraph/plan.h), the tools' own headers (a name
# without a directory) and system headers (<...>); the command is built
# without -I src and links libtilegraph.so (issue 43). Any other quoted
# include reaches into the library's insides and fails (exit 1), naming the
# file and line, unless it is listed in KNOWN below: those are the includes
# that remain to be replaced by a public call.
# Shrink KNOWN as they go; an entry that no longer exists also fails, so the
# list cannot go stale.
# usage: scripts/check_tools_api.sh [SOURCE_DIR]
cd "${1:-$(dirname "$0")/..}" || exit 2
KNOWN="" # none left; add "tools/FILE:dir/header.h" lines only with the issue that removes them
out=/tmp/check_tools_api.$$
: >"$out"
seen=""
for f in $(find tools -maxdepth 1 -name '*.[ch]' | sort); do
    # Quoted includes with a directory part: everything else is allowed.
    for inc in $(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*\/[^"]*)".*/\1/p' "$f"); do
        case $inc in tilegraph/*.h) continue ;; esac
        seen="$seen $f:$inc"
        case "$KNOWN" in *"
$f:$inc
"*) continue ;; esac
        line=$(grep -n "#[[:space:]]*include[[:space:]]*\"$inc\"" "$f" | head -1 | cut -d: -f1)
        echo "$f:$line: includes \"$inc\", a library internal: use the public API" \
            "(include/tilegraph/*.h) or add a TG_API call" >>"$out"
    done
done
for k in $KNOWN; do
    case "$seen " in *" $k "*) ;; *)
        echo "$k: listed in KNOWN of scripts/check_tools_api.sh but no longer included: remove it from KNOWN" >>"$out" ;;
    esac
done
if [ -s "$out" ]; then
    cat "$out"
    echo "check_tools_api: $(wc -l <"$out") problems"
    rm -f "$out"
    exit 1
fi
rm -f "$out"
echo "check_tools_api: tools/ includes only the public API and its own headers" \
    "($(echo $KNOWN | wc -w) known internal includes remain)"
exit 0
