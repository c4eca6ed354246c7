"""Node summaries /3: the ranks' log windows as digests (summaries/log_window.py), and
hydrate() taking the named ranks' logs from the summary instead of parsing them again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hangdoc.analyzer.loading import hydrate as hydrate_module
from hangdoc.analyzer.loading.loader import load_dump, load_paths
from hangdoc.analyzer.loading.redaction import redact_evidence
from hangdoc.analyzer.model import LogLine, LogTemplates
from hangdoc.analyzer.summaries.log_window import (
    TemplateFormats,
    TemplateTable,
    decode_window,
    encode_window,
)
from hangdoc.analyzer.summaries.read import read_summary
from hangdoc.analyzer.summarize.write import write_node_summary
from hangdoc.analyzer.views.log_compare import compare_logs
from hangdoc.analyzer.vocabulary import BenignWarning
from hangdoc.collectors.jobformat import SUMMARY_FORMAT, SUMMARY_NAME
from tests.unit.summary.older_formats import as_format_5

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
# Recorded dumps whose ranks have logs (the windows a digest carries).
LOGGED = sorted(p.parent for p in FIXTURES.rglob("manifest.json") if any(p.parent.glob("*/logs/*")))
IDS = [str(p.relative_to(FIXTURES)) for p in LOGGED]


def _copy(dump: Path, tmp_path: Path) -> Path:
    dest = tmp_path / dump.name
    shutil.copytree(dump, dest)
    return dest


def _round_trip(lines: list[LogLine]) -> list[LogLine]:
    table = TemplateTable()
    window = encode_window(lines, table)
    window = json.loads(json.dumps(window))  # as a summary file holds it
    return decode_window(window, TemplateFormats(table.rows), lambda path: "D" + path)


def test_a_digest_gives_back_every_line_exactly() -> None:
    # GIVEN lines with every kind of number the comparison cuts at, none, %-signs, hex,
    # times, a benign mark, two sources and line numbers that go back to 0 (a tail)
    lines = [
        LogLine("epoch 0 step 12 | loss 2.8084 | lr 3.00e-04 | 100% done", "/a", 3),
        LogLine("no number here, 50%% literal %s %d", "/a", 4),
        LogLine("ptr 0x7f3a9c at 12:03:04.5 took 1:02:03", "/a", 9),
        LogLine("", "/a", 10),
        LogLine("rank 7 step 13", "/b", 0, BenignWarning.TOKENIZERS_FORK),
        LogLine("rank 7 step 14 ", "/b", 0),
        LogLine("٣ digits of another script 4", "/b", 0),
    ]
    # WHEN it is written as a digest and read back (paths relocated by the reader)
    back = _round_trip(lines)
    # THEN every line is the same, its source relocated
    assert back == [LogLine(x.text, "D" + x.source, x.line, x.benign) for x in lines]


def test_an_empty_window_round_trips() -> None:
    assert _round_trip([]) == []


@pytest.mark.parametrize(
    "damage",
    [
        {"t": [0], "n": "", "l": [1], "s": [["/a", 1]]},  # a number missing
        {"t": [0], "n": "1 2", "l": [1], "s": [["/a", 1]]},  # one too many
        {"t": [5], "n": "1", "l": [1], "s": [["/a", 1]]},  # no such template
        {"t": [-1], "n": "1", "l": [1], "s": [["/a", 1]]},
        {"t": [0], "n": "1", "l": [], "s": [["/a", 1]]},
        {"t": [0], "n": "1", "l": [1], "s": [["/a", 2]]},
        {"t": [0], "n": "1", "l": [1], "s": [["/a", 10**15]]},  # not built before refused
        {"t": [0], "n": "1", "l": [1], "s": [["/a", -1], ["/a", 2]]},
        {"t": [0, 0], "n": "1", "l": [1, 1], "s": [["/a", 1]]},
    ],
)
def test_a_damaged_digest_raises_what_the_reader_catches(damage: dict[str, object]) -> None:
    formats = TemplateFormats([["step ", ""]])
    with pytest.raises((KeyError, TypeError, ValueError, IndexError)):
        decode_window(damage, formats, lambda path: path)


def test_a_digest_that_would_build_gigabytes_is_refused_before_it_does() -> None:
    formats = TemplateFormats([["x" * 1_000_000]])
    damage = {"t": [0] * 100_000, "n": "", "l": [0] * 100_000, "s": [["/a", 100_000]]}
    with pytest.raises(ValueError, match="longer than any window"):
        decode_window(damage, formats, lambda path: path)


def test_summaries_carry_windows_as_digests_and_are_smaller(tmp_path: Path) -> None:
    copy = _copy(FIXTURES / "dumps" / "own-data-count", tmp_path)
    write_node_summary(copy)
    summary = json.loads((copy / SUMMARY_NAME).read_text())
    assert summary["format"] == SUMMARY_FORMAT
    assert summary["log_templates"]
    assert all(
        "log_window" in r and "log_lines" not in r.get("extra", {}) for r in summary["ranks"]
    )
    # AND the windows read back are the raw load's (redacted, as the writer stores them)
    contents, why = read_summary(copy, "X")
    assert contents is not None and why is None
    raw = load_dump(copy, "X")
    redact_evidence(raw)
    by_rank = {p.rank: p for p in raw.processes}
    assert contents.processes
    for proc in contents.processes:
        assert proc.log_lines == by_rank[proc.rank].log_lines


def test_a_summary_of_the_previous_format_still_loads(tmp_path: Path) -> None:
    """A /2 summary (written by hangdoc before the digests: each window's lines under the
    rank's ``extra``) is read as it was, not refused."""
    copy = _copy(FIXTURES / "dumps" / "own-data-count", tmp_path)
    raw = load_dump(copy, "X")
    redact_evidence(raw)
    write_node_summary(copy)
    path = copy / SUMMARY_NAME
    summary = as_format_5(json.loads(path.read_text()))
    # the /2 form of the same node: the lines as model records, no template table
    summary["format"] = "hangdoc.summary/2"
    templates = TemplateFormats(summary.pop("log_templates"))
    for rank in summary["ranks"]:
        if "log_window" not in rank:
            continue  # a rank without log lines
        lines = decode_window(rank.pop("log_window"), templates, lambda p: p)
        rank.setdefault("extra", {})["log_lines"] = [
            {"text": x.text, "source": x.source, "line": x.line} for x in lines
        ]
    path.write_text(json.dumps(summary))
    contents, why = read_summary(copy, "X")
    assert why is None and contents is not None
    by_rank = {p.rank: p for p in raw.processes}
    assert all(p.log_lines == by_rank[p.rank].log_lines for p in contents.processes)


def test_a_summary_of_format_4_still_loads(tmp_path: Path) -> None:
    """A /4 summary (each window's templates and line-number differences a value a line,
    ``t`` and ``l``, where /5 writes runs) reads back the same lines and templates."""
    copy = _copy(FIXTURES / "dumps" / "own-data-count", tmp_path)
    write_node_summary(copy)
    path = copy / SUMMARY_NAME
    summary = as_format_5(json.loads(path.read_text()))
    path.write_text(json.dumps(summary))
    windows = [r["log_window"] for r in summary["ranks"] if "log_window" in r]
    assert windows and all("tr" in w and "lr" in w and "t" not in w for w in windows)
    assert any(count > 1 for w in windows for _, count in w["tr"])  # (runs, not a line each)
    now, _ = read_summary(copy, "X")
    summary["format"] = "hangdoc.summary/4"
    for window in windows:
        window["t"] = [v for v, n in window.pop("tr") for _ in range(n)]
        window["l"] = [v for v, n in window.pop("lr") for _ in range(n)]
    path.write_text(json.dumps(summary))
    before, why = read_summary(copy, "X")
    assert why is None and before is not None and now is not None
    for old, new in zip(before.processes, now.processes, strict=True):
        assert old.log_lines == new.log_lines
        assert (old.log_templates is None) == (new.log_templates is None)
        if old.log_templates is not None and new.log_templates is not None:
            assert old.log_templates.runs == new.log_templates.runs


def test_a_summary_of_an_unknown_format_is_named_in_one_line(tmp_path: Path) -> None:
    copy = _copy(FIXTURES / "dumps" / "own-data-count", tmp_path)
    write_node_summary(copy)
    (copy / SUMMARY_NAME).write_text('{"format": "hangdoc.summary/1", "ranks": []}')
    evidence = load_paths([copy])
    notes = [n for n in evidence.notes if "format" in n]
    assert notes == [
        f"{copy}: {SUMMARY_NAME} has format hangdoc.summary/1; this hangdoc reads "
        f"{SUMMARY_FORMAT}; its raw files are read instead"
    ]
    assert any(p.log_lines for p in evidence.processes)


@pytest.mark.parametrize("dump", LOGGED, ids=IDS)
def test_hydrate_takes_logs_from_the_summary_as_the_raw_logs_give_them(
    dump: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a recorded dump with rank logs, and its node summary
    copy = _copy(dump, tmp_path)
    write_node_summary(copy)
    # WHEN it is loaded from the summary, the outliers' logs taken from the summary...
    taken = load_paths([copy])
    # ...and again with every outlier's logs parsed from the raw files
    monkeypatch.setattr(hydrate_module, "_logs_from_summaries", lambda plans: (set(), frozenset()))
    parsed = load_paths([copy])
    # THEN the two Evidences are the same, record for record
    assert taken.processes == parsed.processes
    assert sorted(taken.inputs, key=lambda i: i.path) == sorted(parsed.inputs, key=lambda i: i.path)
    assert taken.notes == parsed.notes
    assert taken.job_log_events == parsed.job_log_events


def test_hydrate_leaves_the_logs_unread_where_the_summary_holds_them(tmp_path: Path) -> None:
    copy = _copy(FIXTURES / "dumps" / "own-data-count", tmp_path)
    write_node_summary(copy)
    read: list[str] = []
    original = hydrate_module._logs_from_summaries

    def spy(
        plans: list[tuple[hydrate_module.SummaryDump, list[int], list[int]]],
    ) -> tuple[set[int], frozenset[str]]:
        ranks, skip = original(plans)
        read.extend(skip)
        return ranks, skip

    pytest.MonkeyPatch().setattr(hydrate_module, "_logs_from_summaries", spy)
    try:
        evidence = load_paths([copy])
    finally:
        pytest.MonkeyPatch().undo()
    assert any("were opened as well" in n for n in evidence.notes)
    assert read and all("/logs/" in path for path in read)


@pytest.mark.parametrize("dump", LOGGED, ids=IDS)
def test_the_log_comparison_of_given_templates_is_the_comparison_of_the_lines(
    dump: Path, tmp_path: Path
) -> None:
    # GIVEN a recorded dump read from its summary, whose ranks' windows carry templates
    copy = _copy(dump, tmp_path)
    write_node_summary(copy)
    evidence = load_paths([copy], hydrate_budget=0)
    given = [p for p in evidence.processes if p.log_templates is not None]
    assert all(p.log_templates.describes(p.log_lines) for p in given if p.log_templates)
    # WHEN the logs are compared by those templates, and again by masking every line
    by_templates = compare_logs(evidence)
    for proc in evidence.processes:
        proc.log_templates = None
    by_lines = compare_logs(evidence)
    # THEN the comparisons are the same
    assert by_templates == by_lines


def test_templates_of_a_window_changed_after_reading_are_not_used() -> None:
    lines = [LogLine("step 1", "/a", 1), LogLine("step 2", "/a", 2)]
    given = LogTemplates(("step #",), ((0, 2),), lines)
    assert given.describes(lines)
    assert not given.describes(list(lines))
    lines.append(LogLine("done", "/a", 3))
    assert not given.describes(lines)
