"""The dump archive: reproducible, relative names only, no links, no temp files."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from hangdoc.common.archive import write_archive
from hangdoc.errors import CollectionError


def _make_dump(root: Path) -> Path:
    dump = root / "hangdoc-node1-20250101T000000Z"
    (dump / "rank1").mkdir(parents=True)
    (dump / "rank0").mkdir()
    (dump / "manifest.json").write_text("{}")
    (dump / "rank1" / "process.json").write_text('{"rank": 1}')
    (dump / "rank0" / "pyspy.0.json").write_text("[]")
    (dump / "rank0" / ".process.json.abc.tmp").write_text("half-written")
    (root / "secret.txt").write_text("outside the dump")
    (dump / "rank0" / "link").symlink_to(root / "secret.txt")
    (dump / "linkdir").symlink_to(root)
    return dump


def test_archive_members_are_sorted_relative_regular_files(tmp_path: Path) -> None:
    dump = _make_dump(tmp_path)
    path = write_archive(dump)
    assert path == tmp_path / "hangdoc-node1-20250101T000000Z.tar.gz"
    with tarfile.open(path) as tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        top = dump.name
        assert names == [
            top,
            f"{top}/manifest.json",
            f"{top}/rank0",
            f"{top}/rank0/pyspy.0.json",
            f"{top}/rank1",
            f"{top}/rank1/process.json",
        ]
        assert all(m.isfile() or m.isdir() for m in members)
        assert all(m.uid == 0 and m.uname == "" for m in members)
        extracted = tar.extractfile(f"{top}/rank1/process.json")
        assert extracted is not None and extracted.read() == b'{"rank": 1}'


def test_archive_is_reproducible(tmp_path: Path) -> None:
    dump = _make_dump(tmp_path)
    first = write_archive(dump, tmp_path / "a.tar.gz")
    second = write_archive(dump, tmp_path / "b.tar.gz")
    assert first.read_bytes() == second.read_bytes()


def test_archive_never_overwrites(tmp_path: Path) -> None:
    dump = _make_dump(tmp_path)
    dest = tmp_path / "taken.tar.gz"
    dest.write_bytes(b"precious")
    with pytest.raises(CollectionError, match="already exists"):
        write_archive(dump, dest)
    assert dest.read_bytes() == b"precious"


def test_archive_inside_the_dump_is_not_archived_into_itself(tmp_path: Path) -> None:
    dump = _make_dump(tmp_path)
    path = write_archive(dump, dump / "self.tar.gz")
    with tarfile.open(path) as tar:
        assert not any(name.endswith("self.tar.gz") for name in tar.getnames())
