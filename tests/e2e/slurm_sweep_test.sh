#!/usr/bin/env bash
# kvtier sweep --runner slurm against a real one-node Slurm cluster that this test starts
# (docs/sweep.md, "On a Slurm cluster"): a munge key and munged (as the munge user), a
# slurm.conf whose state lives in a temporary folder, slurmctld and slurmd; then a sweep run
# as a job array must give the local sweep's results.csv byte for byte, skip finished cells,
# keep failed ones failed unless --retry-failed, and everything is stopped again.
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
for b in munged slurmctld slurmd sbatch squeue sinfo scontrol runuser; do
  command -v "$b" >/dev/null || skip "$b is missing (tools/setup installs slurm-wlm and munge)"
done
id munge >/dev/null 2>&1 || skip "no munge user (Debian's munge package makes it)"

tmp=$(mktemp -d /tmp/kvtier-slurm-test.XXXXXX)
chmod 755 "$tmp"
daemons=()
cleanup() {
  for p in "${daemons[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${daemons[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# munge: its own key, socket and state, owned by the munge user.
m=$tmp/munge
mkdir -p "$m/etc" "$m/lib" "$m/log" "$m/run"
dd if=/dev/urandom of="$m/etc/munge.key" bs=1024 count=1 status=none
chmod 700 "$m/etc" "$m/lib" "$m/log"
chmod 755 "$m/run"
chmod 400 "$m/etc/munge.key"
chown -R munge:munge "$m"
runuser -u munge -- munged --force --key-file="$m/etc/munge.key" --socket="$m/run/munge.sock" \
  --pid-file="$m/run/munged.pid" --log-file="$m/log/munged.log" --seed-file="$m/lib/seed" \
  || skip "munged did not start: $(tail -3 "$m/log/munged.log" 2>/dev/null)"
daemons+=("$(cat "$m/run/munged.pid")")

host=$(hostname -s)
port=$((20000 + $$ % 20000))  # away from the default ports of a Slurm this machine may run
export SLURM_CONF=$tmp/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=kvtiertest
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$m/run/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
mkdir -p "$tmp/state" "$tmp/spool"
slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 &
daemons+=($!)
slurmd -D -f "$SLURM_CONF" >"$tmp/slurmd.out" 2>&1 &
daemons+=($!)
for _ in $(seq 1 100); do
  state=$(sinfo -h -o %T 2>/dev/null | head -1)
  [ "$state" = idle ] && break
  sleep 0.3
done
[ "$state" = idle ] || skip "Slurm did not come up (node state '$state'): $(tail -3 \
  "$tmp/slurmctld.log" "$tmp/slurmd.log" 2>/dev/null | tr '\n' ' ')"
echo "slurm: one node $host with $(nproc) CPUs is up"

grid="--mode hitrate --trace $sample --grid cache.host_tokens=100000,400000,1600000
  --grid cache.write_policy=write_through,write_back --deterministic --quiet"
# shellcheck disable=SC2086
"$kvtier" sweep --jobs 2 --out "$tmp/local" $grid || fail "the local sweep failed"
# shellcheck disable=SC2086
out=$("$kvtier" sweep --runner slurm --cells-per-task 4 --out "$tmp/slurm" $grid 2>&1) \
  || fail "the Slurm sweep failed: $out"
cmp "$tmp/local/results.csv" "$tmp/slurm/results.csv" \
  || fail "results.csv of the Slurm sweep differs from the local sweep's"
[ "$(wc -l <"$tmp/slurm/slurm/tasks-1.txt")" -eq 2 ] || fail "6 cells at 4 a task are 2 tasks"
echo "ok: 6 cells in 2 array tasks give the local sweep's results.csv byte for byte"

# A second run finds every cell done and submits nothing.
# shellcheck disable=SC2086
out=$("$kvtier" sweep --runner slurm --out "$tmp/slurm" ${grid/--quiet/} 2>&1) \
  || fail "the repeated Slurm sweep failed: $out"
grep -q "6 already done, 0 run" <<<"$out" || fail "finished cells were submitted again: $out"
[ ! -e "$tmp/slurm/slurm/tasks-2.txt" ] || fail "a second array was submitted"
echo "ok: finished cells are skipped"

# A failing cell stays failed, and is resubmitted only with --retry-failed.
bad="--mode hitrate --trace $sample --grid cache.device_tokens=0,200000 --deterministic"
out=$("$kvtier" sweep --runner slurm --out "$tmp/bad" $bad 2>&1)
[ $? -eq 1 ] || fail "a sweep with a failing cell must exit 1: $out"
grep -q "device tier needs at least one block" "$tmp/bad/results.csv" \
  || fail "the failed cell's row does not say why"
out=$("$kvtier" sweep --runner slurm --out "$tmp/bad" $bad 2>&1)
grep -q "1 already done, 0 run" <<<"$out" || fail "a failed cell was resubmitted: $out"
out=$("$kvtier" sweep --runner slurm --retry-failed --out "$tmp/bad" $bad 2>&1)
grep -q "1 already done, 1 run" <<<"$out" || fail "--retry-failed did not resubmit: $out"
echo "ok: a failed cell is resubmitted only with --retry-failed"
echo "PASSED"
