"""A window read from a node summary builds its lines when they are read (LogWindow,
summaries/log_window.DigestWindow): every way of reading it gives the lines that building
them all gives, and the views that pass over most lines (last_words, unfinished,
benign_lines) answer as on the built lines."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import LINE_NUMBER, Evidence, LogLine, LogWindow
from hangdoc.analyzer.summaries.log_window import (
    DigestWindow,
    NodeNumbers,
    TemplateFormats,
    TemplateTable,
    _after_space,
    decode_window,
    encode_window,
)
from hangdoc.analyzer.summaries.read import read_summary
from hangdoc.analyzer.summarize.write import write_node_summary
from hangdoc.analyzer.views import last_words as last_words_view
from hangdoc.analyzer.views.benign import benign_lines
from hangdoc.analyzer.vocabulary import BenignWarning, EventKind
from hangdoc.rules import hd061_activity_before_timeout as hd061

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
LOGGED = sorted(p.parent for p in FIXTURES.rglob("manifest.json") if any(p.parent.glob("*/logs/*")))
IDS = [str(p.relative_to(FIXTURES)) for p in LOGGED]


def _window(lines: list[LogLine]) -> DigestWindow:
    table = TemplateTable()
    raw = json.loads(json.dumps(encode_window(lines, table)))
    window = decode_window(raw, TemplateFormats(table.rows), lambda path: path)
    assert isinstance(window, DigestWindow)
    return window


def _window_in_node(lines: list[LogLine]) -> DigestWindow:
    """The window as /6 writes it: its runs' numbers inside the node's one string, between
    other windows' numbers (a line's numbers are found in place there: none may be read
    from beyond its run's ends)."""
    table = TemplateTable()
    raw = json.loads(json.dumps(encode_window(lines, table)))
    texts = raw.pop("n")
    raw["nl"] = [len(t) for t in texts]
    before, after = "1 22 333 4444", "55555 6 77"
    numbers = NodeNumbers(before + "".join(texts) + after)
    numbers.take([len(before)])
    window = decode_window(raw, TemplateFormats(table.rows), lambda path: path, numbers)
    numbers.take([len(after)])
    numbers.check_all_taken()
    assert isinstance(window, DigestWindow)
    return window


def _fresh(window: LogWindow) -> list[LogLine]:
    """The window's lines built all at once, from a copy that read none before."""
    assert isinstance(window, DigestWindow)
    copy = DigestWindow.__new__(DigestWindow)
    for name in DigestWindow.__slots__:
        setattr(copy, name, getattr(window, name))
    copy._built, copy._some = None, {}
    return copy.lines()


def _lines(count: int, seed: int) -> list[LogLine]:
    """Lines of several templates with 0 to 70 numbers each (more than the window's
    near ends, so that lines in the middle are found by counting), two sources, line
    numbers that restart (a tail), benign marks."""
    rng = random.Random(seed)
    out = []
    for index in range(count):
        numbers = rng.choice([0, 1, 3, 7, 70])
        text = " ".join(
            f"w{k}={rng.choice(['0', '12', '3.25', '0x1f', '12:03:04', '99999999'])}"
            for k in range(numbers)
        )
        benign = BenignWarning.TOKENIZERS_FORK if rng.random() < 0.05 else None
        source = "/a" if index < count // 2 else "/b"
        out.append(
            LogLine(f"step {text} %s", source, index + 1 if index < count // 3 else 0, benign)
        )
    return out


@pytest.mark.parametrize("seed", range(6))
def test_every_line_read_alone_is_the_line_built_with_all(seed: int) -> None:
    lines = _lines(300, seed)
    window = _window(lines)
    order = list(range(len(lines)))
    random.Random(seed).shuffle(order)
    # WHEN lines are read one by one, in any order, by positive and negative index
    alone = {i: window[i] if i % 2 else window[i - len(lines)] for i in order}
    # THEN each is the line written, the same record when read again, and built whole
    # the window is the same lines, holding the records read before
    assert [alone[i] for i in range(len(lines))] == lines
    assert all(window[i] is alone[i] for i in order[:20])
    assert window.lines() == lines and _fresh(window) == lines
    assert all(window.lines()[i] is alone[i] for i in order)
    assert len(window) == len(lines)


@pytest.mark.parametrize("in_node", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_a_lines_numbers_are_read_from_the_digest_as_its_text_gives_them(
    seed: int, in_node: bool
) -> None:
    """``numbers`` (what the log comparison reads of most lines) is the line's numbers as
    ``LINE_NUMBER`` finds them in its text, without building the line: for every line,
    in any order (a run's first and last lines, lines inside a run, 0 to 70 numbers), the
    window's numbers its own (/5) or in the node's string (/6)."""
    lines = _lines(300, seed)
    window = _window_in_node(lines) if in_node else _window(lines)
    order = list(range(len(lines)))
    random.Random(seed).shuffle(order)
    for index in order:
        assert window.numbers(index) == tuple(LINE_NUMBER.findall(lines[index].text))
    assert window.numbers(-1) == tuple(LINE_NUMBER.findall(lines[-1].text))
    assert window._built is None and not window._some  # (no line was built)
    window[5]  # (read, then its numbers are the built line's)
    assert window.numbers(5) == tuple(LINE_NUMBER.findall(lines[5].text))


def _long_runs(count: int) -> list[LogLine]:
    """A window of a few long runs of one template (as a job's logs are: step after
    step), 1 to 8 numbers a line, of unequal lengths."""
    rng = random.Random(count)
    out = []
    for index in range(count):
        if index % 97 == 50:
            out.append(LogLine(f"validation at step {index} loss {rng.random():.4f}", "/a", index))
            continue
        numbers = " ".join(str(rng.choice([0, 7, 123456, 3.25])) for _ in range(index // 97 % 8))
        out.append(LogLine(f"epoch {index // 97} step {index} | {numbers}", "/a", index + 1))
    return out


@pytest.mark.parametrize("in_node", [False, True])
@pytest.mark.parametrize("count", [1, 2, 300, 1000])
def test_numbers_of_lines_in_long_runs_at_any_place(count: int, in_node: bool) -> None:
    lines = _long_runs(count)
    window = _window_in_node(lines) if in_node else _window(lines)
    for index in range(count):
        assert window.numbers(index) == tuple(LINE_NUMBER.findall(lines[index].text))
    assert window._built is None and not window._some
    assert all(window[i] == lines[i] for i in range(count))


def test_a_window_as_format_4_wrote_it_reads_the_same() -> None:
    """/3 and /4 wrote the numbers of a window as one string and its templates and line
    numbers a value a line: cut into runs when read, they give the same lines."""
    lines = _long_runs(700)
    table = TemplateTable()
    raw = encode_window(lines, table)
    old = {
        "t": [v for v, n in raw["tr"] for _ in range(n)],
        "n": " ".join(t for t in raw["n"] if t),
        "l": [v for v, n in raw["lr"] for _ in range(n)],
        "s": raw["s"],
    }
    window = decode_window(old, TemplateFormats(table.rows), lambda path: path)
    assert isinstance(window, DigestWindow)
    assert [window.numbers(i) for i in range(700)] == [
        tuple(LINE_NUMBER.findall(x.text)) for x in lines
    ]
    assert window == lines


def test_a_window_reads_as_the_list_of_its_lines() -> None:
    lines = _lines(50, 7)
    window = _window(lines)
    assert len(window) == 50 and window[-1] == lines[-1] and window[3:9] == lines[3:9]
    assert window == lines and lines == window and window == _window(lines)
    assert bool(window) and list(reversed(window)) == lines[::-1]
    with pytest.raises(IndexError):
        window[50]
    with pytest.raises(IndexError):
        window[-51]
    # changed, it is a list of lines from then on
    extra = LogLine("more", "/b", 0)
    window.extend([extra])
    assert window == [*lines, extra] and len(window) == 51


def test_its_columns_are_those_of_its_lines() -> None:
    lines = _lines(200, 3)
    window = _window(lines)
    assert list(window.sources()) == list(dict.fromkeys(x.source for x in lines))
    assert list(window.benign_marks()) == [x for x in lines if x.benign is not None]
    assert window._built is None  # (neither built the lines)


def test_a_space_is_found_by_counting_as_splitting_finds_it() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        parts = [rng.choice(["0", "7", "12345", "3.25", "99999999", "0x1f"]) for _ in range(400)]
        parts = parts[: rng.randint(1, 400)]
        text = " ".join(parts)
        index = rng.randrange(len(parts))
        start = _after_space(text, index, len(text) / len(parts))
        assert start == len(" ".join(parts[:index])) + (1 if index else 0)


@pytest.mark.parametrize(
    "damage",
    [
        {"t": [0], "n": "1", "l": ["x"], "s": [["/a", 1]]},  # a line number not a number
        {"t": [0], "n": "1\n2", "l": [1], "s": [["/a", 1]]},  # a newline inside
        {"t": [0], "n": "1", "l": [1], "s": [["/a", 1]], "b": [[1, "tokenizers_fork"]]},
        {"t": [0], "n": "1", "l": [1], "s": [["/a", 1]], "b": [[0, "no such warning"]]},
        {"t": [0], "n": 7, "l": [1], "s": [["/a", 1]]},
    ],
)
def test_a_damaged_digest_raises_when_read_not_when_a_line_is_built(
    damage: dict[str, object],
) -> None:
    with pytest.raises((KeyError, TypeError, ValueError, IndexError)):
        decode_window(damage, TemplateFormats([["step ", ""]]), lambda path: path)


def _built(evidence: Evidence) -> Evidence:
    """The same Evidence with every window a list of its lines (as before LogWindow)."""
    for proc in evidence.processes:
        if isinstance(proc.log_lines, LogWindow):
            proc.log_lines = _fresh(proc.log_lines)
    return evidence


@pytest.mark.parametrize("dump", LOGGED, ids=IDS)
def test_views_that_pass_lines_over_answer_as_on_the_built_lines(
    dump: Path, tmp_path: Path
) -> None:
    copy = tmp_path / dump.name
    shutil.copytree(dump, copy)
    write_node_summary(copy)
    contents, why = read_summary(copy, "X")
    assert why is None and contents is not None
    if not any(isinstance(p.log_lines, DigestWindow) for p in contents.processes):
        pytest.skip("no rank of this dump has a log window")
    lazy, built = load_paths([copy]), _built(load_paths([copy]))
    # (as HD061 asks them: its failures, its phases, the stops)
    said = [
        last_words_view.last_words(e, hd061._FAILURES, EventKind.PHASE, hd061._PHASES)
        for e in (lazy, built)
    ]
    assert said[0] == said[1]
    left = [last_words_view.unfinished(e, hd061._FAILURES, hd061._STOPS) for e in (lazy, built)]
    assert left[0] == left[1]
    assert benign_lines(lazy) == benign_lines(built)


def _damaged_in_node(lines: list[LogLine], at: int, to: str) -> DigestWindow:
    """The window as /6 writes it, the character ``at`` of its first run's numbers made
    ``to`` (the lengths kept: found damaged only when read)."""
    table = TemplateTable()
    raw = json.loads(json.dumps(encode_window(lines, table)))
    texts = raw.pop("n")
    raw["nl"] = [len(t) for t in texts]
    first = texts[0]
    at %= len(first)
    texts[0] = first[:at] + to + first[at + 1 :]
    numbers = NodeNumbers("".join(texts), "node/summary.json")
    window = decode_window(raw, TemplateFormats(table.rows), lambda path: path, numbers, 5)
    numbers.check_all_taken()
    assert isinstance(window, DigestWindow)
    return window


def test_a_damaged_run_is_found_when_a_line_inside_it_is_read() -> None:
    from hangdoc.analyzer.summaries.log_window import DamagedWindow

    # GIVEN a run of 200 lines of 3 numbers, a number in its middle merged with the next
    # (a space made a digit: the run holds one number fewer than its lines take)
    lines = [LogLine(f"step {i} loss {i % 7}.5 lr 0.{i}", "/a", i + 1) for i in range(200)]
    numbers = " ".join(" ".join(LINE_NUMBER.findall(line.text)) for line in lines)
    window = _damaged_in_node(lines, [i for i, c in enumerate(numbers) if c == " "][300], "7")
    # WHEN its first and last lines are read THEN they are the lines written (their
    # places are counted from their own end of the run), and nothing is damaged yet
    for index in (0, 1, 198, 199):
        assert window.numbers(index) == tuple(LINE_NUMBER.findall(lines[index].text))
        assert window[index] == lines[index]
    assert window.damage() is None
    # WHEN a line inside it is read THEN the run is checked whole: DamagedWindow, naming
    # the summary and the rank, and every later read of the window raises it
    with pytest.raises(DamagedWindow, match=r"node/summary.json: rank 5's log window"):
        window.numbers(100)
    assert window.damage() is not None and "rank 5" in window.damage()  # type: ignore[operator]
    with pytest.raises(DamagedWindow):
        window.numbers(2)  # (a line not read before)
    with pytest.raises(DamagedWindow):
        window.lines()


def test_a_damaged_line_at_a_runs_end_is_found_when_it_is_read() -> None:
    from hangdoc.analyzer.summaries.log_window import DamagedWindow

    # GIVEN a run whose last line's last number is cut short (a space in place of its
    # last digit) or holds a quote
    lines = [LogLine(f"step {i} loss {i % 7}.5 lr 0.{i}", "/a", i + 1) for i in range(200)]
    for at, to in ((-1, " "), (-2, '"'), (0, '"')):
        window = _damaged_in_node(lines, at, to)
        # WHEN the line is read THEN DamagedWindow (its numbers are checked alone)
        with pytest.raises(DamagedWindow, match="damaged"):
            window.numbers(199 if at < 0 else 0)
