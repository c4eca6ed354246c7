"""A dump's ``summary.json`` comes with the dump, from strangers too: it is input.

An edited summary must not carry a secret past redaction, a malformed one must not stop
the analysis, and a huge one must not be read whole.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

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
