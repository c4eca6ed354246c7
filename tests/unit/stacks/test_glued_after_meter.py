"""A traceback written right after a tqdm bar's last state, on the same line (tqdm ends no
state with a newline), is read from its header on (scan.glued_after_meter)."""

from __future__ import annotations

from hangdoc.analyzer.parsers.stacks.parser import extract_stacks
from hangdoc.analyzer.parsers.stacks.scan import glued_after_meter

_BAR = (
    "Running tokenizer on dataset:  47%|████▊     | 1695000/3634744 "
    "[30:09<33:25, 967.30 examples/s]"
)
_TB = (
    "Traceback (most recent call last):\n"
    '  File "/job/train.py", line 14, in <module>\n'
    "    main()\n"
    '  File "/job/train.py", line 5, in main\n'
    "    run()\n"
)


def test_header_after_meter() -> None:
    assert glued_after_meter(_BAR + "Traceback (most recent call last):") == (
        "Traceback (most recent call last):"
    )


def test_meter_alone_or_other_words() -> None:
    assert glued_after_meter(_BAR) is None
    assert glued_after_meter(_BAR + " done") is None
    assert glued_after_meter("no meter: Traceback (most recent call last):") is None


def test_glued_traceback_is_the_same_stack_as_on_its_own_line() -> None:
    # GIVEN one traceback glued to the bar and one on the next line
    glued = extract_stacks(_BAR + _TB, "glued.log")
    apart = extract_stacks(_BAR + "\n" + _TB, "apart.log")
    # THEN both are read, with the same frames
    frames = [
        [f.function for s in p.text_stacks for t in s.threads for f in t.frames]
        for p in (*glued, *apart)
    ]
    assert frames == [["main", "<module>"], ["main", "<module>"]]
