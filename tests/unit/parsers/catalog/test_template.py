"""Templates: the parts a row is made of, its pattern, its sample line."""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.catalog.template import (
    Slot,
    display,
    keywords_of,
    literal_length,
    normalise,
    regex_source,
    sample,
)


def test_normalise_joins_literals_strips_and_keeps_the_first_line_that_says_something() -> None:
    parts = normalise(["  Got ", "completion ", Slot("peer"), " failed\n", "second line"])
    assert parts == ("Got completion ", Slot("peer"), " failed")


def test_normalise_skips_a_first_line_with_no_literal_text() -> None:
    parts = normalise([Slot("x"), "\n", "Last error: ", Slot("why")])
    assert parts == ("Last error: ", Slot("why"))


def test_pattern_types_slots_and_loosens_blanks() -> None:
    parts = (
        "rank ",
        Slot("rank", "int"),
        " peer ",
        Slot("addr"),
        " took ",
        Slot("ms", "float"),
        "ms",
    )
    pattern = re.compile(regex_source(parts))
    m = pattern.search("xx rank 3 peer 10.0.0.1<4242>   took 1.5ms")
    assert m is not None
    assert m.groups() == ("3", "10.0.0.1<4242>", "1.5")


def test_a_leading_text_slot_takes_one_token_and_a_trailing_one_the_rest() -> None:
    pattern = re.compile(regex_source((Slot("file"), ":", Slot("line", "int"), " -> ", Slot("rc"))))
    m = pattern.search("host:1:2 [0] NCCL INFO init.cc:1815 -> 5 extra")
    assert m is not None
    assert m.groups()[1:] == ("1815", "5 extra")


def test_sample_fills_every_slot_and_display_names_them() -> None:
    parts = ("NET/IB : Got completion from peer ", Slot("addr"), " with status=", Slot("s", "int"))
    assert sample(parts) == "NET/IB : Got completion from peer some value with status=3"
    assert display(parts) == "NET/IB : Got completion from peer <addr> with status=<s>"
    assert keywords_of(parts)[:3] == ["NET", "Got", "completion"]
    assert literal_length(parts) > 30
