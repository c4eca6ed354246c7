"""A library's message that a paste broke in two lines (a line break typed or rendered
inside it, no terminal width involved) is read whole: the scanner holds back a long line
that holds a catalog row's keyword and matches no row, and joins it to the next line when
the two, as printed, are one row's message that the break falls inside
(parsers/logs/scanner.py ``_message_rejoined``). DeepSpeed ZeRO's cross-rank check is the
message (deepspeed/runtime/zero/utils.py assert_ints_same_as_other_ranks, 0.6-0.17:
f"disagreement between rank0 and rank{r}: rank0: {rank0_ints}, rank{r}: {ints}")."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.payloads.nccl import CollectiveMismatch, MismatchSource
from hangdoc.analyzer.vocabulary import EventKind
from tests.unit.logs.helpers import events, parse

_RANK0 = ", ".join(str(4_300_000_000_000_000_000 + 7919 * i) for i in range(12))
_RANK2 = ", ".join(str(i) for i in range(2, 40, 3))
HEAD = f"RuntimeError: disagreement between rank0 and rank2: rank0: [{_RANK0}], "
REST = f"rank2: [{_RANK2}]"


def _mismatches(tmp_path: Path, text: str) -> list[CollectiveMismatch]:
    log = tmp_path / "error.txt"
    log.write_text(text, encoding="utf-8")
    found = []
    for _, event in events(parse(log), EventKind.COLLECTIVE_MISMATCH.value):
        payload = event.payload_as(CollectiveMismatch)
        assert payload is not None
        found.append(payload)
    return found


def test_the_message_whole_is_read(tmp_path: Path) -> None:
    [found] = _mismatches(tmp_path, HEAD + REST + "\n")
    assert found.source is MismatchSource.ZERO_IDS


def test_the_message_broken_after_a_list_is_read_whole(tmp_path: Path) -> None:
    [found] = _mismatches(tmp_path, f"{HEAD}\n{REST}\n")
    assert found.source is MismatchSource.ZERO_IDS


def test_the_message_broken_where_a_space_was_is_read_whole(tmp_path: Path) -> None:
    [found] = _mismatches(tmp_path, f"{HEAD.rstrip()}\n{REST}\n")
    assert found.source is MismatchSource.ZERO_IDS


def test_a_next_line_that_does_not_finish_it_is_read_as_its_own(tmp_path: Path) -> None:
    # The first piece alone is no message; the record after it stays its own, at its line.
    timeout = (
        "[E ProcessGroupNCCL.cpp:485] [Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1809029 milliseconds before "
        "timing out."
    )
    log = tmp_path / "error.txt"
    log.write_text(f"{HEAD}\n{timeout}\n", encoding="utf-8")
    parsed = parse(log)
    assert events(parsed, EventKind.COLLECTIVE_MISMATCH.value) == []
    [(_, found)] = events(parsed, EventKind.COLLECTIVE_TIMEOUT.value)
    assert found.line == 2


def test_the_held_line_is_read_when_the_file_ends(tmp_path: Path) -> None:
    # Held back for a rest that never comes: read as it is (here: no row's message).
    assert _mismatches(tmp_path, HEAD) == []


def test_the_later_wording_is_the_same_check(tmp_path: Path) -> None:
    # DeepSpeed 0.18 on (#7525): "Detected a disagreement on list contents between rank0 and
    # rank{r}: \n list length: …\n rank0: […] \n rank{r}: […]", its first line whole.
    text = (
        "RuntimeError: Detected a disagreement on list contents between rank0 and rank2: \n"
        " list length: 3\n rank0: [1, 2, 3] \n rank2: [1, 2, 4]\n"
    )
    [found] = _mismatches(tmp_path, text)
    assert found.source is MismatchSource.ZERO_IDS
