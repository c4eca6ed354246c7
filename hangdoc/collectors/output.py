"""Writing a dump when the output itself may fail: a full disk, a quota, a file-size limit.

A collection runs on a node in trouble, often with a nearly full local disk. A write
that fails must cost the file it was writing and nothing else: the session records
the failure as a step and goes on; once the file system is full, further writes are
skipped (and py-spy no longer pauses ranks for stacks that cannot be kept). Writes are
atomic (``atomic.py``), so a failed rewrite of the manifest leaves the previous one —
the dump stays readable up to the last write that fit — and a small reserve, set aside
at the start and given back when the disk fills up, lets the manifest be rewritten one
more time to say what is missing and why.

This module also holds the last line of redaction for files that extra collectors
(flight recorder, logs, GPU...) put into the dump: whatever a collector forgot to
redact is redacted here before the collection ends.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from pathlib import Path

from hangdoc.common.atomic import write_bytes_atomic, write_json_atomic
from hangdoc.common.redact import redact_json_bytes

# errno values that mean "no more bytes fit" (a full disk, a quota, RLIMIT_FSIZE).
OUT_OF_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
# Files larger than this are not re-read by the redaction net (collectors cap their
# text copies below it; a larger file is a binary dump).
MAX_RECHECK_BYTES = 64 * 1024 * 1024
_HEAD = 8192


# Space set aside at the start of a collection and given back when the disk fills up,
# so that the manifest can still be rewritten to say what is missing and why. The name
# is a temporary file's: archives and the dump reader leave it out.
RESERVE_NAME = ".hangdoc-reserve.tmp"
RESERVE_BYTES = 256 * 1024


class DumpWriter:
    """Writes files under one dump directory; remembers when the output is full."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.full: str | None = None  # why nothing more can be written, once it is so
        self._reserve: Path | None = None

    def reserve(self) -> None:
        """Set RESERVE_BYTES aside for the last manifest; best effort."""
        path = self.root / RESERVE_NAME
        try:
            with path.open("wb") as handle:
                try:
                    os.posix_fallocate(handle.fileno(), 0, RESERVE_BYTES)
                except OSError:  # a file system without fallocate: write the bytes
                    handle.write(b"\0" * RESERVE_BYTES)
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink()
            return
        self._reserve = path

    def release(self) -> None:
        """Give the reserved space back (when the disk is full, and at the end)."""
        if self._reserve is not None:
            with contextlib.suppress(OSError):
                self._reserve.unlink()
            self._reserve = None

    def json(self, path: Path, obj: object, *, essential: bool = False) -> str | None:
        """Write ``obj`` atomically; ``None`` on success, else why it failed. An
        ``essential`` write (the manifest) may use the reserve when the disk is full."""
        why = self._attempt(path, lambda: write_json_atomic(path, obj))
        if why is not None and essential and self.full is not None and self._reserve:
            self.release()
            why = self._attempt(path, lambda: write_json_atomic(path, obj))
        return why

    def bytes(self, path: Path, data: bytes) -> str | None:
        return self._attempt(path, lambda: write_bytes_atomic(path, data))

    def mkdir(self, path: Path) -> str | None:
        return self._attempt(path, lambda: path.mkdir(exist_ok=True))

    def _attempt(self, path: Path, action: Callable[[], None]) -> str | None:
        try:
            action()
        except OSError as exc:
            why = f"cannot write {self._rel(path)}: {exc.strerror or exc}"
            if exc.errno in OUT_OF_SPACE and self.full is None:
                self.full = (
                    f"the output file system is full ({exc.strerror or exc}; at {self._rel(path)})"
                )
            return why
        return None

    def _rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)


def redact_file(path: Path) -> bool:
    """Redact a text file in place (JSON by key and shape, else as text); True if it
    changed. Binary files (a pickle) and files over MAX_RECHECK_BYTES are left as they are.
    """
    try:
        size = path.stat().st_size
        if size == 0 or size > MAX_RECHECK_BYTES:
            return False
        data = path.read_bytes()
    except OSError:
        return False
    if b"\0" in data[:_HEAD] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        data = data.decode("utf-16", errors="replace").encode("utf-8")
        cleaned = redact_json_bytes(data)
        changed = True
    else:
        cleaned = redact_json_bytes(data)
        changed = cleaned is not data and cleaned != data
    if changed:
        write_bytes_atomic(path, cleaned)
    return changed
