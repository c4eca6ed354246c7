"""What ``hangdoc watch`` costs a healthy job, and how soon it reports a hang.

    sudo .venv/bin/python scripts/bench_watch.py throughput   # steps/min with and without
    sudo .venv/bin/python scripts/bench_watch.py latency      # hang → report, 4 live hangs
    sudo .venv/bin/python scripts/bench_watch.py healthy      # a slow job, minutes, no report

**throughput**: a healthy gloo job on CPU (hangdoc/scenarios/job.py ``throughput``: an MLP's
forward, backward and gradient all_reduce per step, as fast as it goes) runs throughout;
one ``hangdoc watch --pid …`` runs beside it, paused (SIGSTOP to watch's own process) in the
windows without it; pairs of short windows without and with it follow (AB, BA, AB…, so that
a drift of the machine's load favours neither), and each window's steps per minute are
read from rank 0's own "step N time" lines. Watch's CPU time in its windows (utime + stime
of its process, from /proc) is its cost in cores; its start-up (imports) is before the
first window, and the job never stalls, so no stack is sampled.

**latency**: each of four hangs (a stuck checkpoint writer, a lock deadlock, a dead rank,
a stuck upload, through http.client and through a bare socket), process-group timeout 150 s, watched from its start with
``--stall-after 30``; for each, the hang (the last rank's ready marker, written just before
the call that blocks), when watch confirmed the stall, and when the report was written,
whether every surviving rank was still alive then, and whether the category and culprit
are the expected ones.

**healthy**: a healthy slow job (``slow``: uneven steps, 0.15-0.8 s) watched with
``--stall-after 30`` for ``--minutes``: the number of reports (must be 0), and watch's exit
status once the job is gone.

Each prints a Markdown table (docs/watch.md holds the last ones). Needs torch and py-spy
with the right to read other processes (root).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hangdoc.scenarios.launch import ScenarioJob, launch

HANGS = [
    ("stuck checkpoint writer", "checkpoint", "checkpoint_save_hang", [3]),
    ("lock deadlock", "lock-deadlock", "python_deadlock_gil_or_lock", [3]),
    ("dead rank", "killed", "rank_dead_or_crashed", [3]),
    ("stuck upload", "upload", "io_or_filesystem_stall", [3]),
    ("stuck upload, socket.sendall", "upload-socket", "io_or_filesystem_stall", [3]),
]


def _watch(out: Path, *args: str) -> subprocess.Popen[bytes]:
    log = (out.parent / f"{out.name}.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "hangdoc", "watch", "--out", str(out), *args],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.terminate()  # SIGTERM: watch stops watching and says what it reported
    return proc.wait(timeout=60)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


def _steps(job: ScenarioJob) -> list[tuple[int, float]]:
    lines = (job.log_dir / "rank0.out").read_text().splitlines()
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "step":
            out.append((int(parts[1]), float(parts[2])))
    return out


def _rate(job: ScenarioJob, start: float, end: float) -> float:
    """Steps per minute between two times, from rank 0's lines."""
    points = _steps(job)
    before = [p for p in points if p[1] <= start]
    until = [p for p in points if p[1] <= end]
    first, last = before[-1], until[-1]
    return (last[0] - first[0]) / (last[1] - first[1]) * 60.0


def throughput(window_s: float, pairs: int, ranks: int, stall_after: str) -> None:
    """One watch runs beside the job throughout and is paused (SIGSTOP, to watch's own
    process, never the job's) in the windows without it: no start-up in any window, and
    windows short enough to follow the machine's load. Pairs of windows in the order AB,
    BA, AB… so that a drift of that load favours neither; the loss is the median of the
    pairs' relative differences, with their mean and its standard error."""
    losses: list[float] = []
    plain: list[float] = []
    watched: list[float] = []
    cpu: list[float] = []
    with tempfile.TemporaryDirectory(prefix="hangdoc-bench-watch-") as tmp:
        work = Path(tmp)
        with launch("throughput", ranks, work / "job") as job:
            job.wait_ready(timeout=300)
            pids = ",".join(str(p.pid) for p in job.procs)
            watch = _watch(work / "watch", "--pid", pids, "--stall-after", stall_after)
            try:
                time.sleep(10)  # its start-up (imports, the first scan) is not its steady cost

                def window(watching: bool) -> float:
                    os.kill(watch.pid, signal.SIGCONT if watching else signal.SIGSTOP)
                    start, used = time.time(), _cpu_s(watch.pid)
                    time.sleep(window_s)
                    end = time.time()
                    if watching:
                        cpu.append((_cpu_s(watch.pid) - used) / (end - start))
                    return _rate(job, start, end)

                for index in range(pairs):
                    order = (False, True) if index % 2 == 0 else (True, False)
                    rates = {watching: window(watching) for watching in order}
                    plain.append(rates[False])
                    watched.append(rates[True])
                    losses.append((rates[False] - rates[True]) / rates[False])
                    print(f"pair {index + 1}: {rates[False]:.0f} without, {rates[True]:.0f} with "
                          f"({losses[-1]:+.2%})", file=sys.stderr)  # fmt: skip
            finally:
                os.kill(watch.pid, signal.SIGCONT)
                _stop(watch)
    error = statistics.stdev(losses) / len(losses) ** 0.5 if len(losses) > 1 else 0.0
    print(f"| job | windows | steps/min without watch | with watch (--stall-after {stall_after}) "
          "| throughput lost: median of pairs (mean ± s.e.) | watch's CPU between samples |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    print(
        f"| {ranks}-rank gloo MLP, CPU | {pairs} pairs × {window_s:g} s | "
        f"{statistics.mean(plain):.0f} | {statistics.mean(watched):.0f} | "
        f"{statistics.median(losses):+.2%} ({statistics.mean(losses):+.2%} ± {error:.2%}) | "
        f"{statistics.mean(cpu):.3%} of a core (max {max(cpu):.3%}) |"
    )


def latency(stall_after: str, timeout_s: str) -> None:
    env = {"HANGDOC_SCENARIO_TIMEOUT": timeout_s, "HANGDOC_SCENARIO_WARMUP_STEPS": "10",
           "HANGDOC_SCENARIO_STEP_S": "0.5"}  # fmt: skip
    print("| hang | scenario | confirmed after the hang | report after the hang | ranks alive "
          "at the report | category, culprit (expected) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for what, scenario, category, culprits in HANGS:
        with (
            tempfile.TemporaryDirectory(prefix="hangdoc-bench-latency-") as tmp,
            launch(scenario, 4, Path(tmp) / "job", extra_env=env) as job,
        ):
            pids = ",".join(str(p.pid) for p in job.procs)
            watch = _watch(Path(tmp) / "watch", "--pid", pids, "--stall-after", stall_after)
            job.wait_ready(timeout=300)
            deadline = time.monotonic() + float(timeout_s) + 60
            found = None
            while found is None and time.monotonic() < deadline:
                found = next(iter((Path(tmp) / "watch").glob("hang-1/hang.json")), None)
                time.sleep(0.2)
            alive = sum(p.poll() is None for p in job.procs)
            hung = max(p.stat().st_mtime for p in job.ready_dir.glob("ready-*"))
            if found is None:
                print(f"| {what} | {scenario} | - | no report | - | - |")
                continue
            hang = json.loads(found.read_text())
            right = (hang["category"], hang["culprit_ranks"]) == (category, culprits)
            print(
                f"| {what} | `{scenario}` | {hang['confirmed_at'] - hung:.1f} s | "
                f"{hang['reported_at'] - hung:.1f} s | {alive} of 4 | "
                f"{'right' if right else 'WRONG'}: {hang['category']}, {hang['culprit_ranks']} |"
            )
            job.stop()
            code = watch.wait(timeout=60)
            print(f"  {scenario}: watch exited with {code} after the job ended", file=sys.stderr)


def healthy(minutes: float, stall_after: str) -> None:
    with tempfile.TemporaryDirectory(prefix="hangdoc-bench-healthy-") as tmp:
        with launch("slow", 3, Path(tmp) / "job") as job:
            pids = ",".join(str(p.pid) for p in job.procs)
            watch = _watch(Path(tmp) / "watch", "--pid", pids, "--stall-after", stall_after)
            job.wait_ready(timeout=300)
            time.sleep(minutes * 60)
            reports = len(list((Path(tmp) / "watch").glob("hang-*")))
        code = watch.wait(timeout=60)
    print("| healthy job | watched for | --stall-after | reports | watch's exit status |")
    print("|---|---|---|---|---|")
    print(f"| `slow` (3 ranks, steps of 0.15-0.8 s) | {minutes:g} min | {stall_after} s | "
          f"{reports} | {code} (the job ended, no hang reported) |")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["throughput", "latency", "healthy"])
    parser.add_argument("--window", type=float, default=10.0, help="seconds per window")
    parser.add_argument("--pairs", type=int, default=30, help="pairs of windows")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--stall-after", default="30")
    parser.add_argument("--pg-timeout", default="150")
    parser.add_argument("--minutes", type=float, default=5.0)
    args = parser.parse_args()
    # SIGTERM ends the script like Ctrl-C: the job's processes are killed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.what == "throughput":
        throughput(args.window, args.pairs, args.ranks, args.stall_after)
    elif args.what == "latency":
        latency(args.stall_after, args.pg_timeout)
    else:
        healthy(args.minutes, args.stall_after)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
