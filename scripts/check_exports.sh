#!/bin/sh
# scripts/check_exports.sh - libtilegraph.so exports exactly the public API
# (issue 16, docs/architecture.md): every symbol `nm -D --defined-only`
# lists must be declared with TG_API in include/tilegraph/*.h, and every
# TG_API declaration must be exported. An internal function that leaks
# (a missing `static`, a lost -fvisibility=hidden) or a public one that is
# not built fails (exit 1), naming the symbol. The ifunc resolvers GCC makes
# for a public function with target_clones ("name.resolver") go with it.
# usage: scripts/check_exports.sh LIBTILEGRAPH_SO [SOURCE_DIR]
lib=$1
cd "${2:-$(dirname "$0")/..}" || exit 2
[ -r "$lib" ] || { echo "check_exports: cannot read the library '$lib'"; exit 2; }
command -v nm >/dev/null || { echo "check_exports: nm not found (binutils)"; exit 77; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
# Declarations: the name before "(" (functions) or ";" (data) after TG_API.
sed -n 's/.*TG_API[^;{]*[^a-z_0-9]\([a-z_][a-z_0-9]*\) *(.*/\1/p; s/.*TG_API[^(;{]*[^a-z_0-9]\([a-z_][a-z_0-9]*\) *;.*/\1/p' \
    $(ls include/tilegraph/*.h | grep -v '/export.h$') | sort -u >"$tmp/api"
# Sanitizer builds add their own: ASan's ODR indicator of an exported
# variable ("__odr_asan.name") goes with it, the runtime's hooks are theirs.
nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/\.resolver$//; s/^__odr_asan\.//' |
    grep -vE '^__(asan|tsan|ubsan|sanitizer|lsan)' | sort -u >"$tmp/exported"
comm -13 "$tmp/api" "$tmp/exported" >"$tmp/extra"
comm -23 "$tmp/api" "$tmp/exported" >"$tmp/missing"
bad=0
if [ -s "$tmp/extra" ]; then
    echo "check_exports: exported but not declared with TG_API in include/tilegraph/:"
    sed 's/^/  /' "$tmp/extra"
    bad=1
fi
if [ -s "$tmp/missing" ]; then
    echo "check_exports: declared with TG_API but not exported by $lib:"
    sed 's/^/  /' "$tmp/missing"
    bad=1
fi
[ $bad = 0 ] && echo "check_exports: $(wc -l <"$tmp/exported") exported symbols, all of them the public API"
exit $bad
