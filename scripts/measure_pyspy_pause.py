"""How long does ``hangdoc collect`` pause a rank? Measured by the rank itself.

    python scripts/measure_pyspy_pause.py              # 20 dumps per mode, a table
    python scripts/measure_pyspy_pause.py --dumps 5 --json

A target process runs a thread that ticks every millisecond and logs every gap longer
than 2 ms between two ticks: a process stopped by ptrace cannot tick, so the gap is the
pause as the rank lived it. The script runs ``py-spy dump`` on the target through
hangdoc's own runner (``collectors.pyspy.dump_stacks``), in the default (pausing) mode
and with ``--nonblocking``, and also sits idle for as long as the dumps took (the
baseline: what the scheduler alone costs on this machine). For each dump, the pause is
the longest gap that overlaps it. Needs py-spy and ptrace rights (root).
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
import textwrap
import time
from pathlib import Path

from hangdoc.collectors import pyspy

TARGET = textwrap.dedent(
    """
    import sys, threading, time

    def ticker(path):
        last = time.perf_counter()
        with open(path, "a", buffering=1) as out:
            while True:
                time.sleep(0.001)
                now = time.perf_counter()
                gap, last = now - last, now
                if gap > 0.002:
                    out.write(f"{time.time():.6f} {gap:.6f}\\n")

    def train_step():  # a rank computing in Python: it holds the GIL most of the time
        total = 0
        while True:
            for i in range(10_000):
                total += i * i

    def all_reduce():  # a hung rank: blocked in a collective, the GIL released
        threading.Event().wait()

    threading.Thread(target=ticker, args=(sys.argv[1],), daemon=True).start()
    print("ready", flush=True)
    train_step() if sys.argv[2] == "busy" else all_reduce()
    """
)


def _gaps(log: Path) -> list[tuple[float, float]]:
    """(start, end) of every logged gap."""
    out = []
    for line in log.read_text().splitlines():
        end, gap = (float(x) for x in line.split())
        out.append((end - gap, end))
    return out


def _pause(gaps: list[tuple[float, float]], start: float, end: float) -> float:
    """The longest gap overlapping [start, end] (0 when none was over 2 ms)."""
    return max((b - a for a, b in gaps if b >= start and a <= end), default=0.0)


def measure(dumps: int, busy: bool = False) -> dict[str, object]:
    exe = pyspy.find_pyspy()
    if exe is None:
        raise SystemExit("py-spy is not installed")
    with tempfile.TemporaryDirectory(prefix="hangdoc-pause-") as tmp:
        script, log = Path(tmp) / "target.py", Path(tmp) / "gaps.log"
        script.write_text(TARGET)
        cmd = [sys.executable, str(script), str(log), "busy" if busy else "hung"]
        target = subprocess.Popen(cmd,
                                  stdout=subprocess.PIPE, start_new_session=True)  # fmt: skip
        try:
            assert target.stdout is not None and target.stdout.readline().strip() == b"ready"
            time.sleep(0.5)  # let the target settle into its loop
            windows: dict[str, list[tuple[float, float, float]]] = {}
            for mode in ("blocking", "nonblocking", "baseline"):
                windows[mode] = []
                for _ in range(dumps):
                    start = time.time()
                    if mode == "baseline":
                        time.sleep(statistics.median(d for _, _, d in windows["blocking"]))
                        took = time.time() - start
                    else:
                        result = pyspy.dump_stacks(
                            target.pid, exe=exe, subprocesses=False,
                            nonblocking=mode == "nonblocking",
                        )  # fmt: skip
                        assert result.output is not None, result.reason
                        took = result.duration_s
                    windows[mode].append((start, time.time(), took))
                    time.sleep(0.05)
            time.sleep(0.1)
            gaps = _gaps(log)
            signalled = target.poll() is not None
        finally:
            os.killpg(target.pid, signal.SIGKILL)  # the script's own target
            target.wait()
    report: dict[str, object] = {
        "dumps_per_mode": dumps,
        "py_spy": pyspy.pyspy_version(exe),
        "target": "busy (holds the GIL)" if busy else "hung (blocked, GIL released)",
    }
    for mode, spans in windows.items():
        pauses = sorted(_pause(gaps, a, b) * 1000 for a, b, _ in spans)
        report[mode] = {
            "pause_ms_median": round(statistics.median(pauses), 1),
            "pause_ms_max": round(pauses[-1], 1),
            "dump_ms_median": round(statistics.median(d for _, _, d in spans) * 1000, 1),
        }
    report["target_died"] = signalled
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dumps", type=int, default=20, help="dumps per mode")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--busy", action="store_true", help="only the GIL-holding target")
    args = parser.parse_args()
    reports = [measure(args.dumps, busy=True)] if args.busy else [
        measure(args.dumps), measure(args.dumps, busy=True)]  # fmt: skip
    if args.json:
        print(json.dumps(reports))
        return
    for report in reports:
        print(f"\n{report['py_spy']}, {args.dumps} dumps per mode, target {report['target']}")
        print(f"{'mode':<12} {'pause median':>13} {'pause max':>10} {'dump median':>12}")
        for mode in ("blocking", "nonblocking", "baseline"):
            row = report[mode]
            assert isinstance(row, dict)
            print(f"{mode:<12} {row['pause_ms_median']:>10} ms {row['pause_ms_max']:>7} ms "
                  f"{row['dump_ms_median']:>9} ms")  # fmt: skip


if __name__ == "__main__":
    main()
