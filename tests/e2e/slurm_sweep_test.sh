#!/usr/bin/env bash
# kvtier sweep --runner slurm against a real one-node Slurm cluster that this test starts
# (tests/e2e/slurm_cluster.sh; docs/sweep.md, "On a Slurm cluster"). Checked:
#  1. a sweep run as a job array gives the local sweep's results.csv byte for byte, and --jobs 2
#     runs two cells at once within each array task;
#  2. a second run submits nothing; a failed cell stays failed until --retry-failed;
#  3. scancel of the array: every cell is reported with how its task ended, results.csv is
#     written, the cells stay failed on a re-run and run again with --retry-failed; a per-cell
#     time limit becomes the tasks' --time;
#  4. the runner killed (SIGKILL, before it even recorded the job id): --collect names the task
#     each cell waits in, and a re-run finds the array still queued, waits for it and submits
#     nothing again;
#  5. a lost node (DOWN) and a task cancelled while their cells ran: each row names its cause.
# Cost: about 40 s on 2 cores (most of it the runner's 2 s polls and Slurm's scheduling).
# Needs root and Debian's slurm-wlm and munge (tools/setup). Without them it skips LOUDLY
# (exit 77, which ctest reports as skipped) saying why.
set -uo pipefail
kvtier=$1
sample=$2

skip() {
  echo "***************************************************************************" >&2
  echo "*** SKIPPED: kvtier sweep --runner slurm is NOT tested: $*" >&2
  echo "***************************************************************************" >&2
  exit 77
}
fail() { echo "FAILED: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "the test starts munged, slurmctld and slurmd and needs root"
for b in munged slurmctld slurmd sbatch squeue sinfo scontrol scancel runuser; do
  command -v "$b" >/dev/null || skip "$b is missing (tools/setup installs slurm-wlm and munge)"
done
id munge >/dev/null 2>&1 || skip "no munge user (Debian's munge package makes it)"

# shellcheck source=tests/e2e/slurm_cluster.sh
source "$(dirname "$0")/slurm_cluster.sh"
tmp=$(mktemp -d /tmp/kvtier-slurm-test.XXXXXX)
chmod 755 "$tmp"
background=()
cleanup() {
  for p in "${background[@]}"; do kill "$p" 2>/dev/null; done
  slurm_cluster_stop
  rm -rf "$tmp"
}
trap cleanup EXIT
slurm_cluster_start "$tmp" || skip "$SLURM_SKIP"
echo "slurm: one node $SLURM_NODE with $(nproc) CPUs is up"

# Waits up to 60 s for a file (a glob) to exist.
wait_for() {
  local _
  for _ in $(seq 1 300); do
    compgen -G "$1" >/dev/null && return 0
    sleep 0.2
  done
  fail "waited 60 s for $1"
}

grid="--mode hitrate --trace $sample --grid cache.host_tokens=100000,400000,1600000
  --grid cache.write_policy=write_through,write_back --deterministic --quiet"

# 1. The array gives the local results; --jobs reaches each task.
# shellcheck disable=SC2086
"$kvtier" sweep --jobs 2 --out "$tmp/local" $grid || fail "the local sweep failed"
# shellcheck disable=SC2086
out=$("$kvtier" sweep --runner slurm --cells-per-task 4 --jobs 2 --out "$tmp/slurm" $grid 2>&1) \
  || fail "the Slurm sweep failed: $out"
cmp "$tmp/local/results.csv" "$tmp/slurm/results.csv" \
  || fail "results.csv of the Slurm sweep differs from the local sweep's"
[ "$(wc -l <"$tmp/slurm/slurm/tasks-1.txt")" -eq 2 ] || fail "6 cells at 4 a task are 2 tasks"
grep -q "4 cells, 0 already done, 4 run, at most 2 at once (--jobs 2)" "$tmp"/slurm/slurm/*_0.out \
  || fail "--jobs 2 did not run two cells at once in a task: $(cat "$tmp"/slurm/slurm/*_0.out)"
echo "ok: 6 cells in 2 array tasks, 2 at once in each, give the local results.csv byte for byte"

# 2. Finished cells are skipped; a failed one is resubmitted only on request.
# shellcheck disable=SC2086
out=$("$kvtier" sweep --runner slurm --out "$tmp/slurm" ${grid/--quiet/} 2>&1) \
  || fail "the repeated Slurm sweep failed: $out"
grep -q "6 already done, 0 run" <<<"$out" || fail "finished cells were submitted again: $out"
[ ! -e "$tmp/slurm/slurm/tasks-2.txt" ] || fail "a second array was submitted"
bad="--mode hitrate --trace $sample --grid cache.device_tokens=0,200000 --deterministic"
# shellcheck disable=SC2086
out=$("$kvtier" sweep --runner slurm --out "$tmp/bad" $bad 2>&1)
[ $? -eq 1 ] || fail "a sweep with a failing cell must exit 1: $out"
grep -q "device tier needs at least one block" "$tmp/bad/results.csv" \
  || fail "the failed cell's row does not say why"
# shellcheck disable=SC2086
out=$("$kvtier" sweep --runner slurm --out "$tmp/bad" $bad 2>&1)
grep -q "1 already done, 0 run" <<<"$out" || fail "a failed cell was resubmitted: $out"
# shellcheck disable=SC2086
out=$("$kvtier" sweep --runner slurm --retry-failed --out "$tmp/bad" $bad 2>&1)
grep -q "1 already done, 1 run" <<<"$out" || fail "--retry-failed did not resubmit: $out"
echo "ok: finished cells are skipped, a failed cell is resubmitted only with --retry-failed"

# 3. scancel: a held array (its tasks pending) cancelled.
# shellcheck disable=SC2086
"$kvtier" sweep --runner slurm --out "$tmp/cancel" $grid --cell-time-limit 30 --sbatch=--hold \
  >"$tmp/cancel.log" 2>&1 &
runner=$!
background+=("$runner")
wait_for "$tmp/cancel/slurm/tasks-1.job"
job=$(cat "$tmp/cancel/slurm/tasks-1.job")
limit=$(squeue -h -r -j "$job" -o %l | sort -u)
# 4 cells a task, one at a time, 30 s each, and a minute to spare: 3 minutes.
[ "$limit" = "3:00" ] || fail "--cell-time-limit 30 should give tasks of 4 cells --time 3:00, not $limit"
scancel "$job"
wait "$runner"
rc=$?
[ $rc -eq 1 ] || fail "the runner of a cancelled array must exit 1, not $rc: $(cat "$tmp/cancel.log")"
[ -s "$tmp/cancel/results.csv" ] || fail "no results.csv after scancel: $(cat "$tmp/cancel.log")"
n=$(grep -c "Slurm job $job task [01] (log [^)]*) was cancelled (scancel.*) before this cell started" \
  "$tmp/cancel/results.csv")
[ "$n" -eq 6 ] || fail "6 rows should say their task was cancelled before they started, $n do:
$(cat "$tmp/cancel/results.csv")"
# shellcheck disable=SC2086
out=$("$kvtier" sweep --runner slurm --out "$tmp/cancel" ${grid/--quiet/} 2>&1)
grep -q "0 already done, 0 run.*6 of them from before: --retry-failed" <<<"$out" \
  || fail "cancelled cells were resubmitted without --retry-failed: $out"
# shellcheck disable=SC2086
out=$("$kvtier" sweep --runner slurm --retry-failed --out "$tmp/cancel" $grid 2>&1) \
  || fail "--retry-failed after scancel failed: $out"
cmp "$tmp/local/results.csv" "$tmp/cancel/results.csv" \
  || fail "the cancelled sweep, retried, differs from the local one"
echo "ok: scancel leaves every cell reported; --retry-failed completes the sweep"

# 4. The runner killed while its array waits in the queue, before it recorded the job id.
# shellcheck disable=SC2086
"$kvtier" sweep --runner slurm --out "$tmp/killed" $grid --sbatch=--hold >"$tmp/killed.log" 2>&1 &
runner=$!
wait_for "$tmp/killed/slurm/tasks-1.job"
kill -9 "$runner"
wait "$runner" 2>/dev/null
job=$(cat "$tmp/killed/slurm/tasks-1.job")
rm "$tmp/killed/slurm/tasks-1.job"
# --collect meanwhile names where each cell waits.
"$kvtier" sweep --out "$tmp/killed" --collect --quiet && fail "--collect with cells queued must exit 1"
n=$(grep -c "queued or running in Slurm job $job task [01] (log [^)]*) (PENDING)" \
  "$tmp/killed/results.csv")
[ "$n" -eq 6 ] || fail "--collect should name the queued task of 6 cells, $n:
$(cat "$tmp/killed/results.csv")"
rm "$tmp/killed/slurm/tasks-1.job"  # recovered by --collect: the re-run must recover it too
# shellcheck disable=SC2086
"$kvtier" sweep --runner slurm --out "$tmp/killed" ${grid/--quiet/} >"$tmp/rerun.log" 2>&1 &
runner=$!
background+=("$runner")
for _ in $(seq 1 150); do
  grep -q "waiting for them, not submitting them again" "$tmp/rerun.log" && break
  sleep 0.2
done
grep -q "6 cells are still queued or running in Slurm job(s) $job" "$tmp/rerun.log" \
  || fail "the re-run did not find the array still queued: $(cat "$tmp/rerun.log")"
scontrol release "$job"
wait "$runner" || fail "the re-run failed: $(cat "$tmp/rerun.log")"
[ ! -e "$tmp/killed/slurm/tasks-2.txt" ] || fail "the re-run submitted queued cells again"
[ "$(cat "$tmp/killed/slurm/tasks-1.job")" = "$job" ] || fail "the job id was not recovered"
cmp "$tmp/local/results.csv" "$tmp/killed/results.csv" \
  || fail "the sweep whose runner was killed differs from the local one"
echo "ok: a re-run after the runner's death waits for the queued array and submits nothing"

# 5. While their cells run: task 1 cancelled, then the node lost under task 0. The cells take
# seconds (32 copies of the sample's sessions, full mode: they are stopped long before).
slow="--trace $sample --set trace.session_copies=32 --grid cache.host_tokens=100000,200000
  --deterministic --cells-per-task 1"
# shellcheck disable=SC2086
"$kvtier" sweep --runner slurm --out "$tmp/lost" $slow >"$tmp/lost.log" 2>&1 &
runner=$!
background+=("$runner")
wait_for "$tmp/lost/slurm/tasks-1.job"
job=$(cat "$tmp/lost/slurm/tasks-1.job")
for t in 0 1; do wait_for "$tmp/lost/slurm/${job}_$t.out"; done
for c in $(cat "$tmp/lost/cells.txt"); do wait_for "$tmp/lost/cells/$c/log.txt"; done
scancel "${job}_1"
sleep 1
scontrol update NodeName="$SLURM_NODE" State=DOWN Reason=kvtier-test
wait "$runner"
rc=$?
[ $rc -eq 1 ] || fail "the runner of a lost node must exit 1, not $rc: $(cat "$tmp/lost.log")"
grep -q "Slurm job $job task 0 (log [^)]*) lost its node (NODE_FAIL.*) while this cell ran" \
  "$tmp/lost/results.csv" || fail "no row names the lost node: $(cat "$tmp/lost/results.csv")"
grep -q "Slurm job $job task 1 (log [^)]*) was cancelled (scancel.*) while this cell ran" \
  "$tmp/lost/results.csv" || fail "no row names the cancelled task: $(cat "$tmp/lost/results.csv")"
[ "$(slurm_node_state)" = idle ] || scontrol update NodeName="$SLURM_NODE" State=RESUME
slurm_wait_idle || fail "the node did not come back: $(slurm_node_state)"
echo "ok: a lost node and a task cancelled mid-cell are each named in the cells' rows"
echo "PASSED"
