"""What watch does with a confirmed stall, on recorded dumps of real hung (and slow) jobs:
the reports and hang.json for a hang, nothing for a job that is merely slow, one line and
no traceback when collecting fails."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

from hangdoc.collectors.watch.stall import Outcome
from hangdoc.errors import CollectionError
from hangdoc.watch.report import HANG_NAME, Reporter

ROOT = Path(__file__).resolve().parents[3]
DUMPS = ROOT / "fixtures" / "dumps"
SUMMARY = {"host": "node1", "quiet_since": 100.0, "detected_at": 130.0, "confirmed_at": 135.0,
           "ranks": [], "exited": [], "notes": []}  # fmt: skip


def _copy(name: str) -> object:
    def collect(folder: Path) -> Path:
        shutil.copytree(DUMPS / name, folder / "dump")
        return folder / "dump"

    return collect


def test_a_hang_leaves_the_reports_and_hang_json_and_pages(tmp_path: Path) -> None:
    lines: list[str] = []
    pager = shlex.join([sys.executable, "-c", "import sys; print(*sys.argv[1:])"])
    reporter = Reporter(tmp_path, lines.append, shlex.split(pager + " {category} {culprits}"))
    outcome = reporter.report(SUMMARY, _copy("checkpoint"))  # type: ignore[arg-type]
    assert outcome is Outcome.REPORTED
    folder = tmp_path / "hang-1"
    hang = json.loads((folder / HANG_NAME).read_text())
    assert (hang["verdict"], hang["category"], hang["culprit_ranks"]) == (
        "hang", "checkpoint_save_hang", [3],
    )  # fmt: skip
    assert hang["quiet_since"] == 100.0 and hang["reported_at"] >= hang["collected_at"]
    assert {Path(p).name for p in hang["paths"].values()} == {
        "dump", "report.html", "findings.json", "summary.md",
    }  # fmt: skip
    assert all(Path(p).exists() for p in hang["paths"].values())
    assert hang["on_hang"]["status"] == 0
    assert (folder / "on-hang.log").read_text().strip() == "checkpoint_save_hang 3"
    assert any(line.startswith("HANG REPORTED (hang): rank 3") for line in lines), lines
    # a second stall gets the next folder
    assert reporter.report(SUMMARY, _copy("lock-deadlock")) is Outcome.REPORTED  # type: ignore[arg-type]
    assert (tmp_path / "hang-2" / HANG_NAME).is_file()


def test_a_job_the_analysis_calls_slow_leaves_no_report(tmp_path: Path) -> None:
    lines: list[str] = []
    outcome = Reporter(tmp_path, lines.append).report(SUMMARY, _copy("slow"))  # type: ignore[arg-type]
    assert outcome is Outcome.RECHECK
    assert list(tmp_path.iterdir()) == []
    assert any(line.startswith("not hung after all") for line in lines), lines


def test_a_failed_collection_or_a_bug_is_one_line_and_watching_goes_on(tmp_path: Path) -> None:
    lines: list[str] = []
    reporter = Reporter(tmp_path, lines.append)

    def gone(folder: Path) -> Path:
        raise CollectionError("none of the processes exists any more")

    def bug(folder: Path) -> Path:
        raise KeyError("oops")

    assert reporter.report(SUMMARY, gone) is Outcome.RECHECK
    assert reporter.report(SUMMARY, bug) is Outcome.RECHECK
    assert lines[-3].endswith("none of the processes exists any more")
    assert lines[-1].startswith("internal error while reporting (a bug in hangdoc")
    assert "KeyError: 'oops' at test_report.py:" in lines[-1]
    assert list(tmp_path.iterdir()) == []
