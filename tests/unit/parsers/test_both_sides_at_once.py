"""A big text that holds stacks is read by both sides at once (analyzer/parsers/text.py:
the log side in a forked worker, the stack side in the caller) and must read exactly as
one side after the other does.

The text is built from real parts only: py-spy's recorded dump (tests/unit/parsers/
samples, py-spy 0.4.3) and a public log with the watchdog's timeouts of three ranks
(fixtures/logs/public, its source in the file), each part repeated under a rank label as
a paste of a big job is, to past the size where the worker starts.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from hangdoc.analyzer.parsers import text as text_path
from hangdoc.analyzer.parsers.text import BOTH_AT_ONCE_BYTES, TextParser
from tests.unit.parsers.helpers import SAMPLES

ROOT = Path(__file__).resolve().parents[3]
LOG = ROOT / "fixtures" / "logs" / "public" / "torch-2.4_pg_status_laggard.log"


def _big_paste(path: Path, size: int) -> Path:
    dump = (SAMPLES / "pyspy" / "dump.txt").read_text()
    log = "\n".join(line for line in LOG.read_text().splitlines() if not line.startswith("# "))
    parts = ["Here is every rank's py-spy dump and its log.\n"]
    rank, written = 0, 0
    while written < size:
        part = f"\nrank {rank}:\n{dump}\n{log}\n"
        parts.append(part)
        written += len(part)
        rank += 1
    path.write_text("".join(parts))
    return path


@pytest.fixture(scope="module")
def paste(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _big_paste(tmp_path_factory.mktemp("big") / "ticket.txt", BOTH_AT_ONCE_BYTES + 4096)


def _one_after_the_other(path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    with monkeypatch.context() as patch:
        patch.setattr(text_path, "BOTH_AT_ONCE_BYTES", 1 << 62)
        return TextParser().parse(path, path.name)


def _allow_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker where the machine can run it: a test session keeps threads of its own
    alive (which the reader avoids forking beside); the worker only parses a file."""
    if text_path._cores() < 2 or "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no second core, or no fork, here")
    monkeypatch.setattr(text_path._LogSideAside, "possible", staticmethod(lambda: True))


def test_both_sides_at_once_read_what_one_after_the_other_reads(
    paste: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a paste of many ranks' dumps and log lines, big enough for the worker
    _allow_the_worker(monkeypatch)
    workers: list[object] = []
    real_result = text_path._LogSideAside.result

    def result(self: text_path._LogSideAside) -> object:
        workers.append(self._future)
        return real_result(self)

    monkeypatch.setattr(text_path._LogSideAside, "result", result)
    # WHEN it is read with both sides at once, and one after the other
    at_once = TextParser().parse(paste, paste.name)
    serial = _one_after_the_other(paste, monkeypatch)
    # THEN a worker read the log side, and everything read is the same: stacks, events,
    # their ranks, the notes and their order
    assert workers and workers[0] is not None
    assert at_once == serial
    assert len([p for p in at_once.processes if p.text_stacks]) > 100
    assert any(e for p in at_once.processes for e in p.log_events)


def test_a_worker_that_cannot_start_leaves_the_log_side_to_the_caller(
    paste: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a machine where no worker process can be started
    _allow_the_worker(monkeypatch)

    def no_pool(*args: object, **kwargs: object) -> None:
        raise OSError("no processes left")

    serial = _one_after_the_other(paste, monkeypatch)
    monkeypatch.setattr(text_path, "ProcessPoolExecutor", no_pool)
    # WHEN the paste is read, THEN it reads as it does one side after the other
    assert TextParser().parse(paste, paste.name) == serial


def test_a_small_text_or_one_without_stacks_is_read_in_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a log past the size but with no stack in it, and a small paste with stacks
    _allow_the_worker(monkeypatch)
    log_only = tmp_path / "train.log"
    line = LOG.read_text().splitlines()[-1] + "\n"
    log_only.write_text(line * (BOTH_AT_ONCE_BYTES // len(line) + 1))
    small = _big_paste(tmp_path / "small.txt", 64 * 1024)
    started: list[Path] = []
    real_init = text_path._LogSideAside.__init__

    def init(self: text_path._LogSideAside, path: Path, display: str) -> None:
        started.append(path)
        real_init(self, path, display)

    monkeypatch.setattr(text_path._LogSideAside, "__init__", init)
    # WHEN both are read, THEN no worker was started for either
    TextParser().parse(log_only, log_only.name)
    TextParser().parse(small, small.name)
    assert started == []
