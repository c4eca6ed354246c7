"""torch's own DataLoader worker messages become dataloader_worker_died events.

Formats: torch/utils/data/dataloader.py and torch/csrc/DataLoader.cpp; the first two
lines are verbatim from casebook pastes (fixtures/cases/mmdet-2406-…, timm-1269-…).
"""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.logs.process import match_dataloader_worker
from hangdoc.analyzer.vocabulary import EventKind


@pytest.mark.parametrize(
    ("line", "signal"),
    [
        ("RuntimeError: DataLoader worker (pid 14647) is killed by signal: Killed", "SIGKILL"),
        ("ERROR: Unexpected segmentation fault encountered in worker.", "SIGSEGV"),
        (
            "ERROR: Unexpected bus error encountered in worker. This might be caused by "
            "insufficient shared memory (shm).",
            "SIGBUS",
        ),
        ("RuntimeError: DataLoader worker (pid(s) 101, 102) exited unexpectedly", None),
        ("RuntimeError: DataLoader timed out after 60 seconds", None),
    ],
)
def test_worker_messages(line: str, signal: str | None) -> None:
    hit = match_dataloader_worker(line)
    assert hit is not None and hit.kind is EventKind.DATALOADER_WORKER_DIED
    assert hit.fields.get("signal") == signal


def test_shared_memory_and_ordinary_lines() -> None:
    bus = match_dataloader_worker("ERROR: Unexpected bus error encountered in worker.")
    assert bus is not None and bus.fields.get("shm") == "1"
    assert match_dataloader_worker("worker 3 finished epoch 2") is None
    assert match_dataloader_worker("DataLoader created with 8 workers") is None
