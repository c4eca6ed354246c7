"""A progress bar before the timeouts is what the ranks waited for only where its own
clock lets it be: tqdm's meter states the time run and its estimate of the time left
("5/6 [00:14<00:03, 3.19s/it]"). Work that by that clock takes a small part of the
collective timeout (Timeout(ms)=…) and printed no later state was not running when the
timeout fired (views/last_words.py ``_outrun``); a bar whose time nears the timeout was."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Finding


def _hd061(path: Path) -> list[Finding]:
    """HD061's findings on one file, read as the CLI reads it."""
    diagnosis: Diagnosis = analyze(load_paths([path]))
    return [f for f in diagnosis.findings if f.rule == "HD061"]


TIMEOUT = (
    "[E ProcessGroupNCCL.cpp:485] [Rank {rank}] Watchdog caught collective operation timeout: "
    "WorkNCCL(OpType=BROADCAST, Timeout(ms)={ms}) ran for {ran} milliseconds before timing out."
)


def _log(tmp_path: Path, bar: str, ms: int) -> Path:
    log = tmp_path / "console.txt"
    lines = [
        bar,
        TIMEOUT.format(rank=2, ms=ms, ran=ms + 9000),
        TIMEOUT.format(rank=3, ms=ms, ran=ms + 9005),
    ]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return log


def test_a_bar_due_to_end_long_before_the_timeout_is_not_named(tmp_path: Path) -> None:
    bar = "Validating:  83%|########3 | 5/6 [00:14<00:03,  3.19s/it]"
    assert _hd061(_log(tmp_path, bar, 1_800_000)) == []


def test_a_bar_whose_time_nears_the_timeout_is_named(tmp_path: Path) -> None:
    # The same bar against a 30 s timeout: the evaluation was still running then.
    bar = "Validating:  83%|########3 | 5/6 [00:14<00:03,  3.19s/it]"
    [found] = _hd061(_log(tmp_path, bar, 30_000))
    assert found.category.value == "eval_loop_only_some_ranks"


def test_a_bar_without_an_estimate_is_named(tmp_path: Path) -> None:
    # "<?": tqdm has no rate yet, so the bar's clock says nothing of when it ends.
    bar = "Validating:   0%|          | 0/6 [00:00<?, ?it/s]"
    [found] = _hd061(_log(tmp_path, bar, 1_800_000))
    assert found.category.value == "eval_loop_only_some_ranks"
