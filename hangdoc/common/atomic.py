"""Atomic file writes: a reader (or a collector killed half-way) sees the old file or the
new one, never a torn one.

The one way hangdoc writes a file that someone may read while it is written or after a
crash: dump files, node summaries, archives, reports. The temporary file lives in the
destination's directory so that ``os.replace`` is a rename within one file system,
which POSIX makes atomic.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

# mkstemp creates 0600 files; dump files get the mode an ordinary write gets under the
# usual umask, so that a dump collected with sudo can be read when copied off the node.
FILE_MODE = 0o644


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A binary handle on a temporary file that becomes ``path`` when the block ends.

    Flushed, fsynced and given ``FILE_MODE`` before the rename; an exception in the
    block removes the temporary file and leaves ``path`` as it was.
    """
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as tmp:
            yield tmp
            tmp.flush()
            os.fchmod(tmp.fileno(), FILE_MODE)
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(path.parent)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a fsynced temporary file and a rename."""
    with atomic_file(path) as tmp:
        tmp.write(data)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, obj: object) -> None:
    """Serialise ``obj`` (strict JSON: no NaN) and write it atomically.

    Serialising first means a value that is not JSON leaves the old file untouched.
    """
    text = json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable; best effort (some file systems refuse)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
