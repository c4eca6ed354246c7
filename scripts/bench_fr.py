"""Flight recorder analysis at scale: hangdoc vs torch's fr_trace vs the unpickle floor.

    python scripts/bench_fr.py --ranks 256 1024 4096 --entries 2000
    python scripts/bench_fr.py --ranks 1024 --entries 500 1000 2000 --fr-trace-up-to 1024
    python scripts/bench_fr.py --ranks 4096 --repeat 5 --code /tmp/base .   # before/after

For each size (N ranks × E entries) it writes N dumps in torch's exact pickle format
(``fr_synth.Job``: tensor- and data-parallel groups, ring buffers that wrapped at
different points, three planted problems) once into --workdir, then times, each in a
fresh process on the same --jobs cores:

* floor: unpickling every file and dropping it (the least any Python reader pays);
* hangdoc: ``read_flight_recorders`` (restricted unpickling, reduction per rank in
  --jobs workers) + matching + the FR rules; it checks the three planted culprits are
  the three root findings, so a fast wrong answer cannot pass;
* fr_trace: ``torchfrtrace DIR`` (torch's analyzer), up to --fr-trace-up-to ranks and
  --fr-trace-timeout seconds.

Time is wall-clock; memory is the peak RSS of the main process plus --jobs times the
largest worker's (an upper bound of the sum). This machine is shared: each size is run
--repeat times, the floor and hangdoc interleaved (and, with ``--code``, several
checkouts of hangdoc: before and after a change, each with its own copy of this script),
so that they all see the same load; the table gives the best run and the spread, and the
load average. Results go to stdout as a Markdown table and to --json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import pickle
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from fr_synth import Job  # noqa: E402


def _write_chunk(args: tuple[int, int, str, int, int]) -> None:
    ranks, entries, directory, start, stop = args
    Job(ranks=ranks, entries=entries).write(Path(directory), range(start, stop))


def generate(ranks: int, entries: int, workdir: Path, jobs: int) -> Path:
    directory = workdir / f"n{ranks}_e{entries}"
    done = directory / ".complete"
    if done.exists():
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    step = max(1, ranks // (jobs * 8))
    chunks = [
        (ranks, entries, str(directory), s, min(s + step, ranks)) for s in range(0, ranks, step)
    ]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        pool.map(_write_chunk, chunks)
    done.write_text(json.dumps({"ranks": ranks, "entries": entries}))
    return directory


def _files(directory: Path) -> list[Path]:
    """In rank order, as ``hangdoc analyze`` reads them (a tp group's files together)."""
    found = [p for p in directory.iterdir() if p.name.startswith("comm_lib_trace_rank_")]
    return sorted(found, key=lambda p: int(p.name.rsplit("_", 1)[1]))


def _unpickle(path: str) -> int:
    with open(path, "rb") as handle:
        doc = pickle.load(handle)
    return len(doc["entries"])


def _peaks(jobs: int) -> dict[str, float]:
    """Peak memory (main + jobs × largest worker) and CPU seconds of all processes."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    main, worker = me.ru_maxrss / 1024, kids.ru_maxrss / 1024
    return {
        "main_mb": round(main, 1),
        "worker_mb": round(worker, 1),
        "peak_mb": round(main + jobs * worker, 1),
        "cpu_s": round(me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, 2),
    }


def measure_floor(directory: Path, jobs: int) -> dict[str, Any]:
    files = [str(p) for p in _files(directory)]
    began = time.perf_counter()
    # fork, like read_flight_recorders: the workers are our children, so their CPU counts
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        total = sum(pool.imap(_unpickle, files, chunksize=8))
    wall = time.perf_counter() - began
    return {"seconds": round(wall, 2), "entries": total, **_peaks(jobs)}


def measure_hangdoc(directory: Path, jobs: int, ranks: int, entries: int) -> dict[str, Any]:
    from hangdoc.analyzer.engine import analyze
    from hangdoc.analyzer.flight_recorder.bulk import read_flight_recorders
    from hangdoc.analyzer.model import Evidence, InputFile, InputKind
    from hangdoc.rules import all_rules

    files = [(p, p.name) for p in _files(directory)]
    began = time.perf_counter()
    evidence = Evidence()
    for (path, _), parsed in zip(files, read_flight_recorders(files, jobs=jobs), strict=True):
        ranks_here = tuple(p.rank for p in parsed.processes if p.rank is not None)
        evidence.inputs.append(
            InputFile(str(path), InputKind.FLIGHT_RECORDER, ranks_here, parsed.error)
        )
        for proc in parsed.processes:
            proc.world_size = ranks
            evidence.processes.append(proc)
        for group in parsed.process_groups:
            evidence.process_groups.setdefault(group.name, group)
    parsed_at = time.perf_counter()
    rules = tuple(r for r in all_rules() if "HD010" <= r.id <= "HD029")
    diagnosis = analyze(evidence, rules=rules)
    done = time.perf_counter()
    job = Job(ranks=ranks, entries=entries)
    expected = {
        ("HD010", job.expected()["skip"]),
        ("HD012", job.expected()["size"]),
        ("HD011", job.expected()["type"]),
    }
    top = {(f.rule, f.culprit_ranks) for f in diagnosis.findings[:3]}
    return {
        "seconds": round(done - began, 2),
        "parse_s": round(parsed_at - began, 2),
        "match_s": round(done - parsed_at, 2),
        "correct": top == expected,
        "findings": [(f.rule, f.severity.value, list(f.culprit_ranks)) for f in diagnosis.findings],
        **_peaks(jobs),
    }


def measure_fr_trace(directory: Path, timeout: float) -> dict[str, Any]:
    exe = shutil.which("torchfrtrace") or str(Path(sys.executable).parent / "torchfrtrace")
    began = time.perf_counter()
    proc = subprocess.Popen(
        [exe, str(directory)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = began + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            wall = time.perf_counter() - began
            return {
                "seconds": round(wall, 2),
                "peak_mb": round(usage.ru_maxrss / 1024, 1),
                "exit": os.waitstatus_to_exitcode(status),
            }
        if time.perf_counter() > deadline:
            proc.kill()
            _, _, usage = os.wait4(proc.pid, 0)
            return {
                "seconds": None,
                "timeout_s": timeout,
                "peak_mb": round(usage.ru_maxrss / 1024, 1),
            }
        time.sleep(0.2)


def _in_fresh_process(
    kind: str,
    directory: Path,
    args: argparse.Namespace,
    ranks: int,
    entries: int,
    code: Path | None = None,
) -> dict[str, Any]:
    """One measurement in a new process; ``code`` is the checkout whose hangdoc (and
    whose copy of this script) it runs, this one by default."""
    script = Path(__file__) if code is None else code / "scripts" / "bench_fr.py"
    cmd = [
        sys.executable,
        str(script),
        "--measure",
        kind,
        str(directory),
        "--jobs",
        str(args.jobs),
        "--ranks",
        str(ranks),
        "--entries",
        str(entries),
    ]
    env = dict(os.environ, PYTHONPATH=str(script.resolve().parent.parent))
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["load"] = os.getloadavg()[0]
    return result


def _row(
    label: str,
    ranks: int,
    entries: int,
    floors: list[dict[str, Any]],
    ourses: list[dict[str, Any]],
    theirs: dict[str, Any] | None,
) -> str:
    """One Markdown table row: the best run of each, the spread, the load."""
    floor, ours = _best(floors), _best(ourses)
    gb = ours["peak_mb"] / 1024
    cells = [
        label,
        str(ranks),
        str(entries),
        f"{floor['seconds']} ({_spread(floors)}; {floor['cpu_s']})",
        f"{ours['seconds']} ({_spread(ourses)}; {ours['parse_s']}+{ours['match_s']}; "
        f"{ours['cpu_s']})",
        f"{ours['seconds'] / floor['seconds']:.2f} ({ours['cpu_s'] / floor['cpu_s']:.2f})",
        f"{gb:.2f}",
        "yes" if all(r["correct"] for r in ourses) else "NO",
        f"{min(r['load'] for r in floors + ourses):.1f}-{max(r['load'] for r in floors + ourses):.1f}",
    ]
    if theirs is None:
        cells += ["not run", "–", "–"]
    elif theirs.get("seconds") is None:
        limit = theirs["timeout_s"]
        cells += [
            f"> {limit:.0f} (killed)",
            f"≥ {theirs['peak_mb'] / 1024:.2f}",
            f"≥ {limit / ours['seconds']:.0f}×",
        ]
    else:
        cells += [
            str(theirs["seconds"]),
            f"{theirs['peak_mb'] / 1024:.2f}",
            f"{theirs['seconds'] / ours['seconds']:.1f}×",
        ]
    return "| " + " | ".join(cells) + " |"


def _spread(runs: list[dict[str, Any]]) -> str:
    seconds = sorted(r["seconds"] for r in runs if r.get("seconds") is not None)
    return f"{seconds[0]}-{seconds[-1]}" if len(seconds) > 1 else "1 run"


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda r: r["seconds"] if r.get("seconds") is not None else 1e18)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ranks", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--entries", type=int, nargs="+", default=[2000])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/hangdoc-fr-bench"))
    parser.add_argument("--fr-trace-up-to", type=int, default=1024)
    parser.add_argument("--fr-trace-timeout", type=float, default=600.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the generated dumps")
    parser.add_argument(
        "--code",
        type=Path,
        nargs="+",
        default=None,
        help="checkouts of hangdoc to measure side by side (before/after); default: this one",
    )
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    parser.add_argument("directory", nargs="?", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:  # child mode: one measurement, JSON on the last line
        if args.measure == "floor":
            result = measure_floor(args.directory, args.jobs)
        else:
            result = measure_hangdoc(args.directory, args.jobs, args.ranks[0], args.entries[0])
        print(json.dumps(result))
        return 0
    codes: list[Path | None] = list(args.code) if args.code else [None]
    rows: list[dict[str, Any]] = []
    print(
        "| code | ranks | entries | floor s (spread; cpu s) "
        "| hangdoc s (spread; parse+match; cpu s) "
        "| hangdoc/floor (cpu) | hangdoc GB | correct | load "
        "| fr_trace s | fr_trace GB | fr_trace/hangdoc |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for ranks in args.ranks:
        for entries in args.entries:
            began = time.perf_counter()
            directory = generate(ranks, entries, args.workdir, args.jobs)
            gen_s = time.perf_counter() - began
            floors: list[dict[str, Any]] = []
            ourses: dict[Path | None, list[dict[str, Any]]] = {code: [] for code in codes}
            for _ in range(args.repeat):  # interleaved: all see the same machine load
                for code in codes:
                    ourses[code].append(
                        _in_fresh_process("hangdoc", directory, args, ranks, entries, code)
                    )
                floors.append(_in_fresh_process("floor", directory, args, ranks, entries))
            theirs: dict[str, Any] | None = None
            if ranks <= args.fr_trace_up_to:
                theirs = measure_fr_trace(directory, args.fr_trace_timeout)
            for code in codes:
                label = "this checkout" if code is None else str(code.resolve())
                rows.append(
                    {
                        "code": label,
                        "ranks": ranks,
                        "entries": entries,
                        "generate_s": round(gen_s, 1),
                        "floor": floors,
                        "hangdoc": ourses[code],
                        "fr_trace": theirs,
                    }
                )
                print(_row(label, ranks, entries, floors, ourses[code], theirs), flush=True)
            if not args.keep:
                shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if all(r["correct"] for row in rows for r in row["hangdoc"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
