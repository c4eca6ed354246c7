#!/usr/bin/env bash
# Stop the daemons that scripts/slurm_up.sh started (and only those), by their pid files.
set -uo pipefail

STATE="${HANGDOC_SLURM_STATE:-/tmp/hangdoc-slurm}"
[ -f "$STATE/started" ] || exit 0

stop_pidfile() {
    local file="$1" pid
    [ -s "$file" ] || return 0
    pid="$(cat "$file")"
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

# Reverse order of start: slurmd, slurmctld, then munged.
grep -qx slurmd "$STATE/started" && stop_pidfile "$STATE/slurmd.pid"
grep -qx slurmctld "$STATE/started" && stop_pidfile "$STATE/slurmctld.pid"
grep -qx munged "$STATE/started" && stop_pidfile /run/munge/munged.pid
: >"$STATE/started"
echo "slurm_down: stopped what slurm_up started" >&2
