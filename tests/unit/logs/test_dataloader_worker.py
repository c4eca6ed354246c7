"""torch's own DataLoader worker messages become dataloader_worker_died events.

Formats: torch/utils/data/dataloader.py and torch/csrc/DataLoader.cpp; the first two
lines are verbatim from casebook pastes (fixtures/cases/mmdet-2406-…, timm-1269-…).
"""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.logs.process import match_dataloader_worker
from hangdoc.analyzer.payloads.launch import LoaderWorkerDied, SignalName
from hangdoc.analyzer.vocabulary import EventKind


@pytest.mark.parametrize(
    ("line", "signal"),
    [
        (
            "RuntimeError: DataLoader worker (pid 14647) is killed by signal: Killed",
            SignalName.SIGKILL,
        ),
        ("ERROR: Unexpected segmentation fault encountered in worker.", SignalName.SIGSEGV),
        (
            "ERROR: Unexpected bus error encountered in worker. This might be caused by "
            "insufficient shared memory (shm).",
            SignalName.SIGBUS,
        ),
        # torch names the signal by strsignal(): glibc's "Terminated" is SIGTERM
        (
            "RuntimeError: DataLoader worker (pid 7) is killed by signal: Terminated",
            SignalName.SIGTERM,
        ),
        # DataLoader.cpp goes on after the signal's name for SIGBUS only
        (
            "RuntimeError: DataLoader worker (pid 311) is killed by signal: Bus error. It is "
            "possible that dataloader's workers are out of shared memory. Please try to raise "
            "your shared memory limit.",
            SignalName.SIGBUS,
        ),
        ("RuntimeError: DataLoader worker (pid(s) 101, 102) exited unexpectedly", None),
        ("RuntimeError: DataLoader timed out after 60 seconds", None),
    ],
)
def test_worker_messages(line: str, signal: SignalName | None) -> None:
    hit = match_dataloader_worker(line)
    assert hit is not None and hit.kind is EventKind.DATALOADER_WORKER_DIED
    assert isinstance(hit.payload, LoaderWorkerDied)
    assert hit.payload.signal is signal


def test_worker_pids_and_timeout_are_numbers() -> None:
    gone = match_dataloader_worker("RuntimeError: DataLoader worker (pid(s) 101, 102) exited")
    assert gone is None  # not torch's words ("exited unexpectedly")
    gone = match_dataloader_worker(
        "RuntimeError: DataLoader worker (pid(s) 101, 102) exited unexpectedly"
    )
    assert gone is not None and isinstance(gone.payload, LoaderWorkerDied)
    assert gone.payload.worker_pids == (101, 102)
    late = match_dataloader_worker("RuntimeError: DataLoader timed out after 60 seconds")
    assert late is not None and isinstance(late.payload, LoaderWorkerDied)
    assert late.payload.timeout_s == 60


def test_shared_memory_and_ordinary_lines() -> None:
    bus = match_dataloader_worker("ERROR: Unexpected bus error encountered in worker.")
    assert bus is not None and isinstance(bus.payload, LoaderWorkerDied) and bus.payload.shm
    assert match_dataloader_worker("worker 3 finished epoch 2") is None
    assert match_dataloader_worker("DataLoader created with 8 workers") is None
