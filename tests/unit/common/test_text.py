"""Text or binary (hangdoc/common/text.py): the loader and the ticket archive ask the same
function, so the archive never carries a file the loader would refuse."""

from __future__ import annotations

import pytest

from hangdoc.common.text import HEAD_BYTES, looks_binary


@pytest.mark.parametrize(
    ("head", "binary"),
    [
        (b"[rank0]: NCCL WARN timeout\n", False),
        ("année, déjà vu, naïve\n".encode(), False),  # UTF-8 accents
        ("日志 ログ\n".encode() * 50, False),
        (b"\xff\xfe" + "log\n".encode("utf-16-le"), False),  # UTF-16 with its BOM
        (b"\x1b[31merror\x1b[0m\r\n\tdone\n", False),  # colour codes, CRLF, tabs
        (b"caf\xe9 au lait\n" * 3, False),  # a few Latin-1 bytes: still text
        (b"", False),
        (b"text\x00more", True),  # a NUL byte
        (b"\x80\x04\x95" + bytes(range(128, 256)), True),  # no NUL, yet binary (a pickle)
        (bytes(range(1, 32)) * 4, True),  # control characters
    ],
)
def test_looks_binary(head: bytes, binary: bool) -> None:
    assert looks_binary(head) is binary


def test_only_the_head_decides() -> None:
    assert not looks_binary(b"a" * HEAD_BYTES + b"\x00")
