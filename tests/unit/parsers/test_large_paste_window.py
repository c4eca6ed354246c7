"""A large paste of stacks is read from its tail: the ranks' own log lines come from that
tail too, numbered as its events are.

The paste's shape is what ``scripts/bench_text.py`` generates (and what people paste for a
big job): per rank a hand-written label, ``py-spy dump``'s text of the rank (documented
format: py-spy's ``dump`` output, ``Thread N (idle): "MainThread"`` and ``func (file:line)``
frames) and the tail of its log, ending in torch's watchdog timeout line
(ProcessGroupNCCL.cpp's "Watchdog caught collective operation timeout"). The sizes are
shrunk so that a small file is "large".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers import text as text_parser
from hangdoc.api import diagnose, load

RANKS = 120


def _section(rank: int) -> str:
    pid = 160_000 + rank
    log = "".join(
        f"[rank{rank}]:2026-11-22 19:16:{step:02d},799 - INFO - trainer - epoch 3 step "
        f"{400 + step} | loss 2.10{step:02d} | lr 3.00e-04\n"
        for step in range(10)
    )
    return (
        f"Rank {rank} py-spy dump:\n"
        f"Process {pid}: /opt/conda/bin/python -u train.py\n"
        "Python v3.11.9 (/opt/conda/bin/python3.11)\n\n"
        f'Thread {pid} (idle): "MainThread"\n'
        "    all_reduce (torch/distributed/distributed_c10d.py:2501)\n"
        "    wrapper (torch/distributed/c10d_logger.py:83)\n"
        "    train_step (trainer/loop.py:90)\n"
        "    main (train.py:52)\n\n"
        f"log of rank {rank} (last lines):\n{log}"
        f"[rank{rank}]:[E1122 19:27:{rank % 60:02d}.000328468 ProcessGroupNCCL.cpp:607] "
        f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41873, "
        "OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for "
        "600490 milliseconds before timing out.\n\n"
    )


@pytest.fixture
def large_paste(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    paste = tmp_path / "paste.txt"
    paste.write_text("".join(_section(rank) for rank in range(RANKS)), encoding="utf-8")
    size = paste.stat().st_size
    monkeypatch.setattr(text_parser, "WHOLE_STACKS_BYTES", size // 4)
    monkeypatch.setattr(text_parser, "STACK_TEXT_BYTES", size // 8)
    return paste


def test_only_the_tail_s_ranks_and_their_lines_are_read(large_paste: Path) -> None:
    # GIVEN a paste of 120 ranks, each ending in its own timeout, too large to read whole
    # WHEN it is loaded
    evidence = load([large_paste])
    assert any("read from its last" in note for note in evidence.notes)
    # THEN every rank with log lines is one the tail holds, with its timeout beside them:
    # no rank of the head stands there with lines and without the timeout it printed
    with_lines = [p for p in evidence.processes if p.log_lines]
    assert with_lines
    head_ranks = {p.rank for p in with_lines if p.rank is not None and p.rank < RANKS // 2}
    assert not head_ranks
    assert all(p.log_events for p in with_lines), [p.rank for p in with_lines]


def test_no_rank_is_called_silent_for_lines_read_outside_the_tail(large_paste: Path) -> None:
    # GIVEN the same paste: every rank timed out, none is behind
    # WHEN diagnosed THEN no rank is named for not having timed out (HD032)
    diagnosis = diagnose([large_paste])
    assert all(finding.rule != "HD032" for finding in diagnosis.findings), [
        (finding.rule, finding.title) for finding in diagnosis.findings
    ]
