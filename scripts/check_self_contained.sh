#!/bin/sh
# scripts/check_self_contained.sh ROOT - a fresh clone needs nothing outside
# itself: no source, benchmark, test, script or doc may point at a path above
# the repository (a benchmark that read its PyTorch reference from
# ../shared/ printed "reference: none" in every fresh clone).
root=${1:-.}
hits=$(grep -rnE '\.\./shared/|\.\./\.\./shared' "$root/src" "$root/tools" "$root/models" \
    "$root/bench" "$root/tests" "$root/scripts" "$root/python" "$root/examples" "$root/docs" \
    "$root/Makefile" "$root/CMakeLists.txt" "$root/README.md" 2>/dev/null |
    grep -v 'scripts/check_self_contained.sh')
if [ -n "$hits" ]; then
    echo "paths outside the repository (copy what they need into it):"
    echo "$hits"
    exit 1
fi
echo "no path points outside the repository"
