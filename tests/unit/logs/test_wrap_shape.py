"""What the log scanner reads of a line it passes over, without peeling it (issue 21
item 1, issue 20 item 9): its wrap facts (tagged, may continue the line before, indented),
remembered per wrap shape (parsers/logs/wrap_shape.py), and peel_line's test that
no layer can start where it is (parsers/logs/prefix._ANY_ROUND_LAYER).

The wrap shape is sound only while every pattern peeling tries treats all ASCII digits
alike but for the literal "[1," and a date's month and day, whose tests come out the same
for each class 0, 1, 2, 3, "4 or more" of each digit: held here to the patterns
themselves (a new layer with a digit literal fails), to every month and day, to every
recorded line and to lines generated with their digits changed. The one-match round
test is held to every pattern the peelers read (a new layer left out of it fails) and to
every recorded line, peeled with it and without it.
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangdoc.analyzer.parsers import prefixes
from hangdoc.analyzer.parsers.logs import prefix, scanner, window, wrap_shape
from hangdoc.analyzer.parsers.logs.prefilter import block_shapes
from hangdoc.analyzer.parsers.logs.timefmt import dated_stamp, dated_stamp_of, glog_stamp

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
_DIGITS = frozenset(map(ord, "0123456789"))
_CLASS = str.maketrans("56789", "44444")


def _recorded_paths() -> list[Path]:
    return [
        path
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
    ]


def _recorded_lines() -> list[str]:
    return [
        line for path in _recorded_paths() for line in path.read_text(errors="replace").splitlines()
    ]


def _patterns_read(*functions: object) -> set[str]:
    """The module-level compiled patterns each function names."""
    names: set[str] = set()
    for function in functions:
        module = sys.modules[function.__module__]  # type: ignore[attr-defined]
        for name in function.__code__.co_names:  # type: ignore[attr-defined]
            if isinstance(getattr(module, name, None), re.Pattern):
                names.add(f"{module.__name__}.{name}")
    return names


def _digit_literals(parsed: object) -> list[tuple[str, int]]:
    """(the literal's kind, its code) of every digit a pattern names as such, and of
    every class that holds some ASCII digits but not all ten."""
    found: list[tuple[str, int]] = []
    for op, arg in parsed:  # type: ignore[attr-defined]
        if op is sre_constants.LITERAL and arg in _DIGITS:
            found.append(("literal", arg))
        elif op is sre_constants.IN:
            held = set()
            for item_op, item in arg:
                if item_op is sre_constants.LITERAL:
                    held.add(item)
                elif item_op is sre_constants.RANGE:
                    held |= set(range(item[0], item[1] + 1))
                elif item_op is sre_constants.CATEGORY and "DIGIT" in str(item):
                    held |= _DIGITS  # \d, \w (a word holds every digit)
                elif item_op is sre_constants.CATEGORY and "WORD" in str(item):
                    held |= _DIGITS
                elif item_op is sre_constants.CATEGORY and "SPACE" in str(item):
                    held |= _DIGITS if "NOT" in str(item) else set()
            if held & _DIGITS and not held >= _DIGITS:
                found.append(("class", min(held & _DIGITS)))
        elif isinstance(arg, (list, tuple)):
            for part in arg:
                if isinstance(part, sre_parse.SubPattern):
                    found += _digit_literals(part)
                elif isinstance(part, (list, tuple)):
                    for sub in part:
                        if isinstance(sub, sre_parse.SubPattern):
                            found += _digit_literals(sub)
        elif isinstance(arg, sre_parse.SubPattern):
            found += _digit_literals(arg)
    return found


_PEELERS = (prefix._peel, prefix._own_layer, prefixes.peel, prefixes.clean_line)
_SHAPED = (
    *prefix._ROUND_LAYERS,
    prefix._TORCHRUN_FIRST,
    prefix._SRUN_LABEL,
    prefix._SHIPPER,
    prefixes._MAYBE_PREFIX,
    wrap_shape.NCCL_HEAD,
)


def test_every_pattern_peeling_reads_is_in_the_round_test_or_a_gate() -> None:
    listed = {id(p) for p in prefix._ROUND_LAYERS} | {id(p) for p in prefixes.PEEL_LAYERS}
    gates = {"_TORCHRUN_FIRST", "_SRUN_LABEL", "_SHIPPER", "_MAYBE_PREFIX", "_ANY_ROUND_LAYER"}
    colours = {"_ANSI", "_BARE_SGR", "_BARE_SGR_SPACED", "_LEADING_SGR"}  # clean_line's
    for qualified in _patterns_read(*_PEELERS):
        module, name = qualified.rsplit(".", 1)
        if name in gates or name in colours:
            continue
        assert id(getattr(sys.modules[module], name)) in listed, qualified
    silent = {id(p) for p in prefixes._SILENT}
    for name in _patterns_read(prefixes.peel):
        pattern = getattr(prefixes, name.rsplit(".", 1)[1])
        assert id(pattern) in listed or id(pattern) in silent or pattern is prefixes._MAYBE_PREFIX


def test_the_patterns_peeling_reads_treat_every_digit_alike() -> None:
    # but _MPI_RANK_TAG's "1," (a line holding "[1," is peeled, not shaped)
    for pattern in _SHAPED:
        found = _digit_literals(sre_parse.parse(pattern.pattern, pattern.flags))
        if pattern is prefix._MPI_RANK_TAG or pattern is prefix._ANY_ROUND_LAYER:
            found = [f for f in found if f != ("literal", ord("1"))]
        assert not found, (pattern.pattern, found)
    for pattern in prefixes.PEEL_LAYERS:
        assert not _digit_literals(sre_parse.parse(pattern.pattern, pattern.flags)), pattern


def _valid(stamp: object) -> bool:
    return stamp is not None


def test_a_dates_test_comes_out_alike_for_each_digit_class() -> None:
    two = [f"{n:02d}" for n in range(100)]
    for month in two:
        for day in two:
            shaped_month, shaped_day = month.translate(_CLASS), day.translate(_CLASS)
            assert _valid(dated_stamp_of("2026", month, day, "1", "2", "3")) == _valid(
                dated_stamp_of("2026", shaped_month, shaped_day, "1", "2", "3")
            ), (month, day)
            assert dated_stamp_of("2026", month, day, "10", "20", "30.5") == dated_stamp(
                "2026", month, day, "10:20:30.5"
            )
    for mmdd in [f"{n:03d}" for n in range(1000)] + [f"{n:04d}" for n in range(10000)]:
        assert _valid(glog_stamp(mmdd, "1:02:03")) == _valid(
            glog_stamp(mmdd.translate(_CLASS), "1:02:03")
        ), mmdd


def _facts(raw: str) -> wrap_shape.WrapFacts:
    return wrap_shape.facts_of(prefix.peel_line(raw), raw if wrap_shape.plain(raw) else None)


def test_recorded_lines_have_the_wrap_facts_of_their_peeling() -> None:
    wrap_shape.forget()
    lines = _recorded_lines()
    assert len(lines) > 1000
    for raw in lines:
        assert wrap_shape.wrap_facts(raw) == _facts(raw), raw
    # and again, each read from the shapes the others left
    for raw in lines:
        assert wrap_shape.wrap_facts(raw) == _facts(raw), raw


_PIECES = st.sampled_from(
    [
        "2026-11-21 19:23:51,750 - ",
        "[2025-04-08 08:39:46] ",
        "06/27 08:41:09 - ",
        "I0709 17:05:38.16 1 a.py:3] ",
        "INFO - trainer - ",
        "root - INFO - ",
        "[rank3]:",
        "[default1]:",
        "  3: ",
        "[1,3]<stdout>:",
        "[2,3]<stdout>:",
        "node7:12:34 [0] NCCL INFO x",
        "trainer-1  | ",
        "Feb 18 10:28:25 host python[1234]: ",
        "[NeMo I 2025-01-02 03:04:05 x] ",
        "[E709 17:05:38.16 ProcessGroupNCCL.cpp:632] ",
        "[I ProcessGroupNCCL.cpp:632] ",
        "torch.distributed.elastic: [INFO] ",
        "2026-11-21 19:23:51,750 - torch.distributed - INFO - ",
        "[rank=3] ",
        "epoch 0 step 1 | loss 2.8 | lr 3.00e-04 | grad_norm 1.344 | 11989 tokens/s",
        " ",
        "x",
        "[",
        "]",
    ]
)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(_PIECES, min_size=1, max_size=6), seed=st.lists(st.integers(0, 9)))
def test_lines_of_one_wrap_shape_have_their_own_peelings_facts(
    parts: list[str], seed: list[int]
) -> None:
    line = "".join(parts)
    digits = iter(seed * (len(line) // max(len(seed), 1) + 1) if seed else [])
    other = "".join(str(next(digits, 0)) if ch.isdigit() else ch for ch in line)
    for raw in (line, other, line):
        assert wrap_shape.wrap_facts(raw) == _facts(raw), raw


def test_lines_of_recorded_shapes_with_any_digits_have_their_own_peelings_facts() -> None:
    """Each recorded line's shape with its digits drawn anew, many times: entries of one
    shape found by their digits' classes, by the digits found before, or one by one where
    the shape's entries read other places, all as the line's own peeling."""
    wrap_shape.forget()
    rng = random.Random(7)
    lines = [raw for raw in _recorded_lines() if any(ch.isdigit() for ch in raw)][::7]
    variants = [
        "".join(rng.choice("0123456789") if ch.isdigit() else ch for ch in raw)
        for raw in lines
        for _ in range(12)
    ]
    rng.shuffle(variants)
    for raw in variants + variants:
        assert wrap_shape.wrap_facts(raw) == _facts(raw), raw


def test_a_logs_step_lines_of_many_dates_are_found_at_one_class_look_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wrap_shape.forget()
    lines = [
        f"2026-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:17,136 - INFO - trainer - "
        f"epoch 1061 step 1327283 | loss 2.0099 | lr 3.00e-04"
        for month in (11, 12)
        for day in range(10, 30)
        for hour in (3, 11, 19)
        for minute in (5, 48)
    ]
    real_classes = wrap_shape._classes
    calls: list[str] = []
    monkeypatch.setattr(
        wrap_shape, "_classes", lambda digits, raw: calls.append(raw) or real_classes(digits, raw)
    )
    for raw in lines:
        assert wrap_shape.wrap_facts(raw) == _facts(raw), raw
    assert len(calls) < 1.2 * len(lines), len(calls)


def _peel_every_round(raw: str, monkeypatch: pytest.MonkeyPatch) -> prefix.LineTag:
    with monkeypatch.context() as patched:
        patched.setattr(prefix, "_ANY_ROUND_LAYER", re.compile(""))
        return prefix.peel_line(raw)


def test_recorded_lines_peel_the_same_with_the_one_match_round_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for raw in _recorded_lines():
        assert prefix.peel_line(raw) == _peel_every_round(raw, monkeypatch), raw


def test_a_bench_rank_logs_step_lines_are_peeled_once_per_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench_all  # the benchmark's generated rank log
    from fr_synth import Job

    log = tmp_path / "stdout.rank3.out"
    bench_all.write_log(log, Job(ranks=16), 3, "node00000", 10003, 400_000)
    lines = log.read_text().split("\n")
    wrap_shape.forget()
    peeled: list[str] = []
    real_peel, real_reads = scanner.peel_line, wrap_shape.peel_line_reads
    for module in (scanner, wrap_shape):
        monkeypatch.setattr(module, "peel_line", lambda raw: peeled.append(raw) or real_peel(raw))
    monkeypatch.setattr(
        wrap_shape, "peel_line_reads", lambda raw: peeled.append(raw) or real_reads(raw)
    )
    reader = scanner.Scanner()
    reader.feed_lines((n, line, None) for n, line in enumerate(lines, 1))
    reader.finish()
    steps = [line for line in lines if " step " in line]
    assert len(steps) > 2000
    assert len(peeled) < len(lines) / 20, len(peeled)


class _EveryLineRead(scanner.Scanner):
    """The scanner with no line passed over: every line peeled, as before the prefilter."""

    def _quiet(self) -> bool:
        return False


class _Counting(scanner.Scanner):
    passed_over = 0

    def _pass_over(self, raw: str, shape: bytes | None) -> None:
        self.passed_over += 1
        super()._pass_over(raw, shape)


def _scan(lines: list[str], reader: scanner.Scanner) -> list[tuple[object, ...]]:
    for number, line in enumerate(lines, 1):
        reader.feed(number, line)
    return [(e.line, e.kind, e.text, e.prefix_rank, e.local_rank) for e in reader.finish()]


@pytest.mark.parametrize("root", ["[rank3]:", "[default3]:", "2026-11-21 19:23:51,750 - ", ""])
@pytest.mark.parametrize("filler", [70, 200])
def test_a_long_wrapped_chain_passes_its_roots_identity_on_as_every_line_read(
    root: str, filler: int
) -> None:
    # a tagged line, then more passed-over headerless lines of a wrapped line's length
    # than the old bound on lines kept before their tags were read (64), some with dates that are
    # none (month 13), then a headerless line that means something: it takes the root's
    # rank when the chain reaches a tagged root, as it did when every line was peeled
    step = (
        "epoch 0 step {} | loss 2.8024 | lr 3.00e-04 | grad_norm 1.344 | 11989 tokens/s | 1 | 2 | "
    )
    chain = [root + step.format(0) + "11989 tokens/s"]
    for index in range(filler):
        date = "2026-13-45 10:00:01 " if index % 7 == 3 else ""
        chain.append(date + step.format(index + 1) + "11989 tokens/s" + " |" * (index % 3))
    chain.append(
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, "
        "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600005 milliseconds before timing out."
    )
    reader = _Counting()
    fast, slow = _scan(chain, reader), _scan(chain, _EveryLineRead())
    assert reader.passed_over >= filler  # the chain's lines were passed over, unpeeled
    assert fast == slow
    assert fast, "the last line is read"
    if root == "[rank3]:":
        assert fast[-1][3] == 3
    if root == "[default3]:":
        assert fast[-1][4] == 3


@pytest.mark.parametrize("root", ["[rank3]:", "2026-11-21 19:23:51,750 - ", ""])
def test_a_wrapped_chain_read_as_a_log_reader_feeds_it_is_read_as_line_by_line(root: str) -> None:
    # feed_lines (the log parser's loop, the passing over in it) reads as feed does
    step = "epoch 0 step {} | loss 2.8024 | lr 3.00e-04 | grad_norm 1.344 | 11989 tokens/s | "
    chain = [root + step.format(0) + "x" * 30]
    chain += [step.format(n) + "y" * (30 + n % 3) for n in range(1, 90)]
    chain += [
        "",
        root + "short",
        "  indented " + step.format(1),
        "Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600005 milliseconds before timing out.",
    ]
    batched = scanner.Scanner()
    shapes = block_shapes("\n".join(chain).encode())
    batched.feed_lines(zip(range(1, len(chain) + 1), chain, shapes, strict=True))
    fast = [(e.line, e.kind, e.text, e.prefix_rank, e.local_rank) for e in batched.finish()]
    assert fast == _scan(chain, scanner.Scanner()) == _scan(chain, _EveryLineRead())
    assert fast


def _window_peeling_every_line(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[int, list[object]]:
    with monkeypatch.context() as patched:
        patched.setattr(wrap_shape, "plain", lambda raw: False)
        return window.read_line_window(path, "x", None)  # type: ignore[return-value]


def test_the_line_window_reads_recorded_logs_as_when_it_peeled_every_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the window's untagged lines are read by their wrap facts (text start, library
    # origin, indent), remembered per shape: each recorded log, and a bench rank log,
    # gives the window it gave when every line was peeled
    import bench_all
    from fr_synth import Job

    bench = tmp_path / "stdout.rank3.out"
    bench_all.write_log(bench, Job(ranks=16), 3, "node00000", 10003, 400_000)
    paths = [*_recorded_paths(), bench]
    assert len(paths) > 20
    for path in paths:
        wrap_shape.forget()
        expected = _window_peeling_every_line(path, monkeypatch)
        assert window.read_line_window(path, "x", None) == expected, path
        assert window.read_line_window(path, "x", None) == expected, path  # from shapes kept
