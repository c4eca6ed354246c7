"""The text path's line router remembers the frame lines it has seen (a big job's paste
repeats the same few): its answers stay those of ``is_dump_frame`` line by line, for
lines seen again and past the number it remembers."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers import text
from hangdoc.analyzer.parsers.logs import LogParser
from hangdoc.analyzer.parsers.stacks import FRAME_FIRSTS, is_dump_frame

ROOT = Path(__file__).resolve().parents[3]


def _recorded_lines() -> list[str]:
    return [
        line
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
        for line in path.read_text(errors="replace").splitlines()
    ]


@pytest.mark.parametrize("remembered", [text._REMEMBERED_FRAMES, 3])
def test_the_router_answers_as_the_frame_test_for_every_line_seen_again(
    remembered: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(text, "_REMEMBERED_FRAMES", remembered)
    lines = _recorded_lines()
    frames = [line for line in lines if is_dump_frame(line)]
    assert len(frames) > 100
    router = text._LineRouter()
    for number, line in enumerate(lines + lines, start=1):  # each line twice
        assert router(number, line) == is_dump_frame(line), line
    assert len(router._frames) <= remembered


def test_a_line_starting_with_none_of_the_frame_firsts_is_no_frame() -> None:
    # the router asks no frame test of such a line (FRAME_FIRSTS): every recorded frame
    # starts with one, and with its first character changed to another it is no frame
    frames = [line for line in _recorded_lines() if is_dump_frame(line)]
    assert frames
    assert all(line[:1] in FRAME_FIRSTS for line in frames)
    for line in frames:
        for first in ("a", "0", "Z", "(", '"', "-", "|", "\u00e9"):
            assert not is_dump_frame(first + line[1:]), first + line[1:]
            assert not is_dump_frame(first + line), first + line


def test_a_quiet_shape_is_quiet_for_every_line_of_it() -> None:
    # the log scanner asks quiet_shape once a shape and then calls no router for the
    # shape's lines it passes over: the router says False of each and notes nothing, and
    # a line with its digits changed has the same answer
    router = text._LineRouter()
    quiet = text._LineRouter.quiet_shape
    lines = _recorded_lines()
    assert any(quiet(line) for line in lines) and not all(quiet(line) for line in lines)
    for number, line in enumerate(lines, start=1):
        other = line.translate(str.maketrans("0123456789", "5678901234"))
        assert quiet(other) == quiet(line), line
        if quiet(line):
            noted = len(router.labels)
            assert not router(number, line), line
            assert len(router.labels) == noted, line


class _EveryLineRouted(text._LineRouter):
    @staticmethod
    def quiet_shape(line: str) -> bool:
        return False


def test_recorded_texts_read_as_when_the_router_saw_every_line() -> None:
    paths = [
        path
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
    ]
    assert len(paths) > 20
    for path in paths:
        by_shape, every = text._LineRouter(), _EveryLineRouted()
        fast = LogParser(line_filter=by_shape).parse(path, "x")
        slow = LogParser(line_filter=every).parse(path, "x")
        assert fast == slow, path
        assert by_shape.labels == every.labels, path
