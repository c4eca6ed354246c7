"""``analyze --archive`` round-trips: the archive carries redacted inputs and the report,
and analyzing the archive gives the same diagnosis as the original inputs."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from hangdoc.cli import main

DUMP = Path(__file__).resolve().parents[2] / "fixtures" / "dumps" / "checkpoint"
SECRET = "hf_" + "Q" * 34


def _findings(path: Path) -> dict[str, object]:
    return dict(json.loads(path.read_text()))


def test_archive_round_trip(tmp_path: Path) -> None:
    # GIVEN a recorded dump and a loose log that leaks a token
    log = tmp_path / "rank3.log"
    log.write_text(f"export HF_TOKEN={SECRET}\nsaving checkpoint step 100\n")
    archive = tmp_path / "ticket.tar.gz"
    first = tmp_path / "first.json"
    # WHEN analyzed with --archive, then the archive itself analyzed
    assert main(["analyze", str(DUMP), str(log), "--archive", str(archive),
                 "--json", str(first), "-q"]) == 0  # fmt: skip
    again = tmp_path / "again.json"
    assert main(["analyze", str(archive), "--json", str(again), "-q"]) == 0
    # THEN the diagnosis is the same, and the archive holds the report but not the secret
    a, b = _findings(first), _findings(again)
    assert a["verdict"] == b["verdict"] == "hang"
    keys = ("rule", "category", "title", "culprit_ranks", "waiting_ranks", "explanation")

    def strip(doc: dict[str, object]) -> list[dict[str, object]]:
        found = doc["findings"]
        assert isinstance(found, list)
        return [{k: f[k] for k in keys} for f in found]  # sources differ: inside the archive

    assert strip(a) == strip(b)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        blobs = [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]  # type: ignore[union-attr]
    assert any(n.endswith("report.html") for n in names)
    assert any(n.endswith("summary.md") for n in names)
    assert not any(SECRET.encode() in blob for blob in blobs)


def test_archive_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "ticket.tar.gz"
    archive.write_bytes(b"keep me")
    assert main(["analyze", str(DUMP), "--archive", str(archive), "-q"]) == 2  # bad usage
    assert archive.read_bytes() == b"keep me"
    assert "already exists" in capsys.readouterr().err


def test_archive_leaves_out_what_the_loader_calls_binary(tmp_path: Path) -> None:
    # GIVEN a file without NUL bytes that is not text (the loader refuses it as binary)
    blob = tmp_path / "core.bin"
    blob.write_bytes(bytes(range(0xA0, 0x100)) * 8)
    archive = tmp_path / "ticket.tar.gz"
    # WHEN archived THEN it is left out with its reason, not copied as text of U+FFFD
    main(["analyze", str(DUMP), str(blob), "--archive", str(archive), "-q"])
    with tarfile.open(archive) as tar:
        marker = next(m for m in tar.getmembers() if m.name.endswith("hangdoc-ticket.json"))
        handle = tar.extractfile(marker)
        assert handle is not None
        left_out = json.loads(handle.read())["left_out"]
        assert not any(n.endswith("core.bin") for n in tar.getnames())
    assert [e["path"] for e in left_out] == ["inputs/1-core.bin"]
    assert "binary" in left_out[0]["reason"]
