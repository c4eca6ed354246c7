"""Atomic file writes: a reader (or a collector killed half-way) sees the old file or the
new one, never a torn one.

The temporary file lives in the destination's directory so that ``os.replace`` is a
rename within one file system, which POSIX makes atomic.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

# mkstemp creates 0600 files; dump files get the mode an ordinary write gets under the
# usual umask, so that a dump collected with sudo can be read when copied off the node.
FILE_MODE = 0o644


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a fsynced temporary file and a rename."""
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fchmod(tmp.fileno(), FILE_MODE)
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(path.parent)


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
