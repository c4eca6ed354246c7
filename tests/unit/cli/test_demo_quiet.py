"""A quiet demo, and the two false input problems behind its noise: the empty stdout and
stderr files of a rank (no problem) and "empty directory" for a folder of flight recorder
files (they wait for a batch parse, and were not counted)."""

from __future__ import annotations

import shutil
from pathlib import Path

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.errors import ExitStatus
from tests.unit.cli.conftest import FIXTURE_DUMP, ROOT, Run

FR_FILE = ROOT / "fixtures" / "fr" / "torch_samples" / "fr_json" / "comm_lib_trace_rank_0.json"


def _dump_with_empty_logs(tmp_path: Path) -> Path:
    dump = tmp_path / "dump"
    shutil.copytree(FIXTURE_DUMP, dump)
    for rank in range(4):
        logs = dump / f"rank{rank}" / "logs"
        logs.mkdir(exist_ok=True)
        (logs / f"stdout.rank{rank}.out").touch()
        (logs / f"stderr.rank{rank}.err").touch()
    return dump


def test_empty_rank_logs_in_a_dump_are_no_problem(tmp_path: Path) -> None:
    evidence = load_paths([_dump_with_empty_logs(tmp_path)])
    empty = [i for i in evidence.inputs if i.size == 0]
    assert len(empty) == 8  # still listed as inputs …
    assert all(i.error is None for i in empty)  # … but no problem
    assert not [n for n in evidence.notes if "empty file" in n]


def test_an_empty_file_given_by_the_user_is_still_a_problem(tmp_path: Path) -> None:
    empty = tmp_path / "rank0.log"
    empty.touch()
    evidence = load_paths([FIXTURE_DUMP, empty])
    assert {i.path: i.error for i in evidence.inputs}[str(empty)] == "empty file"


def test_a_folder_of_flight_recorder_files_is_not_empty(tmp_path: Path) -> None:
    # GIVEN a folder holding only flight recorder files (1,100 of them: past the 1,024
    # the report came with) beside the dump
    folder = tmp_path / "fr"
    folder.mkdir()
    text = FR_FILE.read_bytes()
    for rank in range(1100):
        (folder / f"comm_lib_trace_rank_{rank}.json").write_bytes(text)
    # WHEN loaded THEN no "empty directory" and no "no usable file" for it
    evidence = load_paths([FIXTURE_DUMP, folder])
    problems = {i.path: i.error for i in evidence.inputs if i.error}
    assert str(folder) not in problems, problems
    assert not [n for n in evidence.notes if "empty directory" in n]


def test_recorded_demo_is_quiet(hangdoc: Run, tmp_path: Path) -> None:
    # GIVEN the recorded demo WHEN run THEN a diagnosis, the three reports, and no
    # input problems or notes
    done = hangdoc("demo", "--recorded", "--out", str(tmp_path / "demo"))
    assert done.returncode == ExitStatus.OK, done.stderr
    assert "input problem" not in done.stdout and "note:" not in done.stdout
    assert "Traceback" not in done.stderr
    assert {p.name for p in (tmp_path / "demo").iterdir()} >= {
        "report.html", "findings.json", "summary.md", "dump",
    }  # fmt: skip


def test_demo_never_overwrites_an_earlier_demo(hangdoc: Run, tmp_path: Path) -> None:
    out = tmp_path / "demo"
    assert hangdoc("demo", "--recorded", "--out", str(out)).returncode == 0
    assert hangdoc("demo", "--recorded", "--out", str(out)).returncode == 0
    assert (tmp_path / "demo-2" / "findings.json").exists()


def test_demo_out_that_cannot_be_created_is_a_usage_error(hangdoc: Run, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done = hangdoc("demo", "--recorded", "--out", str(blocker / "sub"))
    assert done.returncode == ExitStatus.USAGE and "Traceback" not in done.stderr
    assert done.stderr.startswith("hangdoc: --out")
