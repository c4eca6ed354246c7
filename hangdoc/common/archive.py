"""Archives: the safe extraction of those users attach to tickets, and the ``.tar.gz``
hangdoc writes (a dump to attach, a ticket archive).

Reading (.tar.gz, .tgz, .tar, .zip). An archive from a ticket is untrusted. Extraction
writes only regular files and directories, only under a fresh temporary directory, and
refuses: absolute names, names with ``..``, links (symbolic or hard), devices and fifos
— each refusal is a message naming the member, and the rest of the archive is still
extracted. A bomb (too many members, or more declared bytes than the cap) stops the
whole archive with an ``ArchiveError`` naming the member where the cap was crossed:
sizes are checked from the headers before any data of the member is written.

A lone compressed file (``nccl.log.gz``) is decompressed, under the same size cap.
The temporary directory is removed when the ``extract_archive`` context ends.

Writing. An archive hangdoc writes is reproducible (sorted members, fixed owner, no
gzip timestamp), so that archiving the same dump twice gives the same bytes, and safe
to unpack anywhere: every member is a regular file or directory under one top folder,
with a relative name. It is written atomically and never over an existing file.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from hangdoc.common.atomic import atomic_file
from hangdoc.errors import CollectionError

ARCHIVE_SUFFIX = ".tar.gz"
_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    """Caps that stop decompression bombs; generous enough for 16k-rank dump sets."""

    max_members: int = 500_000
    max_total_bytes: int = 16 * 1024**3


class ArchiveError(Exception):
    """The archive as a whole was refused or could not be read."""


class _Oversize(OSError):
    """A member produced more bytes than allowed."""


@dataclass(slots=True)
class Extracted:
    """Where an archive's contents now are, and what was refused or went wrong."""

    root: Path
    refused: list[tuple[str, str]] = field(default_factory=list)  # (member name, why)
    error: str | None = None  # the archive ended early (truncated); what came before is kept
    single_file: bool = False  # a lone compressed file, not an archive of many


def archive_kind(head: bytes) -> str | None:
    """What kind of archive or compressed stream the first bytes announce, if any."""
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh") and head[3:4].isdigit():
        return "bzip2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "zip"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    return None


_DRIVE = re.compile(r"^[A-Za-z]:")


def _safe_relative(name: str) -> PurePosixPath | str:
    """The member's path relative to the extraction root, or why it is refused."""
    if "\x00" in name:
        return "its name contains a NUL byte"
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        return "absolute path"
    normalized = name.replace("\\", "/")
    parts = [p for p in PurePosixPath(normalized).parts if p not in ("", ".")]
    if ".." in parts:
        return "path escapes the archive ('..')"
    if not parts:
        return "empty name"
    return PurePosixPath(*parts)


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Budget:
    def __init__(self, archive: str, limits: ArchiveLimits) -> None:
        self.archive = archive
        self.limits = limits
        self.members = 0
        self.total = 0

    def count(self, name: str, size: int) -> None:
        self.members += 1
        self.total += max(size, 0)
        if self.members > self.limits.max_members:
            raise ArchiveError(
                f"{self.archive}: refused: more than {self.limits.max_members} members "
                f"(stopped at {name!r}); extract it by hand and pass the directory"
            )
        if self.total > self.limits.max_total_bytes:
            raise ArchiveError(
                f"{self.archive}: refused: members declare more than "
                f"{self.limits.max_total_bytes} bytes in all (stopped at {name!r}, "
                f"{size} bytes); extract it by hand and pass the directory"
            )


def _write(root: Path, rel: PurePosixPath, source: _Readable, size_cap: int) -> int:
    """Copy ``source`` to ``root/rel`` (never through a link), at most ``size_cap``
    bytes; returns how many bytes were written."""
    dest = root.joinpath(*rel.parts)
    if not dest.resolve().is_relative_to(root.resolve()):
        raise OSError(f"{rel} resolves outside the extraction directory")
    dest.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(dest, flags, 0o600)
    written = 0
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := source.read(_CHUNK):
                written += len(chunk)
                if written > size_cap:
                    raise _Oversize(f"{rel} holds more than {size_cap} bytes")
                out.write(chunk)
    except BaseException:
        # A member cut off (a lying size, a bad CRC) must not stay behind as a file of
        # its own: it would be read as an empty or torn input next to its refusal.
        with contextlib.suppress(OSError):
            dest.unlink()
        raise
    return written


def _extract_tar(tar: tarfile.TarFile, root: Path, budget: _Budget, out: Extracted) -> None:
    for member in tar:
        budget.count(member.name, member.size if member.isfile() else 0)
        rel = _safe_relative(member.name)
        refuse = rel if isinstance(rel, str) else None
        if refuse is None:
            if member.issym() or member.islnk():
                refuse = f"link to {member.linkname!r}"
            elif member.ischr() or member.isblk() or member.isfifo():
                refuse = "device or fifo"
            elif not (member.isfile() or member.isdir()):
                refuse = "unsupported member type"
        if refuse is not None:
            out.refused.append((member.name, f"refused: {refuse}"))
            continue
        assert isinstance(rel, PurePosixPath)
        if member.isdir():
            root.joinpath(*rel.parts).mkdir(parents=True, exist_ok=True)
            continue
        source = tar.extractfile(member)
        if source is None:
            continue
        try:
            written = _write(root, rel, source, member.size)
        except OSError as exc:
            out.refused.append((member.name, f"not extracted: {exc}"))
            continue
        if written < member.size:  # an uncompressed tar cut short reads short, silently
            out.error = (
                f"archive ends early: {member.name} has {written} of its {member.size} bytes (kept)"
            )
            return


def _extract_zip(archive: zipfile.ZipFile, root: Path, budget: _Budget, out: Extracted) -> None:
    for info in archive.infolist():
        budget.count(info.filename, info.file_size)
        rel = _safe_relative(info.filename)
        kind = stat.S_IFMT(info.external_attr >> 16)  # 0 when the zip has no Unix mode
        refuse = rel if isinstance(rel, str) else None
        if refuse is None and kind == stat.S_IFLNK:
            refuse = "symbolic link"
        elif refuse is None and kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            refuse = "device or fifo"
        if refuse is not None:
            out.refused.append((info.filename, f"refused: {refuse}"))
            continue
        assert isinstance(rel, PurePosixPath)
        if info.is_dir():
            root.joinpath(*rel.parts).mkdir(parents=True, exist_ok=True)
            continue
        try:
            with archive.open(info) as source:
                _write(root, rel, source, info.file_size)
        except (OSError, zipfile.BadZipFile, EOFError) as exc:
            out.refused.append((info.filename, f"not extracted: {exc}"))


def _open_gzip(path: Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb")


def _open_bz2(path: Path) -> io.BufferedIOBase:
    return bz2.open(path, "rb")


def _open_xz(path: Path) -> io.BufferedIOBase:
    return lzma.open(path, "rb")


_OPENERS: dict[str, Callable[[Path], io.BufferedIOBase]] = {
    "gzip": _open_gzip,
    "bzip2": _open_bz2,
    "xz": _open_xz,
}
_SUFFIXES = (".gz", ".bz2", ".xz", ".gzip")


def _decompress_single(
    path: Path, kind: str, root: Path, display: str, limits: ArchiveLimits
) -> str:
    name = path.name
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    else:
        name = name + ".out"
    opener = _OPENERS[kind]
    with opener(path) as source:
        try:
            _write(root, PurePosixPath(name), source, limits.max_total_bytes)
        except _Oversize as exc:
            raise ArchiveError(f"{display}: refused: decompressed, {exc}") from exc
    return name


def _is_compressed_tar(path: Path, kind: str) -> bool:
    """Whether the decompressed stream starts with a tar header ("ustar" at 257)."""
    try:
        with _OPENERS[kind](path) as stream:
            head = stream.read(512)
    except (OSError, EOFError, lzma.LZMAError, zlib.error):
        return False
    return archive_kind(head) == "tar" or (len(head) == 512 and _looks_like_v7_tar(head))


def _looks_like_v7_tar(block: bytes) -> bool:
    """A pre-POSIX tar header has no magic; its checksum field still checks out."""
    try:
        stored = int(block[148:156].split(b"\0", 1)[0].strip() or b"-1", 8)
    except ValueError:
        return False
    computed = sum(block[:148]) + 8 * 32 + sum(block[156:])
    return stored == computed


def _extract(path: Path, display: str, limits: ArchiveLimits, out: Extracted) -> None:
    with path.open("rb") as handle:
        kind = archive_kind(handle.read(512))
    budget = _Budget(display, limits)
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as archive:
                _extract_zip(archive, out.root, budget, out)
            return
        if kind in _OPENERS and not _is_compressed_tar(path, kind):
            out.single_file = True
            _decompress_single(path, kind, out.root, display, limits)
            return
        with tarfile.open(path, "r:*") as tar:
            _extract_tar(tar, out.root, budget, out)
    except ArchiveError:
        raise
    except (
        tarfile.TarError,
        zipfile.BadZipFile,
        EOFError,
        OSError,
        lzma.LZMAError,
        zlib.error,
    ) as exc:
        if out.single_file:
            if not any(p.stat().st_size for p in out.root.iterdir()):
                raise ArchiveError(f"{display}: not a readable compressed file: {exc}") from exc
            out.error = f"compressed stream ends early or is damaged ({exc}); kept what came before"
        elif budget.members == 0:
            raise ArchiveError(f"{display}: not a readable archive: {exc}") from exc
        else:
            out.error = f"archive ends early or is damaged after {budget.members} members: {exc}"


@contextmanager
def extract_archive(
    path: Path, display: str | None = None, limits: ArchiveLimits | None = None
) -> Iterator[Extracted]:
    """Extract ``path`` into a temporary directory that lives as long as the context.

    Raises ArchiveError when the archive is refused as a whole (bomb caps) or cannot be
    read at all; per-member refusals are in ``Extracted.refused``.
    """
    tmp = Path(tempfile.mkdtemp(prefix="hangdoc-archive-"))
    try:
        out = Extracted(root=tmp)
        _extract(path, display or str(path), limits or ArchiveLimits(), out)
        yield out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- writing --------------------------------------------------------------------------


def default_archive_path(dump_dir: Path) -> Path:
    return dump_dir.with_name(dump_dir.name + ARCHIVE_SUFFIX)


def write_archive(
    dump_dir: Path, dest: Path | None = None, *, only: Collection[str] | None = None
) -> Path:
    """Write ``<dump_dir>.tar.gz`` (or ``dest``) and return its path.

    Links, devices and the temporary files of an interrupted atomic write are left out:
    a link could point outside the dump, and a temporary file is not part of it.
    ``only`` keeps the top folder's files of those names alone (a dump's manifest and
    summary, when the node sends only those).
    """
    dump_dir = dump_dir.resolve()
    if not dump_dir.is_dir():
        raise CollectionError(f"cannot archive {dump_dir}: not a directory")
    dest = (dest or default_archive_path(dump_dir)).resolve()
    if dest.exists():
        raise CollectionError(
            f"archive {dest} already exists",
            help_text="Remove it, or give another destination; hangdoc never overwrites one.",
        )
    members = _members(dump_dir, exclude=dest)
    if only is not None:
        top = dump_dir.name
        wanted = {f"{top}/{name}" for name in only}
        members = [(p, a) for p, a in members if a == top or (a in wanted and p.is_file())]
    with (
        atomic_file(dest) as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path, arcname in members:
            _add(tar, path, arcname)
    return dest


def _members(dump_dir: Path, exclude: Path) -> list[tuple[Path, str]]:
    """Directories and regular files under ``dump_dir``, sorted, with archive names."""
    top = dump_dir.name
    found: list[tuple[Path, str]] = [(dump_dir, top)]
    for root, dirs, files in os.walk(dump_dir, followlinks=False):
        dirs.sort()
        root_path = Path(root)
        rel_root = root_path.relative_to(dump_dir)
        for name in [*sorted(files), *dirs]:
            path = root_path / name
            if path == exclude or (name.startswith(".") and name.endswith(".tmp")):
                continue
            mode = path.lstat().st_mode
            if stat.S_ISREG(mode) or stat.S_ISDIR(mode):  # lstat: a link is neither
                found.append((path, f"{top}/{(rel_root / name).as_posix()}"))
    found.sort(key=lambda item: item[1])
    return found


def _add(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    info = tar.gettarinfo(str(path), arcname=arcname)
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if info.isdir():
        tar.addfile(info)
        return
    with path.open("rb") as f:
        tar.addfile(info, f)
