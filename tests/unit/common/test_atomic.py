"""Atomic writes: the old file or the new one, never a torn one, never a stray temp file."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from hangdoc.common.atomic import write_bytes_atomic, write_json_atomic


def test_write_json_atomic_writes_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    write_json_atomic(path, {"complete": False})
    write_json_atomic(path, {"complete": True, "host": "nodé"})
    assert json.loads(path.read_text("utf-8")) == {"complete": True, "host": "nodé"}
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


@pytest.mark.parametrize("bad", [{"x": object()}, {"x": float("nan")}])
def test_unserialisable_object_leaves_the_old_file_untouched(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "process.json"
    write_json_atomic(path, {"samples": [1]})
    with pytest.raises((TypeError, ValueError)):
        write_json_atomic(path, bad)
    assert json.loads(path.read_text()) == {"samples": [1]}
    assert [p.name for p in tmp_path.iterdir()] == ["process.json"]


def test_failed_write_removes_its_temp_file(tmp_path: Path) -> None:
    # GIVEN a destination that cannot be replaced (a non-empty directory)
    dest = tmp_path / "pyspy.0.json"
    dest.mkdir()
    (dest / "keep").write_text("x")
    # WHEN writing over it THEN it fails and leaves nothing behind
    with pytest.raises(OSError):
        write_bytes_atomic(dest, b"[]")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyspy.0.json"]
    assert (dest / "keep").read_text() == "x"
