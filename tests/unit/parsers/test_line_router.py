"""The text path's line router remembers the frame lines it has seen (a big job's paste
repeats the same few): its answers stay those of ``is_dump_frame`` line by line, for
lines seen again and past the number it remembers."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers import text
from hangdoc.analyzer.parsers.stacks import is_dump_frame

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
