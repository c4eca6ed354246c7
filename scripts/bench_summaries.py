"""Analysis time and memory of a whole job read from node summaries (a benchmark, not a test).

    python scripts/bench_summaries.py                        # 2,048 nodes x 8 ranks
    python scripts/bench_summaries.py --nodes 256 2048 --raw # also the raw files, to compare
    python scripts/bench_summaries.py --tree /tmp/job16k     # build once, reuse the tree
    python scripts/bench_summaries.py --compare TREE --code /tmp/main . --rounds 3

It builds the tree a whole-job collection leaves (one dump per node in the real dump
format, scripts/bench_analyze.py's synthetic ranks: all wait in all_gather but the last,
which is in torch.save), writes each node's ``summary.json`` with the same
``write_node_summary`` the node runs after collecting, then analyzes the tree in a fresh
process: ``load → rules → JSON`` (and HTML unless --no-html), wall time per phase and
peak RSS. ``--raw`` analyzes the same tree from its raw files (summaries ignored).

``--compare TREE`` measures ``hangdoc analyze TREE --json -`` from the summaries already
in a tree of ``scripts/bench_all.py`` (every input kind; its summaries written once, by
``bench_all.summarize``), by each ``--code`` checkout in turn, each run a fresh process,
``--rounds`` times (one tree per code: each code on its own, as for summaries of two
formats): wall and CPU seconds, peak summed RSS and PSS, the load average, and whether
the three planted culprits are named (``bench_all.analyze``); every run must give the
same verdict, primary finding and findings as the first, or it says so.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_analyze import build_dump

RANKS_PER_NODE = 8


def _summarize(dump: Path) -> int:
    from hangdoc.analyzer.summarize.write import write_node_summary

    return write_node_summary(dump).stat().st_size


def build_tree(root: Path, nodes: int) -> tuple[float, int]:
    """Dumps and summaries of ``nodes`` nodes; (seconds summarising, summary bytes)."""
    if (root / "node00000").is_dir():
        dumps = sorted(p for p in root.iterdir() if p.is_dir())
        if len(dumps) == nodes and all((d / "summary.json").is_file() for d in dumps):
            return 0.0, sum((d / "summary.json").stat().st_size for d in dumps)
        raise SystemExit(f"{root} holds another tree; remove it or pick another --tree")
    dumps = build_dump(root, nodes * RANKS_PER_NODE, RANKS_PER_NODE)
    began = time.perf_counter()
    with multiprocessing.Pool() as pool:
        sizes = pool.map(_summarize, dumps, chunksize=16)
    return time.perf_counter() - began, sum(sizes)


def _measure(root: Path, html: bool, raw: bool) -> dict[str, float]:
    """Runs in the child: one analysis, phase by phase."""
    from hangdoc.analyzer.engine import analyze
    from hangdoc.analyzer.loading.loader import load_paths

    cpu0 = time.process_time()
    t0 = time.perf_counter()
    evidence = load_paths([root], summaries=not raw)
    t1 = time.perf_counter()
    diagnosis = analyze(evidence)
    t2 = time.perf_counter()
    json.dumps(diagnosis.to_json())
    t3 = time.perf_counter()
    if html:
        from hangdoc.analyzer.render.html import render_html

        render_html(diagnosis)
    t4 = time.perf_counter()
    ranks = len(evidence.ranked())
    assert diagnosis.findings[0].culprit_ranks == (ranks - 1,), diagnosis.findings[0]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # CPU seconds too: on a shared 2-core machine wall time also measures the neighbours.
    return {"ranks": ranks, "load_s": t1 - t0, "rules_s": t2 - t1, "json_s": t3 - t2,
            "html_s": t4 - t3, "total_s": t4 - t0, "cpu_s": time.process_time() - cpu0,
            "peak_mb": peak_mb}  # fmt: skip


def _child(root: Path, html: bool, raw: bool) -> dict[str, float] | str:
    cmd = [sys.executable, __file__, "--child", str(root)]
    cmd += (["--no-html"] if not html else []) + (["--raw"] if raw else [])
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return done.stderr.strip()[-400:]
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def compare(trees: list[Path], codes: list[Path], rounds: int) -> int:
    """``--compare``: the codes in turn, each on its tree (one tree: all on it); 1 when an
    answer differs or misses."""
    if len(trees) not in (1, len(codes)):
        raise SystemExit("--compare takes one tree, or one per --code")
    pairs = list(zip(trees * len(codes) if len(trees) == 1 else trees, codes, strict=True))
    import os

    from bench_all import analyze

    print("| round | code | tree | wall s | CPU s | peak RSS MB | peak PSS MB | load | planted "
          "named | primary |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    first: tuple[object, ...] | None = None
    failed = 0
    for round_ in range(1, rounds + 1):
        for tree, code in pairs:
            r = analyze(tree, False, code)
            answer = (r["verdict"], r["primary"], r["findings"], r["ranks_seen"])
            first = first or answer
            same = answer == first and r["planted_found"]
            failed += not same
            print(f"| {round_} | {code} | {tree.name} | {r['seconds']} | {r['cpu_s']} | "
                  f"{r['peak_mb']} | {r['peak_pss_mb']} | {os.getloadavg()[0]:.1f} | "
                  f"{'yes' if r['planted_found'] else 'NO'} | {r['primary']}"
                  f"{'' if same else ' (DIFFERS: ' + repr(answer) + ')'} |", flush=True)  # fmt: skip
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="*", default=[2048])
    parser.add_argument("--tree", type=Path, help="where to build (and reuse) the tree")
    parser.add_argument("--raw", action="store_true", help="also analyze the raw files")
    parser.add_argument("--no-html", action="store_true")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--compare", type=Path, nargs="+",
                        help="bench_all.py trees with their summaries (one, or one per --code)")  # fmt: skip
    parser.add_argument("--code", type=Path, nargs="+", default=[Path(__file__).parents[1]])
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    if args.compare:
        return compare(args.compare, args.code, args.rounds)
    if args.child:
        print(json.dumps(_measure(args.child, not args.no_html, args.raw)))
        return 0
    import tempfile

    print(f"{'nodes':>6} {'ranks':>6} {'input':>8} {'load s':>7} {'rules s':>7} {'json s':>7} "
          f"{'html s':>7} {'total s':>8} {'cpu s':>6} {'peak MB':>8}")  # fmt: skip
    for nodes in sorted(args.nodes):
        with tempfile.TemporaryDirectory(prefix="hangdoc-bench-") as tmp:
            root = args.tree if args.tree is not None and len(args.nodes) == 1 else Path(tmp)
            summarize_s, size = build_tree(root, nodes)
            if summarize_s:
                print(f"# {nodes} node summaries written in {summarize_s:.1f} s "
                      f"({size / nodes / 1024:.1f} KiB each)", flush=True)  # fmt: skip
            for raw in [False, True] if args.raw else [False]:
                r = _child(root, not args.no_html, raw)
                label = "raw" if raw else "summary"
                if isinstance(r, str):
                    print(f"{nodes:>6} {label} failed: {r}")
                    continue
                print(f"{nodes:>6} {int(r['ranks']):>6} {label:>8} {r['load_s']:7.2f} "
                      f"{r['rules_s']:7.2f} {r['json_s']:7.2f} {r['html_s']:7.2f} "
                      f"{r['total_s']:8.2f} {r['cpu_s']:6.2f} {r['peak_mb']:8.0f}",
                      flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
