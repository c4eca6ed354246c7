"""Nothing lost: output paths are checked before any work, an existing file is replaced
only with --force (and the command says so), and every requested output is written,
also when nothing in the inputs was usable or when another output fails."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from hangdoc.cli import main
from hangdoc.errors import ExitStatus
from tests.unit.cli.conftest import FIXTURE_DUMP, Run

DUMP = str(FIXTURE_DUMP)


def _all_outputs(folder: Path) -> dict[str, Path]:
    return {
        "--html": folder / "report.html",
        "--json": folder / "findings.json",
        "--md": folder / "summary.md",
        "--archive": folder / "ticket.tar.gz",
    }


def _args(outputs: dict[str, Path]) -> list[str]:
    return [item for option, path in outputs.items() for item in (option, str(path))]


def test_a_cause_found_writes_everything_and_exits_0(hangdoc: Run, tmp_path: Path) -> None:
    outputs = _all_outputs(tmp_path)
    done = hangdoc("analyze", DUMP, *_args(outputs))
    assert done.returncode == ExitStatus.OK, done.stderr
    assert all(p.stat().st_size > 0 for p in outputs.values())
    assert json.loads(outputs["--json"].read_text())["verdict"] == "hang"
    for path in outputs.values():
        assert str(path) in done.stdout  # each output is named


def test_nothing_usable_still_writes_every_output(hangdoc: Run, tmp_path: Path) -> None:
    # GIVEN inputs of which none is usable: an empty file, binary junk, a missing path
    empty = tmp_path / "empty.log"
    empty.touch()
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01" * 64)
    out = tmp_path / "out"
    out.mkdir()
    outputs = _all_outputs(out)
    # WHEN analyzed with every output
    done = hangdoc("analyze", str(empty), str(junk), str(tmp_path / "nope"), *_args(outputs))
    # THEN inconclusive (status 1), no traceback, and every output is there
    assert done.returncode == ExitStatus.INCONCLUSIVE, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert all(p.exists() and p.stat().st_size > 0 for p in outputs.values())
    doc = json.loads(outputs["--json"].read_text())
    assert doc["verdict"] == "inconclusive"
    assert doc["findings"][0]["category"] == "unknown"
    reasons = {Path(i["path"]).name: i["error"] for i in doc["inputs"]}
    assert reasons["empty.log"] == "empty file"
    assert reasons["nope"] == "no such file or directory"
    assert reasons["junk.bin"]


@pytest.mark.parametrize("option", ["--html", "--json", "--md", "--archive"])
def test_bad_output_paths_stop_before_any_work(hangdoc: Run, tmp_path: Path, option: str) -> None:
    folder_missing = tmp_path / "no" / "such" / "x.out"
    for target, words in (
        (folder_missing, "does not exist"),
        (tmp_path, "is a directory"),
    ):
        done = hangdoc("analyze", str(tmp_path / "never-read"), option, str(target))
        assert done.returncode == ExitStatus.USAGE, done.stderr
        first = done.stderr.splitlines()[0]
        assert option in first and str(target) in first and words in first
        assert "verdict" not in done.stdout + done.stderr  # no analysis ran


def test_not_writable_folder_is_refused_before_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Root ignores permission bits, so a folder that refuses new files is simulated
    # where the check creates its probe file.
    import hangdoc.outputs as outputs

    def refuse(*args: object, **kwargs: object) -> object:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(outputs.tempfile, "NamedTemporaryFile", refuse)
    analysed = []
    monkeypatch.setattr("hangdoc.cli.run_analysis", lambda *a, **k: analysed.append(a))
    rc = main(["analyze", DUMP, "--json", str(tmp_path / "f.json")])
    err = capsys.readouterr().err
    assert rc == ExitStatus.USAGE and not analysed
    assert "cannot write in" in err and "permission denied" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
def test_read_only_folder_for_a_user(hangdoc: Run, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    done = hangdoc("analyze", DUMP, "--md", str(locked / "s.md"))
    assert done.returncode == ExitStatus.USAGE and "cannot write in" in done.stderr


def test_existing_output_needs_force_and_is_reported_replaced(hangdoc: Run, tmp_path: Path) -> None:
    # GIVEN a findings.json that already exists
    target = tmp_path / "findings.json"
    target.write_text("precious\n")
    # WHEN analyzed without --force THEN refused at once, the file untouched
    done = hangdoc("analyze", DUMP, "--json", str(target))
    assert done.returncode == ExitStatus.USAGE
    assert "already exists" in done.stderr and "--force" in done.stderr
    assert target.read_text() == "precious\n"
    # WHEN with --force THEN replaced, and the command says so
    done = hangdoc("analyze", DUMP, "--json", str(target), "--force")
    assert done.returncode == ExitStatus.OK, done.stderr
    assert json.loads(target.read_text())["schema"] == "hangdoc.findings/1"
    assert f"findings JSON: {target} (replaced the old one)" in done.stdout


def test_force_never_replaces_an_input(hangdoc: Run, tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_text("[rank0]: hello\n")
    done = hangdoc("analyze", str(tmp_path), "--md", str(log), "--force")
    assert done.returncode == ExitStatus.USAGE and "never replaces an input" in done.stderr
    assert log.read_text() == "[rank0]: hello\n"


def test_existing_archive_is_replaced_whole_with_force(hangdoc: Run, tmp_path: Path) -> None:
    archive = tmp_path / "t.tar.gz"
    archive.write_bytes(b"old")
    assert hangdoc("analyze", DUMP, "--archive", str(archive)).returncode == ExitStatus.USAGE
    done = hangdoc("analyze", DUMP, "--archive", str(archive), "-f", "-q")
    assert done.returncode == ExitStatus.OK, done.stderr
    assert archive.read_bytes()[:2] == b"\x1f\x8b"  # gzip
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers


def test_one_failing_output_does_not_lose_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN an HTML renderer that fails (a bug, or a full disk)
    import hangdoc.outputs as outputs

    real = outputs.render

    def flaky(kind: outputs.Kind, diagnosis: object) -> str:
        if kind == "html":
            raise OSError(28, "No space left on device")
        return real(kind, diagnosis)  # type: ignore[arg-type]

    monkeypatch.setattr(outputs, "render", flaky)
    out = _all_outputs(tmp_path)
    # WHEN analyzed THEN the other outputs are written, and the status says one failed
    rc = main(["analyze", DUMP, *_args(out), "-q"])
    err = capsys.readouterr().err
    assert rc == ExitStatus.OUTPUT_FAILED
    assert "--html" in err and "No space left on device" in err
    assert not out["--html"].exists()
    assert out["--json"].exists() and out["--md"].exists() and out["--archive"].exists()


def test_unreadable_inputs_are_input_problems(
    hangdoc: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a fifo (reading it would block) and a folder that cannot be listed
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = hangdoc("analyze", str(fifo), "--json", "-", timeout=60)
    assert done.returncode == ExitStatus.INCONCLUSIVE, done.stderr
    doc = json.loads(done.stdout)
    assert doc["inputs"][0]["error"] == "not a regular file (a fifo or device)"


def test_a_folder_without_read_permission_is_an_input_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a folder that cannot be listed: chmod 000, and since root reads through
    # permission bits, os.scandir refusing it as it would for a user
    locked = tmp_path / "rank5"
    locked.mkdir()
    (locked / "stderr.log").write_text("x\n")
    locked.chmod(0)
    real_scandir = os.scandir

    def scandir(path: object) -> object:
        if Path(str(path)) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr("hangdoc.analyzer.loading.loader.os.scandir", scandir)
    try:
        # WHEN analyzed with the recorded dump beside it
        rc = main(["analyze", DUMP, str(locked), "--json", str(tmp_path / "f.json"), "-q"])
    finally:
        locked.chmod(0o755)
    # THEN the diagnosis stands, and the folder is listed with its reason
    assert rc == ExitStatus.OK, capsys.readouterr().err
    doc = json.loads((tmp_path / "f.json").read_text())
    assert {i["path"]: i["error"] for i in doc["inputs"]}[str(locked)] == "permission denied"
