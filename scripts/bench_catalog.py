"""How fast the message catalog's matcher reads lines (a benchmark, not a test).

    python scripts/bench_catalog.py                 # a 200 MB log, and today's recognisers on 20 MB
    python scripts/bench_catalog.py --mb 50 --compare-mb 0
    python scripts/bench_catalog.py --text ordinary  # a run's own lines, no library message

The log is made of the text the project already holds (fixtures/logs and the casebook's
artifacts, every line of them, repeated in order until the size is reached), so the mix
of NCCL lines, tracebacks, launcher output and training progress is that of real
tickets. Printed: the catalog's load time, the matcher's lines per second and MB per
second over the whole file (reading included), the lines it recognised and how many of
them carry a meaning about a hang; with ``--compare-mb``, the same for the log parser's
single-line recognisers of today (``match_any`` after ``peel_line``) on the first N MB.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def corpus() -> list[str]:
    lines: list[str] = []
    for folder in (ROOT / "fixtures" / "logs", ROOT / "fixtures" / "cases"):
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.suffix in {".toml", ".json", ".py", ".pickle", ".gz"}:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            lines.extend(text.splitlines())
    return [line + "\n" for line in lines if line.strip()]


def ordinary() -> list[str]:
    """A training run's own output, no library message in it: what most of a big log is."""
    lines = []
    for step in range(2000):
        lines.append(
            f"[rank{step % 8}]: epoch 3 step {step} loss {2.0 / (step + 1):.4f} lr 0.0003\n"
        )
        lines.append(
            f"{{'loss': {1 / (step + 1):.4f}, 'grad_norm': 0.98, 'epoch': {step / 2000:.2f}}}\n"
        )
        if step % 20 == 0:
            lines.append(
                f"Epoch 3:  {step // 20}%|███       | {step}/2000 [01:00<02:00, 2.08it/s]\n"
            )
    return lines


def write_log(path: Path, megabytes: int, kind: str = "casebook") -> int:
    lines = corpus() if kind == "casebook" else ordinary()
    chunk = "".join(lines).encode()
    want = megabytes * 1024 * 1024
    written = 0
    with path.open("wb") as handle:
        while written < want:
            piece = chunk[: want - written]
            handle.write(piece)
            written += len(piece)
    return written


def bench_catalog(path: Path) -> None:
    started = time.perf_counter()
    from hangdoc.analyzer.parsers.catalog import default_matcher

    matcher = default_matcher()
    loaded = time.perf_counter() - started
    kinds: Counter[str] = Counter()
    n_lines = hits = meaningful = 0
    started = time.perf_counter()
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            n_lines += 1
            found = matcher.match(line)
            if found is None:
                continue
            hits += 1
            meaning = found.row.meaning
            if meaning is not None and meaning.strength != "none":
                meaningful += 1
                kinds[meaning.kind or ""] += 1
    took = time.perf_counter() - started
    size = path.stat().st_size / 1024 / 1024
    print(
        f"catalog: loaded in {loaded:.2f} s ({len(matcher.catalog)} rows, {len(matcher.keywords)} keywords)"
    )
    print(
        f"catalog: {n_lines:,} lines, {size:.0f} MB in {took:.1f} s: "
        f"{n_lines / took:,.0f} lines/s, {size / took:.1f} MB/s; "
        f"{hits:,} lines recognised, {meaningful:,} with a meaning about a hang"
    )
    print("  top kinds:", ", ".join(f"{k} {v:,}" for k, v in kinds.most_common(8)))


def bench_today(path: Path, megabytes: int) -> None:
    from hangdoc.analyzer.parsers.logs.prefix import peel_line
    from hangdoc.analyzer.parsers.logs.scanner import match_any

    limit = megabytes * 1024 * 1024
    n_lines = hits = 0
    read = 0
    started = time.perf_counter()
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            read += len(line)
            if read > limit:
                break
            n_lines += 1
            if match_any(peel_line(line.rstrip("\n")).text, []) is not None:
                hits += 1
    took = time.perf_counter() - started
    print(
        f"today's recognisers (peel_line + match_any): {n_lines:,} lines in {took:.1f} s: "
        f"{n_lines / took:,.0f} lines/s; {hits:,} lines recognised"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--compare-mb", type=int, default=20)
    parser.add_argument(
        "--text",
        choices=["casebook", "ordinary"],
        default="casebook",
        help="the casebook's text (dense with messages) or a training run's own lines",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.log"
        size = write_log(path, args.mb, args.text)
        where = "fixtures/logs and fixtures/cases" if args.text == "casebook" else "training lines"
        print(f"log: {size / 1024 / 1024:.0f} MB of {where}")
        bench_catalog(path)
        if args.compare_mb:
            bench_today(path, args.compare_mb)


if __name__ == "__main__":
    main()
