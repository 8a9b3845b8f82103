#!/bin/sh
# tests/analyse/report_test.sh - `tilegraph report` tested in a real browser.
#
# Makes a small pipelined training profile, writes the HTML report, loads it in
# headless Chromium (--dump-dom) with the URL hash selecting each tab, and
# checks the figures the page computed against the profile (read with
# sqlite3): device count and per-device memory (Summary), the live tensors
# listed after a scripted click on a liveness step and the change between two
# steps, the busy share per device (Execution Trace), the operations and
# program-tree counts; that the page reports no JavaScript errors; that a
# comparison page shows both reports; that on an mk2 profile the Memory tab
# has a tile map per device with the fullest tile's bytes and a clicked tile's
# bytes by category, and with TILEGRAPH_TRACE the Host tab's call counts and
# times; on two mk2 profiles (pipelined and sharded, host trace on) the
# compared Host call tree's "host step" calls and the compared tile
# summaries' largest tiles of A and B; and that bad inputs fail with exit 1.
# Saves a screenshot of each tab in BUILD/report-screenshots/.
# Usage: report_test.sh TILEGRAPH_BINARY BUILD_DIR. Exit 77: skipped.
set -u
TG=$1
BUILD=$2
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ] || ! command -v sqlite3 >/dev/null; then
    echo "SKIP: chromium or sqlite3 is not installed"
    exit 77
fi
WORK=$(mktemp -d)
SHOTS=$BUILD/report-screenshots
mkdir -p "$SHOTS"
trap 'rm -rf "$WORK"' EXIT
FAIL=0
fail() { echo "FAIL: $*"; FAIL=1; }
ok() { echo "ok: $*"; }

TILEGRAPH_ENGINE_OPTIONS="{\"autoReport.all\":\"true\",\"autoReport.directory\":\"$WORK/rep\"}" \
    "$TG" train --model mnist-pipeline --strategy pipelined --train-limit 640 --test-limit 200 \
    --batch-size 8 --gradient-accumulation 4 --epochs 1 --quiet > "$WORK/train.log" 2>&1
if [ ! -f "$WORK/rep/training/profile.sqlite" ]; then
    if grep -qi "fashion\|dataset\|not found" "$WORK/train.log"; then
        echo "SKIP: training could not run:"; cat "$WORK/train.log"; exit 77
    fi
    echo "FAIL: no profile written"; cat "$WORK/train.log"; exit 1
fi
DB=$WORK/rep/training/profile.sqlite
q() { sqlite3 "$DB" "$1"; }

"$TG" report "$WORK/rep" -o "$WORK/report.html" > /dev/null || fail "report exited $?"
# the training/ subdirectory is accepted as analyse accepts it (issue 15, item 6)
"$TG" report "$WORK/rep/training" -o "$WORK/report-sub.html" > /dev/null && [ -s "$WORK/report-sub.html" ] \
    && ok "report DIR/training" || fail "report DIR/training failed"
[ -s "$WORK/report.html" ] || { echo "FAIL: no report.html"; exit 1; }
grep -qi '<script [^>]*src=\|<link [^>]*href=\|<img [^>]*src=\|url(\|@import' "$WORK/report.html" \
    && fail "the page refers to external resources"

browse() { # browse HASH OUT: the DOM after the page ran, with the hash set
    prof=$(mktemp -d "$WORK/chrome.XXXXXX")
    timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$prof" --dump-dom "file://$3#$1" > "$2" 2> /dev/null
}
# attr FILE ID ATTR: the value of attribute ATTR of the element with id ID
attr() { grep -o "id=\"$2\"[^>]*" "$1" | head -1 | sed -n "s/.* $3=\"\([^\"]*\)\".*/\1/p"; }
errors_empty() { # the page catches window.onerror into <div id="errors">
    if grep -q '<div id="errors"></div>' "$1"; then ok "$2: no JavaScript errors"
    else fail "$2: JavaScript errors: $(grep -o '<div id="errors">[^<]*' "$1")"; fi
}
R=$WORK/report.html

# ---- Summary: device count and the memory of each device
browse summary "$WORK/summary.html" "$R"
errors_empty "$WORK/summary.html" summary
n=$(q "SELECT COUNT(*) FROM devices")
v=$(attr "$WORK/summary.html" device-count data-value)
[ "$v" = "$n" ] && ok "device count $v" || fail "device count: page '$v', profile $n"
for d in $(q "SELECT device FROM devices"); do
    want=$(q "SELECT arena_bytes FROM devices WHERE device = $d")
    got=$(attr "$WORK/summary.html" device-memory-$d data-value)
    [ "$got" = "$want" ] && ok "device $d memory $got" || fail "device $d memory: page '$got', arena $want"
done

# ---- Liveness: a click on the peak step of device 1 lists its live tensors
dev=1
step=$(q "SELECT step FROM liveness WHERE device = $dev ORDER BY live_bytes DESC, step LIMIT 1")
step2=$(q "SELECT MAX(step) FROM liveness WHERE device = $dev")
browse "liveness/device=$dev&step=$step&step2=1" "$WORK/live.html" "$R"
errors_empty "$WORK/live.html" liveness
want=$(q "SELECT name FROM tensors WHERE device = $dev AND always_live = 0 AND first_step <= $step
          AND last_step >= $step ORDER BY name")
got=$(grep -o 'id="live-list".*' "$WORK/live.html" | sed 's#</table>.*##' | grep -o 'data-name="[^"]*"' \
      | sed 's/data-name="\(.*\)"/\1/' | LC_ALL=C sort)
want=$(echo "$want" | LC_ALL=C sort)
if [ -n "$want" ] && [ "$got" = "$want" ]; then ok "live tensors at device $dev step $step: $(echo $got)"
else fail "live tensors at device $dev step $step: page [$(echo $got)], profile [$(echo $want)]"; fi
added=$(q "SELECT COUNT(*) FROM tensors WHERE device = $dev AND always_live = 0 AND first_step <= 1
           AND last_step >= 1 AND NOT (first_step <= $step AND last_step >= $step)")
got=$(attr "$WORK/live.html" live-added data-count)
[ "$got" = "$added" ] && ok "tensors live at step 1 only: $got" || fail "live at step 1 only: page '$got', profile $added"
freed=$(q "SELECT COUNT(*) FROM tensors WHERE device = $dev AND always_live = 0 AND first_step <= $step
           AND last_step >= $step AND NOT (first_step <= 1 AND last_step >= 1)")
got=$(attr "$WORK/live.html" live-freed data-count)
[ "$got" = "$freed" ] && [ "$freed" -gt 0 ] && ok "tensors live at step $step only: $got" || fail "live at step $step only: page '$got', profile $freed"

# the live tensors, the step's kernel scratch and the always-live baseline add up (issue 15, item 9)
lb=$(q "SELECT live_bytes FROM liveness WHERE device = $dev AND step = $step")
al=$(q "SELECT always_live_bytes FROM liveness WHERE device = $dev AND step = $step")
tb=$(q "SELECT COALESCE(SUM(bytes * slots), 0) FROM tensors WHERE device = $dev AND always_live = 0
        AND first_step <= $step AND last_step >= $step")
tot() { grep -o "<tr data-kind=\"$1\" data-value=\"[0-9]*\"" "$WORK/live.html" | sed 's/.*data-value="\([0-9]*\)"/\1/'; }
got="$(tot tensors)+$(tot scratch)=$(tot live), $(tot always), $(tot total)"
want="$tb+$((lb - tb))=$lb, $al, $((lb + al))"
[ "$got" = "$want" ] && ok "step $step adds up: tensors+scratch=live, always live, in use: $got" \
    || fail "step $step totals: page '$got', profile '$want'"
got=$(attr "$WORK/live.html" liveness-device-$dev data-always-live)
[ "$got" = "$al" ] && [ "$al" -gt 0 ] && ok "liveness chart draws the always-live baseline ($got)" \
    || fail "liveness chart baseline: page '$got', profile $al"

# ---- Insights: the tables of `analyse insights`, each device's total = its arena
browse insights "$WORK/ins.html" "$R"
errors_empty "$WORK/ins.html" insights
got=$(grep -o '<table id="insights-0" data-title="Memory".*' "$WORK/ins.html" | sed 's#</table>.*##' \
      | grep -o 'data-col="total" data-value="[0-9]*"' | sed 's/.*data-value="\([0-9]*\)"/\1/' | awk '{ s += $1 } END { print s + 0 }')
want=$(q "SELECT SUM(arena_bytes) FROM devices")
[ "$got" = "$want" ] && ok "insights: memory totals $got" || fail "insights memory totals: page '$got', profile $want"
n=$(attr "$WORK/ins.html" insights-notes data-count)
[ -n "$n" ] && [ "$n" -gt 3 ] && grep -q 'the pipeline bubble' "$WORK/ins.html" && ok "insights: $n sentences" \
    || fail "insights sentences: '$n'"

# the re-planned remedies compile stores in its graph profile: the Insights tab lists them as the profile holds them
"$TG" compile --model mnist-pipeline --memory-per-device 1000000 --profile-dir "$WORK/oom" > "$WORK/oom.log" 2>&1
"$TG" report "$WORK/oom" -o "$WORK/oom.html" > /dev/null 2>&1 || fail "report of the compile profile exited $?"
browse insights "$WORK/oomins.html" "$WORK/oom.html"
errors_empty "$WORK/oomins.html" "insights of a compile profile"
ODB=$WORK/oom/training/profile.sqlite
want=$(sqlite3 "$ODB" "SELECT remedy || '|' || IFNULL(after_bytes, '') FROM remedies ORDER BY id")
got=$(grep -o '<table id="insights-[0-9]*" data-title="Re-planned remedies (compile)".*' "$WORK/oomins.html" | sed 's#</table>.*##' \
      | grep -o '<td data-col="remedy" data-value="[^"]*"\|data-col="after" data-value="[0-9]*"' \
      | sed 's/.*data-col="remedy" data-value="\([^"]*\)"/\1/; s/.*data-col="after" data-value="\([0-9]*\)"/|\1/' | paste -d '' - -)
[ "$(echo "$want" | wc -l)" -ge 8 ] && [ "$got" = "$want" ] && ok "insights: $(echo "$got" | wc -l) re-planned remedies from compile" \
    || fail "insights remedies: page [$(echo $got)], profile [$(echo $want)]"

# ---- Execution Trace: busy share per device over the whole host step 0
browse trace "$WORK/trace.html" "$R"
errors_empty "$WORK/trace.html" trace
for d in $(q "SELECT device FROM devices"); do
    want=$(q "SELECT printf('%.4f', SUM(end_ns - start_ns) * 1.0 / (SELECT MAX(end_ns) - MIN(start_ns)
              FROM trace WHERE run = 0)) FROM trace WHERE run = 0 AND replica = 0 AND device = $d
              AND kind = 'execute'")
    got=$(attr "$WORK/trace.html" range-busy-$d-0 data-value)
    [ -n "$got" ] && [ "$got" = "$want" ] && ok "device $d busy $got" || fail "device $d busy: page '$got', profile '$want'"
done
grep -q 'id="pipeline-phases"' "$WORK/trace.html" && ok "pipeline phases shown" || fail "no pipeline phases"
# transfers: bytes per device, transfer and peer (Tx on the sender, Rx on the receiver), as in analyse trace
want=$(q "SELECT device || '|Tx|' || peer || '|' || COUNT(*) || '|' || SUM(bytes) FROM trace WHERE run = 0 AND replica = 0
          AND kind = 'copy to device' GROUP BY device, peer
          UNION ALL SELECT peer || '|Rx|' || device || '|' || COUNT(*) || '|' || SUM(bytes) FROM trace WHERE run = 0
          AND replica = 0 AND kind = 'copy to device' GROUP BY device, peer
          UNION ALL SELECT device || '|host-in|-1|' || COUNT(*) || '|' || SUM(bytes) FROM trace WHERE run = 0
          AND replica = 0 AND kind = 'stream from host' GROUP BY device" | LC_ALL=C sort)
got=$(grep -o '<tr data-device="[0-9]*" data-transfer="[^"]*" data-peer="-*[0-9]*" data-count="[0-9]*" data-bytes="[0-9]*"' "$WORK/trace.html" \
      | sed 's/<tr data-device="\([0-9]*\)" data-transfer="\([^"]*\)" data-peer="\(-*[0-9]*\)" data-count="\([0-9]*\)" data-bytes="\([0-9]*\)"/\1|\2|\3|\4|\5/' \
      | sed 's/|copy to device (Tx)|/|Tx|/; s/|copy from device (Rx)|/|Rx|/; s/|stream from host (Rx)|/|host-in|/' | grep -v 'stream to host' | LC_ALL=C sort)
[ -n "$want" ] && [ "$got" = "$want" ] && ok "transfers: $(echo $got | wc -w) device/peer rows match" \
    || fail "transfers: page [$(echo $got)], profile [$(echo $want)]"

# repeated executions grouped: count and total per device, step and phase, as SQL on the trace
want=$(q "SELECT device || '|' || kind || '|' || phase || '|' || COUNT(*) || '|' || SUM(end_ns - start_ns)
          FROM trace WHERE run = 0 AND replica = 0 GROUP BY device, kind, phase" | LC_ALL=C sort)
got=$(grep -o '<tr class="repeat-group" data-group="[0-9]*" data-device="[0-9]*" data-kind="[^"]*" data-phase="[^"]*" data-count="[0-9]*" data-total="[0-9]*"' "$WORK/trace.html" \
      | sed 's/.*data-device="\([0-9]*\)" data-kind="\([^"]*\)" data-phase="\([^"]*\)" data-count="\([0-9]*\)" data-total="\([0-9]*\)"/\1|\2|\3|\4|\5/' | LC_ALL=C sort)
[ -n "$want" ] && [ "$got" = "$want" ] && ok "repeated executions: $(echo "$got" | wc -l) groups match" \
    || fail "repeated executions: page [$(echo $got)], profile [$(echo $want)]"

# ---- Histograms: a chart per tensor and kind of the last recorded run, counting every value
browse histograms "$WORK/hist.html" "$R"
errors_empty "$WORK/hist.html" histograms
want=$(q "SELECT tensor || '|' || kind || '|' || elements FROM histograms WHERE run = (SELECT MAX(run) FROM histograms)" | LC_ALL=C sort)
got=$(grep -o 'class="histogram" data-tensor="[^"]*" data-kind="[^"]*" data-elements="[0-9]*" data-sum="[0-9]*"' "$WORK/hist.html" \
      | sed 's/.*data-tensor="\([^"]*\)" data-kind="\([^"]*\)" data-elements="\([0-9]*\)" data-sum="\([0-9]*\)"/\1|\2|\3|\4/' \
      | awk -F'|' '$3 == $4 { print $1 "|" $2 "|" $3 }' | LC_ALL=C sort)
[ -n "$want" ] && [ "$got" = "$want" ] && ok "histograms: $(echo "$got" | wc -l) charts, every value in a bin" \
    || fail "histograms: page [$(echo $got)], profile [$(echo $want)]"

# ---- Operations and Program Tree: every op and every step is shown
browse "operations/sort=flops" "$WORK/ops.html" "$R"
errors_empty "$WORK/ops.html" operations
v=$(attr "$WORK/ops.html" ops-table data-count); n=$(q "SELECT COUNT(*) FROM ops")
[ "$v" = "$n" ] && ok "operations $v" || fail "operations: page '$v', profile $n"
first=$(sed -n '/id="ops-table"/,$p' "$WORK/ops.html" | grep -o '<tr data-name="[^"]*"' | head -1 | sed 's/.*="\(.*\)"/\1/')
want=$(q "SELECT name FROM ops ORDER BY flops DESC LIMIT 1")
[ "$first" = "$want" ] && ok "sorted by flops: $first first" || fail "sort by flops: page '$first', profile '$want'"
# FLOPs columns say per call or all calls; per type they are the total over calls, as in analyse
grep -q '>FLOPs per call' "$WORK/ops.html" && grep -q '>FLOPs (all calls)' "$WORK/ops.html" \
    && ok "FLOPs columns say per call and all calls" || fail "FLOPs column headers do not say which"
want=$(q "SELECT type || '=' || CAST(SUM(flops * calls) AS INTEGER) FROM ops GROUP BY type ORDER BY type")
got=$(grep -o '<tr data-type="[^"]*" data-flops="[0-9.e+]*"' "$WORK/ops.html" \
      | sed 's/<tr data-type="\([^"]*\)" data-flops="\([^"]*\)"/\1 \2/' | awk '{ printf "%s=%d\n", $1, $2 }' | LC_ALL=C sort)
want=$(echo "$want" | LC_ALL=C sort)
[ -n "$want" ] && [ "$got" = "$want" ] && ok "FLOPs per type, all calls: $(echo $got)" || fail "FLOPs per type: page [$(echo $got)], profile [$(echo $want)]"
# the operations graph: forward ops only by default, the op_edges among them
v=$(attr "$WORK/ops.html" ops-graph data-nodes); n=$(q "SELECT COUNT(*) FROM ops WHERE phase = 'forward'")
[ "$n" -gt 0 ] && [ "$v" = "$n" ] && ok "ops graph: $v forward ops" || fail "ops graph nodes: page '$v', profile $n forward ops"
v=$(attr "$WORK/ops.html" ops-graph data-edges)
n=$(q "SELECT COUNT(*) FROM op_edges e JOIN ops p ON p.id = e.producer JOIN ops c ON c.id = e.consumer
       WHERE p.phase = 'forward' AND c.phase = 'forward' AND p.id <> c.id")
[ "$n" -gt 0 ] && [ "$v" = "$n" ] && ok "ops graph: $v edges" || fail "ops graph edges: page '$v', profile $n"
# with backward and update shown, every op; a selected op (what a click does) is highlighted and detailed
sel=$(q "SELECT id FROM ops WHERE phase = 'backward' ORDER BY flops DESC, id LIMIT 1")
browse "operations/gbwd=1&gupd=1&op=$sel" "$WORK/opsall.html" "$R"
errors_empty "$WORK/opsall.html" "operations graph, all phases"
v=$(attr "$WORK/opsall.html" ops-graph data-nodes); n=$(q "SELECT COUNT(*) FROM ops")
[ "$v" = "$n" ] && ok "ops graph, all phases: $v ops" || fail "ops graph, all phases: page '$v', profile $n"
v=$(attr "$WORK/opsall.html" ops-graph data-edges); n=$(q "SELECT COUNT(*) FROM op_edges WHERE producer <> consumer")
[ "$v" = "$n" ] && ok "ops graph, all phases: $v edges" || fail "ops graph, all phases edges: page '$v', profile $n"
got=$(grep -o '<tr [^>]*id="ops-selected"' "$WORK/opsall.html" | grep -o 'data-id="[0-9]*"' | grep -o '[0-9]*')
d=$(attr "$WORK/opsall.html" op-detail-title data-op)
[ -n "$sel" ] && [ "$got" = "$sel" ] && [ "$d" = "$sel" ] && ok "op $sel selected: highlighted row and details" \
    || fail "selected op $sel: row '$got', details '$d'"
browse program "$WORK/program.html" "$R"
errors_empty "$WORK/program.html" program
v=$(attr "$WORK/program.html" program-tree data-count); n=$(q "SELECT COUNT(*) FROM steps")
[ "$v" = "$n" ] && ok "program tree $v steps" || fail "program tree: page '$v', profile $n"

# ---- Two reports: both shown, with differences
"$TG" report "$DB" "$WORK/rep/inference/profile.sqlite" -o "$WORK/compare.html" > /dev/null || fail "compare report exited $?"
browse summary "$WORK/cmp.html" "$WORK/compare.html"
errors_empty "$WORK/cmp.html" comparison
a=$(attr "$WORK/cmp.html" meta-program data-value); b=$(attr "$WORK/cmp.html" meta-b-program data-value)
[ "$a" = training ] && [ "$b" = inference ] && ok "comparison shows training and inference" || fail "comparison: '$a' '$b'"
# the devices table gives each quantity's source, target and difference
# together (busy came after memory's difference, with no difference of its own)
heads=$(grep -o 'id="summary-devices".*' "$WORK/cmp.html" | sed 's#</thead>.*##' | grep -o '<th\( [^>]*\)\?>[^<]*' | sed 's/.*>//' | tr '\n' '|')
want='device|memory (source)|memory (target)|memory diff|memory diff %|busy (source)|busy (target)|busy diff|'
[ "$heads" = "$want" ] && ok "compared devices: $heads" || fail "compared devices' columns: '$heads', want '$want'"
ba=$(attr "$WORK/cmp.html" device-busy-0 data-value); bb=$(attr "$WORK/cmp.html" device-busy-b-0 data-value)
bd=$(attr "$WORK/cmp.html" device-busy-diff-0 data-value)
awk -v a="$ba" -v b="$bb" -v d="$bd" 'BEGIN { x = b - a - d; exit !(a != "" && d != "" && x < 1e-3 && x > -1e-3) }' \
    && ok "busy difference $bd = $bb - $ba" || fail "busy difference: '$bd', busy '$ba' and '$bb'"
browse memory "$WORK/cmpmem.html" "$WORK/compare.html"
errors_empty "$WORK/cmpmem.html" "comparison memory"
grep -q 'device 0 target' "$WORK/cmpmem.html" && ok "memory compared" || fail "memory tab shows no comparison"
# every tab compares: op counts per type in A and B (SQL on both), only-in-one ops, steps, busy, peaks
IDB=$WORK/rep/inference/profile.sqlite
browse operations "$WORK/cmpops.html" "$WORK/compare.html"
errors_empty "$WORK/cmpops.html" "comparison operations"
want=$(sqlite3 "$DB" "ATTACH '$IDB' AS b;
    SELECT t.type || '=' || (SELECT COUNT(*) FROM main.ops WHERE type = t.type) || '/' || (SELECT COUNT(*) FROM b.ops WHERE type = t.type)
      FROM (SELECT type FROM main.ops UNION SELECT type FROM b.ops) t ORDER BY 1")
got=$(grep -o '<tr data-type="[^"]*" data-count-a="[0-9]*" data-count-b="[0-9]*"' "$WORK/cmpops.html" \
      | sed 's/<tr data-type="\([^"]*\)" data-count-a="\([0-9]*\)" data-count-b="\([0-9]*\)"/\1=\2\/\3/' | LC_ALL=C sort)
want=$(echo "$want" | LC_ALL=C sort)
[ -n "$want" ] && [ "$got" = "$want" ] && ok "op types compared: $(echo $got)" || fail "op types compared: page [$(echo $got)], profiles [$(echo $want)]"
want=$(sqlite3 "$DB" "ATTACH '$IDB' AS b; SELECT COUNT(*) FROM main.ops WHERE name NOT IN (SELECT name FROM b.ops)")
got=$(attr "$WORK/cmpops.html" ops-only-title data-only-a)
[ "$got" = "$want" ] && ok "ops only in A: $got" || fail "ops only in A: page '$got', profiles $want"
browse program "$WORK/cmpprog.html" "$WORK/compare.html"
errors_empty "$WORK/cmpprog.html" "comparison program tree"
for d in $(q "SELECT device FROM devices"); do
    want="$(q "SELECT COUNT(*) FROM steps WHERE device = $d")/$(sqlite3 "$IDB" "SELECT COUNT(*) FROM steps WHERE device = $d")"
    got=$(grep -o "<tr data-device=\"$d\" data-a=\"[0-9]*\" data-b=\"[0-9]*\"" "$WORK/cmpprog.html" | sed 's/.*data-a="\([0-9]*\)" data-b="\([0-9]*\)"/\1\/\2/')
    [ "$got" = "$want" ] && ok "device $d steps A/B $got" || fail "device $d steps A/B: page '$got', profiles $want"
done
browse liveness "$WORK/cmplive.html" "$WORK/compare.html"
errors_empty "$WORK/cmplive.html" "comparison liveness"
want="$(q "SELECT MAX(live_bytes) FROM liveness WHERE device = 0")/$(sqlite3 "$IDB" "SELECT MAX(live_bytes) FROM liveness WHERE device = 0")"
got="$(attr "$WORK/cmplive.html" liveness-compare-0 data-peak-a)/$(attr "$WORK/cmplive.html" liveness-compare-0 data-peak-b)"
[ "$got" = "$want" ] && ok "device 0 peaks A/B $got" || fail "device 0 peaks A/B: page '$got', profiles $want"
browse trace "$WORK/cmptrace.html" "$WORK/compare.html"
errors_empty "$WORK/cmptrace.html" "comparison trace"
busy() { sqlite3 "$1" "SELECT printf('%.4f', SUM(end_ns - start_ns) * 1.0 / (SELECT MAX(end_ns) - MIN(start_ns)
          FROM trace WHERE run = 0)) FROM trace WHERE run = 0 AND replica = 0 AND device = 0 AND kind = 'execute'"; }
want="$(busy "$DB")/$(busy "$IDB")"
got="$(attr "$WORK/cmptrace.html" busy-a-0 data-value)/$(attr "$WORK/cmptrace.html" busy-b-0 data-value)"
[ "$got" = "$want" ] && ok "device 0 busy A/B $got" || fail "device 0 busy A/B: page '$got', profiles $want"

# ---- A tiled target (mk2) with the host trace on: the tile map and the Host tab
TILEGRAPH_TRACE="{\"enable\":\"true\",\"directory\":\"$WORK/trace\"}" \
    "$TG" train --model mnist-pipeline --strategy pipelined --train-limit 64 --test-limit 16 \
    --batch-size 8 --gradient-accumulation 4 --epochs 1 --quiet --profile --profile-dir "$WORK/mk2" \
    --engine-option target=mk2 > "$WORK/mk2.log" 2>&1 || { fail "mk2 training: $(cat "$WORK/mk2.log")"; }
MDB=$WORK/mk2/training/profile.sqlite
M=$WORK/mk2.html
mq() { sqlite3 "$MDB" "$1"; }
"$TG" report "$WORK/mk2" -o "$M" > /dev/null || fail "mk2 report exited $?"
# Summary on mk2: tiles, memory per tile / device / all devices, compute sets, vertices, edges
browse summary "$WORK/mk2sum.html" "$M"
errors_empty "$WORK/mk2sum.html" "mk2 summary"
mv() { mq "SELECT CAST(value AS INTEGER) FROM meta WHERE key = '$1'"; }
n=$(( $(mv devices) * $(mv replicas) ))
want="$(mv tiles_per_device) $(( $(mv tiles_per_device) * n )) $(mv compute_sets) $(mv vertices) $(mv edges) $(mv memory_per_tile) $(( $(mv tiles_per_device) * $(mv memory_per_tile) )) $(( $(mv tiles_per_device) * $(mv memory_per_tile) * n ))"
got=""
for k in tiles_per_device tiles_all compute_sets vertices edges memory_per_tile memory_per_device memory_all; do
    got="$got $(attr "$WORK/mk2sum.html" tiled-$k data-value)"
done
[ "${got# }" = "$want" ] && ok "mk2 summary: $want" || fail "mk2 summary: page '${got# }', profile '$want'"
# Insights on mk2: the fullest tile of each device against a tile's memory
browse insights "$WORK/mk2ins.html" "$M"
errors_empty "$WORK/mk2ins.html" "mk2 insights"
got=$(grep -o '<table id="insights-[0-9]*" data-title="Fullest tile per device".*' "$WORK/mk2ins.html" | sed 's#</table>.*##' \
      | grep -o 'data-col="bytes" data-value="[0-9]*"' | sed 's/.*data-value="\([0-9]*\)"/\1/' | tr '\n' ' ')
want=$(mq "SELECT MAX(s) FROM (SELECT device, SUM(bytes) s FROM tiles GROUP BY device, tile) GROUP BY device ORDER BY device" | tr '\n' ' ')
[ -n "$want" ] && [ "$got" = "$want" ] && ok "mk2 insights: fullest tiles $got" || fail "mk2 insights fullest tiles: page '$got', profile '$want'"
grep -q 'the limit of a device is' "$WORK/mk2ins.html" && ok "mk2 insights: the tile memory is the limit" \
    || fail "mk2 insights: no tile-memory limit sentence"
tmax=$(mq "SELECT tile FROM (SELECT tile, SUM(bytes) s FROM tiles WHERE device = 0 GROUP BY tile) ORDER BY s DESC, tile LIMIT 1")
browse "memory/tdev=0&tile=$tmax" "$WORK/mk2mem.html" "$M"
errors_empty "$WORK/mk2mem.html" "mk2 memory"
want=$(mq "SELECT value FROM meta WHERE key = 'tiles_per_device'")
got=$(attr "$WORK/mk2mem.html" tile-map-0 data-tiles)
[ -n "$want" ] && [ "$got" = "$want" ] && ok "tile map of $got tiles" || fail "tile map: page '$got' tiles, profile '$want'"
# Vertex types below the tile maps: the vertices and code bytes per row as the profile holds them
got=$(grep -o '<table id="vertex-types".*' "$WORK/mk2mem.html" | sed 's#</table>.*##' \
      | grep -o 'data-value="[0-9]*"' | sed 's/data-value="\([0-9]*\)"/\1/' | tr '\n' ' ')
want=$(mq "SELECT vertices, state_bytes, code_bytes FROM vertex_types ORDER BY device, vertices DESC, type" | tr '|\n' '  ')
[ -n "$want" ] && [ "$got" = "$want" ] && ok "vertex types: $(mq "SELECT COUNT(*) FROM vertex_types") rows" \
    || fail "vertex types: page '$got', profile '$want'"
n=$(grep -o 'id="tile-map-[0-9]*"' "$WORK/mk2mem.html" | wc -l); nd=$(mq "SELECT COUNT(DISTINCT device) FROM tiles")
[ "$n" = "$nd" ] && ok "a tile map per device ($n)" || fail "tile maps: page $n, profile $nd devices"
for d in $(mq "SELECT DISTINCT device FROM tiles"); do
    want=$(mq "SELECT MAX(s) FROM (SELECT SUM(bytes) s FROM tiles WHERE device = $d GROUP BY tile)")
    got=$(attr "$WORK/mk2mem.html" tile-max-$d data-value)
    [ "$got" = "$want" ] && ok "device $d fullest tile $got bytes" || fail "device $d fullest tile: page '$got', profile $want"
    want=$(mq "SELECT COUNT(*) FROM (SELECT SUM(bytes) s FROM tiles WHERE device = $d GROUP BY tile)
               WHERE s > (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'memory_per_tile')")
    got=$(attr "$WORK/mk2mem.html" tile-over-$d data-value)
    [ "$got" = "$want" ] && ok "device $d tiles over capacity: $got" || fail "device $d over capacity: page '$got', profile $want"
done
# the clicked tile (device 0's fullest) lists its bytes by category
want=$(mq "SELECT category || '=' || bytes FROM tiles WHERE device = 0 AND tile = $tmax AND bytes > 0 ORDER BY category")
got=$(grep -o 'id="tile-detail".*' "$WORK/mk2mem.html" | sed 's#</table>.*##' | grep -o '<tr data-category="[^"]*"><td>[^<]*</td><td[^>]*data-value="[0-9]*"' \
      | sed 's/<tr data-category="\([^"]*\)".*data-value="\([0-9]*\)"/\1=\2/' | grep -v '=0$' | LC_ALL=C sort)
want=$(echo "$want" | LC_ALL=C sort)
[ -n "$want" ] && [ "$got" = "$want" ] && ok "tile $tmax by category: $(echo $got)" || fail "tile $tmax by category: page [$(echo $got)], profile [$(echo $want)]"
# Host: calls of "host step" in the by-name table and summed over the call tree's paths
want=$(mq "SELECT COUNT(*) FROM host_trace WHERE kind = 'region' AND name = 'host step'")
browse "host" "$WORK/host.html" "$M"
errors_empty "$WORK/host.html" host
got=$(grep -o 'id="host-names".*' "$WORK/host.html" | grep -o '<tr data-name="host step" data-calls="[0-9]*"' | sed 's/.*data-calls="\([0-9]*\)"/\1/')
[ "$want" -gt 0 ] && [ "$got" = "$want" ] && ok "host step calls $got" || fail "host step calls: page '$got', profile $want"
got=$(grep -o 'id="host-tree".*' "$WORK/host.html" | sed 's#</table>.*##' | grep -o 'data-name="host step" data-calls="[0-9]*"' \
      | sed 's/.*data-calls="\([0-9]*\)"/\1/' | awk '{ s += $1 } END { print s + 0 }')
[ "$got" = "$want" ] && ok "call tree: host step called $got times" || fail "call tree host step calls: page '$got', profile $want"
want=$(mq "SELECT printf('%d', SUM(end_ns - start_ns)) FROM host_trace WHERE kind = 'region' AND name = 'host step'")
got=$(grep -o 'id="host-tree".*' "$WORK/host.html" | sed 's#</table>.*##' | grep -o 'data-name="host step" data-calls="[0-9]*" data-total="[0-9]*"' \
      | sed 's/.*data-total="\([0-9]*\)"/\1/' | awk '{ s += $1 } END { printf "%d", s }')
[ "$got" = "$want" ] && ok "call tree: host step total $got ns" || fail "call tree host step total: page '$got', profile $want"
# selecting a path (what a click on its flame-graph box does) highlights it in the call tree
path=$(grep -o 'data-path="[^"]*host step"' "$WORK/host.html" | head -1 | sed 's/data-path="\(.*\)"/\1/; s/&gt;/>/g')
enc=$(printf '%s' "$path" | sed 's/ /%20/g; s/>/%3E/g')
browse "host/path=$enc" "$WORK/hostsel.html" "$M"
got=$(grep -o '<tr [^>]*id="host-selected"' "$WORK/hostsel.html" | grep -o 'data-path="[^"]*"' | sed 's/data-path="\(.*\)"/\1/; s/&gt;/>/g')
[ -n "$path" ] && [ "$got" = "$path" ] && ok "selected path '$got'" || fail "selected path: page '$got', wanted '$path'"
# counters per host step: a line graph per counter, its points and last value as in the profile
want=$(mq "SELECT COUNT(DISTINCT name) FROM counters")
got=$(grep -o 'class="counter-graph"' "$WORK/host.html" | wc -l)
[ "$want" -gt 3 ] && [ "$got" -eq "$want" ] && ok "counters: $got line graphs" || fail "counters: page $got graphs, profile $want counters"
want=$(mq "SELECT COUNT(*) || '|' || (SELECT value FROM counters WHERE name = 'loss' ORDER BY step DESC LIMIT 1) FROM counters WHERE name = 'loss'")
got=$(grep -o 'data-counter="loss" data-points="[0-9]*" data-first="[^"]*" data-last="[^"]*"' "$WORK/host.html" \
      | sed 's/.*data-points="\([0-9]*\)".*data-last="\([^"]*\)"/\1|\2/')
[ -n "$got" ] && [ "${got%%|*}" = "${want%%|*}" ] && awk -v a="${got#*|}" -v b="${want#*|}" 'BEGIN { exit !(a - b < 1e-9 && b - a < 1e-9) }' \
    && ok "counters: loss has $got (points|last)" || fail "counters: loss page '$got', profile '$want'"
# searching events by name: the matches are the profile's regions whose name holds the text
browse "host/search=host%20step" "$WORK/hostsearch.html" "$M"
errors_empty "$WORK/hostsearch.html" "host search"
want=$(mq "SELECT COUNT(*) FROM host_trace WHERE kind = 'region' AND instr(lower(name), 'host step') > 0")
got=$(attr "$WORK/hostsearch.html" host-search-results data-matches)
[ "$want" -gt 0 ] && [ "$got" = "$want" ] && ok "host search: $got regions named '*host step*'" || fail "host search: page '$got', profile $want"

# ---- Two mk2 profiles with the host trace (pipelined A, sharded B): the
# compared Host call tree and tile summaries against each profile
TILEGRAPH_TRACE="{\"enable\":\"true\",\"directory\":\"$WORK/trace-sharded\"}" \
    "$TG" train --model mnist-pipeline --strategy sharded --train-limit 64 --test-limit 16 \
    --batch-size 8 --gradient-accumulation 4 --epochs 1 --quiet --profile --profile-dir "$WORK/mk2s" \
    --engine-option target=mk2 > "$WORK/mk2s.log" 2>&1 || { fail "mk2 sharded training: $(cat "$WORK/mk2s.log")"; }
SDB=$WORK/mk2s/training/profile.sqlite
MC=$WORK/mk2cmp.html
"$TG" report "$MDB" "$SDB" -o "$MC" > /dev/null || fail "mk2 compare report exited $?"
# the header describes each report by its own meta (B is sharded, issue 15 item 9)
browse summary "$WORK/cmpsum.html" "$MC"
sa=$(attr "$WORK/cmpsum.html" subtitle data-strategy-a); sb=$(attr "$WORK/cmpsum.html" subtitle data-strategy-b)
want="$(mq "SELECT value FROM meta WHERE key = 'strategy'")/$(sqlite3 "$SDB" "SELECT value FROM meta WHERE key = 'strategy'")"
[ "$sa/$sb" = "$want" ] && [ "$sb" = sharded ] && ok "compare header: A $sa, B $sb" || fail "compare header: page '$sa/$sb', profiles $want"
browse host "$WORK/cmphost.html" "$MC"
errors_empty "$WORK/cmphost.html" "comparison host"
# "host step" calls summed over the compared call tree's paths, for A and for B
for side in a b; do
    [ $side = a ] && db=$MDB || db=$SDB
    want=$(sqlite3 "$db" "SELECT COUNT(*) FROM host_trace WHERE kind = 'region' AND name = 'host step'")
    got=$(grep -o 'id="host-compare".*' "$WORK/cmphost.html" | sed 's#</table>.*##' \
          | grep -o "data-name=\"host step\" data-calls-a=\"[0-9]*\" data-calls-b=\"[0-9]*\"" \
          | sed "s/.*data-calls-$side=\"\([0-9]*\)\".*/\1/" | awk '{ s += $1 } END { print s + 0 }')
    [ "$want" -gt 0 ] && [ "$got" = "$want" ] && ok "compared call tree: host step calls in $side $got" \
        || fail "compared call tree host step calls in $side: page '$got', profile $want"
done
# below it, the call trees of A and of B one above the other (B's ids end in -b)
for sfx in "" -b; do
    [ -z "$sfx" ] && db=$MDB || db=$SDB
    want=$(sqlite3 "$db" "SELECT COUNT(*) FROM host_trace WHERE kind = 'region' AND name = 'host step'")
    got=$(grep -o "id=\"host-tree$sfx\".*" "$WORK/cmphost.html" | sed 's#</table>.*##' | grep -o 'data-name="host step" data-calls="[0-9]*"' \
          | sed 's/.*data-calls="\([0-9]*\)"/\1/' | awk '{ s += $1 } END { print s + 0 }')
    grep -q "id=\"host-timeline$sfx\"" "$WORK/cmphost.html" && grep -q "id=\"host-flame$sfx\"" "$WORK/cmphost.html" \
        && [ "$got" = "$want" ] && ok "host view host-tree$sfx: timeline, flame graph, host step calls $got" \
        || fail "host view host-tree$sfx: host step calls page '$got', profile $want, or no timeline/flame graph"
done
echo "compared call tree: $(attr "$WORK/cmphost.html" host-compare-only data-only-a) paths only in A, $(attr "$WORK/cmphost.html" host-compare-only data-only-b) only in B"
browse memory "$WORK/cmptiles.html" "$MC"
errors_empty "$WORK/cmptiles.html" "comparison tiles"
for d in $(mq "SELECT DISTINCT device FROM tiles"); do
    for side in a b; do
        [ $side = a ] && db=$MDB || db=$SDB
        want=$(sqlite3 "$db" "SELECT MAX(s) FROM (SELECT SUM(bytes) s FROM tiles WHERE device = $d GROUP BY tile)")
        got=$(attr "$WORK/cmptiles.html" tile-cmp-max-$side-$d data-value)
        [ -n "$want" ] && [ "$got" = "$want" ] && ok "compared tiles: device $d largest tile in $side $got" \
            || fail "compared tiles: device $d largest tile in $side: page '$got', profile '$want'"
    done
    ra=$(attr "$WORK/cmptiles.html" tile-cmp-map-a-$d data-ref); rb=$(attr "$WORK/cmptiles.html" tile-cmp-map-b-$d data-ref)
    [ -n "$ra" ] && [ "$ra" = "$rb" ] && ok "device $d heat maps of A and B on one scale ($ra)" || fail "device $d heat map scales: A '$ra', B '$rb'"
done
# render times of every tab (informational: no timing assertions in tests)
browse timing "$WORK/timing.html" "$M"
errors_empty "$WORK/timing.html" "every tab"
echo "render times (ms): $(grep -o '<div id="timings"[^>]*' "$WORK/timing.html" | grep -o 'data-[a-z-]*="[0-9.]*"' | tr '\n' ' ')"

# ---- Bad inputs: a clear error and exit 1, no page
echo "not a profile" > "$WORK/junk.sqlite"
"$TG" report "$WORK/junk.sqlite" -o "$WORK/bad.html" 2> "$WORK/err.txt"
rc=$?
[ $rc = 1 ] && [ ! -e "$WORK/bad.html" ] && grep -q junk.sqlite "$WORK/err.txt" && ok "not a profile: $(cat "$WORK/err.txt")" \
    || fail "not a profile: exit $rc, $(cat "$WORK/err.txt")"
cp "$DB" "$WORK/other.sqlite"
sqlite3 "$WORK/other.sqlite" "UPDATE meta SET value = 'tiled' WHERE key = 'target'"
"$TG" report "$DB" "$WORK/other.sqlite" -o "$WORK/bad.html" 2> "$WORK/err.txt"
rc=$?
[ $rc = 1 ] && [ ! -e "$WORK/bad.html" ] && grep -q "different targets" "$WORK/err.txt" && ok "different targets: $(cat "$WORK/err.txt")" \
    || fail "different targets: exit $rc, $(cat "$WORK/err.txt")"

# ---- Screenshots of each tab, for people to look at
for t in summary insights memory "liveness/device=1&step=$step&step2=1" program operations trace histograms; do
    name=${t%%/*}
    prof=$(mktemp -d "$WORK/chrome.XXXXXX")
    timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
        --user-data-dir="$prof" --window-size=1400,900 --screenshot="$SHOTS/$name.png" "file://$R#$t" > /dev/null 2>&1
    [ -s "$SHOTS/$name.png" ] || fail "no screenshot of $name"
done
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$(mktemp -d "$WORK/chrome.XXXXXX")" \
    --window-size=1400,900 --screenshot="$SHOTS/compare-summary.png" "file://$WORK/compare.html#summary" > /dev/null 2>&1
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$(mktemp -d "$WORK/chrome.XXXXXX")" \
    --window-size=1400,1500 --screenshot="$SHOTS/memory-tiles.png" "file://$M#memory/tdev=0&tile=$tmax" > /dev/null 2>&1
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$(mktemp -d "$WORK/chrome.XXXXXX")" \
    --window-size=1400,1000 --screenshot="$SHOTS/host.png" "file://$M#host/path=$enc" > /dev/null 2>&1
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$(mktemp -d "$WORK/chrome.XXXXXX")" \
    --window-size=1400,1100 --screenshot="$SHOTS/ops-graph.png" "file://$R#operations/gbwd=1&gupd=1&op=$sel" > /dev/null 2>&1
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$(mktemp -d "$WORK/chrome.XXXXXX")" \
    --window-size=1400,1100 --screenshot="$SHOTS/compare-operations.png" "file://$WORK/compare.html#operations" > /dev/null 2>&1
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$(mktemp -d "$WORK/chrome.XXXXXX")" \
    --window-size=1400,1900 --screenshot="$SHOTS/compare-host.png" "file://$MC#host" > /dev/null 2>&1
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$(mktemp -d "$WORK/chrome.XXXXXX")" \
    --window-size=1400,1700 --screenshot="$SHOTS/compare-tiles.png" "file://$MC#memory" > /dev/null 2>&1
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$(mktemp -d "$WORK/chrome.XXXXXX")" \
    --window-size=1400,1100 --screenshot="$SHOTS/summary-mk2.png" "file://$M#summary" > /dev/null 2>&1
for f in memory-tiles host ops-graph compare-operations compare-host compare-tiles summary-mk2; do [ -s "$SHOTS/$f.png" ] || fail "no screenshot $f.png"; done
cp "$M" "$SHOTS/report-mk2.html"
cp "$R" "$SHOTS/report.html"
echo "screenshots: $SHOTS"
exit $FAIL
