"""Every input kind at once: time and peak memory of ``hangdoc analyze`` against ranks.

    python scripts/bench_all.py --ranks 1024 4096 16384 --root /tmp/hangdoc-all
    python scripts/bench_all.py --ranks 16384 --root /big/disk --keep --repeat 3

For each size N it builds the tree a whole-job collection (``hangdoc collect --slurm-job``)
leaves: one dump per node of 8 ranks, in the dump format (collectors/dumpformat.py), and
per rank

* ``process.json`` (/proc facts of two samples),
* two py-spy samples (``pyspy.0.json``, ``pyspy.1.json``): the main thread where the
  rank's flight recorder says it waits (torch 2.13-shaped frames) and three idle threads,
* its flight recorder dump (``flight_recorder.file.comm_lib_trace_rank_R``, 2,000 entries
  in torch's exact pickle format: ``scripts/fr_synth.py``'s job, with its three planted
  problems),
* its stdout log (``logs/stdout.rankR.out``, ``--log-mb`` MB): NCCL's init lines for the
  three communicators, the trainer's step lines, periodic evaluation and checkpoint lines,

then runs ``hangdoc analyze TREE --no-summaries --json -`` (raw files) in a fresh process,
then writes every node's ``summary.json`` (``write_node_summary``, what each node runs
after collecting; timed apart, since the nodes do it in parallel) and runs ``hangdoc
analyze TREE --json -`` (from summaries). Each analysis must name the three planted
culprits; the primary finding of both is printed.

Time is wall clock of the whole command (start-up and output included), and the CPU
seconds of it and its workers; memory is the peak, over the run, of the summed RSS of the
command and its worker processes (sampled from /proc every 50 ms) and of their summed
PSS: a worker forked from the command counts the pages it shares with it again in
summed RSS, PSS counts a shared page once in all, so PSS is what they take together. The machine is
shared: ``--repeat`` runs each analysis several times and the table gives the best and
the spread. Generated trees are removed unless ``--keep``; the FR dumps are generated
once per size into ``--root``/fr-N and hard-linked into the tree.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from fr_synth import _FRAMES, TP, Job  # noqa: E402

from hangdoc.collectors.dumpformat import (  # noqa: E402
    FORMAT,
    MANIFEST_NAME,
    PROCESS_FORMAT,
    PROCESS_NAME,
    pyspy_file_name,
    rank_dir_name,
)

RANKS_PER_NODE = 8
SITE = "/opt/venv/lib/python3.11/site-packages"
T0 = 1_795_289_000.0  # the job's start (2026-11-20), seconds


# --- what each rank was doing --------------------------------------------------------------


def _frame(name: str, filename: str, line: int) -> dict[str, object]:
    return {"name": name, "filename": filename, "module": None,
            "short_filename": filename.rsplit("/", 1)[-1], "line": line, "locals": None}  # fmt: skip


def _waiting_in(job: Job, rank: int) -> str | None:
    """The op a rank's flight recorder leaves it in, None for the rank busy elsewhere."""
    ops = list(job.ops(rank))
    pending = [op for _, op, _, state in ops if state != "completed"]
    if not pending:
        return None
    return pending[0]


def _main_stack(job: Job, rank: int) -> list[dict[str, object]]:
    """The main thread, innermost first: in the rank's stuck collective, or saving."""
    op = _waiting_in(job, rank)
    if op is None:  # the rank that never issued the last all_reduce: writing a checkpoint
        inner = [_frame("write", "/usr/lib/python3.11/zipfile.py", 1196),
                 _frame("write_record", f"{SITE}/torch/serialization.py", 795),
                 _frame("_save", f"{SITE}/torch/serialization.py", 1259),
                 _frame("save", f"{SITE}/torch/serialization.py", 1003),
                 _frame("save_checkpoint", "/srv/job/trainer/ckpt.py", 41),
                 _frame("train_step", "/srv/job/trainer/loop.py", 96)]  # fmt: skip
        outer = _FRAMES[16:]
    else:
        inner = [_frame("wait", f"{SITE}/torch/distributed/distributed_c10d.py", 2781),
                 _frame(op, _FRAMES[0][1], 3000)]  # fmt: skip
        outer = _FRAMES[1:]
    return inner + [_frame(name, path, line) for name, path, line in outer]


def _threads(job: Job, rank: int, pid: int) -> list[dict[str, object]]:
    threads = [{"pid": pid, "thread_id": 140000000000000 + rank, "thread_name": "MainThread",
                "os_thread_id": pid, "active": False, "owns_gil": False,
                "frames": _main_stack(job, rank), "process_info": None}]  # fmt: skip
    for t in range(3):  # background threads as a real rank has (pin memory, logging, store)
        threads.append({"pid": pid, "thread_id": 140000000001000 + t, "thread_name": f"bg{t}",
                        "os_thread_id": pid + 50_000 + t, "active": False, "owns_gil": False,
                        "frames": [_frame("wait", "/usr/lib/python3.11/threading.py", 327),
                                   _frame("run", "/usr/lib/python3.11/threading.py", 982)],
                        "process_info": None})  # fmt: skip
    return threads


# --- its log --------------------------------------------------------------------------------


def _nccl_init(job: Job, rank: int, host: str, pid: int) -> list[str]:
    dev = rank % RANKS_PER_NODE
    who = f"{host}:{pid}:{pid}"
    lines = [
        f"{who} [{dev}] NCCL INFO Bootstrap : Using ib0:10.{rank >> 16 & 255}.{rank >> 8 & 255}.{rank & 255}<0>",
        f"{who} [{dev}] NCCL INFO cudaDriverVersion 12040",
        f"{who} [{dev}] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)",
        f"{who} [{dev}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>",
        f"{who} [{dev}] NCCL INFO Using network IB",
    ]
    if rank == 0:
        lines.insert(1, "NCCL version 2.21.5+cuda12.4")
    comms = [("0", job.ranks, rank), (job.tp_group(rank)[0], TP, rank % TP),
             (job.dp_group(rank)[0], job.ranks // TP, rank // TP)]  # fmt: skip
    for number, (name, size, local) in enumerate(comms):
        comm = f"0x55{rank:08x}{number:02x}"
        head = f"{who} [{dev}] NCCL INFO"
        lines += [
            f"{head} ncclCommInitRank comm {comm} rank {local} nranks {size} cudaDev {dev} "
            f"nvmlDev {dev} busId {dev + 1}a000 commId 0x{int(name) + 7:016x} - Init START",
            f"{head} Setting affinity for GPU {dev} to ffff,ffffffff",
            f"{head} comm {comm} rank {local} nRanks {size} nNodes {max(1, size // 8)} "
            f"localRanks {min(size, 8)} localRank {dev} MNNVL 0",
            f"{head} Channel 00/32 :    0   1   2   3   4   5   6   7",
            f"{head} Trees [0] -1/-1/-1->{local}->{(local + 1) % size} [1] -1/-1/-1->{local}->-1",
            f"{head} P2P Chunksize set to 524288",
            f"{head} Connected all rings",
            f"{head} Connected all trees",
            f"{head} ncclCommInitRank comm {comm} rank {local} nranks {size} cudaDev {dev} "
            f"nvmlDev {dev} busId {dev + 1}a000 commId 0x{int(name) + 7:016x} - Init COMPLETE",
        ]
    return lines


def _stamp(seconds: float) -> str:
    whole = int(seconds)
    gm = time.gmtime(whole)
    return time.strftime("%Y-%m-%d %H:%M:%S", gm) + f",{int((seconds - whole) * 1000):03d}"


def write_log(path: Path, job: Job, rank: int, host: str, pid: int, size: int) -> float:
    """About ``size`` bytes of the rank's stdout: init, then step lines up to the hang;
    the time of its last line."""
    rng = random.Random(rank)
    out = [f"{_stamp(T0)} - INFO - trainer - world size {job.ranks}, tp {TP}, "
           f"dp {job.ranks // TP}; dataset has 1250 batches per epoch"]  # fmt: skip
    out += _nccl_init(job, rank, host, pid)
    budget = size - sum(len(line) + 1 for line in out)
    steps: list[str] = []
    step, now = 0, T0 + 30.0
    while budget > 0:
        now += 1.75
        loss = 2.0 + 8.0 / (step + 10) + rng.random() * 0.01
        line = (f"{_stamp(now)} - INFO - trainer - epoch {step // 1250} step {step} | loss "
                f"{loss:.4f} | lr 3.00e-04 | grad_norm {0.8 + rng.random():.3f} | "
                f"{11800 + rng.randrange(400)} tokens/s")  # fmt: skip
        steps.append(line)
        budget -= len(line) + 1
        if step % 500 == 499:
            more = [f"{_stamp(now)} - INFO - trainer - running validation at step {step}",
                    f"{_stamp(now + 20)} - INFO - trainer - validation loss {loss + 0.1:.4f}",
                    f"{_stamp(now + 21)} - INFO - ckpt - saving checkpoint to "
                    f"/ckpt/step_{step}/shard_{rank}.pt",
                    f"{_stamp(now + 33)} - INFO - ckpt - checkpoint saved in 12.1 s"]  # fmt: skip
            steps += more
            budget -= sum(len(line) + 1 for line in more)
            now += 33
        step += 1
    if _waiting_in(job, rank) is None:
        steps.append(f"{_stamp(now + 1)} - INFO - ckpt - saving checkpoint to "
                     f"/ckpt/step_{step}/shard_{rank}.pt")  # fmt: skip
    path.write_text("\n".join(out + steps) + "\n")
    return now


# --- the tree -------------------------------------------------------------------------------


def _write_node(args: tuple[Path, Path, int, int, int]) -> None:
    root, fr_dir, ranks, node, log_bytes = args
    job = Job(ranks=ranks)
    host = f"node{node:05d}"
    dump = root / host
    dump.mkdir(parents=True, exist_ok=True)
    records, steps = [], [{"step": "discover", "status": "ok", "rank": None, "pid": None,
                           "sample": None, "reason": None, "duration_s": 0.01}]  # fmt: skip
    first = node * RANKS_PER_NODE
    mine = range(first, min(ranks, first + RANKS_PER_NODE))
    logs = {rank: dump / rank_dir_name(rank, 10_000 + rank) / "logs" for rank in mine}
    last_line = 0.0
    for rank, folder in logs.items():  # the logs first: collection is 10 minutes after them
        folder.mkdir(parents=True, exist_ok=True)
        last = write_log(
            folder / f"stdout.rank{rank}.out", job, rank, host, 10_000 + rank, log_bytes
        )
        last_line = max(last_line, last)
    when = last_line + 600.0
    for rank in mine:
        pid = 10_000 + rank
        local = rank - first
        folder = dump / rank_dir_name(rank, pid)
        stacks = json.dumps(_threads(job, rank, pid))
        for sample in range(2):
            (folder / pyspy_file_name(sample)).write_text(stacks)
            steps.append({"step": "pyspy", "status": "ok", "rank": rank, "pid": pid,
                          "sample": sample, "reason": None, "duration_s": 0.02,
                          "file": f"{folder.name}/{pyspy_file_name(sample)}"})  # fmt: skip
        samples = [{"index": i, "time": when + 3 * i, "alive": True, "state": "S",
                    "wchan": "futex_wait_queue", "cpu_ticks": 90_000,
                    "threads": [{"tid": pid, "name": "python", "state": "S",
                                 "wchan": "futex_wait_queue", "cpu_ticks": 90_000,
                                 "voluntary_ctxt_switches": 10, "nonvoluntary_ctxt_switches": 1}],
                    "io": {"rchar": 5, "wchar": 5, "syscr": 1, "syscw": 1},
                    "output": {"stdout": {"path": f"/srv/job/logs/{rank}/stdout.log",
                                          "size": log_bytes}}}
                   for i in range(2)]  # fmt: skip
        (folder / PROCESS_NAME).write_text(json.dumps({
            "format": PROCESS_FORMAT, "pid": pid, "rank": rank, "local_rank": local,
            "world_size": ranks, "local_world_size": RANKS_PER_NODE, "group_rank": node,
            "host": host, "cmdline": ["python", "/srv/job/train.py"], "start_time": T0,
            "parent_pid": 1, "env": {"RANK": str(rank), "WORLD_SIZE": str(ranks)},
            "samples": samples,
        }))  # fmt: skip
        fr_name = f"flight_recorder.file.comm_lib_trace_rank_{rank}"
        os.link(fr_dir / f"comm_lib_trace_rank_{rank}", folder / fr_name)
        for step, file in (("flight_recorder", fr_name), ("logs", f"logs/stdout.rank{rank}.out")):
            steps.append({"step": step, "status": "ok", "rank": rank, "pid": pid, "sample": None,
                          "reason": None, "duration_s": 0.05, "file": f"{folder.name}/{file}"})  # fmt: skip
        records.append({"rank": rank, "pid": pid, "local_rank": local, "world_size": ranks,
                        "local_world_size": RANKS_PER_NODE, "group_rank": node,
                        "dir": folder.name, "how_found": "env-scan"})  # fmt: skip
    manifest = {"format": FORMAT, "hangdoc_version": "bench", "host": host,
                "started_at": when - 1, "finished_at": when + 8, "complete": True,
                "options": {"samples": 2, "interval_s": 3.0, "native": False,
                            "subprocesses": True, "nonblocking": False, "pids_requested": [],
                            "all": True, "step_timeout_s": 20.0},
                "samples": [{"index": 0, "time": when}, {"index": 1, "time": when + 3}],
                "ranks": records, "steps": steps, "py_spy": {}, "warnings": []}  # fmt: skip
    (dump / MANIFEST_NAME).write_text(json.dumps(manifest))


def _write_fr(args: tuple[Path, int, int, int]) -> None:
    directory, ranks, start, stop = args
    Job(ranks=ranks).write(directory, range(start, stop))


def build(root: Path, ranks: int, log_mb: float, jobs: int) -> tuple[Path, float]:
    """The tree of ``ranks`` ranks under ``root`` (FR dumps reused); seconds it took."""
    began = time.perf_counter()
    fr_dir = root / f"fr-{ranks}"
    if not (fr_dir / ".complete").exists():
        shutil.rmtree(fr_dir, ignore_errors=True)
        fr_dir.mkdir(parents=True)
        step = max(1, ranks // (jobs * 8))
        chunks = [(fr_dir, ranks, s, min(s + step, ranks)) for s in range(0, ranks, step)]
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            pool.map(_write_fr, chunks)
        (fr_dir / ".complete").write_text("")
    tree, done = root / f"job-{ranks}", root / f"job-{ranks}.complete"  # (not in the tree)
    if not done.exists():
        shutil.rmtree(tree, ignore_errors=True)
        nodes = (ranks + RANKS_PER_NODE - 1) // RANKS_PER_NODE
        work = [(tree, fr_dir, ranks, node, int(log_mb * 1024 * 1024)) for node in range(nodes)]
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for _ in pool.imap_unordered(_write_node, work, chunksize=4):
                pass
        done.write_text("")
    return tree, time.perf_counter() - began


_SUMMARIZE = """
import sys
from pathlib import Path
from multiprocessing import Pool
from hangdoc.analyzer.summarize.write import write_node_summary
def one(dump):
    return write_node_summary(Path(dump)).stat().st_size
if __name__ == "__main__":
    with Pool(int(sys.argv[1])) as pool:
        print(sum(pool.map(one, sys.argv[2:], chunksize=8)))
"""


def summarize(tree: Path, jobs: int, code: Path) -> tuple[float, int]:
    """Every node's summary.json, as the nodes write them; (seconds, bytes in all)."""
    dumps = sorted(str(p) for p in tree.iterdir() if p.is_dir())
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _SUMMARIZE, str(jobs), *dumps], check=True,
                          capture_output=True, text=True, cwd=code,
                          env=dict(os.environ, PYTHONPATH=str(code)))  # fmt: skip
    return time.perf_counter() - began, int(done.stdout.split()[-1])


def _drop_summaries(tree: Path) -> None:
    for dump in tree.iterdir():
        (dump / "summary.json").unlink(missing_ok=True)


# --- measuring ------------------------------------------------------------------------------


def _tree_memory_kb(pid: int) -> tuple[int, int, frozenset[int]]:
    """Summed RSS and summed PSS of ``pid`` and its descendants, from /proc (0 once gone),
    and the pids of its children (which workers are running: the phase of the run).

    Summed RSS counts a forked worker's inherited pages again in every worker (a worker
    forked from a 700 MB analysis "uses" 700 MB it shares with it); PSS counts a page
    shared by n of them 1/n in each: what they take of the machine together."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        child = int(entry)
        children.setdefault(int(fields[1]), []).append(child)
        rss[child] = int(fields[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    total, pss, todo = 0, 0, [pid]
    while todo:
        current = todo.pop()
        total += rss.get(current, 0)
        try:
            with open(f"/proc/{current}/smaps_rollup") as handle:
                pss += next((int(line.split()[1]) for line in handle if line.startswith("Pss:")), 0)
        except (OSError, ValueError):
            pass
        todo.extend(children.get(current, ()))
    return total, pss, frozenset(c for c in children.get(pid, ()) if not _helper(c))


def _helper(pid: int) -> bool:
    """Whether a child is multiprocessing's resource tracker: started with a fork server's
    first pool, it stays until the command ends, so it tells no phase (its memory counts)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"multiprocessing.resource_tracker" in handle.read()
    except OSError:
        return False


class _Phases:
    """The peak summed PSS of each phase of a raw run, told apart by its worker processes:
    the rank logs' text workers, then the flight recorder workers (a new set of children),
    then the analysis (the command alone after its last workers ended).

    A straight line through the whole run's peaks at two sizes mixes phases: at 1,024
    ranks the peak is the text phase's (two text workers of about 100 MB each, a constant),
    at 4,096 another phase's, so its slope is not any phase's growth; each phase's own
    line is (docs/performance.md, the speed7 runs)."""

    def __init__(self) -> None:
        self.peaks: list[int] = []  # peak PSS (KB) of each set of workers met, in order
        self.current: frozenset[int] = frozenset()
        self.alone = 0  # peak PSS (KB) while no worker ran, since the last workers ended

    def sample(self, pss_kb: int, children: frozenset[int]) -> None:
        if children:
            if not children & self.current:  # another set of workers: the next phase
                self.peaks.append(0)
                self.alone = 0
            self.current = children
            self.peaks[-1] = max(self.peaks[-1], pss_kb)
        else:
            self.alone = max(self.alone, pss_kb)

    def as_mb(self) -> dict[str, int]:
        names = ["text_phase_pss_mb", "fr_phase_pss_mb"]
        out = {name: round(kb / 1024) for name, kb in zip(names, self.peaks, strict=False)}
        out["analysis_phase_pss_mb"] = round(self.alone / 1024)
        return out


def analyze(tree: Path, raw: bool, code: Path) -> dict[str, Any]:
    """One ``hangdoc analyze`` of the tree in a fresh process: wall, peak memory, answer."""
    cmd = [sys.executable, "-m", "hangdoc", "analyze", str(tree), "--json", "-", "--quiet"]
    if raw:
        cmd.append("--no-summaries")
    env = dict(os.environ, PYTHONPATH=str(code))
    chunks: list[bytes] = []
    with tempfile.TemporaryFile() as errors:
        began, before = time.perf_counter(), os.times()
        # run from the checkout: ``-m`` puts the working directory first on the path
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, env=env, cwd=code)
        stdout = proc.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: chunks.append(stdout.read()))
        reader.start()
        peak_kb = peak_pss_kb = 0
        phases = _Phases()
        while proc.poll() is None:
            rss_kb, pss_kb, children = _tree_memory_kb(proc.pid)
            peak_kb, peak_pss_kb = max(peak_kb, rss_kb), max(peak_pss_kb, pss_kb)
            phases.sample(pss_kb, children)
            time.sleep(0.05)
        wall = time.perf_counter() - began
        proc.wait()
        after = os.times()
        # CPU seconds of the command and its workers (reaped by it, then by us): on a
        # shared machine the wall clock measures the neighbours too, these do not
        cpu = (after.children_user - before.children_user) + (
            after.children_system - before.children_system
        )
        reader.join()
        errors.seek(0)
        err = errors.read().decode(errors="replace")
    if proc.returncode not in (0, 1):
        raise SystemExit(f"hangdoc analyze failed ({proc.returncode}): {err[-2000:]}")
    doc = json.loads(b"".join(chunks))
    culprits = {r for f in doc["findings"] for r in f["culprit_ranks"]}
    job = Job(ranks=len(doc["ranks"]["seen"]) or 1)
    planted = {r for ranks in job.expected().values() for r in ranks}
    first = doc["findings"][0] if doc["findings"] else {}
    return {
        "seconds": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "peak_mb": round(peak_kb / 1024),
        "peak_pss_mb": round(peak_pss_kb / 1024),
        **phases.as_mb(),
        "verdict": doc["verdict"],
        "primary": f"{first.get('rule')} {first.get('category')} {first.get('culprit_ranks')}",
        "planted_found": planted <= culprits,
        "ranks_seen": len(doc["ranks"]["seen"]),
        "findings": len(doc["findings"]),
    }


def _spread(runs: list[dict[str, Any]], key: str) -> str:
    values = sorted(r[key] for r in runs)
    if len(values) == 1:
        return f"{values[0]}"
    return f"{values[0]} ({values[0]}-{values[-1]})"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--log-mb", type=float, default=1.0)
    parser.add_argument("--root", type=Path, default=Path("/tmp/hangdoc-bench-all"))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the generated trees")
    parser.add_argument("--no-summaries", action="store_true", help="raw files only")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--code", type=Path, default=HERE.parent,
                        help="the hangdoc checkout to measure (another worktree: before/after)")  # fmt: skip
    args = parser.parse_args()
    print(
        "| ranks | input on disk | analyze raw files: s (CPU s), peak MB (PSS) | node summaries written "
        "(on the nodes), s | analyze from summaries: s (CPU s), peak MB (PSS) | planted culprits named | "
        "primary finding |"
    )
    print("|---|---|---|---|---|---|---|")
    rows = []
    for ranks in sorted(args.ranks):
        tree, built_s = build(args.root, ranks, args.log_mb, args.jobs)
        _drop_summaries(tree)
        disk = subprocess.run(["du", "-sh", "-L", str(tree)], capture_output=True, text=True)
        print(f"# {ranks} ranks: tree {tree} ({disk.stdout.split()[0]}) ready in {built_s:.0f} s",
              flush=True)  # fmt: skip
        raws = [analyze(tree, True, args.code) for _ in range(args.repeat)]
        row: dict[str, Any] = {"ranks": ranks, "raw": raws}
        summary_cells = ["not run", "not run"]
        if not args.no_summaries:
            summarized_s, summary_bytes = summarize(tree, args.jobs, args.code)
            fromsum = [analyze(tree, False, args.code) for _ in range(args.repeat)]
            row.update(summaries_s=summarized_s, summary_bytes=summary_bytes, summary=fromsum)
            summary_cells = [
                f"{summarized_s:.0f} ({summary_bytes / 2**20:.0f} MB)",
                f"{_spread(fromsum, 'seconds')} (CPU {_spread(fromsum, 'cpu_s')}), "
                f"{max(r['peak_mb'] for r in fromsum)} (PSS {max(r['peak_pss_mb'] for r in fromsum)})",
            ]
        found = all(r["planted_found"] for r in raws + row.get("summary", []))
        print(f"| {ranks:,} | {disk.stdout.split()[0]} | {_spread(raws, 'seconds')} "
              f"(CPU {_spread(raws, 'cpu_s')}), {max(r['peak_mb'] for r in raws)} "
              f"(PSS {max(r['peak_pss_mb'] for r in raws)}) | "
              f"{summary_cells[0]} | {summary_cells[1]} | "
              f"{'yes' if found else 'NO'} | {raws[0]['primary']} |", flush=True)  # fmt: skip
        rows.append(row)
        if not args.keep:
            shutil.rmtree(tree, ignore_errors=True)
            (args.root / f"job-{ranks}.complete").unlink(missing_ok=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
