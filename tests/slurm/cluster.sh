#!/usr/bin/env bash
# A real two-node SLURM cluster on this one machine, for evenkeel's SLURM test:
# Debian's slurmctld and two slurmd (-N ek-n1, -N ek-n2) on distinct ports, both at
# 127.0.0.1 (names added to /etc/hosts), munge for authentication,
# proctrack/linuxproc and task/none (no cgroups needed). Run as root.
#   cluster.sh start DIR   writes DIR/slurm.conf, starts munged, slurmctld, two slurmd;
#                          waits until both nodes are idle; prints the SLURM_CONF path
#   cluster.sh stop DIR    stops them
set -euo pipefail
cmd=${1:?usage: cluster.sh start|stop DIR}
DIR=$(realpath -m "${2:?usage: cluster.sh start|stop DIR}")
CONF=$DIR/slurm.conf
export SLURM_CONF=$CONF

stop() {
  for f in "$DIR"/slurmd-*.pid "$DIR"/slurmctld.pid; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  sleep 1
  for f in "$DIR"/slurmd-*.pid "$DIR"/slurmctld.pid; do
    [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || { echo "cluster.sh: unknown command $cmd" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "cluster.sh: run as root (slurmd and munged)" >&2; exit 1; }
for exe in munged slurmctld slurmd sinfo; do
  command -v "$exe" >/dev/null || { echo "cluster.sh: $exe not installed (apt-get install slurmd slurmctld slurm-client munge)" >&2; exit 1; }
done
mkdir -p "$DIR/state" "$DIR/spool-ek-n1" "$DIR/spool-ek-n2"
grep -q "ek-n1" /etc/hosts || echo "127.0.0.1 ek-n1 ek-n2" >> /etc/hosts

# munge: the key Debian's package made, the daemon as the munge user.
if ! munge -n >/dev/null 2>&1 </dev/null; then
  [ -s /etc/munge/munge.key ] || (command -v mungekey >/dev/null && mungekey --create --force)
  chown -R munge:munge /etc/munge
  chmod 0700 /etc/munge; chmod 0400 /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge /var/lib/munge /var/log/munge
  su -s /bin/sh munge -c "munged" 2>/dev/null || munged --force
  for _ in $(seq 50); do munge -n >/dev/null 2>&1 </dev/null && break; sleep 0.1; done
fi
munge -n </dev/null | unmunge >/dev/null

CPUS=$(nproc)
cat > "$CONF" <<CONF
ClusterName=evenkeel-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=17817
SlurmdPort=17818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool-%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=10
MinJobAge=300
NodeName=ek-n1 NodeAddr=127.0.0.1 Port=17821 CPUs=$CPUS State=UNKNOWN
NodeName=ek-n2 NodeAddr=127.0.0.1 Port=17822 CPUs=$CPUS State=UNKNOWN
PartitionName=evenkeel Nodes=ek-n1,ek-n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:2
CONF

stop
slurmctld -f "$CONF" -i
slurmd -f "$CONF" -N ek-n1
slurmd -f "$CONF" -N ek-n2
for _ in $(seq 100); do
  idle=$(sinfo -h -N -o "%N %t" 2>/dev/null | grep -c " idle" || true)
  [ "$idle" = 2 ] && break
  sleep 0.2
done
if [ "$idle" != 2 ]; then
  echo "cluster.sh: nodes not idle:" >&2
  sinfo -N >&2 || true
  tail -20 "$DIR"/slurmctld.log "$DIR"/slurmd-*.log >&2 || true
  exit 1
fi
echo "$CONF"
