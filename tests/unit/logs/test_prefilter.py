"""The scanner's one prefilter (parsers/logs/prefilter.py): a line it says can mean nothing
is passed over, unpeeled, and that may change nothing the scanner finds.

Held to: every recogniser match_any asks tests, first, a need the prefilter holds; every
recogniser's and every catalog row's lines (each recorded line a
recogniser or a row reads, every row's own sample line) pass it; every recorded log, as
it is and pasted the ways pastes are mangled (hangdoc/paste_mangling.py), is scanned to
the same events, maps and counts with it as without it; the word-boundary argument it
relies on (peeling ends at a character no word holds) holds on every recorded line; and
the lines it exists for (the step lines of a big paste or log) are passed over.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.catalog import default_catalog
from hangdoc.analyzer.parsers.catalog.template import sample
from hangdoc.analyzer.parsers.logs import scanner as scanner_module
from hangdoc.analyzer.parsers.logs.catalog_lines import catalog_hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.parsers.logs.prefilter import Prefilter
from hangdoc.analyzer.parsers.logs.prefix import peel_line
from hangdoc.analyzer.parsers.logs.scanner import Scanner, match_any, scanner_prefilter
from hangdoc.analyzer.parsers.prefixes import clean_line
from hangdoc.paste_mangling import COMBINED, MANGLINGS

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import bench_text  # noqa: E402  (the benchmark's generated inputs)

# The manglings every recorded log is scanned under (both ways): the ones that change a
# line's identity or its wrapping, which is what a passed-over line leaves behind.
_MANGLED = {"wrap 40", "wrap 100", "indent 4 spaces", "quote", "timestamps", "interleave ranks"}
_WORD = re.compile(r"[A-Za-z0-9_]")


def _recorded() -> list[Path]:
    return [
        path
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
    ]


def _lines() -> list[str]:
    return [line for path in _recorded() for line in path.read_text(errors="replace").split("\n")]


class _EveryLineRead(Scanner):
    """The scanner as before the prefilter: no state is quiet, every line is peeled."""

    def _quiet(self) -> bool:
        return False


def _scan(text: str, *, prefilter: bool) -> tuple[object, ...]:
    scanner = Scanner() if prefilter else _EveryLineRead()
    # the prefilter's side as the log parser feeds it (feed_lines, its passing over inline)
    scanner.feed_lines((n, line.rstrip("\r"), None) for n, line in enumerate(text.split("\n"), 1))
    events = scanner.finish()
    return (
        events,
        scanner.local_to_global,
        scanner.hostpid_rank,
        scanner.pid_rank,
        scanner.dropped,
    )


def test_every_recogniser_match_any_asks_tests_a_need_of_the_prefilter() -> None:
    # A recogniser added to match_any without its need in RECOGNISER_NEEDS would read
    # lines the prefilter passes over: each one called there tests, first, a need the
    # prefilter holds.
    needs = {id(need) for need in scanner_module.RECOGNISER_NEEDS}
    tree = ast.parse(inspect.getsource(match_any))
    called = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    recognisers = sorted(name for name in called if name.startswith("match_"))
    assert len(recognisers) >= 14
    for name in (*recognisers, "match_any"):
        function = getattr(scanner_module, name)
        module = sys.modules[function.__module__]
        body = ast.parse(inspect.getsource(function)).body[0]
        assert isinstance(body, ast.FunctionDef)
        tested = {
            node.func.value.id
            for node in ast.walk(body)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "admits"
            and isinstance(node.func.value, ast.Name)
        }
        assert any(id(getattr(module, held, None)) in needs for held in tested), name


def test_every_line_a_recogniser_or_a_row_reads_passes() -> None:
    may_mean = scanner_prefilter().may_mean
    read = 0
    for raw in _lines():
        text = peel_line(raw).text
        if not text.strip():
            continue
        if match_any(text, []) is not None or catalog_hit(text) is not None:
            read += 1
            assert may_mean(raw), raw
    assert read > 1000


def test_every_catalog_rows_sample_passes() -> None:
    may_mean = scanner_prefilter().may_mean
    rows = [row for row in default_catalog().rows if row.matchable and row.keyword]
    assert len(rows) > 5000
    for row in rows:
        line = sample(row.parts)
        assert may_mean(line), (row.id, line)
        assert may_mean("[rank3]:[E0603 11:00:00.880376776 ProcessGroupNCCL.cpp:632] " + line)


@pytest.mark.parametrize("mangling", ["", *sorted(_MANGLED)])
def test_recorded_logs_scan_alike_with_and_without_it(mangling: str) -> None:
    change = {m.name: m.apply for m in (*MANGLINGS, *COMBINED)}.get(mangling, lambda t: t)
    for path in _recorded():
        text = change(path.read_text(errors="replace"))
        assert _scan(text, prefilter=True) == _scan(text, prefilter=False), (mangling, path)


@pytest.mark.parametrize("mangling", ["", "wrap 100", "wrap 80 + fence + CRLF", "indent + CRLF"])
def test_the_benchmarks_paste_and_log_scan_alike(mangling: str, tmp_path: Path) -> None:
    change = {m.name: m.apply for m in (*MANGLINGS, *COMBINED)}.get(mangling, lambda t: t)
    paste, log = tmp_path / "paste.txt", tmp_path / "train.log"
    bench_text.write_paste(paste, 120_000)
    bench_text.write_log(log, 400_000)
    for path in (paste, log):
        text = change(path.read_text())
        assert _scan(text, prefilter=True) == _scan(text, prefilter=False), (mangling, path)


def test_peeling_ends_where_no_word_does() -> None:
    # The catalog's keywords are looked for among the raw line's words: a word of the
    # peeled line must be one of them, so the peeled line starts at a word's start.
    for raw in _lines():
        clean = clean_line(raw)
        text = peel_line(raw).text
        assert clean.endswith(text), raw
        cut = len(clean) - len(text)
        assert cut == 0 or not text or not _WORD.match(clean[cut - 1]) or not _WORD.match(text[0])


def test_the_step_lines_of_the_benchmarks_are_passed_over(tmp_path: Path) -> None:
    may_mean = scanner_prefilter().may_mean
    paste = tmp_path / "paste.txt"
    bench_text.write_paste(paste, 60_000)
    steps = [line for line in paste.read_text().split("\n") if " step " in line]
    assert steps
    assert not any(may_mean(line) for line in steps)
    scanner = Scanner()
    peeled: list[str] = []
    real = scanner_module.peel_line

    def counting(raw: str) -> object:
        peeled.append(raw)
        return real(raw)

    scanner_module.peel_line = counting  # type: ignore[assignment]
    try:
        for number, line in enumerate(paste.read_text().split("\n"), 1):
            scanner.feed(number, line)
    finally:
        scanner_module.peel_line = real
    assert not set(steps) & set(peeled)


def test_a_need_is_what_its_patterns_hold() -> None:
    need = Need.patterns(re.compile(r"Watchdog caught (?:collective|barrier)"))
    assert need.admits("[Rank 3] Watchdog caught collective operation timeout")
    assert not need.admits("Watchdog says nothing")
    with pytest.raises(ValueError, match="no literal"):
        Need.patterns(re.compile(r"\d+\s\d+"))
    with pytest.raises(ValueError, match="no literal"):
        Need.patterns(re.compile(r"(?i)watchdog"))


def test_a_prefilter_reads_a_words_need_and_a_branchs_every_part() -> None:
    counted = re.compile(r"Number of (?:steps|batch): \d+ left")
    prefilter = Prefilter([Need.words(["Watchdog"]), Need.patterns(counted)], ["ncclCommInitRank"])
    assert prefilter.may_mean("[rank3]: Watchdog caught")
    assert prefilter.may_mean("Number of steps: 1250 left")
    assert not prefilter.may_mean("12 steps left")  # words of two parts, not of the third
    assert prefilter.may_mean("x ncclCommInitRank comm 0x1")
    assert not prefilter.may_mean("x myncclCommInitRank2")  # the keyword as a word only
    assert prefilter.may_mean("\x1b[31mWatch\x1b[0mdog")  # colours are read in full
