"""Text or binary: one answer for every reader of an unknown file.

The loader refuses binary data in no format it reads (a note naming the file), and the
ticket archive copies text redacted but leaves binary out: both must call the same file
text, or the archive would carry a file the loader then refuses (or drop one it reads).
Text is what ``decode_bytes`` (analyzer/parsers/base.py) can read: UTF-16 with a BOM, or
bytes without NUL that are mostly valid UTF-8 (a log of Latin-1 accents stays text; a
compiled or compressed blob does not).
"""

from __future__ import annotations

# How much of a file's head decides: the first 8 KiB of a log are as telling as more.
HEAD_BYTES = 8192
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
# Control characters that text files do hold (tabs, line ends, form feed, backspace,
# the escape of colour codes); any other one counts against the file being text.
_TEXT_CONTROLS = frozenset("\t\r\n\f\b\x1b")


def looks_binary(head: bytes) -> bool:
    """True when ``head`` (a file's first bytes) is not text.

    Binary: a NUL byte in the first ``HEAD_BYTES`` (UTF-16 with a BOM excepted), or more
    undecodable bytes and stray control characters than ``max(8, a tenth)`` of them.
    """
    if head.startswith(_UTF16_BOMS):
        return False
    sample = head[:HEAD_BYTES]
    if b"\x00" in sample:
        return True
    text = sample.decode("utf-8", errors="replace")
    bad = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in _TEXT_CONTROLS))
    return bad > max(8, len(text) // 10)
