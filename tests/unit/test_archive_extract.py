"""Safe extraction of attached archives: refusals by member, bombs refused as a whole."""

from __future__ import annotations

import gzip
import io
import random
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from hangdoc.common.archive import (
    ArchiveError,
    ArchiveLimits,
    archive_kind,
    extract_archive,
)


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"x", **attrs: object) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in attrs.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if info.isfile() else None)


def _tar(path: Path, build: list[tuple[str, bytes, dict[str, object]]], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:  # type: ignore[call-overload]
        for name, data, attrs in build:
            _add(tar, name, data, **attrs)
    return path


def test_extracts_files_and_dirs_and_cleans_up(tmp_path: Path) -> None:
    archive = _tar(
        tmp_path / "dump.tar.gz",
        [("node1/", b"", {"type": tarfile.DIRTYPE}), ("node1/rank0/pyspy.0.json", b"[]", {})],
    )
    with extract_archive(archive) as out:
        root = out.root
        assert (root / "node1" / "rank0" / "pyspy.0.json").read_bytes() == b"[]"
        assert out.refused == [] and out.error is None and not out.single_file
    assert not root.exists()


@pytest.mark.parametrize(
    ("name", "attrs", "why"),
    [
        ("../evil", {}, "'..'"),
        ("a/../../evil", {}, "'..'"),
        ("/abs/path", {}, "absolute"),
        ("C:\\windows\\x", {}, "absolute"),
        ("link", {"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}, "link"),
        ("hard", {"type": tarfile.LNKTYPE, "linkname": "ok.txt"}, "link"),
        ("dev", {"type": tarfile.CHRTYPE}, "device"),
        ("fifo", {"type": tarfile.FIFOTYPE}, "fifo"),
    ],
)
def test_refuses_dangerous_members_and_keeps_the_rest(
    tmp_path: Path, name: str, attrs: dict[str, object], why: str
) -> None:
    archive = _tar(tmp_path / "a.tgz", [("ok.txt", b"fine", {}), (name, b"bad", attrs)])
    with extract_archive(archive) as out:
        [(member, reason)] = out.refused
        assert member == name and "refused" in reason and why in reason
        assert (out.root / "ok.txt").read_bytes() == b"fine"
        assert not (tmp_path / "evil").exists()
        assert sorted(p.name for p in out.root.rglob("*")) == ["ok.txt"]


def test_too_many_members_is_a_bomb(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "many.tar", [(f"f{i}", b"x", {}) for i in range(11)], "w")
    with (
        pytest.raises(ArchiveError, match=r"more than 10 members.*'f10'"),
        extract_archive(archive, limits=ArchiveLimits(max_members=10)),
    ):
        pass


def test_huge_declared_size_is_refused_before_reading(tmp_path: Path) -> None:
    # A header that declares 1 TB with no data behind it: refused from the header alone
    info = tarfile.TarInfo("huge.bin")
    info.size = 10**12
    path = tmp_path / "bomb.tar"
    path.write_bytes(info.tobuf(format=tarfile.GNU_FORMAT))
    with (
        pytest.raises(ArchiveError, match=r"huge\.bin"),
        extract_archive(path, limits=ArchiveLimits(max_total_bytes=10**9)),
    ):
        pass


def test_gzip_bomb_total_size(tmp_path: Path) -> None:
    # 50 MB of zeros compress to ~50 KB; the cap is on what members declare
    archive = _tar(tmp_path / "zeros.tar.gz", [("zeros", b"\0" * 50_000_000, {})])
    assert archive.stat().st_size < 1_000_000
    with (
        pytest.raises(ArchiveError, match="zeros"),
        extract_archive(archive, limits=ArchiveLimits(max_total_bytes=1_000_000)),
    ):
        pass


def test_truncated_archive_keeps_what_came_before(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "t.tar", [("a.txt", b"a" * 600, {}), ("b.txt", b"b" * 5000, {})], "w")
    archive.write_bytes(archive.read_bytes()[: 1536 + 512 + 100])  # cut inside b.txt's data
    with extract_archive(archive) as out:
        assert (out.root / "a.txt").read_bytes() == b"a" * 600
        assert out.error is not None and "ends early" in out.error


def test_truncated_tar_gz_keeps_what_came_before(tmp_path: Path) -> None:
    payload = random.Random(0).randbytes(100_000)  # does not compress
    archive = _tar(tmp_path / "t.tar.gz", [("a.txt", b"a", {}), ("b.bin", payload, {})])
    archive.write_bytes(archive.read_bytes()[:-20000])
    with extract_archive(archive) as out:
        assert (out.root / "a.txt").read_bytes() == b"a"
        assert out.error is not None


def test_not_an_archive(tmp_path: Path) -> None:
    path = tmp_path / "x.tar.gz"
    path.write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    with pytest.raises(ArchiveError, match="not a readable"), extract_archive(path):
        pass


def test_single_gzip_file_is_decompressed(tmp_path: Path) -> None:
    path = tmp_path / "nccl.log.gz"
    path.write_bytes(gzip.compress(b"hello\n"))
    with extract_archive(path) as out:
        assert out.single_file
        assert (out.root / "nccl.log").read_bytes() == b"hello\n"


def test_zip_refusals(tmp_path: Path) -> None:
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("ok.txt", "fine")
        archive.writestr("../evil.txt", "bad")
        link = zipfile.ZipInfo("link")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    with extract_archive(path) as out:
        assert sorted(m for m, _ in out.refused) == ["../evil.txt", "link"]
        assert (out.root / "ok.txt").read_text() == "fine"


def test_archive_kind_by_magic() -> None:
    assert archive_kind(b"\x1f\x8b\x08") == "gzip"
    assert archive_kind(b"PK\x03\x04") == "zip"
    assert archive_kind(b"\0" * 257 + b"ustar\x0000") == "tar"
    assert archive_kind(b"[{") is None
