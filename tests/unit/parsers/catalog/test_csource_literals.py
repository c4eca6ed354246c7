"""scripts/catalog/csource.py reads C string literals as the compiler does.

A backslash before a newline splices two lines (C11 §5.1.1.2, translation phase 2): the
string goes on with the next line's characters, its indentation included. NCCL 2.8–2.12
wrote net_socket.cc's truncation WARN so ("… in healthy state, \\<newline>          there
may be a mismatch …"), and the catalog kept only the text before the backslash.
"""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"


def _decode(body: str) -> str:
    sys.path.insert(0, str(SCRIPTS))
    try:
        from catalog.csource import decode
    finally:
        sys.path.remove(str(SCRIPTS))
    return decode(body)


def test_a_backslash_newline_splices_the_lines_keeping_the_next_lines_indentation() -> None:
    body = "is in healthy state, \\\n          there may be a mismatch"
    assert _decode(body) == "is in healthy state,           there may be a mismatch"


def test_escapes_still_decode() -> None:
    assert _decode("a\\tb\\n\\x41\\\\") == "a\tb\nA\\"
