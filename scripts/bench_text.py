"""Big text inputs: a training log of --log-mb MB and a paste of --paste-mb MB, analyzed.

    python scripts/bench_text.py --code /tmp/base054 .          # before/after, 200 MB + 52 MB
    python scripts/bench_text.py --log-mb 20 --paste-mb 5 --repeat 3

Both inputs are GENERATED here (seeded; no real job's text), in formats the projects
print:

* the log (``train.log``): what a 64-rank job's combined stdout holds when it hangs after
  a long run: NCCL's init lines of every rank (``host:pid:tid [dev] NCCL INFO …``, NCCL
  2.21's wording), then rank 0's trainer lines (a logging-module timestamp, an epoch and
  step, loss, lr, grad norm, throughput), a validation and a checkpoint every 500 steps,
  a few NCCL INFO lines and Python warnings between, and at the end the watchdog's timeout
  of every rank but one (torch 2.4's ``[rankN]:[E… ProcessGroupNCCL.cpp:607] [Rank N]
  Watchdog caught collective operation timeout: WorkNCCL(…)``) and the rank that was
  still saving;
* the paste (``paste.txt``): what a person pastes for a big job: for each rank, a label
  written by hand (in several common forms), ``py-spy dump``'s text of that rank (its
  ``Process``/``Python`` header, the main thread in an all_reduce or, for one rank, in
  ``torch.save``, and three idle background threads) and the tail of the rank's log.

Each checkout's ``hangdoc analyze FILE --json OUT`` runs in a fresh process, the
checkouts interleaved --repeat times so they see the same load; wall clock of the whole
command, its CPU seconds with its children's (a worker's: on a loaded machine they are
the steadier measure, since the wall clock then waits for a core), and peak RSS of it
and its children. Both checkouts must give the same verdict,
primary finding and culprits (printed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RANKS = 64
SITE = "/opt/conda/lib/python3.11/site-packages"
T0 = 1_795_289_000.0  # 2026-11-20, the job's start
STUCK_SEQ = 41_873
SAVER = 37  # the rank still writing its checkpoint


def _stamp(seconds: float) -> str:
    whole = int(seconds)
    return (
        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(whole)) + f",{int(seconds % 1 * 1000):03d}"
    )


def _host(rank: int) -> str:
    return f"gpu-node-{rank // 8:03d}"


def _pid(rank: int) -> int:
    return 41_000 + rank * 7


def _nccl_init(rank: int) -> list[str]:
    dev, who = rank % 8, f"{_host(rank)}:{_pid(rank)}:{_pid(rank)}"
    head = f"{who} [{dev}] NCCL INFO"
    return [
        f"{head} Bootstrap : Using ib0:10.1.{rank // 8}.{rank % 8 + 10}<0>",
        f"{head} cudaDriverVersion 12040",
        f"{head} NET/Plugin: No plugin found (libnccl-net.so)",
        f"{head} NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.0.10<0>",
        f"{head} Using network IB",
        f"{head} ncclCommInitRank comm 0x55d{rank:05x}c0 rank {rank} nranks {RANKS} cudaDev "
        f"{dev} nvmlDev {dev} busId {dev + 1}a000 commId 0x7f3a9c21e5d04b18 - Init START",
        f"{head} Setting affinity for GPU {dev} to ffff,ffffffff",
        f"{head} comm 0x55d{rank:05x}c0 rank {rank} nRanks {RANKS} nNodes {RANKS // 8} "
        f"localRanks 8 localRank {dev} MNNVL 0",
        f"{head} Trees [0] {rank + 1 if rank + 1 < RANKS else -1}/-1/-1->{rank}->"
        f"{rank - 1 if rank else -1} [1] -1/-1/-1->{rank}->-1",
        f"{head} P2P Chunksize set to 524288",
        f"{head} Connected all rings",
        f"{head} Connected all trees",
        f"{head} ncclCommInitRank comm 0x55d{rank:05x}c0 rank {rank} nranks {RANKS} cudaDev "
        f"{dev} nvmlDev {dev} busId {dev + 1}a000 commId 0x7f3a9c21e5d04b18 - Init COMPLETE",
    ]


def _watchdog(rank: int, ms: int) -> list[str]:
    """torch 2.4's ProcessGroupNCCL lines when a collective times out (the rank prefix is
    torchrun's --tee)."""
    e = f"[rank{rank}]:[E1120 19:02:{rank % 60:02d}.{310412 + rank:09d} ProcessGroupNCCL.cpp"
    work = (
        f"WorkNCCL(SeqNum={STUCK_SEQ}, OpType=ALLREDUCE, NumelIn=262144000, "
        f"NumelOut=262144000, Timeout(ms)=600000)"
    )
    return [
        f"{e}:607] [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for "
        f"{ms} milliseconds before timing out.",
        f"{e}:1664] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error or "
        f"timeout) detected by watchdog at work: {STUCK_SEQ}, last enqueued NCCL work: "
        f"{STUCK_SEQ}, last completed NCCL work: {STUCK_SEQ - 1}.",
        f"{e}:621] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the "
        "asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
        "corrupted/incomplete data.",
    ]


def write_log(path: Path, size: int) -> None:
    rng = random.Random(20261120)
    with path.open("w") as out:
        written = 0
        first = ["NCCL version 2.21.5+cuda12.4"]
        for rank in range(RANKS):
            first += _nccl_init(rank)
        first.append(f"{_stamp(T0)} - INFO - trainer - world size {RANKS}; 1250 batches per epoch")
        text = "\n".join(first) + "\n"
        out.write(text)
        written += len(text)
        step, now = 0, T0 + 40.0
        tail_budget = 4096 * RANKS
        while written < size - tail_budget:
            now += 1.8
            loss = 2.0 + 8.0 / (step + 10) + rng.random() * 0.01
            lines = [
                f"{_stamp(now)} - INFO - trainer - epoch {step // 1250} step {step} | "
                f"loss {loss:.4f} | lr 3.00e-04 | grad_norm {0.8 + rng.random():.3f} | "
                f"{11800 + rng.randrange(400)} tokens/s | mem 61.2 GB"
            ]
            if step % 500 == 499:
                lines += [
                    f"{_stamp(now)} - INFO - trainer - running validation at step {step}",
                    f"{_stamp(now + 20)} - INFO - trainer - validation loss {loss + 0.1:.4f}",
                    f"{_stamp(now + 21)} - INFO - ckpt - saving checkpoint to "
                    f"/ckpt/step_{step}/model.pt",
                    f"{_stamp(now + 33)} - INFO - ckpt - checkpoint saved in 12.1 s",
                ]
                now += 33
            if step % 2000 == 1999:
                who = f"{_host(0)}:{_pid(0)}:{_pid(0) + 210}"
                lines += [
                    f"{who} [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/IPC/read",
                    f"{SITE}/torch/utils/checkpoint.py:295: FutureWarning: "
                    "`torch.cpu.amp.autocast(args...)` is deprecated.",
                ]
            text = "\n".join(lines) + "\n"
            out.write(text)
            written += len(text)
            step += 1
        end: list[str] = []
        for rank in range(RANKS):
            if rank == SAVER:
                end.append(
                    f"[rank{rank}]:{_stamp(now + 1)} - INFO - ckpt - saving checkpoint to "
                    f"/ckpt/step_{step}/model.pt"
                )
                continue
            end += _watchdog(rank, 600_000 + rng.randrange(900))
        out.write("\n".join(end) + "\n")


def _pyspy(rank: int) -> list[str]:
    pid = _pid(rank)
    site = "torch/distributed"
    main = [
        f'Thread {pid} (idle): "MainThread"',
    ]
    if rank == SAVER:
        main += [
            "    write (zipfile.py:1196)",
            "    write_record (torch/serialization.py:795)",
            "    _save (torch/serialization.py:1259)",
            "    save (torch/serialization.py:1003)",
            "    save_checkpoint (trainer/ckpt.py:41)",
            "    train_step (trainer/loop.py:96)",
        ]
    else:
        main += [
            f"    all_reduce ({site}/distributed_c10d.py:2501)",
            f"    wrapper ({site}/c10d_logger.py:83)",
            "    reduce_gradients (trainer/ddp.py:77)",
            "    train_step (trainer/loop.py:90)",
        ]
    main += [
        "    train_epoch (trainer/loop.py:140)",
        "    fit (trainer/loop.py:188)",
        "    main (train.py:52)",
        "    <module> (train.py:61)",
    ]
    threads = [
        f"Process {pid}: /opt/conda/bin/python -u train.py --config configs/llama_7b.yaml",
        "Python v3.11.9 (/opt/conda/bin/python3.11)",
        "",
        *main,
    ]
    for t, name in enumerate(("pin_memory", "Thread-2 (_monitor)", "QueueFeederThread")):
        threads += [
            "",
            f'Thread {pid + 100 + t} (idle): "{name}"',
            "    wait (threading.py:327)",
            "    get (queue.py:180)",
            "    _pin_memory_loop (torch/utils/data/_utils/pin_memory.py:54)",
            "    run (threading.py:982)",
            "    _bootstrap_inner (threading.py:1045)",
            "    _bootstrap (threading.py:1002)",
        ]
    return threads


_LABELS = ("rank {r}:", "=== rank {r} ===", "### Rank {r}", "[rank {r}]", "Rank {r} py-spy dump:")


def write_paste(path: Path, size: int) -> None:
    """Sections of rank after rank, each a label, a py-spy dump and a log tail, until
    ``size`` (about 19,500 ranks for 52 MB: a big job, every rank pasted)."""
    rng = random.Random(52)
    with path.open("w") as out:
        written, rank = 0, 0
        out.write("Here are the py-spy dumps of every rank and the end of each rank's log.\n\n")
        while written < size:
            label = _LABELS[rank % len(_LABELS)].format(r=rank)
            lines = [label, *_pyspy(rank), "", f"log of rank {rank} (last lines):"]
            now = T0 + 86_000
            for step in range(40_000, 40_012):
                now += 1.8
                lines.append(
                    f"[rank{rank}]:{_stamp(now)} - INFO - trainer - epoch 32 step {step} | "
                    f"loss {2.1 + rng.random() * 0.01:.4f} | lr 3.00e-04"
                )
            if rank != SAVER:
                lines += _watchdog(rank, 600_000 + rng.randrange(900))[:1]
            text = "\n".join(lines) + "\n\n"
            out.write(text)
            written += len(text)
            rank += 1


def _peak_children_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def _cpu_children_s() -> float:
    """CPU seconds (user + system) of the finished children and theirs (a worker)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_one(code: Path, target: Path) -> dict[str, Any]:
    """``hangdoc analyze`` of ``target`` by ``code`` in a fresh process (wall, peak RSS of
    the child, its answer). A wrapper process runs it, so ru_maxrss is this run's alone."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "findings.json"
        cmd = [sys.executable, "-m", "hangdoc", "analyze", str(target), "--json", str(out)]
        wrapper = [sys.executable, __file__, "--child", json.dumps(cmd)]
        env = dict(os.environ, PYTHONPATH=str(code))
        began = time.perf_counter()
        done = subprocess.run(wrapper, capture_output=True, text=True, env=env, cwd=code)
        wall = time.perf_counter() - began
        if not out.exists():
            raise SystemExit(f"{code}: hangdoc analyze {target} failed: {done.stderr[-2000:]}")
        doc = json.loads(out.read_text())
    child = json.loads(done.stdout.strip().splitlines()[-1])
    peak = child["peak_mb"]
    first = doc["findings"][0] if doc["findings"] else {}
    return {
        "seconds": round(wall, 2),
        "cpu_s": round(child["cpu_s"], 2),
        "peak_mb": round(peak),
        "answer": f"{doc['verdict']}: {first.get('rule')} {first.get('category')} "
        f"{first.get('culprit_ranks')}",
        "load": os.getloadavg()[0],
    }


def _child(cmd: list[str]) -> int:
    code = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    print(json.dumps({"peak_mb": _peak_children_mb(), "cpu_s": _cpu_children_s(), "exit": code}))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--log-mb", type=float, default=200.0)
    parser.add_argument("--paste-mb", type=float, default=52.0)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/hangdoc-bench-text"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--code", type=Path, nargs="+", default=[Path(__file__).parent.parent])
    parser.add_argument("--only", choices=("log", "paste"), default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(json.loads(args.child))
    args.workdir.mkdir(parents=True, exist_ok=True)
    inputs: list[tuple[str, Path]] = []
    if args.only in (None, "log"):
        log = args.workdir / f"train-{args.log_mb:g}MB.log"
        if not log.exists():
            write_log(log, int(args.log_mb * 2**20))
        inputs.append(("log", log))
    if args.only in (None, "paste"):
        paste = args.workdir / f"paste-{args.paste_mb:g}MB.txt"
        if not paste.exists():
            write_paste(paste, int(args.paste_mb * 2**20))
        inputs.append(("paste", paste))
    results: list[dict[str, Any]] = []
    print("| input | MB | code | s (runs) | CPU s (runs) | peak MB | load | answer |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, target in inputs:
        runs: dict[Path, list[dict[str, Any]]] = {code: [] for code in args.code}
        for _ in range(args.repeat):
            for code in args.code:
                runs[code].append(run_one(code.resolve(), target))
        mb = target.stat().st_size / 2**20
        for code, done in runs.items():
            seconds = sorted(r["seconds"] for r in done)
            cpu = sorted(r["cpu_s"] for r in done)
            loads = [r["load"] for r in done]
            print(
                f"| {kind} | {mb:.0f} | {code} | {seconds[0]} ({', '.join(map(str, seconds))}) "
                f"| {cpu[0]} ({', '.join(map(str, cpu))}) "
                f"| {max(r['peak_mb'] for r in done)} | {min(loads):.1f}-{max(loads):.1f} "
                f"| {done[0]['answer']} |",
                flush=True,
            )
            results.append({"input": kind, "mb": mb, "code": str(code), "runs": done})
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
