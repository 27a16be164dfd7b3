#!/usr/bin/env bash
# slurm-one-host.sh: a Slurm cluster on this machine, for trying
# examples/slurm and examples/slurm-factory without a real cluster. It runs
# Debian's munged, slurmctld and NODES slurmd (each node is this machine),
# from a configuration of their own in DIR, on free ports: the machine's own
# Slurm and munge, if any, are left alone. It is what the acceptance tests'
# clusters are (overlay/glidein/slurm/slurmtest), as a script.
#
#   scripts/slurm-one-host.sh start [-n NODES] [-c CPUS] [-m MEMORY_MB] [-p PARTITION] [DIR]
#   scripts/slurm-one-host.sh stop DIR
#
# start prints the line to run in your shell so that sbatch, squeue, sacct,
# scancel (and pondctl) reach the cluster, and the command that stops it:
#
#   eval "$(sudo scripts/slurm-one-host.sh start)"
#
# It needs root (slurmd runs jobs as their owners) and the packages
# slurm-wlm and munge (apt-get install slurm-wlm munge). stop cancels the
# cluster's jobs, stops its daemons and removes DIR.
set -euo pipefail

die() { echo "slurm-one-host.sh: $*" >&2; exit 1; }

usage() {
  sed -n '9,10p' "$0" | sed 's/^# *//' >&2
  exit 2
}

# free_port sets port to a TCP port no one listens on, on 127.0.0.1, and
# that it did not choose before, below the kernel's ephemeral range
# (ip_local_port_range): a port the kernel gives to another program's
# connection or listener can never be it.
free_port() {
  local p lo=32768 span
  read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  span=$((lo - 10000))
  [ "$span" -ge 1000 ] || span=$((65535 - 10000)) # an unusual range: take any
  for _ in $(seq 1 200); do
    p=$((10000 + (RANDOM * 32768 + RANDOM) % span))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      case " ${used:-} " in *" $p "*) continue ;; esac
      used="${used:-} $p"
      port="$p"
      return
    fi
  done
  die "no free port found"
}

# spawn LABEL CMD...: starts a daemon in a session of its own, its output
# in DIR/log/LABEL.out, its PID in DIR/pids.
spawn() {
  local label="$1"
  shift
  SLURM_CONF="$dir/slurm.conf" setsid "$@" >"$dir/log/$label.out" 2>&1 </dev/null &
  echo "$! $label" >>"$dir/pids"
}

# wait_for SECONDS CMD...: until CMD succeeds, or fails the script.
wait_for() {
  local secs="$1"
  shift
  for _ in $(seq 1 $((secs * 10))); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}

logs() {
  for f in "$dir"/log/* "$dir/munge/munged.log"; do
    if [ -f "$f" ]; then
      echo "--- $f"
      tail -n 20 "$f"
    fi
  done >&2
}

# in_use says whether a daemon of the cluster failed to bind its port:
# another program took it between free_port and the daemon's start.
in_use() {
  grep -qs "Address already in use" "$dir"/log/* "$dir/munge/munged.log"
}

start() {
  local nodes=1 cpus=2 mem=2000 partition=debug
  while getopts "n:c:m:p:" o; do
    case "$o" in
      n) nodes="$OPTARG" ;;
      c) cpus="$OPTARG" ;;
      m) mem="$OPTARG" ;;
      p) partition="$OPTARG" ;;
      *) usage ;;
    esac
  done
  shift $((OPTIND - 1))
  [ "$(id -u)" -eq 0 ] || die "needs root: slurmd runs jobs as their owners"
  local missing=""
  for c in munged slurmctld slurmd sinfo sbatch squeue sacct scancel; do
    command -v "$c" >/dev/null || missing="$missing $c"
  done
  [ -z "$missing" ] || die "missing:$missing (apt-get install slurm-wlm munge)"
  # Under /tmp by default: unix socket paths are short.
  if [ $# -gt 0 ]; then
    dir="$1"
    mkdir -p "$dir"
  else
    dir="$(mktemp -d /tmp/slurm-one-host.XXXXXX)"
  fi
  dir="$(cd "$dir" && pwd)"
  [ ! -e "$dir/slurm.conf" ] || die "$dir already holds a cluster: stop it first"
  # A port free when chosen may be taken by another program before the
  # daemon binds it: the cluster is started again, on fresh ports, up to
  # three times.
  local attempt why
  for attempt in 1 2 3; do
    if launch "$nodes" "$cpus" "$mem" "$partition"; then
      echo "export SLURM_CONF=$dir/slurm.conf"
      echo "# the cluster's partition: $partition; stop it with: $0 stop $dir"
      return
    fi
    if [ "$attempt" -lt 3 ] && in_use; then
      echo "slurm-one-host.sh: $why: a port was taken meanwhile; starting again on other ports" >&2
      stop "$dir"
      mkdir -p "$dir"
      continue
    fi
    logs
    stop "$dir"
    die "$why"
  done
}

# launch NODES CPUS MEMORY_MB PARTITION writes the cluster's files in DIR
# and starts its daemons, until every node is idle. It returns 1, with
# why set, when a daemon did not start.
launch() {
  local nodes="$1" cpus="$2" mem="$3" partition="$4" ctld i
  used=""
  mkdir -p "$dir/munge" "$dir/state" "$dir/log"
  chmod 700 "$dir/munge" "$dir/state"
  head -c 128 /dev/urandom >"$dir/munge/munge.key"
  chmod 600 "$dir/munge/munge.key"
  free_port
  ctld="$port"
  {
    echo "# written by slurm-one-host.sh"
    echo "ClusterName=pondonehost"
    echo "SlurmctldHost=localhost"
    echo "SlurmctldPort=$ctld"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$dir/munge/socket"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool/%n"
    echo "SlurmctldPidFile=$dir/slurmctld.pid"
    echo "SlurmdPidFile=$dir/slurmd-%n.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core_Memory"
    echo "DefMemPerCPU=100"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "JobCompType=jobcomp/filetxt"
    echo "JobCompLoc=$dir/jobcomp.txt"
    echo "MpiDefault=none"
    echo "MailProg=/bin/true"
    echo "ReturnToService=2"
    echo "MinJobAge=300"
    echo "KillWait=2"
    echo "InactiveLimit=0"
    echo "Waittime=0"
    echo "SlurmctldTimeout=30"
    echo "SlurmdTimeout=30"
    for i in $(seq 1 "$nodes"); do
      mkdir -p "$dir/spool/n$i"
      free_port
      echo "NodeName=n$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port CPUs=$cpus RealMemory=$mem State=UNKNOWN"
    done
    echo "PartitionName=$partition Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  export SLURM_CONF="$dir/slurm.conf"

  spawn munged munged --foreground --force --key-file="$dir/munge/munge.key" \
    --socket="$dir/munge/socket" --pid-file="$dir/munge/munged.pid" \
    --seed-file="$dir/munge/munged.seed" --log-file="$dir/munge/munged.log"
  wait_for 5 test -S "$dir/munge/socket" || { why="munged did not start"; return 1; }
  spawn slurmctld slurmctld -D -i -f "$dir/slurm.conf"
  # A Slurm command or slurmd that finds no controller sleeps a second
  # before it tries again: start them once it listens.
  wait_for 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$ctld" 2>/dev/null || { why="slurmctld did not start"; return 1; }
  for i in $(seq 1 "$nodes"); do
    spawn "slurmd-n$i" slurmd -D -N "n$i" -f "$dir/slurm.conf"
  done
  # Every node idle, or a daemon gone (a port taken: Slurm's daemons exit).
  idle() {
    local pid label
    while read -r pid label; do
      kill -0 "$pid" 2>/dev/null || { why="$label exited"; return 0; }
    done <"$dir/pids"
    [ "$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -eq "$nodes" ]
  }
  why=""
  wait_for 30 idle || { why="the nodes did not become idle in 30 s"; return 1; }
  [ -z "$why" ] || return 1
}

stop() {
  dir="$1"
  [ -f "$dir/slurm.conf" ] || die "$dir holds no cluster of slurm-one-host.sh"
  export SLURM_CONF="$dir/slurm.conf"
  timeout 10 scancel --full --user=root >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do
    [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break
    sleep 0.1
  done
  if [ -f "$dir/pids" ]; then
    tac "$dir/pids" | while read -r pid _; do
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    done
    sleep 1
    tac "$dir/pids" | while read -r pid _; do
      kill -KILL -- "-$pid" 2>/dev/null || true
    done
  fi
  # slurmstepd and the jobs it started outlive slurmd; they carry the
  # cluster's SLURM_CONF in their environment (this script's own
  # commands, from here on, do not).
  unset SLURM_CONF
  for env in /proc/[0-9]*/environ; do
    if tr '\0' '\n' 2>/dev/null <"$env" | grep -qxF "SLURM_CONF=$dir/slurm.conf"; then
      pid="${env#/proc/}"
      pid="${pid%/environ}"
      [ "$pid" = "$$" ] || kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$dir"
}

[ $# -ge 1 ] || usage
cmd="$1"
shift
case "$cmd" in
  start) start "$@" ;;
  stop) [ $# -eq 1 ] || usage; stop "$1" ;;
  *) usage ;;
esac
