"""A log read whole (parsers/logs/parser._whole_lines: split and shaped at once) gives
the lines the line-by-line reading gives (_iter_lines), each with its line_shape, or is
left to that reading: every recorded log, and texts made of what it treats apart
(carriage returns, bytes that are no UTF-8, a UTF-16 mark, blank lines, no last newline,
a line it would cut)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.logs import parser
from hangdoc.analyzer.parsers.logs.prefilter import line_shape

ROOT = Path(__file__).resolve().parents[3]


def _both(path: Path) -> tuple[list[tuple[int, str, bytes | None]] | None, list[tuple[int, str]]]:
    size = path.stat().st_size
    whole = parser._whole_lines(path, size)
    return (None if whole is None else list(whole)), list(parser._iter_lines(path, size, []))


def _same(path: Path) -> bool:
    whole, by_line = _both(path)
    if whole is None:
        return False
    assert [(n, line) for n, line, _ in whole] == by_line, path
    assert all(shape == line_shape(line) for _, line, shape in whole), path
    return True


def test_recorded_logs_read_whole_give_their_lines_and_shapes() -> None:
    paths = [
        path
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
    ]
    read_whole = [path for path in paths if _same(path)]
    assert len(read_whole) > len(paths) / 2


@pytest.mark.parametrize(
    ("data", "whole"),
    [
        (b"", True),
        (b"a\n\nb", True),
        (b"a\n\n", True),
        (b"\n", True),
        ("r\u00e9sum\u00e9 step 1 \u2502 caf\u00e9\n".encode(), True),
        (b"a\r\nb\n", False),
        (b"tqdm 1/3\rtqdm 2/3\n", False),
        (b"bad \xe2\x82\nok\n", False),
        (b"bad \xff end", False),
        ("\ufeffutf16\n".encode("utf-16"), False),
        (b"x" * parser.MAX_LINE_BYTES + b"\nafter\n", False),
        (b"x" * (parser.MAX_LINE_BYTES - 2) + b"\nafter\n", True),
    ],
)
def test_a_text_is_read_whole_only_where_that_gives_what_reading_it_by_line_gives(
    tmp_path: Path, data: bytes, whole: bool
) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(data)
    assert _same(path) is whole


def test_a_log_read_by_its_head_and_tail_is_not_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parser, "HEAD_BYTES", 64)
    monkeypatch.setattr(parser, "TAIL_BYTES", 64)
    path = tmp_path / "x.log"
    path.write_bytes(b"step 1 loss 2.0\n" * 20)
    assert parser._whole_lines(path, path.stat().st_size) is None
    path.write_bytes(b"step 1 loss 2.0\n" * 8)
    assert _same(path)
