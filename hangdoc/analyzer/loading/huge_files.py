"""A bounded view of a huge input file, so that no parser can load one whole.

Parsers cap what they read (``read_text_capped``, the log parser's head and tail), but
the contract "never load a 10 GB file" should not depend on every parser, present and
future, getting its reader right: a file with no newline for gigabytes (a tqdm log of
``\\r`` redraws, a sparse file) defeats line iteration. So a file over
``HUGE_FILE_BYTES`` is given to its parser as a temporary copy of its first
``HEAD_BYTES`` (where init lines map processes to ranks) and its last ``TAIL_BYTES``
(where the hang is), cut at line boundaries; a note says what was left out. Formats
that are one document (a pickle) are refused by the loader before they get here.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HUGE_FILE_BYTES = 1024 * 1024 * 1024
HEAD_BYTES = 1024 * 1024
TAIL_BYTES = 63 * 1024 * 1024
_BOMS = (b"\xff\xfe", b"\xfe\xff")


@contextmanager
def bounded_view(path: Path, size: int) -> Iterator[tuple[Path, str | None]]:
    """``(path, None)`` for a file of ordinary size; else a capped copy and a note.

    The copy has the same name (parsers may read a rank from it) and modification time
    (the log parser dates year-less stamps by it), and is removed on exit.
    """
    if size <= HUGE_FILE_BYTES:
        yield path, None
        return
    with tempfile.TemporaryDirectory(prefix="hangdoc-huge-") as tmp:
        copy = Path(tmp) / path.name
        with path.open("rb") as src:
            head = src.read(HEAD_BYTES)
            utf16 = head.startswith(_BOMS)
            start = size - TAIL_BYTES
            if utf16:
                head = head[: len(head) // 2 * 2]
                start += start % 2
            else:
                cut = head.rfind(b"\n")
                head = head[: cut + 1] if cut >= 0 else head
            src.seek(start)
            tail = src.read(TAIL_BYTES)
            if not utf16:
                newline = tail.find(b"\n")
                tail = tail[newline + 1 :] if newline >= 0 else tail
        copy.write_bytes(head + tail)
        st = path.stat()
        os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
        omitted = size - len(head) - len(tail)
        note = (
            f"{size} bytes: only its first {len(head)} and last {len(tail)} bytes were "
            f"read ({omitted} left out); line numbers after the cut are relative to it"
        )
        yield copy, note
