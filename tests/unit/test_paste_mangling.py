"""The paste manglings of the metamorphic test (hangdoc/paste_mangling.py) do what their
tools do, and nothing else."""

from __future__ import annotations

from hangdoc.paste_mangling import (
    COMBINED,
    MANGLINGS,
    WORD_WRAPS,
    cut_first_line,
    hard_wrap,
    interleave,
    journald,
    quote,
    twice,
    word_wrap,
)

TEXT = "[rank0]: a\n[rank1]: b\n    under b\n[rank0]: c\n\n[rank1]: d\n"


def test_every_mangling_is_deterministic_and_changes_a_paste() -> None:
    # two ranks' records one after the other, an error line longer than any wrap width
    text = "[rank0]: start\n[rank0]: RuntimeError: " + "x" * 220 + "\n[rank1]: start\n"
    for mangling in (*MANGLINGS, *WORD_WRAPS, *COMBINED):
        once = mangling.apply(text)
        assert once == mangling.apply(text), mangling.name
        assert once != text, mangling.name


def test_quote_marks_blank_lines_too() -> None:
    assert quote("a\n\nb\n") == "> a\n>\n> b\n"
    assert quote("a\n\nb\n", depth=2) == "> > a\n> >\n> > b\n"


def test_a_hard_wrap_cuts_at_the_column_whatever_it_cuts() -> None:
    assert hard_wrap("abcdefgh\nxy\n", 3) == "abc\ndef\ngh\nxy\n"


def test_a_word_wrap_breaks_at_the_last_space_before_the_width_and_drops_it() -> None:
    assert word_wrap("aaa bbb ccc\nxy\n", 7) == "aaa bbb\nccc\nxy\n"
    # a word longer than the line is cut at the column; a margin is no place to break
    assert word_wrap("aaa bbbbbbbbbb c\n", 7) == "aaa\nbbbbbbb\nbbb c\n"
    assert word_wrap("    xxxxxxxx yy\n", 8) == "    xxxx\nxxxx yy\n"


def test_a_cut_starts_inside_the_first_line_and_drops_leading_blanks() -> None:
    assert cut_first_line("\nhello world\nnext\n") == " world\nnext\n"
    assert cut_first_line("hello world\n", chars=3) == "lo world\n"


def test_interleave_takes_each_ranks_records_in_turn_in_their_order() -> None:
    assert interleave(TEXT) == "[rank0]: a\n[rank1]: b\n    under b\n[rank0]: c\n\n[rank1]: d\n"
    text = "[rank0]: a\n[rank0]: b\n[rank1]: c\n[rank1]: d\n"
    assert interleave(text) == "[rank0]: a\n[rank1]: c\n[rank0]: b\n[rank1]: d\n"
    assert interleave("no ranks\n") == "no ranks\n"


def test_a_shippers_clock_is_one_instant() -> None:
    stamps = {line.split(" gpu-node-07")[0] for line in journald("a\nb\nc\n").splitlines()}
    assert stamps == {"May 01 10:00:00"}


def test_twice_is_the_paste_then_itself() -> None:
    assert twice("a\nb") == "a\nb\na\nb\n"
