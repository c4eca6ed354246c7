#!/usr/bin/env bash
# Start a one-node Slurm cluster on this host, for tests/slurm (a real Slurm, not a mock).
#
#   bash scripts/slurm_up.sh            # prints the SLURM_CONF to use; exit 0 when it answers
#   bash scripts/slurm_down.sh          # stops only what this script started
#
# Installs Debian's slurmctld, slurmd, slurm-client and munge when they are missing (root),
# writes a minimal slurm.conf for this host into $HANGDOC_SLURM_STATE (default
# /tmp/hangdoc-slurm; /etc/slurm is never touched), and starts munged, slurmctld and
# slurmd. The config runs without cgroups (proctrack/linuxproc, task/none), so it works
# in a container. What it started is listed in $STATE/started for slurm_down.sh.
# Idempotent: a second run finds the daemons answering and changes nothing.
set -euo pipefail

STATE="${HANGDOC_SLURM_STATE:-/tmp/hangdoc-slurm}"
CONF="$STATE/slurm.conf"
mkdir -p "$STATE"
touch "$STATE/started"

say() { echo "slurm_up: $*" >&2; }
die() { say "$*"; exit 1; }

note_started() { grep -qx "$1" "$STATE/started" || echo "$1" >>"$STATE/started"; }

answering() {
    [ -f "$CONF" ] && SLURM_CONF="$CONF" timeout 10 scontrol ping 2>/dev/null | grep -q "is UP"
}

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    command -v munged >/dev/null || missing+=(munge)
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]} and not root: cannot install"
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get"
    say "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y --no-install-recommends \
        "${missing[@]}" >"$STATE/apt.log" 2>&1 \
        || { apt-get update >>"$STATE/apt.log" 2>&1 \
             && DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y \
                --no-install-recommends "${missing[@]}" >>"$STATE/apt.log" 2>&1; } \
        || die "apt-get install ${missing[*]} failed (see $STATE/apt.log)"
}

start_munge() {
    if timeout 5 munge -n 2>/dev/null | timeout 5 unmunge >/dev/null 2>&1; then
        return 0
    fi
    [ "$(id -u)" -eq 0 ] || die "munged is not running and we are not root"
    if [ ! -s /etc/munge/munge.key ]; then
        mkdir -p /etc/munge
        dd if=/dev/urandom of=/etc/munge/munge.key bs=128 count=1 status=none
    fi
    chown munge:munge /etc/munge/munge.key 2>/dev/null || true
    chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
    chmod 755 /run/munge
    if id munge >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged
    else
        /usr/sbin/munged --force
    fi
    note_started munged
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "munged did not come up"
}

write_conf() {
    local host node_line
    host="$(hostname -s)"
    # slurmd -C prints this host's real CPUs and memory: a node line that claims more
    # than the machine has would be drained at once.
    node_line="$(slurmd -C | head -1)"
    [ -n "$node_line" ] || die "slurmd -C printed nothing"
    mkdir -p "$STATE/ctld" "$STATE/d"
    cat >"$CONF" <<EOF
# Written by hangdoc scripts/slurm_up.sh: a one-node test cluster without cgroups.
ClusterName=hangdoc
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
KillWait=5
$node_line State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start_daemons() {
    if ! pgrep -F "$STATE/slurmctld.pid" >/dev/null 2>&1; then
        /usr/sbin/slurmctld -f "$CONF" -c || die "slurmctld failed (see $STATE/slurmctld.log)"
        note_started slurmctld
    fi
    if ! pgrep -F "$STATE/slurmd.pid" >/dev/null 2>&1; then
        /usr/sbin/slurmd -f "$CONF" || die "slurmd failed (see $STATE/slurmd.log)"
        note_started slurmd
    fi
    export SLURM_CONF="$CONF"
    local host state
    host="$(hostname -s)"
    for _ in $(seq 100); do
        state="$(timeout 10 sinfo -h -n "$host" -o %T 2>/dev/null || true)"
        case "$state" in
            idle*|mixed*|alloc*|allocated*) return 0 ;;
            down*|drain*|drained*) scontrol update nodename="$host" state=resume \
                                    >/dev/null 2>&1 || true ;;
        esac
        sleep 0.2
    done
    die "node $host did not become idle (state: ${state:-none}; see $STATE/*.log)"
}

if answering; then
    say "already running"
else
    install_packages
    start_munge
    write_conf
    start_daemons
    answering || die "slurmctld does not answer (see $STATE/slurmctld.log)"
fi
echo "SLURM_CONF=$CONF" >"$STATE/env"
echo "SLURM_CONF=$CONF"
