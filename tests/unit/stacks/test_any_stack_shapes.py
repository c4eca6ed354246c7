"""A log read whole hands the stack side its text and its lines' shapes (parsers/text.py):
``any_stack`` then looks for a stack's words in the distinct shapes, not the whole text.
That must answer what the whole text's search answers, for every text."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.logs import parser as log_parser
from hangdoc.analyzer.parsers.logs.prefilter import block_shapes
from hangdoc.analyzer.parsers.stacks import parser as stacks
from hangdoc.analyzer.parsers.text import TextParser

ROOT = Path(__file__).resolve().parents[3] / "fixtures"

# Stacks whose words sit beside digits, and texts of the words' near misses.
_TEXTS = [
    'Traceback (most recent call last):\n  File "train.py", line 12, in <module>\n',
    'step 10 loss 1.5\nThread 0x7f00aa (idle): "MainThread"\n    wait (x.py:3)\n',
    "Thread1 is fine 2024\nrank 3 Process 12 ok\n",
    "frame #3: c10d::ProcessGroupNCCL::wait() + 0x1f\n",
    'Stack (most recent call first):\n  File "a.py", line 9 in f\n',
    "no stack here 123\n456 Traceback\n",
    'File "x.py", line 3\n',
    "\x1b[31mThread\x1b[0m 42 (idle)\n",
    # py-spy frames pasted without their thread line (_PYSPY_FRAME_END, then FRAME)
    "step 3\nwait (torch/distributed/distributed_c10d.py:3215)\ntrain (train.py:88)\n",
    "see x.py:12) for it\n",
    "\x1b[1mwait\x1b[0m (x.py:3)\nmain (train.py:9)\n",
    "",
]


def _fixture_texts() -> list[Path]:
    paths = sorted(
        p
        for folder in ("logs", "pastes", "cases")
        for p in (ROOT / folder).rglob("*")
        if p.is_file()
        and p.suffix in (".log", ".txt", ".out", ".err")
        and p.stat().st_size < 4 << 20
    )
    return paths[:400]


def test_the_words_serve_by_shape() -> None:
    """No stack word holds a digit or a newline (else shapes could not answer for them)."""
    assert stacks._SHAPES_SERVE


@pytest.mark.parametrize("text", _TEXTS)
def test_shapes_answer_as_the_text(text: str) -> None:
    shapes = block_shapes(text.encode())
    assert stacks.any_stack(text, shapes) == stacks.any_stack(text)
    assert stacks._holds_stack_word(text, shapes) == stacks._holds_stack_word(text, None)


def test_shapes_answer_as_the_text_on_fixtures() -> None:
    paths = _fixture_texts()
    assert len(paths) > 50
    held = 0
    for path in paths:
        text = path.read_bytes().decode("utf-8", errors="replace")
        shapes = block_shapes(text.encode("utf-8", "surrogatepass"))
        whole = stacks._holds_stack_word(text, None)
        held += whole
        assert stacks._holds_stack_word(text, shapes) == whole, path
        assert stacks.any_stack(text, shapes) == stacks.any_stack(text), path
    assert held > 10  # the fixtures hold stacks: the test compares both answers


def test_a_whole_log_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack side of a log the log side read whole takes its text and shapes, and
    finds the same stacks as from reading the file again."""
    log = tmp_path / "rank3.log"
    log.write_text(
        "[rank3]: step 1 loss 2.0\n" * 50
        + "Traceback (most recent call last):\n"
        + '  File "train.py", line 12, in <module>\n    main()\n'
        + "RuntimeError: NCCL communicator was aborted on rank 3.\n"
    )
    seen: list[object] = []
    real = stacks.any_stack

    def spy(text: str, shapes: object = None) -> bool:
        found = real(text, shapes)  # type: ignore[arg-type]
        seen.append((shapes is not None, found))
        return found

    monkeypatch.setattr(stacks, "any_stack", spy)
    parsed = TextParser().parse(log, "rank3.log")
    assert seen == [(True, True)]  # the shapes served, and a stack was found
    monkeypatch.setattr(log_parser, "_whole_read", lambda path, size: None)
    seen.clear()
    again = TextParser().parse(log, "rank3.log")
    assert seen == [(False, True)]
    assert parsed == again
