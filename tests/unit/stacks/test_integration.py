"""How pasted stacks reach the analysis: what a text is taken for, the stacks side of the
one text path, traceback events that agree with the stacks, the size bounds, and
``hangdoc analyze`` end to end."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import pytest

from hangdoc.analyzer.model import InputKind
from hangdoc.analyzer.parsers.base import SNIFF_BYTES, ParsedFile
from hangdoc.analyzer.parsers.logs import LogParser
from hangdoc.analyzer.parsers.stacks import attach_stacks, mostly_stacks
from hangdoc.analyzer.parsers.text import TextParser, text_kind
from hangdoc.cli import main
from tests.unit.parsers.helpers import SAMPLES
from tests.unit.stacks.helpers import PASTES, paste


def _kind(path: Path) -> InputKind:
    return text_kind(path.read_bytes()[:SNIFF_BYTES])


def _read(path: Path, *, in_log: bool) -> ParsedFile:
    """The file read as a log (``in_log``) or as a paste of stacks, whatever it holds."""
    parsed = LogParser().parse(path, path.name)
    return attach_stacks(parsed, path.read_text(), False, path.name, in_log=in_log)


def _analyze(tmp_path: Path, *files: Path) -> dict[str, object]:
    out = tmp_path / "findings.json"
    main(["analyze", *map(str, files), "--json", str(out)])
    data: dict[str, object] = json.loads(out.read_text())
    return data


def _findings(data: dict[str, object]) -> list[dict[str, object]]:
    findings = data["findings"]
    assert isinstance(findings, list)
    return findings


@pytest.mark.parametrize(
    "name",
    [
        "gdb/nccl_901_rank0.txt",
        "gdb/pytorch_4679.txt",
        "pstack/mod_h2_234.txt",
        "pybt/voltron_232.txt",
        "pybt/cylc_1823.txt",
        "pystack/pystack_readme.txt",
        "traceback/mtr_99.txt",
        "cpp/pytorch_131781.txt",
    ],
)
def test_stack_pastes_are_taken_for_pastes_of_stacks(name: str) -> None:
    assert _kind(PASTES / name) is InputKind.STACK_TEXT


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (SAMPLES / "pyspy" / "dump.txt", InputKind.PYSPY_TEXT),
        (SAMPLES / "pyspy" / "dump_native.txt", InputKind.PYSPY_TEXT),
        (SAMPLES / "faulthandler_sigusr1.txt", InputKind.FAULTHANDLER),
        (SAMPLES / "faulthandler_segv_torch.txt", InputKind.FAULTHANDLER),
        (SAMPLES / "torch_debug_pyspy_dump.txt", InputKind.PYSPY_TEXT),
    ],
)
def test_pure_pyspy_and_faulthandler_files_keep_their_names(path: Path, kind: InputKind) -> None:
    assert _kind(path) is kind


def _stderr_with(traceback: str) -> str:
    """A rank's stderr as tickets have it: NCCL INFO lines (real ones), then a
    [rank1]:-prefixed traceback."""
    nccl = paste("traceback/vllm_10453.txt").splitlines()[:8]
    return "\n".join(nccl + [f"[rank1]: {line}" for line in traceback.splitlines()]) + "\n"


@pytest.mark.parametrize("in_log", [True, False], ids=["log", "stacks"])
def test_log_with_a_traceback_yields_both_once(tmp_path: Path, in_log: bool) -> None:
    # GIVEN a rank's stderr: NCCL INFO lines, then the traceback that killed it; read as
    # a log or as a paste of stacks
    log = tmp_path / "stderr.log"
    log.write_text(_stderr_with(paste("traceback/mtr_99.txt")))
    parsed = _read(log, in_log=in_log)
    # THEN rank 1 has the exception once (an event) and the stack that raised it
    rank1 = [p for p in parsed.processes if p.rank == 1]
    events = [e for p in rank1 for e in p.log_events if e.kind == "exception"]
    assert len(events) == 1 and events[0].text.startswith("ValueError")
    stacks = [t for p in rank1 for s in p.text_stacks for t in s.threads]
    assert [t.exception is not None for t in stacks] == [True]
    assert any(p.exited for p in rank1)


def test_consequence_traceback_is_an_event_in_a_log_and_a_stack_in_a_paste(
    tmp_path: Path,
) -> None:
    log = tmp_path / "stderr.log"
    log.write_text(paste("traceback/vllm_10453.txt"))
    from_log = _read(log, in_log=True)
    events = [e for p in from_log.processes for e in p.log_events if e.kind == "exception"]
    assert len([e for e in events if "DistBackendError" in e.text]) == 1
    assert not any(p.text_stacks for p in from_log.processes)
    from_paste = _read(log, in_log=False)
    rank1 = [p for p in from_paste.processes if p.rank == 1]
    events = [e for p in rank1 for e in p.log_events if e.kind == "exception"]
    assert len([e for e in events if "DistBackendError" in e.text]) == 1
    assert [len(s.threads) for p in rank1 for s in p.text_stacks] == [1]


def test_watchdog_cpp_stack_is_a_stack_in_a_paste_and_an_event_in_a_log(tmp_path: Path) -> None:
    text = paste("cpp/open_r1_620.txt")
    log = tmp_path / "stderr.log"
    log.write_text(text)
    # a log: the log side reports the watchdog timeout; its C++ stack is not a sample
    from_log = _read(log, in_log=True)
    assert [p.rank for p in from_log.processes] == [3]
    assert not any(p.text_stacks for p in from_log.processes)
    # a stacks file: the same stack is a thread of rank 3
    from_paste = _read(log, in_log=False)
    assert [p.rank for p in from_paste.processes if p.text_stacks] == [3]


def test_watchdog_log_does_not_make_a_dumped_rank_look_moving(tmp_path: Path) -> None:
    # GIVEN rank 3's py-spy dump and rank 3's stderr with the watchdog's C++ stack
    dump = tmp_path / "rank3_pyspy.txt"
    dump.write_text((SAMPLES / "pyspy" / "dump.txt").read_text())
    log = tmp_path / "rank3_stderr.log"
    log.write_text(paste("cpp/open_r1_620.txt"))
    # THEN the one dump is still the only sample: no "progress between samples"
    data = _analyze(tmp_path, dump, log)
    assert data["verdict"] != "not_hung"


def test_traceback_under_a_rank_header_is_one_death_on_that_rank(tmp_path: Path) -> None:
    # GIVEN a ticket paste: "=== rank 2 ===" over a real traceback, nothing else
    ticket = tmp_path / "ticket.txt"
    ticket.write_text("=== rank 2 ===\n" + paste("traceback/mtr_99.txt"))
    parsed = TextParser().parse(ticket, "ticket.txt")
    # THEN the log side's exception event moved to rank 2, next to the stack
    assert not [e for e in parsed.job_log_events if e.kind == "exception"]
    [proc] = parsed.processes
    assert proc.rank == 2 and proc.exited
    [event] = [e for e in proc.log_events if e.kind == "exception"]
    assert event.rank_from == "stack_marker"
    # AND the analysis names rank 2 once, as the rank that died
    findings = _findings(_analyze(tmp_path, ticket))
    assert findings[0]["rule"] == "HD030" and findings[0]["culprit_ranks"] == [2]


def test_gdb_paste_end_to_end(tmp_path: Path) -> None:
    # GIVEN two ranks' real gdb backtraces pasted in one file under rank headers
    paste_file = tmp_path / "gdb_paste.txt"
    paste_file.write_text(
        "=== rank 0 ===\n"
        + paste("gdb/pytorch_4679.txt")
        + "\n=== rank 1 ===\n"
        + paste("gdb/tensorrt_llm_2560.txt")
    )
    data = _analyze(tmp_path, paste_file)
    ranks = data["ranks"]
    assert isinstance(ranks, dict) and ranks["seen"] == [0, 1]
    inputs = data["inputs"]
    assert isinstance(inputs, list)
    assert [(i["kind"], i["ranks"], i["error"]) for i in inputs] == [("stack_text", [0, 1], None)]


def test_pystack_paste_end_to_end_rank_from_file_name(tmp_path: Path) -> None:
    paste_file = tmp_path / "rank3_pystack.txt"
    paste_file.write_text(paste("pystack/pystack_readme.txt"))
    data = _analyze(tmp_path, paste_file)
    ranks = data["ranks"]
    assert isinstance(ranks, dict) and ranks["seen"] == [3]


def test_pystack_rank_outside_while_a_traceback_rank_waits(tmp_path: Path) -> None:
    # rank 0 pasted with pystack (sleeping in its own code); rank 1's traceback shows
    # it in all_reduce when the NCCL error came
    paste_file = tmp_path / "ticket.txt"
    paste_file.write_text(
        "RANK=0\n"
        + paste("pystack/pystack_readme.txt")
        + "\n"
        + "\n".join(paste("traceback/vllm_10453.txt").splitlines()[8:-2])
    )
    data = _analyze(tmp_path, paste_file)
    ranks = data["ranks"]
    assert isinstance(ranks, dict) and ranks["seen"] == [0, 1]
    top = _findings(data)[0]
    assert top["culprit_ranks"] == [0]  # rank 0 is outside any collective


def test_50_mb_paste_is_bounded(tmp_path: Path) -> None:
    chunk = (
        "=== rank 0 ===\n" + paste("gdb/pytorch_4679.txt") + "\n" + paste("traceback/mtr_99.txt")
    )
    big = tmp_path / "big.txt"
    with big.open("w") as handle:
        for _ in range(50 * 1024 * 1024 // len(chunk) + 1):
            handle.write(chunk + "\n")
    assert big.stat().st_size > 50 * 1024 * 1024
    assert _kind(big) is InputKind.STACK_TEXT
    tracemalloc.start()
    started = time.monotonic()
    try:
        parsed = TextParser().parse(big, "big.txt")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 120  # about 8 s here, tracemalloc included
    assert peak < 256 * 1024 * 1024
    [proc] = parsed.processes
    assert proc.rank == 0 and 1 <= len(proc.text_stacks) <= 32
    # the one exception, its repeats counted (the tail starts inside a traceback, above
    # the first label it holds: the first of them is nobody's)
    events = [*proc.log_events, *parsed.job_log_events]
    [exception] = [e for e in events if e.kind == "exception"]
    assert exception.repeats > 1000
    assert any("only" in n for n in parsed.notes)


def test_several_pyspy_dumps_under_rank_markers_end_to_end(tmp_path: Path) -> None:
    # two py-spy dumps in one file (the same pid, two machines), each under a marker
    # the py-spy parser does not read: today's "ranks seen: none" becomes 0 and 1
    ticket = tmp_path / "dumps.txt"
    ticket.write_text(
        "=== rank 0 ===\n"
        + (SAMPLES / "pyspy" / "dump.txt").read_text()
        + "\nrank 1:\n"
        + (SAMPLES / "pyspy" / "dump_native.txt").read_text()
    )
    data = _analyze(tmp_path, ticket)
    ranks = data["ranks"]
    assert isinstance(ranks, dict) and ranks["seen"] == [0, 1]


def test_a_bug_in_the_stack_scan_costs_the_log_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hangdoc.analyzer.parsers.stacks.parser as stacks_parser

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("boom")

    monkeypatch.setattr(stacks_parser, "scan_text", broken)
    log = tmp_path / "stderr.log"
    log.write_text(paste("traceback/vllm_10453.txt"))
    parsed = TextParser().parse(log, "stderr.log")
    assert any(e.kind == "exception" for p in parsed.processes for e in p.log_events)
    assert any("stacks not read (RuntimeError: boom)" in n for n in parsed.notes)


def test_sniffing_a_pyspy_file_does_not_scan_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import hangdoc.analyzer.parsers.stacks.parser as stacks_parser

    def broken(*args: object, **kwargs: object) -> object:
        raise AssertionError("scanned")

    monkeypatch.setattr(stacks_parser, "scan_text", broken)
    head = (SAMPLES / "pyspy" / "dump.txt").read_bytes()
    assert not mostly_stacks(head, LogParser().sniff)


@pytest.mark.parametrize("in_log", [True, False], ids=["log", "stacks"])
def test_log_with_nccl_lines_then_a_pyspy_dump_yields_both(tmp_path: Path, in_log: bool) -> None:
    nccl = "\n".join(paste("traceback/vllm_10453.txt").splitlines()[:8])
    log = tmp_path / "rank3.log"
    log.write_text(nccl + "\n" + (SAMPLES / "pyspy" / "dump.txt").read_text())
    parsed = _read(log, in_log=in_log)
    stacks = [p for p in parsed.processes if p.text_stacks]
    assert [(p.pid, len(p.text_stacks)) for p in stacks] == [(9106, 1)]
    events = [e for p in parsed.processes for e in p.log_events] + parsed.job_log_events
    assert any("NCCL INFO" in e.text for e in events)
