#!/bin/sh
# tests/dist/mpi_test.sh - instances over MPI on this one machine
# (docs/distributed.md): 2 instances x 1 replica train bit for bit as 1
# instance x 2 replicas, and so do 2 instances x 4 pipelined stages; N not
# dividing R is refused; a killed instance ends the job within 10 s; instances
# with different options are refused at start, naming the difference; one
# instance compiles and the other loads; instances whose loop options
# (--max-steps, --epochs, --train-limit, --checkpoint-every, --save) or engine
# options differ are refused, naming the flag and both values; the job's trace and profiles are
# seen together; optimizer state sharded over both instances trains,
# checkpoints and resumes as one process; a stop signal ends every instance
# after the same host step with a checkpoint, and `tilegraph run` stopped by
# SIGINT exits 130; gradient buckets sent during
# the backward change no bit; the exchange's figures of the epoch line add
# up and count the time an instance waits for a stopped one; weights
# sharded over the instances train, checkpoint and resume as one process;
# bf16 gradients on the wire stay within a bound of float32's.
# usage: mpi_test.sh TILEGRAPH_BINARY   (exit 77: skipped, no mpirun)
T=$1
HERE=$(cd "$(dirname "$0")" && pwd)
command -v mpirun >/dev/null 2>&1 || { echo "no mpirun (openmpi-bin): skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
W=$(mktemp -d) || exit 1
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1
fail() { echo "FAIL: $*"; for f in "$W"/*.log; do echo "--- $f"; tail -20 "$f"; done; exit 1; }
MPI="mpirun -np 2 --bind-to none"
# A long job started in the background (its pid in $job), and once it has
# started training, the pid of its last instance in $victim (an instance of
# this test's: its working directory is $W; another run of this test at the
# same time has the same command line).
long_job() { # LOG [train flags]
    log=$1
    shift
    timeout 120 $MPI $T train --model mnist-pipeline --replicas 2 --epochs 10000 --train-limit 1024 \
        --test-limit 16 --quiet "$@" >"$log" 2>&1 &
    job=$!
    tries=0
    while [ $tries -lt 100 ] && ! grep -q "host steps per epoch" "$log"; do
        sleep 0.2
        tries=$((tries + 1))
    done
    victim=$(pgrep -f "epochs 10000 --train-limit 1024" | while read p; do
        [ "$(cat /proc/$p/comm 2>/dev/null)" = tilegraph ] && [ "$(readlink /proc/$p/cwd)" = "$W" ] &&
            echo $p; done | tail -1)
}
COMMON="--model mnist-pipeline --epochs 1 --batch-size 8 --train-limit 192 --test-limit 48 --seed 5 --quiet"

# 1. 2 x 1 == 1 x 2, after 12 updates (gradient accumulation 2 and dropout-free model)
$T train $COMMON --replicas 2 --gradient-accumulation 2 --save one.safetensors >one.log 2>&1 ||
    fail "one process, 2 replicas"
timeout 120 $MPI $T train $COMMON --replicas 2 --gradient-accumulation 2 \
    --save two.safetensors --profile-dir prof >two.log 2>&1 || fail "2 instances x 1 replica"
for k in 0 1; do # each instance profiles into its own directory
    [ -s prof/instance-$k/training/profile.sqlite ] || fail "no profile of instance $k"
done
cmp one.safetensors two.safetensors || fail "2 x 1 and 1 x 2 give different weights"
grep -q "test accuracy" two.log || fail "instance 0 printed no result"
# the set-up lines give the job's whole, as one process prints them (they
# gave instance 0's share: half the samples, 1 replica), its share after it
sed -n 's/^\(micro-batch .* replicas\).*/\1/p; s/^\(device memory [^ ]* [^ ]*\).*\(, .* MFLOP\).*/\1\2/p' \
    one.log >one.setup
sed -n 's/^\(micro-batch .* replicas\).*/\1/p; s/^\(device memory [^ ]* [^ ]*\).*\(, .* MFLOP\).*/\1\2/p' \
    two.log >two.setup
[ "$(wc -l <one.setup)" = 2 ] && cmp -s one.setup two.setup ||
    fail "the job's set-up lines differ from one process's: $(cat one.setup two.setup)"
grep -q "x 2 replicas over 2 instances (1 replica each)" two.log || fail "no instance share: $(cat two.setup)"
[ "$(grep -c 'test accuracy:' two.log)" = 1 ] || fail "more than instance 0 printed"
# the weights moved: a training that did nothing would also compare equal
$T train $COMMON --replicas 2 --gradient-accumulation 2 --max-steps 1 \
    --save early.safetensors >early.log 2>&1 || fail "a shorter run"
cmp -s early.safetensors one.safetensors && fail "the weights did not change with training"

# 2. 2 instances x 4 pipelined stages == 1 instance x 2 replicas x 4 stages, through `run`
P="--strategy pipelined --gradient-accumulation 4"
$T train $COMMON $P --replicas 2 --save p1.safetensors >p1.log 2>&1 || fail "pipelined, one process"
timeout 120 $T run --instances 2 --replicas 2 -- \
    train $COMMON $P --save p2.safetensors >p2.log 2>&1 || fail "pipelined, 2 instances"
grep -q "instance 1 on this host: replicas 1..1" p2.log || fail "run printed no plan"
cmp p1.safetensors p2.safetensors || fail "pipelined 2 x 1 and 1 x 2 differ"

# 3. N not dividing R: refused by run (exit 2) and by the instances themselves
$T run --instances 2 --replicas 3 -- train $COMMON >nd.log 2>&1
[ $? = 2 ] && grep -q "multiple of --instances" nd.log || fail "run accepted 2 instances, 3 replicas"
timeout 60 $MPI $T train $COMMON --replicas 3 >nd2.log 2>&1 && fail "instances accepted R=3, N=2"
grep -q "not a multiple of the 2 instances" nd2.log || fail "no message for R=3, N=2"

# 4. instances that differ (here: the learning rate of one) are refused at start
cat >differ.sh <<EOS
#!/bin/sh
[ "\$OMPI_COMM_WORLD_RANK" = 1 ] && exec $T train $COMMON --replicas 2 --lr 0.5
exec $T train $COMMON --replicas 2
EOS
timeout 60 $MPI sh differ.sh >differ.log 2>&1 && fail "different instances were accepted"
grep -q "differ in their --lr ('0.05' vs '0.5')" differ.log || fail "no message naming what differs"
# ... and so are instances whose training loops or data differ (they waited
# on each other forever): the message names the flag and both values
M="--model fashion-basic --replicas 2 --train-limit 400 --test-limit 16 --quiet"
differ() { # WANT [flags of instance 1]
    want=$1
    shift
    timeout 60 mpirun -np 1 --bind-to none $T train $M : -np 1 --bind-to none $T train $M "$@" \
        >loop.log 2>&1
    rc=$?
    [ $rc != 0 ] && [ $rc != 124 ] && grep -qF -- "$want" loop.log ||
        fail "instances with $* (exit $rc): no message '$want'"
}
differ "differ in their --max-steps (0 vs 20)" --max-steps 20
differ "differ in their --epochs (1 vs 2)" --epochs 2
differ "training samples (--train-limit, or the training set's size) (400 vs 200)" --train-limit 200
differ "--checkpoint-every in host steps (0 vs 5)" --checkpoint-every 5 --save ck.safetensors
differ "option threadsPerDevice ('0' vs '2')" --engine-option threadsPerDevice=2
# --save on one instance only: its save checked the weights over the job
# while the other evaluated, each in a collective of its own, for ever
# (issue 46, row 1)
differ "differ in their --save (instance 0 writes the file, but every instance takes part in saving) ('not given' vs 'given')" --save one-only.safetensors

# 5. kill -9 of one instance ends the job, non-zero, within 10 s
long_job kill.log
[ -n "$victim" ] || fail "no instance to kill"
start=$(date +%s)
kill -9 "$victim"
wait $job
rc=$?
took=$(($(date +%s) - start))
[ $rc != 0 ] || fail "the job with a killed instance exited 0"
[ $took -le 10 ] || fail "the job took $took s to end after kill -9"
grep -q "signal 9" kill.log || fail "no message about the killed instance"
# 6. one instance compiles, the others load its program (the compile trace
#    of instance 1 holds no compile pass, only the program's arrival)
TILEGRAPH_TRACE='{"enable":"true","directory":"tr","channels":["compile","engine"]}' timeout 120 \
    $MPI $T train $COMMON --replicas 2 >load.log 2>&1 || fail "2 instances with a compile trace"
[ "$(ls tr/tilegraph-*[0-9].trace.json | wc -l)" = 2 ] || fail "expected a trace per instance in tr/"
grep -l '"memory plan"' tr/tilegraph-*[0-9].trace.json >compiled.txt
grep -l '"program from instance 0"' tr/tilegraph-*[0-9].trace.json >loaded.txt
[ "$(wc -l <compiled.txt)" = 1 ] && [ "$(wc -l <loaded.txt)" = 1 ] &&
    ! cmp -s compiled.txt loaded.txt || fail "not one instance compiling and one loading"
# ... and the job's traces are merged into one, the instances as processes
job=$(ls tr/job-*-training.trace.json 2>/dev/null | head -1)
[ -n "$job" ] || fail "no merged trace of the job in tr/"
grep -q '"instance 0: host (pid' "$job" && grep -q '"instance 1: host (pid' "$job" ||
    fail "the job's trace does not hold both instances"
# replicas that do not divide over the instances: the multiple to use, named once
# (below R there is none when R < N: it said "use --replicas 2 or 2")
timeout 60 $MPI $T train --replicas 1 --train-limit 64 --test-limit 16 --quiet >rep.log 2>&1 &&
    fail "--replicas 1 over 2 instances was taken"
grep -q "use --replicas 2\$" rep.log || fail "--replicas 1 over 2 instances: $(grep replicas rep.log | head -1)"
timeout 60 $MPI $T train --replicas 3 --train-limit 64 --test-limit 16 --quiet >rep.log 2>&1 &&
    fail "--replicas 3 over 2 instances was taken"
grep -q "use --replicas 2 or 4\$" rep.log || fail "--replicas 3 over 2 instances: $(grep replicas rep.log | head -1)"
# analyse shows the instances of a job's profiles together
$T analyse prof instances --json >inst.json || fail "analyse instances"
grep -q '"instance":1,"host":' inst.json && grep -q '"replicas":"1"' inst.json ||
    fail "analyse instances lists not both instances: $(cat inst.json)"
# ... with the time the gradient buckets overlapped the backward (one
# replica per instance: buckets on) and the all-reduce's algorithm
grep -q '"in the backward":[1-9]' inst.json ||
    fail "analyse instances shows no bucket in flight during the backward: $(cat inst.json)"
awk 'BEGIN { RS = "[{}]" } /"in the backward"/ {
        match($0, /"mean step":[0-9.e+]+/); m = substr($0, RSTART + 12, RLENGTH - 12) + 0
        match($0, /"in the backward":[0-9.e+]+/); b = substr($0, RSTART + 18, RLENGTH - 18) + 0
        if (b > m) bad = 1 } END { exit bad }' inst.json ||
    fail "buckets in flight during the backward longer than the host step: $(cat inst.json)"
$T analyse prof instances >inst.txt || fail "analyse instances (text)"
grep -q "all-reduce algorithm: .* all-gathered (in buckets during" inst.txt ||
    fail "analyse instances names no all-reduce algorithm"
# ... and what the MPI library ran beneath it (runtime/dist.c reads it back)
grep -q "float32 on the wire.*beneath it, MPI_Iallgatherv: coll/libnbc linear" inst.txt ||
    fail "analyse instances names not the MPI algorithm: $(tail -1 inst.txt)"
$T analyse prof --instance 1 | grep -q "instance 1 of an MPI job of 2" ||
    fail "analyse --instance 1 does not open instance 1's profile"
# the job's figures, not instance 0's: the epoch line of 2 x 1 is that of 1 x 2
grep -h "^epoch 1" one.log | sed 's/, [0-9]* samples.*//' >one.epoch
grep -h "^epoch 1" two.log | sed 's/, [0-9]* samples.*//' >two.epoch
[ -s one.epoch ] && cmp -s one.epoch two.epoch || fail "the job reports other figures than one process: $(cat one.epoch two.epoch)"

# 7. replicated tensor sharding across instances: the optimizer state of 4
#    replicas sharded over 2 instances x 2 replicas trains, checkpoints (the
#    state gathered whole) and resumes as one process of 4 replicas
S="--optimizer adamw --lr 0.001 --engine-option TensorLocations.optimizer.replicatedTensorSharding=true --replicas 4"
$T train $COMMON $S --save rts1.safetensors >rts1.log 2>&1 || fail "sharded state, one process"
timeout 120 $MPI $T train $COMMON $S --save rts2.safetensors >rts2.log 2>&1 ||
    fail "sharded state over 2 instances"
cmp rts1.safetensors rts2.safetensors || fail "sharded over instances differs from one process"
grep -q "exp_avg_sq" rts2.safetensors || fail "the checkpoint holds no optimizer state"
timeout 120 $MPI $T train $COMMON $S --max-steps 3 --save rts3.safetensors >rts3.log 2>&1 ||
    fail "sharded state over 2 instances, stopped early"
timeout 120 $MPI $T train $COMMON $S --resume rts3.safetensors --save rts4.safetensors \
    >rts4.log 2>&1 || fail "sharded state over 2 instances, resumed"
cmp rts1.safetensors rts4.safetensors || fail "a resumed sharded job differs from one run"

# 8. SIGTERM to one instance stops every instance after the same host step:
#    instance 0 writes the checkpoint, the job ends in order (143), no hang
long_job stop.log --save stop.safetensors
[ -n "$victim" ] || fail "no instance to stop"
sleep 1
kill -TERM "$victim"
wait $job
rc=$?
[ $rc = 143 ] || fail "a job stopped by SIGTERM exited $rc, not 143"
[ "$(grep -c 'stopped by a signal' stop.log)" = 1 ] || fail "not one stop message"
[ -s stop.safetensors ] || fail "no checkpoint after the stop"
grep -q "failed" stop.log && fail "a stop was reported as a failure"

# ... and SIGINT to `tilegraph run` (mpirun's parent) ends the job as one
# stopped process ends: 130, with the checkpoint (mpirun itself exits 1)
timeout 120 $T run --instances 2 --replicas 2 -- train --model mnist-pipeline --epochs 10000 \
    --train-limit 1024 --test-limit 16 --quiet --save runstop.safetensors >runstop.log 2>&1 &
job=$!
tries=0
while [ $tries -lt 100 ] && ! grep -q "host steps per epoch" runstop.log; do
    sleep 0.2
    tries=$((tries + 1))
done
sleep 1
kill -INT $job
wait $job
rc=$?
[ $rc = 130 ] || fail "tilegraph run stopped by SIGINT exited $rc, not 130"
grep -q "stopped by a signal" runstop.log && [ -s runstop.safetensors ] ||
    fail "tilegraph run stopped by SIGINT: no stop message or checkpoint"

# 9. gradient buckets: with a bucket per parameter, 2 instances of a 4-stage
#    split (zb-h1) pipeline with accumulation send each stage's gradients
#    while its backward runs, and still train bit for bit as 1 x 2 (a bucket
#    missed or sent before its last micro-batch leaves stale gradients); the
#    trace shows the buckets on their own track
B="--strategy pipelined --gradient-accumulation 4 --schedule zb-h1 --replicas 2"
$T train $COMMON $B --save b1.safetensors >b1.log 2>&1 || fail "split pipeline, one process"
TILEGRAPH_TRACE='{"enable":"true","directory":"trb","channels":["engine"]}' timeout 120 \
    $MPI $T train $COMMON $B --engine-option distributed.gradientBucketBytes=1 \
    --save b2.safetensors >b2.log 2>&1 || fail "split pipeline, 2 instances, small buckets"
cmp b1.safetensors b2.safetensors || fail "gradient buckets changed the weights"
tb=$(ls trb/tilegraph-*[0-9]-training.trace.json | head -1)
grep -q '"device 3: gradient buckets to instances"' "$tb" &&
    grep -q '"gradient bucket to instances"' "$tb" || fail "no gradient buckets in the trace"

# 10. the exchange's share of the host step, measured inside the run: a
#     job's epoch line gives its parts (1 x 1 has none); with gradient
#     buckets MPI runs during the backward, without them only after it;
#     waiting for a slower instance is a part of the wait after it; an
#     instance stopped for 3 s shows as the other's waiting in the exchange
X="--model mnist-pipeline --replicas 2 --batch-size 8 --train-limit 256 --test-limit 16 --json"
$T train $X --epochs 1 >x1.log 2>&1 || fail "exchange figures, one process"
grep -q exchange_ x1.log && fail "one process prints exchange figures"
timeout 120 $MPI $T train $X --epochs 1 >xb.log 2>&1 || fail "exchange figures, buckets"
timeout 120 $MPI $T train $X --epochs 1 --engine-option distributed.gradientBucketBytes=0 \
    >xw.log 2>&1 || fail "exchange figures, no buckets"
check_exchange() { # LOG BUCKETS(1/0): the epoch line's figures agree with each other
    tail -1 "$1" | tr -d '{}"' | tr ',' '\n' | tr ':' '=' >fig.txt
    awk -F= -v b="$2" '{ v[$1] = $2 + 0 }
        END { parts = v["exchange_during_backward_ms"] + v["exchange_after_backward_ms"]
              parts += v["exchange_summing_ms"] + v["exchange_step_totals_ms"]
              if (v["host_step_ms"] <= 0 || v["exchange_after_backward_ms"] <= 0 ||
                  v["exchange_summing_ms"] <= 0 || v["exchange_step_totals_ms"] <= 0) exit 1;
              if ((b == 1) != (v["exchange_during_backward_ms"] > 0)) exit 2;
              if (v["exchange_imbalance_ms"] < 0 ||
                  v["exchange_imbalance_ms"] > v["exchange_after_backward_ms"]) exit 3;
              d = 100 * parts / v["host_step_ms"] - v["exchange_pct_of_host_step"];
              if (d > 0.01 || d < -0.01) exit 4 }' fig.txt
}
check_exchange xb.log 1 || fail "the exchange's figures with buckets (check $?): $(cat fig.txt)"
check_exchange xw.log 0 || fail "the exchange's figures without buckets (check $?): $(cat fig.txt)"
# The epoch must outlast the second before the stop: a whole epoch of
# 60,000 samples in a plain build (12,000 ended within that second on an
# idle machine, so the stop came after training); 12,000 (750 host steps)
# in a sanitizer build, where 60,000 took longer than the timeout on an AVX2
# machine (about 250 samples/s), and so did 20,000 once another job shared
# the machine (stopped at step 993)
samples=60000
if ldd "$T" 2>/dev/null | grep -qE 'lib(asan|tsan)'; then
    samples=12000
fi
timeout 120 $MPI $T train --model mnist-pipeline --replicas 2 --batch-size 8 --epochs 1 \
    --train-limit $samples --test-limit 16 --quiet >xs.log 2>&1 &
job=$!
tries=0
while [ $tries -lt 100 ] && ! grep -q "host steps per epoch" xs.log; do
    sleep 0.2
    tries=$((tries + 1))
done
victim=$(pgrep -f "train-limit $samples --test-limit 16" | while read p; do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = tilegraph ] && [ "$(readlink /proc/$p/cwd)" = "$W" ] &&
        echo $p; done | tail -1)
[ -n "$victim" ] || fail "no instance to stop"
sleep 1 # inside the epoch's host steps (thousands of them)
kill -STOP "$victim"
sleep 3
kill -CONT "$victim"
wait $job || fail "the job with a stopped instance"
steps=$(sed -n 's/.* and \([0-9]*\) host steps per epoch.*/\1/p' xs.log | head -1)
# the epoch's exchange per host step times its host steps: the mean of
# instance 0's 3 s and instance 1's none, less what the stop's edges lose
ms=$(sed -n 's/.*exchange with instances: \([0-9.]*\) ms of a.*/\1/p' xs.log | head -1)
awk -v m="$ms" -v n="$steps" 'BEGIN { exit !(m * n >= 1000) }' ||
    fail "3 s of a stopped instance are not in the exchange's figures: $ms ms x $steps steps"

# 11. replicated tensor sharding of weights (runtime/rts.c): 2 instances x 1
#     replica, each holding half of every weight (on chip, then in streaming
#     memory), train bit for bit as one process of 2 unsharded replicas; 4 replicas over 2 x 2 with weights and
#     optimizer state sharded too, and resumed from a checkpoint of the job
W2="--optimizer adamw --lr 0.001 --engine-option TensorLocations.weight.minElementsForReplicatedTensorSharding=0"
$T train $COMMON $W2 --replicas 2 --gradient-accumulation 2 --save w1.safetensors >w1.log 2>&1 ||
    fail "weights, one process"
timeout 120 $MPI $T train $COMMON $W2 --replicas 2 --gradient-accumulation 2 --shard weights \
    --save w2.safetensors >w2.log 2>&1 || fail "sharded weights over 2 instances"
cmp w1.safetensors w2.safetensors || fail "sharded weights over instances differ from one process"
#     and off chip too: each instance's streaming memory holds its shard
#     (weights and optimizer state), preloaded on the I/O thread
timeout 120 $MPI $T train $COMMON $W2 --replicas 2 --gradient-accumulation 2 --shard weights \
    --offload weights,optimizer --engine-option TensorLocations.ioSchedule=preload \
    --save w3.safetensors >w3.log 2>&1 || fail "sharded weights off chip over 2 instances"
cmp w1.safetensors w3.safetensors || fail "sharded weights off chip over instances differ from one process"
$T train $COMMON $W2 --replicas 4 --save w4.safetensors >w4.log 2>&1 || fail "4 replicas, one process"
timeout 120 $MPI $T train $COMMON $W2 --replicas 4 --shard weights,optimizer --max-steps 3 \
    --save w5.safetensors >w5.log 2>&1 || fail "sharded weights over 2 x 2, stopped early"
timeout 120 $MPI $T train $COMMON $W2 --replicas 4 --shard weights,optimizer \
    --resume w5.safetensors --save w6.safetensors >w6.log 2>&1 || fail "sharded weights, resumed"
cmp w4.safetensors w6.safetensors || fail "a resumed job of sharded weights differs from one run"

# 12. bf16 gradients on the wire (distributed.gradientWireType=bfloat16):
#     bounded, not bit-equal, against float32 (tests/dist/wire_error.py: each
#     tensor's distance from the f32 run under 1% of the f32 run's movement,
#     0.1-0.3% measured); the exchange after the backward and the buckets
#     round the same; several local replicas (2 x 2 against 1 x 4) too; one
#     process has no wire, and the option changes nothing there
BF="--engine-option distributed.gradientWireType=bfloat16"
PY=/usr/bin/python3 # the distance check (pure Python); without it, only the runs
[ -x $PY ] || PY=true
R2="--replicas 2 --gradient-accumulation 2"
$T train $COMMON $R2 --lr 0 --save bf_init.safetensors >bfi.log 2>&1 || fail "weights before training"
timeout 120 $MPI $T train $COMMON $R2 $BF --save bf1.safetensors >bf1.log 2>&1 ||
    fail "bf16 on the wire, buckets"
timeout 120 $MPI $T train $COMMON $R2 $BF --engine-option distributed.gradientBucketBytes=0 \
    --save bf2.safetensors --profile-dir bfprof >bf2.log 2>&1 || fail "bf16 on the wire, no buckets"
# the profile records the wire's type and the all-gather MPI ran: tilegraph
# asks OpenMPI's coll/libnbc for recursive doubling (2 instances: a power of 2)
$T analyse bfprof instances >bfinst.txt || fail "analyse instances of the bf16 job"
grep -q "bfloat16 on the wire.*MPI_Iallgather: coll/libnbc recursive doubling" bfinst.txt ||
    fail "the profile names not the wire's type and MPI's algorithm: $(tail -1 bfinst.txt)"
cmp bf1.safetensors bf2.safetensors || fail "bf16 on the wire: buckets and no buckets differ"
$PY "$HERE/wire_error.py" one.safetensors bf1.safetensors \
    bf_init.safetensors 0.01 >bf.err 2>&1 || fail "bf16 on the wire against float32: $(cat bf.err)"
$T train $COMMON $R2 $BF --save bf3.safetensors >bf3.log 2>&1 || fail "bf16 option, one process"
cmp one.safetensors bf3.safetensors || fail "bf16 on the wire changed one process"
$T train $COMMON --replicas 4 --save bf4.safetensors >bf4.log 2>&1 || fail "4 replicas, one process"
timeout 120 $MPI $T train $COMMON --replicas 4 $BF --save bf5.safetensors >bf5.log 2>&1 ||
    fail "bf16 on the wire, 2 x 2"
$PY "$HERE/wire_error.py" bf4.safetensors bf5.safetensors \
    bf_init.safetensors 0.01 >bf.err 2>&1 || fail "bf16 on the wire, 2 x 2 against 1 x 4: $(cat bf.err)"

echo "mpi_test: all cases passed (kill -9 ended the job in ${took} s)"
