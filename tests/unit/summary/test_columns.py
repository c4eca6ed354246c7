"""Node summaries /6: the ranks' records as one table per node, a column per field
(summaries/columns.py). Read back they are the records the one-object-per-record form
(/2 to /5) gives, on every recorded dump; a /5 summary still loads the same; a damaged
table makes the summary untrusted (the raw files are read), never a traceback."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from hangdoc.analyzer.loading.loader import load_dump, load_paths
from hangdoc.analyzer.loading.redaction import redact_evidence
from hangdoc.analyzer.model import LogEvent, ProcessEvidence
from hangdoc.analyzer.payloads.base import NO_PAYLOAD, EventPayload
from hangdoc.analyzer.payloads.nccl import NcclInit
from hangdoc.analyzer.summaries.codec import (
    DecodeContext,
    FrameTable,
    decode_frames,
    decoder,
    encoder,
)
from hangdoc.analyzer.summaries.columns import TABLES, decode_table, encode_table
from hangdoc.analyzer.summaries.read import read_summary
from hangdoc.analyzer.summarize.write import write_node_summary
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.collectors.jobformat import SUMMARY_FORMAT, SUMMARY_NAME
from tests.unit.summary.older_formats import as_format_5, as_format_6

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
sys.path.insert(0, str(FIXTURES.parent / "scripts"))
import bench_all  # noqa: E402  (the all-inputs benchmark's tree)

DUMPS = sorted(p.parent for p in FIXTURES.rglob("manifest.json"))
IDS = [str(p.relative_to(FIXTURES)) for p in DUMPS]
# (ProcessEvidence field, table name)
FIELDS = {"proc": "proc_samples", "collectives": "collectives", "log_events": "log_events",
          "gpu": "gpu"}  # fmt: skip


def _records(proc: ProcessEvidence, name: str) -> list[Any]:
    return list(getattr(proc, FIELDS[name]))


@pytest.mark.parametrize("dump", DUMPS, ids=IDS)
def test_a_table_reads_back_what_a_record_each_reads_back(dump: Path) -> None:
    # GIVEN the records of a recorded dump's ranks, redacted as a node writes them
    evidence = redact_evidence(load_dump(dump, "@"))
    for name, cls in TABLES.items():
        groups = [_records(p, name) for p in evidence.processes]
        frames = FrameTable()
        # WHEN written as one table (through JSON) and as one object a record
        table = json.loads(json.dumps(encode_table(cls, groups, frames)))
        ones = json.loads(json.dumps([[encoder(cls)(r, frames) for r in g] for g in groups]))
        ctx = DecodeContext(frames=decode_frames(frames.rows), display="D")
        # THEN both read back the same records, in the same ranks, of the same classes
        by_table = decode_table(cls, table, ctx)
        by_record = [[decoder(cls)(r, ctx) for r in g] for g in ones]
        assert by_table == by_record
        if cls is LogEvent:
            assert [type(e.payload) for g in by_table for e in g] == [
                type(e.payload) for g in by_record for e in g
            ]


def test_repeated_values_are_written_once_and_payloads_by_kind() -> None:
    # GIVEN four ranks' init events, alike but for their rank, and one without a payload
    events = [
        [LogEvent(EventKind.NCCL_INIT, f"init {r}", "@/log", r, payload=NcclInit(rank=r)),
         LogEvent(EventKind.NCCL_INIT, "bare", "@/log", 9)]
        for r in range(4)
    ]  # fmt: skip
    table = encode_table(LogEvent, events, FrameTable())
    columns = table["c"]
    # THEN one kind, one source; lines a few values; payloads a table of their kind; the
    # four equal bare events one record (/7), the rows its index
    assert table["rows"] == [2, 2, 2, 2]
    assert table["d"] == 5 and table["u"] == [0, 1, 2, 1, 3, 1, 4, 1]
    assert columns["kind"] == {"k": "nccl_init"} and columns["source"] == {"k": "@/log"}
    assert set(columns["payload"]["t"]) == {"nccl_init"}
    assert columns["payload"]["e"] == [1]
    back = decode_table(LogEvent, json.loads(json.dumps(table)), DecodeContext([], "D"))
    assert [[e.payload for e in g] for g in back] == [
        [NcclInit(rank=r), NO_PAYLOAD] for r in range(4)
    ]
    assert [[e.source for e in g] for g in back] == [["D/log", "D/log"]] * 4
    assert all(g[1] is back[0][1] for g in back)  # (one record, shared: it is frozen)


def test_equal_records_are_written_once_only_where_it_pays() -> None:
    # GIVEN ranks whose records are all different (their own line each)
    events = [[LogEvent(EventKind.NCCL_INIT, f"init {r}", "@/log", r)] for r in range(4)]
    table = encode_table(LogEvent, events, FrameTable())
    # THEN no indices are written: the rows are the records
    assert "u" not in table and "d" not in table
    # AND a table of one equal record is written once however many ranks hold it
    same = encode_table(LogEvent, [[LogEvent(EventKind.NCCL_INIT, "x", "@/log")]] * 3, FrameTable())
    assert same["d"] == 1 and same["u"] == [0, 0, 0]
    back = decode_table(LogEvent, same, DecodeContext([], "D"))
    assert back == [[LogEvent(EventKind.NCCL_INIT, "x", "D/log")]] * 3


def test_a_payload_not_of_its_kinds_class_is_written_a_payload_a_row() -> None:
    # GIVEN an init event whose payload is the base class (a recogniser that read no
    # fields of its kind but an error's words)
    events = [[LogEvent(EventKind.NCCL_INIT, "x", "s", payload=EventPayload(message="m"))]]
    table = encode_table(LogEvent, events, FrameTable())
    # THEN the column is one payload a row, read as the kind's class as /5 reads it
    assert isinstance(table["c"]["payload"], dict) and "t" not in table["c"]["payload"]
    back = decode_table(LogEvent, table, DecodeContext([], "D"))
    assert back[0][0].payload == NcclInit(message="m")


def _summary(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    copy = tmp_path / "own-data-count"  # (its ranks' logs give log events)
    shutil.copytree(FIXTURES / "dumps" / "own-data-count", copy)
    write_node_summary(copy)
    summary = json.loads((copy / SUMMARY_NAME).read_text())
    assert summary["format"] == SUMMARY_FORMAT and sum(summary["tables"]["log_events"]["rows"])
    return copy, summary


def test_a_summary_of_format_5_still_loads_the_same(tmp_path: Path) -> None:
    """/5 wrote each rank's records in its own record, one object each, and each
    window's numbers in the window."""
    copy, summary = _summary(tmp_path)
    now, _ = read_summary(copy, "X")
    (copy / SUMMARY_NAME).write_text(json.dumps(as_format_5(summary)))
    before, why = read_summary(copy, "X")
    assert why is None and before is not None and now is not None
    for old, new in zip(before.processes, now.processes, strict=True):
        for field in FIELDS.values():
            assert getattr(old, field) == getattr(new, field)
        assert list(old.log_lines) == list(new.log_lines)
    assert any(p.log_lines for p in now.processes)


DAMAGES = ["rows", "column too short", "negative index", "wrong scalar", "payload kinds"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_table_makes_the_summary_untrusted(tmp_path: Path, damage: str) -> None:
    copy, summary = _summary(tmp_path)
    events = summary["tables"]["log_events"]
    if damage == "rows":
        events["rows"] = [1, -1]
    elif damage == "column too short":
        events["c"]["text"] = ["x"] * (sum(events["rows"]) + 1)
    elif damage == "negative index":
        events["c"]["line"] = {"v": [1, 2], "i": [-1] * sum(events["rows"])}
    elif damage == "wrong scalar":
        events["c"]["pid"] = {"k": "7"}
    elif damage == "payload kinds":
        events["c"]["payload"]["t"]["no_such_kind"] = {}
    (copy / SUMMARY_NAME).write_text(json.dumps(summary))
    contents, why = read_summary(copy, "X")
    assert contents is None and why is not None and "damaged" in why
    evidence = load_paths([copy])
    assert any("raw files are read instead" in n for n in evidence.notes)
    assert {p.rank for p in evidence.processes} == {0, 1, 2, 3}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job of the all-inputs benchmark (scripts/bench_all.py), 16 ranks on 2 nodes:
    every rank with its NCCL init lines, flight recorder, /proc and py-spy samples."""
    tree, _ = bench_all.build(tmp_path_factory.mktemp("job"), 16, 0.05, 1)
    for node in sorted(p for p in tree.iterdir() if p.is_dir()):
        write_node_summary(node)
    return tree


def test_a_job_read_from_its_tables_is_analysed_as_from_its_raw_files(job: Path) -> None:
    from hangdoc.analyzer.engine import analyze

    def key(summaries: bool) -> list[tuple[object, ...]]:
        found = analyze(load_paths([job], summaries=summaries)).findings
        return [(f.rule, f.category, f.culprit_ranks, f.title) for f in found]

    summary = json.loads((job / "node00000" / SUMMARY_NAME).read_text())
    assert summary["format"] == SUMMARY_FORMAT
    assert all(
        sum(t["rows"]) for t in summary["tables"].values() if t is not summary["tables"]["gpu"]
    )
    assert key(True) == key(False)


def test_a_jobs_tables_read_back_the_records_of_its_raw_files(job: Path) -> None:
    from hangdoc.analyzer.summarize.reduce import LOG_EVENTS_PER_RANK, cap_events, fr_window

    node = job / "node00001"
    raw = {p.rank: p for p in redact_evidence(load_dump(node, "X")).processes}
    contents, why = read_summary(node, "X")
    assert why is None and contents is not None
    for proc in contents.processes:
        assert proc.rank is not None
        assert proc.collectives == fr_window(raw[proc.rank].collectives)
        assert proc.log_events == cap_events(raw[proc.rank].log_events, LOG_EVENTS_PER_RANK)
        assert proc.log_events and proc.collectives


def test_window_numbers_are_found_at_the_end_or_in_a_file_written_otherwise(
    tmp_path: Path,
) -> None:
    # GIVEN a /6 summary, its windows' numbers the last key, read without parsing them
    copy, summary = _summary(tmp_path)
    assert list(summary)[-1] == "window_numbers" and summary["window_numbers"]
    now, _ = read_summary(copy, "X")
    # WHEN the same summary is re-indented by hand (the key is no longer found at the end)
    (copy / SUMMARY_NAME).write_text(json.dumps(summary, indent=2))
    again, why = read_summary(copy, "X")
    # THEN it reads the same lines
    assert why is None and again is not None and now is not None
    assert [list(p.log_lines) for p in again.processes] == [
        list(p.log_lines) for p in now.processes
    ]


@pytest.mark.parametrize("damage", ["short", "long", "space", "newline", "lengths"])
def test_damaged_window_numbers_make_the_summary_untrusted(tmp_path: Path, damage: str) -> None:
    copy, summary = _summary(tmp_path)
    numbers: str = summary["window_numbers"]
    window = next(r["log_window"] for r in summary["ranks"] if "log_window" in r)
    if damage == "short":
        summary["window_numbers"] = numbers[:-1]
    elif damage == "long":
        summary["window_numbers"] = numbers + "7"
    elif damage == "space":  # one number more in a run, the lengths as they were
        at = numbers.index(" ")
        summary["window_numbers"] = numbers[:at] + " " + numbers[at + 2 :]
    elif damage == "newline":
        at = numbers.index(" ")
        summary["window_numbers"] = numbers[:at] + "\n" + numbers[at + 1 :]
    elif damage == "lengths":
        window["nl"] = [-1, *window["nl"][1:]]
    (copy / SUMMARY_NAME).write_text(json.dumps(summary, separators=(",", ":")))
    contents, why = read_summary(copy, "X")
    assert contents is None and why is not None and "damaged" in why


def _node_of(job: Path, tmp_path: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """A copy of the benchmark job's first node, its summary, and the summary's table
    that writes equal records once (/7: the ranks' flight recorders share history)."""
    copy = tmp_path / "node00000"
    shutil.copytree(job / "node00000", copy)
    summary = json.loads((copy / SUMMARY_NAME).read_text())
    return copy, summary, next(t for t in summary["tables"].values() if "u" in t)


def test_a_summary_of_format_6_still_loads_the_same(job: Path, tmp_path: Path) -> None:
    """/6 wrote every row's record, equal ones too."""
    copy, summary, table = _node_of(job, tmp_path)
    assert table["d"] < len(table["u"])
    now, _ = read_summary(copy, "X")
    (copy / SUMMARY_NAME).write_text(json.dumps(as_format_6(summary)))
    assert not any("u" in t for t in summary["tables"].values())
    before, why = read_summary(copy, "X")
    assert why is None and before is not None and now is not None
    for old, new in zip(before.processes, now.processes, strict=True):
        for field in FIELDS.values():
            assert getattr(old, field) == getattr(new, field)
    assert any(p.collectives for p in now.processes)


@pytest.mark.parametrize("damage", ["index past the records", "too few", "not indices"])
def test_damaged_shared_rows_make_the_summary_untrusted(
    job: Path, tmp_path: Path, damage: str
) -> None:
    copy, summary, table = _node_of(job, tmp_path)
    if damage == "index past the records":
        table["u"][-1] = table["d"]
    elif damage == "too few":
        table["u"].pop()
    else:
        table["u"][0] = str(table["u"][0])
    (copy / SUMMARY_NAME).write_text(json.dumps(summary))
    contents, why = read_summary(copy, "X")
    assert contents is None and why is not None and "damaged" in why
