"""A log read in blocks (parsers/logs/parser._iter_shaped_lines: blocks cut after their
last newline, each split and shaped at once where that is sure) gives the lines, line
numbers and notes of the line-by-line reading (_iter_lines), with each shape given its
line's line_shape: every recorded log, read whole and by a small head and tail, and texts
made of what the reading treats apart (carriage returns, bytes that are no UTF-8, lines
it cuts, a line across the head's end or a block's, no last newline), at block, head,
tail and line caps small enough to cut them anywhere."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.logs import parser
from hangdoc.analyzer.parsers.logs.prefilter import line_shape

ROOT = Path(__file__).resolve().parents[3]


def _same(path: Path) -> int:
    """How many lines were shaped in blocks, once the two readings are found the same."""
    size = path.stat().st_size
    notes_by_line: list[str] = []
    notes_in_blocks: list[str] = []
    by_line = list(parser._iter_lines(path, size, notes_by_line))
    in_blocks = list(parser._iter_shaped_lines(path, size, notes_in_blocks))
    assert [(number, line) for number, line, _ in in_blocks] == by_line, path
    assert notes_in_blocks == notes_by_line, path
    assert all(shape is None or shape == line_shape(line) for _, line, shape in in_blocks)
    return sum(shape is not None for _, _, shape in in_blocks)


def _recorded_logs() -> list[Path]:
    return [
        path
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
    ]


@pytest.mark.parametrize(("head", "tail", "block"), [(None, None, None), (2048, 4096, 1000)])
def test_recorded_logs_read_in_blocks_give_their_lines_and_shapes(
    monkeypatch: pytest.MonkeyPatch, head: int | None, tail: int | None, block: int | None
) -> None:
    if head is not None:
        monkeypatch.setattr(parser, "HEAD_BYTES", head)
        monkeypatch.setattr(parser, "TAIL_BYTES", tail)
        monkeypatch.setattr(parser, "_BLOCK_BYTES", block)
    shaped = [_same(path) for path in _recorded_logs()]
    assert sum(count > 0 for count in shaped) > len(shaped) / 2


_PIECES = [
    b"step 12 loss 0.5",
    b"\n",
    b"\n",
    b"\n",
    b"\r",
    b"\xff",
    "\u00e9\u2502".encode(),
    b"x" * 30,
]


@pytest.mark.parametrize("seed", range(300))
def test_made_texts_read_in_blocks_give_their_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    data = b"".join(rng.choice(_PIECES) for _ in range(rng.randrange(0, 60)))
    monkeypatch.setattr(parser, "MAX_LINE_BYTES", rng.choice([8, 40, 1 << 20]))
    monkeypatch.setattr(parser, "_BLOCK_BYTES", rng.choice([1, 7, 32, 64, 4096]))
    monkeypatch.setattr(parser, "HEAD_BYTES", rng.choice([16, 50, 100]))
    monkeypatch.setattr(parser, "TAIL_BYTES", rng.choice([16, 64, 200, 4096]))
    path = tmp_path / "x.log"
    path.write_bytes(data)
    _same(path)


def test_a_big_log_is_shaped_in_its_head_and_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parser, "HEAD_BYTES", 100)
    monkeypatch.setattr(parser, "TAIL_BYTES", 300)
    monkeypatch.setattr(parser, "_BLOCK_BYTES", 64)
    path = tmp_path / "x.log"
    path.write_bytes(b"".join(b"step %d loss 0.5\n" % step for step in range(200)))
    assert _same(path) > 300 // 20
