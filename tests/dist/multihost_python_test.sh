#!/bin/sh
# tests/dist/multihost_python_test.sh - a PopTorch script (tilegraph's
# package) as 4 instances over two network hosts of the test's own
# (netns_hosts.sh), 2 on each, trains to the weights of one process: the
# script of tests/python/test_dist.py, replicationFactor 4, one replica per
# instance. Interpreter: Debian's /usr/bin/python3 (torch 1.13).
# Then the seed-004 tutorial's model with popdist (popdist_tutorial.py),
# started by `tilegraph run --host h1,h2` as 4 instances, trains to the
# weights of one process, and so does seed 001's pipelined BERT question
# answering (popdist_seed001.py).
# usage: multihost_python_test.sh LIBTILEGRAPH_SO SOURCE_DIR TILEGRAPH_CLI
#        (exit 77: skipped, saying why)
LIB=$1
SRC=$2
T=$3
PY=/usr/bin/python3
command -v mpirun >/dev/null 2>&1 || { echo "no mpirun (openmpi-bin): skipped"; exit 77; }
$PY -c "import torch, cffi" 2>/dev/null || { echo "no torch or cffi for $PY: skipped"; exit 77; }
. "$SRC/tests/dist/netns_hosts.sh"
why=$(hosts_can) || { echo "no network hosts here: $why: skipped"; exit 77; }
export PYTHONPATH="$SRC/python" TILEGRAPH_LIBRARY="$LIB" OMP_NUM_THREADS=1
hosts_workdir
hosts_up 2 "$W" || fail "could not make the hosts"
# the script test_dist.py runs (its SCRIPT), written out here
$PY - "$SRC/tests/python/test_dist.py" <<'PYEOF' || fail "no script in test_dist.py"
import sys
src = open(sys.argv[1]).read()
start = src.index("SCRIPT = r'''") + len("SCRIPT = r'''")
open("train.py", "w").write(src[start:src.index("'''", start)])
PYEOF
$PY train.py one.pt "$SRC/tests/python" >one.log 2>&1 || fail "one process"
on_host 1 timeout 240 mpirun -np 4 --host h1:2,h2:2 --map-by node --bind-to none $HOSTS_MPI \
    -x PYTHONPATH -x TILEGRAPH_LIBRARY -x OMP_NUM_THREADS $PY train.py four.pt "$SRC/tests/python" \
    >four.log 2>&1 || fail "4 instances over 2 hosts"
$PY - <<'PYEOF' || fail "4 instances over 2 hosts end with other weights than one process"
import sys, torch
a, b = torch.load("one.pt"), torch.load("four.pt")
sys.exit(0 if a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a) else 1)
PYEOF
MPI_ARGS=""
for a in $HOSTS_MPI; do
    MPI_ARGS="$MPI_ARGS --mpi-arg $a"
done
# as_one_process SCRIPT NAME: tests/dist/SCRIPT (a popdist script: OUT
# EXAMPLES_DIR; one process also saves its starting weights to OUT.start)
# as one process, then under run as 2 hosts x 2 instances: the same
# weights, which the training moved, and lines tagged as h2's
as_one_process() {
    $PY "$SRC/tests/dist/$1" "$2_one.pt" "$SRC/examples/python" >"$2_one.log" 2>&1 ||
        fail "$1 as one process"
    on_host 1 timeout 240 "$T" run --host h1,h2 --num-instances 4 --num-replicas 4 \
        --ipus-per-replica 4 $MPI_ARGS -- $PY "$SRC/tests/dist/$1" "$2_four.pt" \
        "$SRC/examples/python" >"$2_four.log" 2>&1 || fail "$1 under run over 2 hosts"
    grep -q '^\[h2:' "$2_four.log" || fail "no line of $1 tagged as h2's"
    $PY - "$2" <<'PYEOF' || fail "$1 under run ends with other weights than one process"
import sys, torch
a, b, start = (torch.load(f"{sys.argv[1]}_{k}") for k in ("one.pt", "four.pt", "one.pt.start"))
same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
sys.exit(0 if same and any(not torch.equal(start[k], a[k]) for k in a) else 1)
PYEOF
}
as_one_process popdist_tutorial.py tut
# seed 001's pipelined BERT question answering, dropout on (its random
# streams follow the job's replica index)
as_one_process popdist_seed001.py qa
echo "multihost_python_test: 2 hosts x 2 instances train as one process (mpirun, tilegraph run; seeds 004 and 001)"
