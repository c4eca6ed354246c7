"""How comparing the ranks' logs grows with ranks and log size (a benchmark, not a test).

    python scripts/bench_log_compare.py                          # 64 … 1024 ranks × 20 MB
    python scripts/bench_log_compare.py --ranks 1024 --mb 20 --dense 64

Each rank's log is a training log (`[rankR]: epoch E step S loss …` lines, a dataset size
line in the head); rank N-1 has fewer batches and stops on "saving checkpoint shard …".
Logs are compared on their windows (the first 64 KiB and the last 512 KiB of each file:
analyzer/parsers/logs/window.py), so the middle of a file is never read. By default the
middle is a sparse hole (the file has its full size on disk for the reader, which seeks
past it); ``--dense N`` also writes N fully written files of the same size and times them
beside, to show that the middle costs nothing. Each size runs in a fresh process; the
table gives the wall time of reading the windows, of the comparison (templates, counts,
unfinished actions), and the peak RSS.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAD_LINES = 600
TAIL_LINES = 5000


def _lines(rank: int, world: int, first_step: int, count: int) -> list[str]:
    out = []
    for step in range(first_step, first_step + count):
        out.append(f"[rank{rank}]: epoch 3 step {step} loss {2.0 / (step + 1):.4f} lr 0.0003\n")
        if step % 50 == 0:
            out.append(f"[rank{rank}]: throughput {1000 + step % 7} tokens/s on host node-{rank}\n")
    return out


def write_log(path: Path, rank: int, world: int, size: int, dense: bool) -> None:
    culprit = rank == world - 1
    batches = 1248 if culprit else 1250
    head = [f"[rank{rank}]: world size {world}, dataset has {batches} batches\n"]
    head += _lines(rank, world, 0, HEAD_LINES)
    last = 99_000 if culprit else 99_003
    tail = _lines(rank, world, last - TAIL_LINES, TAIL_LINES)
    if culprit:
        tail.append(f"[rank{rank}]: saving checkpoint shard {rank} to /ckpt/step_{last} ...\n")
    head_bytes = "".join(head).encode()
    tail_bytes = "".join(tail).encode()
    with path.open("wb") as handle:
        handle.write(head_bytes)
        middle = size - len(head_bytes) - len(tail_bytes)
        if dense:
            filler = "".join(_lines(rank, world, HEAD_LINES, 2000)).encode()
            while middle > 0:
                chunk = filler[: min(middle, len(filler))]
                handle.write(chunk)
                middle -= len(chunk)
        else:
            handle.seek(max(middle, 0), 1)
        handle.write(tail_bytes)


_CHILD = """
import json, resource, sys, time
from pathlib import Path
from hangdoc.analyzer.model import Evidence, ProcessEvidence
from hangdoc.analyzer.parsers.logs.window import read_line_window
from hangdoc.analyzer.views.log_compare import compare_logs
files = sorted(Path(sys.argv[1]).iterdir())
began = time.perf_counter()
procs = {}
for path in files:
    for rank, lines in read_line_window(path, path.name, None).items():
        procs.setdefault(rank, ProcessEvidence(rank=rank)).log_lines.extend(lines)
read = time.perf_counter() - began
began = time.perf_counter()
result = compare_logs(Evidence(processes=list(procs.values())))
compare = time.perf_counter() - began
kinds = sorted({(d.kind, d.ranks) for d in result.divergences})
print(json.dumps({"read_s": read, "compare_s": compare, "templates": result.templates,
                  "found": [f"{k} {list(r)}" for k, r in kinds],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
"""


def run(ranks: int, mb: int, dense: bool, root: Path) -> dict[str, object]:
    folder = root / f"n{ranks}-{mb}mb-{'dense' if dense else 'sparse'}"
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        path = folder / f"rank{rank}.log"
        if not path.exists():
            write_log(path, rank, ranks, mb * 1024 * 1024, dense)
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(folder)], capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout)
    result["wall_s"] = time.perf_counter() - began
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, nargs="*", default=[64, 256, 1024])
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--dense", type=int, default=0, help="also N fully written files")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="hangdoc-logbench-"))
    print("| ranks × MB | files | read windows s | compare s | templates | found | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    runs = [(n, False) for n in args.ranks] + ([(args.dense, True)] if args.dense else [])
    for ranks, dense in runs:
        r = run(ranks, args.mb, dense, root)
        print(
            f"| {ranks} × {args.mb} | {'dense' if dense else 'sparse middle'} | "
            f"{r['read_s']:.1f} | {r['compare_s']:.1f} | {r['templates']} | "
            f"{'; '.join(r['found'])} | {r['rss_mb']} |",  # type: ignore[arg-type]
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
