"""How analysis time and memory grow with the number of ranks (a benchmark, not a test).

    python scripts/bench_analyze.py                       # 64 … 4096 ranks
    python scripts/bench_analyze.py --ranks 1024 16384    # chosen sizes

For each size it writes a synthetic dump in the real dump format (manifest.json,
rank<R>/process.json, two py-spy JSON samples per rank with torch 2.13-shaped frames;
ranks 0..N-2 wait in all_gather, the last rank is in torch.save), then runs
``load → rules → JSON → HTML`` in a fresh process and reports wall time per phase and
peak RSS. Sizes run smallest first; cost should grow about linearly.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hangdoc.collectors.dumpformat import FORMAT, PROCESS_FORMAT, pyspy_file_name, rank_dir_name

SITE = "/opt/venv/lib/python3.11/site-packages"


def _frame(name: str, filename: str, line: int) -> dict[str, object]:
    return {"name": name, "filename": filename, "module": None,
            "short_filename": filename.rsplit("/", 1)[-1], "line": line, "locals": None}  # fmt: skip


def _stack(rank: int, culprit: bool) -> list[dict[str, object]]:
    user = [_frame("train_step", "/srv/job/train.py", 88), _frame("main", "/srv/job/train.py", 140),
            _frame("<module>", "/srv/job/train.py", 150)]  # fmt: skip
    if culprit:
        inner = [_frame("Event.wait", "/usr/lib/python3.11/threading.py", 629),
                 _frame("_save", f"{SITE}/torch/serialization.py", 1259),
                 _frame("save", f"{SITE}/torch/serialization.py", 1003),
                 _frame("save_checkpoint", "/srv/job/train.py", 72)]  # fmt: skip
    else:
        inner = [_frame("all_gather", f"{SITE}/torch/distributed/distributed_c10d.py", 4287),
                 _frame("_exception_logger.<locals>.wrapper",
                        f"{SITE}/torch/distributed/c10d_logger.py", 83)]  # fmt: skip
    pid = 10_000 + rank
    threads = [{"pid": pid, "thread_id": 140000000000000 + rank, "thread_name": "MainThread",
                "os_thread_id": pid, "active": False, "owns_gil": False,
                "frames": inner + user, "process_info": None}]  # fmt: skip
    for t in range(3):  # background threads as a real rank has (pin memory, logging, gloo)
        threads.append({"pid": pid, "thread_id": 140000000001000 + t, "thread_name": f"bg{t}",
                        "os_thread_id": pid + 50_000 + t, "active": False, "owns_gil": False,
                        "frames": [_frame("Condition.wait", "/usr/lib/python3.11/threading.py", 327),
                                   _frame("Thread.run", "/usr/lib/python3.11/threading.py", 982)],
                        "process_info": None})  # fmt: skip
    return threads


def build_dump(root: Path, ranks: int, ranks_per_host: int = 8) -> list[Path]:
    """One dump dir per host of ``ranks_per_host`` ranks, as collect writes them per node."""
    dumps = []
    for host_index in range(0, ranks, ranks_per_host):
        host = f"node{host_index // ranks_per_host:05d}"
        dump = root / host
        dump.mkdir(parents=True)
        rank_records = []
        for rank in range(host_index, min(ranks, host_index + ranks_per_host)):
            pid = 10_000 + rank
            rdir = dump / rank_dir_name(rank, pid)
            rdir.mkdir()
            local = rank - host_index
            stack = json.dumps(_stack(rank, rank == ranks - 1))
            for sample in range(2):
                (rdir / pyspy_file_name(sample)).write_text(stack)
            proc_samples = [{"index": i, "time": 1000.0 + 3 * i, "alive": True, "state": "S",
                             "wchan": "futex_wait_queue", "cpu_ticks": 500,
                             "threads": [{"tid": pid, "name": "python", "state": "S",
                                          "wchan": "futex_wait_queue", "cpu_ticks": 500,
                                          "voluntary_ctxt_switches": 10,
                                          "nonvoluntary_ctxt_switches": 1}],
                             "io": {"rchar": 5, "wchar": 5, "syscr": 1, "syscw": 1},
                             "output": {}} for i in range(2)]  # fmt: skip
            (rdir / "process.json").write_text(json.dumps({
                "format": PROCESS_FORMAT, "pid": pid, "rank": rank, "local_rank": local,
                "world_size": ranks, "local_world_size": ranks_per_host,
                "group_rank": host_index // ranks_per_host, "host": host,
                "cmdline": ["python", "train.py"], "start_time": 900.0, "parent_pid": 1,
                "env": {"RANK": str(rank), "WORLD_SIZE": str(ranks)}, "samples": proc_samples,
            }))  # fmt: skip
            rank_records.append({"rank": rank, "pid": pid, "local_rank": local,
                                 "world_size": ranks, "local_world_size": ranks_per_host,
                                 "group_rank": host_index // ranks_per_host,
                                 "dir": rdir.name, "how_found": "env-scan"})  # fmt: skip
        manifest = {"format": FORMAT, "hangdoc_version": "bench", "host": host,
                    "started_at": 1000.0, "finished_at": 1007.0, "complete": True,
                    "options": {"samples": 2, "interval_s": 3.0, "native": False,
                                "subprocesses": True, "nonblocking": False, "pids_requested": [],
                                "all": True, "step_timeout_s": 20.0},
                    "samples": [{"index": 0, "time": 1000.0}, {"index": 1, "time": 1003.0}],
                    "ranks": rank_records, "steps": [], "py_spy": {}, "warnings": []}  # fmt: skip
        (dump / "manifest.json").write_text(json.dumps(manifest))
        dumps.append(dump)
    return dumps


def _measure(root: Path, html: bool) -> dict[str, float]:
    """Runs in the child: one analysis, phase by phase."""
    from hangdoc.analyzer.engine import analyze
    from hangdoc.analyzer.loading.loader import load_paths

    t0 = time.perf_counter()
    evidence = load_paths([root])
    t1 = time.perf_counter()
    diagnosis = analyze(evidence)
    t2 = time.perf_counter()
    json.dumps(diagnosis.to_json())
    t3 = time.perf_counter()
    if html:
        from hangdoc.analyzer.render.html import render_html

        render_html(diagnosis)
    t4 = time.perf_counter()
    assert diagnosis.findings[0].culprit_ranks == (len(evidence.ranked()) - 1,)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"load_s": t1 - t0, "rules_s": t2 - t1, "json_s": t3 - t2, "html_s": t4 - t3,
            "total_s": t4 - t0, "peak_mb": peak_mb}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="*", default=[64, 256, 1024, 4096])
    parser.add_argument("--no-html", action="store_true")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_measure(args.child, not args.no_html)))
        return 0
    print(f"{'ranks':>7} {'load s':>8} {'rules s':>8} {'json s':>7} {'html s':>7} "
          f"{'total s':>8} {'peak MB':>8}")  # fmt: skip
    for ranks in sorted(args.ranks):
        with tempfile.TemporaryDirectory(prefix="hangdoc-bench-") as tmp:
            build_dump(Path(tmp), ranks)
            cmd = [sys.executable, __file__, "--child", tmp] + (
                ["--no-html"] if args.no_html else []
            )
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"{ranks:>7} failed: {done.stderr.strip()[-400:]}")
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{ranks:>7} {r['load_s']:8.2f} {r['rules_s']:8.2f} {r['json_s']:7.2f} "
                  f"{r['html_s']:7.2f} {r['total_s']:8.2f} {r['peak_mb']:8.0f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
