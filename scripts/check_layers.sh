#!/bin/sh
# scripts/check_layers.sh - includes point one way (docs/architecture.md):
#   core -> trace -> graph -> ops, data -> backend -> onnx -> compile, target -> profile -> runtime
#   -> report -> analyse -> tools
# (ops is what an op is: shape, gradient, FLOPs, reference kernel, builder;
# backend holds the kernels that run them on a machine, src/backend/cpu/)
# (trace is host tracing: it needs only core, and every layer above may record;
# report shows a compiled program and holds the tables every view is made of,
# analyse reads profiles into those tables)
# A file under src/ may include headers of its own layer or lower ones. Each
# back edge that still exists is listed in KNOWN below with the issue that
# removes it; any other back edge fails (exit 1), naming the file and line.
# The calls themselves are checked on the built objects' symbols by
# scripts/check_layer_symbols.sh (a public header lets an include through).
# usage: scripts/check_layers.sh [SOURCE_DIR]

cd "${1:-$(dirname "$0")/..}" || exit 2
KNOWN=""   # none left; add "file:layer" here only with the issue that removes it
rank() {
    case $1 in
    core) echo 1 ;; trace) echo 2 ;; graph) echo 3 ;; ops | data) echo 4 ;; backend) echo 5 ;;
    onnx) echo 6 ;; compile | target) echo 7 ;; profile) echo 8 ;; runtime) echo 9 ;;
    report) echo 10 ;; analyse) echo 11 ;; *) echo 0 ;;
    esac
}
bad=0 edges=0
for f in $(find src -name '*.[ch]' | sort); do
    layer=$(echo "$f" | cut -d/ -f2)
    me=$(rank "$layer")
    [ "$me" -gt 0 ] || continue
    grep -nE '^#include "[a-z_]+/' "$f" | while IFS= read -r line; do
        inc=$(echo "$line" | sed -E 's/^[0-9]+:#include "([a-z_]+)\/.*/\1/')
        [ "$(rank "$inc")" -gt "$me" ] || continue
        case " $KNOWN " in *" $f:$inc "*) continue ;; esac
        echo "$f:${line%%:*}: $layer includes $inc/ (a higher layer): ${line#*:}"
    done
done >/tmp/check_layers.$$
if [ -s /tmp/check_layers.$$ ]; then
    cat /tmp/check_layers.$$
    echo "check_layers: $(wc -l </tmp/check_layers.$$) includes point up a layer"
    bad=1
else
    echo "check_layers: every include points down or sideways (known back edges: $KNOWN)"
fi
rm -f /tmp/check_layers.$$
exit $bad
