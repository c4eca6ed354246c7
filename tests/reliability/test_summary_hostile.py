"""A dump's ``summary.json`` comes with the dump, from strangers too: it is input.

An edited summary must not carry a secret past redaction, a malformed one must not stop
the analysis, and a huge one must not be read whole.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.summarize.write import write_node_summary
from hangdoc.cli import main
from tests.reliability.stats import count
from tests.reliability.test_safe_loading import ROOT, run_bounded, sparse_file

DUMP = ROOT / "fixtures" / "dumps" / "checkpoint"
SECRET = "hf_" + "Zq9" * 12


def _dump_with_summary(tmp_path: Path) -> tuple[Path, Path]:
    dump = tmp_path / "dump"
    shutil.copytree(DUMP, dump)
    return dump, write_node_summary(dump)


def test_an_edited_summary_is_redacted_like_any_input(tmp_path: Path) -> None:
    # GIVEN a dump whose summary.json was edited to carry a token in a thread name
    dump, summary = _dump_with_summary(tmp_path)
    text = summary.read_text()
    assert '"MainThread"' in text
    summary.write_text(text.replace('"MainThread"', json.dumps(f"MainThread {SECRET}"), 1))
    # WHEN analyzed THEN the report is built from the summary, and the token is not in it
    html = tmp_path / "r.html"
    assert main(["analyze", str(dump), "-q", "--html", str(html)]) == 0
    count("secrets: planted in an edited node summary")
    assert "MainThread" in html.read_text()
    assert SECRET not in html.read_text()


def test_a_summary_nested_past_the_recursion_limit_does_not_stop_the_analysis(
    tmp_path: Path,
) -> None:
    dump, summary = _dump_with_summary(tmp_path)
    summary.write_bytes(b'{"a":' * 100_000)
    evidence = load_paths([dump])
    count("faults: hostile node summaries")
    assert any("summary.json" in n and "RecursionError" in n for n in evidence.notes)
    assert {p.rank for p in evidence.processes} == {0, 1, 2, 3}


def test_read_summary_reports_deep_nesting_itself(tmp_path: Path) -> None:
    from hangdoc.analyzer.summaries.read import read_summary

    dump, summary = _dump_with_summary(tmp_path)
    summary.write_bytes(b'{"a":' * 100_000)
    contents, why = read_summary(dump, "dump")
    assert contents is None and why


HUGE_SUMMARY_PROBE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from hangdoc.analyzer.summaries.read import read_summary
    print(read_summary(Path(sys.argv[1]), "dump")[1])
    """
)


def test_a_10gb_summary_is_not_read_whole(tmp_path: Path) -> None:
    dump, summary = _dump_with_summary(tmp_path)
    sparse_file(summary, summary.read_bytes())
    done = run_bounded(HUGE_SUMMARY_PROBE, str(dump), memory=1024**3)
    assert done.returncode == 0, done.stderr[-1500:]


def test_a_job_manifest_nested_past_the_recursion_limit_is_an_input_error(
    tmp_path: Path,
) -> None:
    from hangdoc.collectors.jobformat import JOB_MANIFEST_NAME

    shutil.copytree(DUMP, tmp_path / "node1")
    (tmp_path / JOB_MANIFEST_NAME).write_bytes(b'{"format": "hangdoc.job/1", "a":' + b"[" * 100_000)
    evidence = load_paths([tmp_path])
    count("faults: hostile node summaries")
    [job] = [i for i in evidence.inputs if i.path.endswith(JOB_MANIFEST_NAME)]
    assert job.error and "RecursionError" in job.error
    assert {p.rank for p in evidence.processes} == {0, 1, 2, 3}


def test_read_job_manifest_reports_deep_nesting_itself(tmp_path: Path) -> None:
    from hangdoc.analyzer.loading.job_merge import read_job_manifest

    path = tmp_path / "job.json"
    path.write_bytes(b'{"format": "hangdoc.job/1", "a":' + b"[" * 100_000)
    info, item, _ = read_job_manifest(path, "job.json")
    assert info is None and item.error


def _spoil_runs(summary: Path, rank: int, how: str) -> None:
    """Every run of ``rank``'s window numbers spoiled in place (the file's length and the
    windows' lengths kept): a backslash at each run's start, or each space made a digit."""
    data = summary.read_bytes()
    key = b',"window_numbers":"'
    at = data.index(key) + len(key)
    head = json.loads(data[: data.index(key)] + b"}")
    start = at
    spoiled = bytearray(data)
    for record in head["ranks"]:
        lengths = record.get("log_window", {}).get("nl", [])
        if record.get("rank") == rank:
            for length in lengths:
                if how == "backslash" and length:
                    spoiled[start] = ord("\\")
                elif how == "count":
                    spoiled[start : start + length] = data[start : start + length].replace(
                        b" ", b"7"
                    )
                start += length
        else:
            start += sum(lengths)
    assert bytes(spoiled) != data
    summary.write_bytes(bytes(spoiled))


def _answer(diagnosis: object) -> object:
    """What an analysis answers, but for its notes (the warning is the difference)."""
    out = diagnosis.to_json()  # type: ignore[attr-defined]
    out.pop("notes", None)
    out.get("evidence", {}).pop("notes", None)
    return out


@pytest.mark.parametrize("how", ["backslash", "count"])
def test_a_damaged_run_of_window_numbers_drops_that_ranks_window_only(
    tmp_path: Path, how: str
) -> None:
    from hangdoc.analyzer.engine import analyze

    # GIVEN a dump whose summary has rank 2's window numbers damaged, found only when a
    # line of them is read (the numbers are checked a run at a time, when first read)
    dump = tmp_path / "dump"
    shutil.copytree(ROOT / "fixtures" / "dumps" / "own-validation", dump)
    summary = write_node_summary(dump)
    evidence = load_paths([dump])
    for proc in evidence.processes:
        if proc.rank == 2:
            proc.log_lines, proc.log_templates = [], None
    expected = _answer(analyze(evidence))
    _spoil_runs(summary, 2, how)
    # WHEN analyzed
    evidence = load_paths([dump])
    assert not any("raw files are read instead" in n for n in evidence.notes)
    diagnosis = analyze(evidence)
    count("faults: hostile node summaries")
    # THEN a warning names the summary file and the rank, no rule failed, and every
    # answer is the one the analysis gives without that rank's window
    warnings = [n for n in evidence.notes if "log window is damaged" in n]
    assert len(warnings) == 1, evidence.notes
    assert "dump/summary.json: rank 2's log window" in warnings[0]
    assert "left out" in warnings[0]
    assert not any("failed on these inputs" in n for n in evidence.notes), evidence.notes
    assert not [n for n in diagnosis.not_evaluated if "failed" in n.reason]
    assert _answer(diagnosis) == expected
    assert [p.log_lines for p in evidence.processes if p.rank == 2] == [[]]
    assert all(len(p.log_lines) for p in evidence.processes if p.rank != 2)


def test_a_damaged_window_joined_to_another_of_its_rank_is_left_out_at_load(
    tmp_path: Path,
) -> None:
    # GIVEN two dumps of the same node and ranks, the second's summary with rank 2's
    # window numbers damaged (its windows are joined to the first's when loaded)
    first, second = tmp_path / "a", tmp_path / "b"
    shutil.copytree(ROOT / "fixtures" / "dumps" / "own-validation", first)
    write_node_summary(first)
    shutil.copytree(first, second)
    _spoil_runs(second / "summary.json", 2, "backslash")
    # WHEN loaded THEN rank 2 keeps the first dump's lines, and a warning names the
    # damaged summary and rank
    evidence = load_paths([first, second])
    count("faults: hostile node summaries")
    warnings = [n for n in evidence.notes if "log window is damaged" in n]
    assert len(warnings) == 1 and "b/summary.json: rank 2's log window" in warnings[0]
    by_rank = {p.rank: p for p in evidence.processes}
    alone = {p.rank: p for p in load_paths([first]).processes}
    assert list(by_rank[2].log_lines) == list(alone[2].log_lines)
    assert len(by_rank[1].log_lines) == 2 * len(alone[1].log_lines)


def test_a_summary_with_a_key_after_its_window_numbers_is_read_whole(tmp_path: Path) -> None:
    from hangdoc.analyzer.summaries.read import read_summary

    # GIVEN a summary whose window numbers are not its last key (written by another writer)
    dump = tmp_path / "dump"
    shutil.copytree(ROOT / "fixtures" / "dumps" / "own-validation", dump)
    summary = write_node_summary(dump)
    before, _ = read_summary(dump, "dump")
    obj = json.loads(summary.read_bytes())
    obj["notes"] = obj.pop("notes")  # (now after the numbers)
    summary.write_text(json.dumps(obj, separators=(",", ":")))
    assert summary.read_bytes().index(b'"window_numbers"') < summary.read_bytes().index(b'"notes"')
    # WHEN read THEN its windows are the same lines
    after, why = read_summary(dump, "dump")
    assert why is None and before is not None and after is not None
    assert [list(p.log_lines) for p in after.processes] == [
        list(p.log_lines) for p in before.processes
    ]
