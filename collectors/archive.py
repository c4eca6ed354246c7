"""Pack a dump directory into one ``.tar.gz`` that can be attached to a ticket.

The archive is reproducible (sorted members, fixed owner, no gzip timestamp) so that
archiving the same dump twice gives the same bytes, and safe to unpack anywhere: every
member is a regular file or directory under one top folder, with a relative name.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import stat
import tarfile
import tempfile
from pathlib import Path

from hangdoc.errors import CollectionError

ARCHIVE_SUFFIX = ".tar.gz"


def default_archive_path(dump_dir: Path) -> Path:
    return dump_dir.with_name(dump_dir.name + ARCHIVE_SUFFIX)


def write_archive(dump_dir: Path, dest: Path | None = None) -> Path:
    """Write ``<dump_dir>.tar.gz`` (or ``dest``) and return its path.

    Links, devices and the temporary files of an interrupted atomic write are left out:
    a link could point outside the dump, and a temporary file is not part of it.
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
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with (
            os.fdopen(fd, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            for path, arcname in members:
                _add(tar, path, arcname)
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
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
