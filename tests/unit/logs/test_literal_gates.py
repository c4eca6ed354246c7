"""The literal gates in front of the log recognisers' searches (parsers/logs/literals.py),
and the other cheap tests that spare a line a search (keyword lists, the silent launcher
prefixes, the scanner's splice test).

A gate may only say "no match possible" when the search would find none: checked on
strings generated to match each gated pattern of the phase and count recognisers
(hypothesis's ``from_regex``), on hand-written patterns of each construct, and on the
lines of every recorded log, where the gated search must find what the plain one does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangdoc.analyzer.parsers import prefixes
from hangdoc.analyzer.parsers.logs import phases, prefix, process, scanner, torch_pg, window
from hangdoc.analyzer.parsers.logs.literals import any_admits, any_of, gate, required_literals
from hangdoc.analyzer.parsers.stacks import parser as stacks_parser

ROOT = Path(__file__).resolve().parents[3]
GATED = {
    "count": phases._COUNT,
    "init": phases._INIT,
    "ds_rank": phases._DS_RANK,
    **{f"marker_{phase.value}": pattern for phase, pattern in phases._MARKERS},
    "library_line": window._LIBRARY_LINE,
    "any_stack": stacks_parser._ANY_STACK,
    "new_start_anywhere": stacks_parser._NEW_START_ANYWHERE,
}


@pytest.mark.parametrize("name", sorted(GATED))
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_a_gate_admits_every_string_its_pattern_matches(name: str, data: st.DataObject) -> None:
    pattern = GATED[name]
    text = data.draw(st.from_regex(pattern))
    assert pattern.search(text) is not None
    assert gate(pattern).admits(text), (name, text)


@pytest.mark.parametrize(
    ("pattern", "admitted", "refused"),
    [
        (r"Saving (?:model|checkpoint)", "Saving model to x", "saving checkpoint"),
        (r"is (?:about to be saved|begin to save)!", "x is begin to save!", "is saved"),
        (r"(?:foo)+bar", "foobar", "barbaz"),
        (r"(?i)loading weights", "LOADING WEIGHTS from", "loadin weights"),
        (r"len\((?P<o>\w*(?:loader|dataset))\) = \d+", "len(train_loader) = 5", "len(x) = 5"),
        (r"\d+ (?:batches|steps)|(?:[Nn]umber of |#)steps", "total 12 steps", "step 12"),
    ],
)
def test_gates_of_each_construct(pattern: str, admitted: str, refused: str) -> None:
    compiled = re.compile(pattern)
    assert compiled.search(admitted) is not None
    assert gate(compiled).admits(admitted)
    assert compiled.search(refused) is None
    assert not gate(compiled).admits(refused)


@pytest.mark.parametrize("pattern", [r"\d+", r"a*b?", r"x|\d", r"(?:)abc|\w+"])
def test_a_pattern_that_needs_no_literal_is_not_gated(pattern: str) -> None:
    compiled = re.compile(pattern)
    assert required_literals(compiled) is None
    through, plain = gate(compiled).search("12 abc"), compiled.search("12 abc")
    assert through is not None and plain is not None and through.span() == plain.span()


def test_case_folded_gates_let_non_ascii_lines_through() -> None:
    # re's IGNORECASE matches the Kelvin sign for "k"; lower-casing does not see it
    compiled = re.compile(r"(?i)checkpoint")
    text = "saving CHEC\u212apoint now"
    assert compiled.search(text) is not None
    assert gate(compiled).search(text) is not None


def test_recorded_logs_read_the_same_through_the_gates() -> None:
    lines = [
        line
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
        for line in path.read_text(errors="replace").splitlines()
    ]
    assert len(lines) > 1000
    for pattern in GATED.values():
        gated = gate(pattern)
        for line in lines:
            plain = pattern.search(line)
            through = gated.search(line)
            assert (plain and plain.span()) == (through and through.span()), line
    markers = any_admits(tuple(gate(p) for _, p in phases._MARKERS))
    for line in lines:
        if any(p.search(line) for _, p in phases._MARKERS):
            assert markers(line), line


def _recorded_lines() -> list[str]:
    return [
        line
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
        for line in path.read_text(errors="replace").splitlines()
    ]


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=8), text=st.text())
def test_any_of_is_any_word_in_the_text(words: list[str], text: str) -> None:
    assert any_of(words)(text) == any(w in text for w in words)


def test_keyword_lists_and_silent_prefixes_read_recorded_lines_as_before() -> None:
    # the keyword lists as one search, and the silent prefixes as one alternation, decide
    # every recorded line as the word-by-word and pattern-by-pattern tests did
    lines = _recorded_lines()
    for keys in (phases._KEYS, process._KEYS):
        has = any_of(keys)
        for line in lines:
            assert has(line) == any(k in line for k in keys), line
    for line in lines:
        for start in range(min(len(line), 40)):
            rest = line[start:]
            one = next((m for p in prefixes._SILENT if (m := p.match(rest))), None)
            joined = prefixes._ANY_SILENT.match(rest)
            assert (one and one.end()) == (joined and joined.end()), rest


_PIECES = st.sampled_from(
    ["[rank3]:", "[default1]:", "[I1120 19:02:03", "[W ProcessGroupNCCL.cpp:", "x", " ", ":",
     "E1120 19:02:03.123456 812 train.py:12]", "[", "]", ".py:", "step 3 | loss 2.0"]
)  # fmt: skip


def _splits(segment: str) -> list[str]:
    pieces = scanner._SPLICE.split(segment)
    if scanner._LINE_PREFIXED.match(segment):
        pieces = [p for piece in pieces for p in scanner._SPLICE_SPACED.split(piece)]
    return pieces


def _may_split(segment: str) -> bool:  # the test in Scanner.feed
    return segment.find("[", 1) > 0 or (segment[:1] == "[" and ".py:" in segment)


@settings(max_examples=500, deadline=None)
@given(parts=st.lists(_PIECES, max_size=8))
def test_a_line_the_splice_test_passes_over_has_nothing_to_split(parts: list[str]) -> None:
    segment = "".join(parts)
    if "[" in segment and not _may_split(segment):
        assert _splits(segment) == [segment]


def test_recorded_lines_the_splice_test_passes_over_have_nothing_to_split() -> None:
    for line in _recorded_lines():
        if "[" in line and not _may_split(line):
            assert _splits(line) == [line], line


def test_torch_and_count_keyword_lists_read_recorded_lines_as_before() -> None:
    # torch_pg's 34 words and the count recogniser's six as one search each
    lines = _recorded_lines()
    for keys, has in (
        (torch_pg._KEYWORDS, torch_pg.NEED.admits),
        (phases._COUNT_KEYS, phases._HAS_COUNT_KEY),
    ):
        for line in lines:
            assert has(line) == any(k in line for k in keys), line


def _slow_peel(raw: str, monkeypatch: pytest.MonkeyPatch) -> prefix.LineTag:
    """peel_line with its torchrun shortcut off: every layer tried in turn, as before it."""
    with monkeypatch.context() as patched:
        patched.setattr(prefix, "_TORCHRUN_FIRST", re.compile(r"(?!)"))
        return prefix.peel_line(raw)


_TORCHRUN_PIECES = st.sampled_from(
    ["[rank3]:", "[default12]:", "[rank=2] ", "[titan] ", "[NeMo I 2025-01-02 03:04:05 x] ",
     "2026-11-22 19:16:41,799 - ", "INFO - ", "[I1120 19:02:03.1 12 a.py:3] ", "[1,3]<stdout>:",
     "  3: ", "node7 ", "x", " ", "[", "]", "step 3 | loss 2.0"]
)  # fmt: skip


@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    head=st.sampled_from(["[rank", "[default"]),
    digits=st.text("0123456789", min_size=1, max_size=5),
    parts=st.lists(_TORCHRUN_PIECES, max_size=6),
)
def test_the_torchrun_shortcut_peels_as_every_layer_in_turn(
    head: str, digits: str, parts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for raw in (head + digits + "".join(parts), "".join(parts) + head + digits + "]: x"):
        assert prefix.peel_line(raw) == _slow_peel(raw, monkeypatch), raw


def test_recorded_lines_peel_the_same_with_the_torchrun_shortcut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [line for line in _recorded_lines() if "[rank" in line or "[default" in line]
    assert len(lines) > 200
    for line in lines:
        assert prefix.peel_line(line) == _slow_peel(line, monkeypatch), line


class _ScannerWithoutBlankShortcut(scanner.Scanner):
    def feed(self, lineno: int, raw: str) -> None:
        if not raw:
            self._physical(lineno, raw, 0)  # the way every line went before _blank
            return
        super().feed(lineno, raw)


def test_blank_lines_scan_as_before() -> None:
    # every recorded log, and every log with each third line emptied (as the text path's
    # router empties a dump's frames): the same events either way
    for path in sorted((ROOT / "fixtures").rglob("*")):
        if not path.is_file() or path.suffix not in {".log", ".txt", ".out", ".err"}:
            continue
        lines = path.read_text(errors="replace").splitlines()
        for variant in (lines, ["" if i % 3 == 2 else line for i, line in enumerate(lines)]):
            fast, slow = scanner.Scanner(), _ScannerWithoutBlankShortcut()
            for number, line in enumerate(variant, start=1):
                fast.feed(number, line)
                slow.feed(number, line)
            assert repr(fast.finish()) == repr(slow.finish()), path


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(text=st.from_regex(stacks_parser._NEW_START_ANYWHERE))
def test_every_match_of_a_stack_start_anywhere_holds_a_stack_word(text: str) -> None:
    # one literal search stands for both any-stack searches (stacks/parser._STACK_WORDS)
    assert stacks_parser._HOLDS_STACK_WORD is not None
    assert stacks_parser._HOLDS_STACK_WORD(text), text


def test_recorded_texts_hold_a_stack_as_both_searches_say() -> None:
    def both(text: str) -> bool:
        return bool(
            stacks_parser._ANY_STACK.search(text) or stacks_parser._NEW_START_ANYWHERE.search(text)
        )

    texts = [
        path.read_text(errors="replace")
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
    ]
    pieces = [line for text in texts for line in text.splitlines()[:400]]
    assert any(both(text) for text in texts) and not all(both(text) for text in texts)
    for text in [*texts, *pieces]:
        held = stacks_parser._HOLDS_STACK_WORD(text)  # type: ignore[misc]
        assert (held and both(text)) == both(text), text[:200]
        gated = stacks_parser._ANY_STACK_GATED
        assert bool(held and gated.search_held(text)) == bool(gated.search(text)), text[:200]
