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
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PYTHONPATH="$SRC/python" TILEGRAPH_LIBRARY="$LIB" OMP_NUM_THREADS=1
W=$(mktemp -d) || exit 1
trap 'hosts_down; rm -rf "$W"' EXIT
trap 'exit 1' INT TERM
cd "$W" || exit 1
fail() {
    echo "FAIL: $*"
    tail -20 "$W"/*.log
    exit 1
}
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
$PY "$SRC/tests/dist/popdist_tutorial.py" tut_one.pt "$SRC/examples/python" >tut_one.log 2>&1 ||
    fail "the tutorial as one process"
MPI_ARGS=""
for a in $HOSTS_MPI; do
    MPI_ARGS="$MPI_ARGS --mpi-arg $a"
done
on_host 1 timeout 240 "$T" run --host h1,h2 --num-instances 4 --num-replicas 4 \
    --ipus-per-replica 4 $MPI_ARGS -- $PY "$SRC/tests/dist/popdist_tutorial.py" tut_four.pt \
    "$SRC/examples/python" >tut_four.log 2>&1 || fail "the tutorial under run over 2 hosts"
grep -q '^\[h2:' tut_four.log || fail "no line of the tutorial's tagged as h2's"
$PY - "$SRC/examples/python" <<'PYEOF' || fail "the tutorial under run ends with other weights"
import sys, torch
sys.path.insert(0, sys.argv[1])
a, b = torch.load("tut_one.pt"), torch.load("tut_four.pt")
same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
torch.manual_seed(0)
import seed004_pipelining as tutorial
start = tutorial.Network().state_dict()
sys.exit(0 if same and any(not torch.equal(start[k], a[k]) for k in a) else 1)
PYEOF
# seed 001's pipelined BERT question answering (popdist_seed001.py, dropout
# on: its random streams follow the job's replica index) the same way
$PY "$SRC/tests/dist/popdist_seed001.py" qa_one.pt "$SRC/examples/python" >qa_one.log 2>&1 ||
    fail "seed 001 as one process"
on_host 1 timeout 240 "$T" run --host h1,h2 --num-instances 4 --num-replicas 4 \
    --ipus-per-replica 4 $MPI_ARGS -- $PY "$SRC/tests/dist/popdist_seed001.py" qa_four.pt \
    "$SRC/examples/python" >qa_four.log 2>&1 || fail "seed 001 under run over 2 hosts"
grep -q '^\[h2:[0-9]*\] step 3: loss' qa_four.log || fail "no step of seed 001 tagged as h2's"
$PY - "$SRC/examples/python" <<'PYEOF' || fail "seed 001 under run ends with other weights"
import sys, torch
sys.path.insert(0, sys.argv[1])
a, b = torch.load("qa_one.pt"), torch.load("qa_four.pt")
same = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
import seed001_bert_qa_debian as seed
sys.argv = [sys.argv[0], "--layers", "5", "--hidden", "32", "--heads", "2", "--seq-len", "16"]
start = seed.build(seed.parse()).state_dict()
sys.exit(0 if same and any(not torch.equal(start[k], a[k]) for k in a) else 1)
PYEOF
echo "multihost_python_test: 2 hosts x 2 instances train as one process (mpirun, tilegraph run; seeds 004 and 001)"
