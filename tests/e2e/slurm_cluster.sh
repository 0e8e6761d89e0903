# A one-node Slurm cluster with munge in a temporary folder, for tests/e2e/slurm_sweep_test.sh
# (sourced). slurm_cluster_start DIR starts munged (as the munge user), slurmctld and slurmd with
# their state, logs and sockets under DIR, exports SLURM_CONF and sets SLURM_NODE; it returns 1
# with SLURM_SKIP saying why when a daemon does not come up. slurm_cluster_stop stops what it
# started (by process id). Needs root, and Debian's slurm-wlm and munge (tools/setup).

slurm_daemons=()

slurm_cluster_start() {
  local tmp=$1 m=$1/munge
  mkdir -p "$m/etc" "$m/lib" "$m/log" "$m/run"
  dd if=/dev/urandom of="$m/etc/munge.key" bs=1024 count=1 status=none
  chmod 700 "$m/etc" "$m/lib" "$m/log"
  chmod 755 "$m/run"
  chmod 400 "$m/etc/munge.key"
  chown -R munge:munge "$m"
  if ! runuser -u munge -- munged --force --key-file="$m/etc/munge.key" \
      --socket="$m/run/munge.sock" --pid-file="$m/run/munged.pid" \
      --log-file="$m/log/munged.log" --seed-file="$m/lib/seed"; then
    SLURM_SKIP="munged did not start: $(tail -3 "$m/log/munged.log" 2>/dev/null)"
    return 1
  fi
  slurm_daemons+=("$(cat "$m/run/munged.pid")")
  SLURM_NODE=$(hostname -s)
  local port=$((20000 + $$ % 20000))  # away from the default ports of a Slurm this machine runs
  export SLURM_CONF=$tmp/slurm.conf
  # MinJobAge: finished jobs stay in squeue -t all for 10 minutes, where the runner reads how
  # each task ended (this cluster keeps no accounting for sacct).
  cat >"$SLURM_CONF" <<CONF
ClusterName=kvtiertest
SlurmctldHost=$SLURM_NODE
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
MinJobAge=600
KillWait=2
SlurmdTimeout=5
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
NodeName=$SLURM_NODE CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$SLURM_NODE Default=YES MaxTime=INFINITE State=UP
CONF
  mkdir -p "$tmp/state" "$tmp/spool"
  slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 &
  slurm_daemons+=($!)
  slurmd -D -f "$SLURM_CONF" >"$tmp/slurmd.out" 2>&1 &
  slurm_daemons+=($!)
  slurm_wait_idle || {
    SLURM_SKIP="Slurm did not come up (node state '$(slurm_node_state)'): $(tail -3 \
      "$tmp/slurmctld.log" "$tmp/slurmd.log" 2>/dev/null | tr '\n' ' ')"
    return 1
  }
}

slurm_node_state() { sinfo -h -o %T 2>/dev/null | head -1; }

# Waits up to 30 s for the node to be idle (after start, or after a resume).
slurm_wait_idle() {
  local _
  for _ in $(seq 1 100); do
    [ "$(slurm_node_state)" = idle ] && return 0
    sleep 0.3
  done
  return 1
}

slurm_cluster_stop() {
  local p
  for p in "${slurm_daemons[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${slurm_daemons[@]}"; do wait "$p" 2>/dev/null; done
  slurm_daemons=()
}
