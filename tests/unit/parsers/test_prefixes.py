"""Launcher prefixes, ANSI and CR (FORMATS.md §8.1-8.3)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.prefixes import (
    _RANK,
    _ROLE,
    clean_line,
    detect_pdsh_hosts,
    local_rank_tag,
    peel,
    split_sections,
    split_streams,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


@pytest.mark.parametrize(
    ("line", "text", "rank", "local_rank"),
    [
        ("[rank3]:Thread 1 (idle)", "Thread 1 (idle)", 3, None),
        ("[rank3]: Thread 1 (idle)", "Thread 1 (idle)", 3, None),
        ("[rank1]: [rank1]: x", "x", 1, None),  # doubled excepthook prefix
        ("[default3]:x", "x", None, 3),
        ("[default1]:[rank1]:[E709 17:05:38 X.cpp:1] m", "[E709 17:05:38 X.cpp:1] m", 1, 1),
        ("2025-11-24T03:20:21.001125857Z [rank2]: x", "x", 2, None),
        ("18:11:06.680 x", "x", None, None),
        ("Fri Aug 11 12:31:45 2023[1,4]<stdout>:x", "x", 4, None),
        ("[1,7]<stderr>: x", "x", 7, None),
        ("[155] [rank0]: x", "x", 0, None),
        ("[2024-01-01 00:00:00] fa88a9df || x", "x", None, None),
        ("stderr: x", "x", None, None),
        ("    save (a.py:1)", "    save (a.py:1)", None, None),  # indentation is content
        ("[E709 17:05:38 X.cpp:1] m", "[E709 17:05:38 X.cpp:1] m", None, None),
    ],
)
def test_peel(line: str, text: str, rank: int | None, local_rank: int | None) -> None:
    tag = peel(line)
    assert (tag.text, tag.rank, tag.local_rank) == (text, rank, local_rank)


def test_peel_ray_gives_pid_and_host() -> None:
    tag = peel("(RayTrainWorker pid=615, ip=10.72.7.6) Thread 615 (idle)")
    assert (tag.text, tag.pid, tag.host) == ("Thread 615 (idle)", 615, "10.72.7.6")


def test_prefixed_frame_stays_indented() -> None:
    # "[rankN]: " is followed by one space in the excepthook format, which is eaten; a
    # frame printed right after "[rank0]:" loses one of its spaces, and stays indented
    # (parsers compare indentation relatively).
    assert peel("[rank0]:    f (a.py:1)").text == "   f (a.py:1)"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("\x1b[33m\x1b[1m13458\x1b[0m: x\r", "13458: x"),
        ("[32mmain[0m (a.py)", "main (a.py)"),  # ESC lost in a paste
        ("10%|#  |\r50%|### |\r100%|####|", "100%|####|"),  # tqdm redraws
        ("[rank0]: x", "[rank0]: x"),
    ],
)
def test_clean_line(raw: str, clean: str) -> None:
    assert clean_line(raw) == clean


def test_split_streams_continuation_lines_follow_their_prefix() -> None:
    text = (
        "[rank0]:Thread 1 (idle)\n    f (a.py:1)\n\n"
        "[rank1]:Thread 2 (idle)\n[rank1]:    g (b.py:2)\nplain\n"
    )
    streams = {s.rank: s for s in split_streams(text)}
    assert [t for _, t in streams[0].lines if t.strip()] == ["Thread 1 (idle)", "    f (a.py:1)"]
    assert [t.strip() for _, t in streams[1].lines] == ["Thread 2 (idle)", "g (b.py:2)"]
    assert [t for _, t in streams[None].lines if t] == ["plain"]
    assert streams[1].lines[0][0] == 4  # 1-based line numbers survive


def test_local_rank_stream_learns_its_rank() -> None:
    text = "[default2]:NCCL INFO x\n[default2]:[rank6]:Thread 1 (idle)\n"
    [stream] = split_streams(text)
    assert (stream.local_rank, stream.rank) == (2, 6)


def test_pdsh_output_is_split_by_host() -> None:
    lines = [f"{h}: Thread 1 (idle)\n{h}:     f (a.py:1)" for h in ("gpu-a1", "gpu-a2")]
    streams = split_streams("\n".join(lines))
    assert sorted(s.host for s in streams if s.host) == ["gpu-a1", "gpu-a2"]
    assert all(s.lines[0][1] == "Thread 1 (idle)" for s in streams)


def test_pdsh_detection_ignores_key_value_text() -> None:
    text = [f"key{i}: value" for i in range(50)]
    assert detect_pdsh_hosts(text) == frozenset()
    assert detect_pdsh_hosts(["Error: x", "Locals: y"]) == frozenset()


def test_sections() -> None:
    lines = [(1, "=== Rank 0: h:1 ==="), (2, "a"), (3, "=== Rank 1: h:2 ==="), (4, "b")]
    sections = split_sections(lines)
    assert [(s.rank, s.address, [t for _, t in s.lines]) for s in sections] == [
        (0, "h:1", ["a"]),
        (1, "h:2", ["b"]),
    ]


def test_local_rank_tag_finds_peels_local_rank_anywhere() -> None:
    """local_rank_tag's search (its "[" first) finds what its definition does: _ROLE at a
    position where _RANK is not, on every line of the recorded logs and pastes and on
    lines made of the tags' own characters."""
    definition = re.compile(f"(?!{_RANK.pattern}){_ROLE.pattern}")
    lines = [
        line
        for path in sorted(FIXTURES.glob("**/*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out"}
        for line in path.read_text(encoding="utf-8", errors="replace").split("\n")
        if "]:" in line
    ]
    chars = "[]:rankdefault0123456789_- x"
    rng = random.Random(7)
    made = ["".join(rng.choice(chars) for _ in range(1 + i % 24)) for i in range(20000)]
    made += ["[rank3]:[default3]: x", "[rank3]: x", "[rank12]:[trainer7]: x", "x [a1]:"]
    assert len(lines) > 100
    for line in lines + made:
        expected = "]:" in line and definition.search(line) is not None
        assert local_rank_tag(line) is expected, line
