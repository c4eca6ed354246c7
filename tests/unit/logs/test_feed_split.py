"""A log read whole is scanned through Scanner.feed_split (its runs of passed-over lines
taken at once, their codes in C where the wrap facts are known: wrap_shape.run_codes),
and that must read as feed_lines does, line by line.

Held to: every recorded log, as it is and mangled the ways that change a line's identity
or wrapping, and the benchmarks' rank log and big log, give feed_lines' events, maps,
counts, router labels and the identity a wrapped line after the last one would take,
with the wrap facts forgotten (each run's facts asked line by line) and remembered (the
known codes); made texts of tagged, untagged, short, long, indented and blank lines in
random order do too; run_codes is the codes of each line's wrap facts, and its known
codes are what a bench rank log's runs take.
"""

from __future__ import annotations

import operator
import random
import sys
from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.logs import scanner as scanner_module
from hangdoc.analyzer.parsers.logs import wrap_shape
from hangdoc.analyzer.parsers.logs.prefilter import block_shapes
from hangdoc.analyzer.parsers.logs.scanner import Scanner
from hangdoc.analyzer.parsers.text import _LineRouter
from hangdoc.paste_mangling import COMBINED, MANGLINGS

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import bench_all  # noqa: E402  (the all-inputs benchmark's rank logs)
import bench_text  # noqa: E402  (the benchmark's generated inputs)
from fr_synth import Job  # noqa: E402

_MANGLED = {"wrap 40", "wrap 100", "indent 4 spaces", "quote", "timestamps", "interleave ranks"}


def _recorded() -> list[Path]:
    return [
        path
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
    ]


def _split(text: str) -> tuple[list[str], list[bytes]]:
    """A text's lines and shapes as the log parser splits a whole log (no CR)."""
    data = text.replace("\r", "").encode("utf-8", "surrogatepass")
    lines, shapes = data.decode("utf-8", "surrogatepass").split("\n"), block_shapes(data)
    if lines[-1] == "":
        lines.pop()
        shapes.pop()
    return lines, shapes


def _scan(
    lines: list[str], shapes: list[bytes], *, split: bool, routed: bool
) -> tuple[object, ...]:
    """The scan's findings and end state, fed as a TextParser's log side feeds it (the
    router skipping frame lines: no indented line is passed over) or a LogParser's."""
    scanner, router = Scanner(), _LineRouter()
    skip = router if routed else None
    if split:
        scanner.feed_split(lines, shapes, skip)
    else:
        numbered = zip(range(1, len(lines) + 1), lines, shapes, strict=True)
        scanner.feed_lines(numbered, skip)
    after = scanner._previous_tag()  # what a wrapped line after the last would take
    return (
        scanner.finish(),
        scanner.local_to_global,
        scanner.hostpid_rank,
        scanner.pid_rank,
        scanner.dropped,
        router.labels,
        after,
        scanner._prev_len,
        scanner._passing,
    )


def _alike(text: str) -> None:
    lines, shapes = _split(text)
    for routed in (True, False):
        wrap_shape.forget()
        by_line = _scan(lines, shapes, split=False, routed=routed)
        wrap_shape.forget()  # each run's facts asked line by line, then known
        assert _scan(lines, shapes, split=True, routed=routed) == by_line
        assert _scan(lines, shapes, split=True, routed=routed) == by_line


@pytest.mark.parametrize("mangling", ["", *sorted(_MANGLED)])
def test_recorded_logs_scan_through_feed_split_as_line_by_line(mangling: str) -> None:
    change = {m.name: m.apply for m in (*MANGLINGS, *COMBINED)}.get(mangling, lambda t: t)
    paths = _recorded()
    assert len(paths) > 20
    for path in paths:
        _alike(change(path.read_text(errors="replace")))


def test_the_benchmarks_logs_scan_through_feed_split_as_line_by_line(tmp_path: Path) -> None:
    rank_log, big_log = tmp_path / "stdout.rank3.out", tmp_path / "train.log"
    bench_all.write_log(rank_log, Job(ranks=16), 3, "node00000", 10003, 400_000)
    bench_text.write_log(big_log, 400_000)
    for path in (rank_log, big_log):
        _alike(path.read_text())


# Tagged lines that are passed over (a launcher's "3: ", Open MPI's tag) and one that is
# read; a glog header (no wrapped line's, it breaks a chain).
_PASSED_ROOTS = ("3: ", "12: ", "[1,3]<stdout>:")
_GLOG = "I1121 19:23:51.750000 123 train.py:12] "
_TIMEOUT = (
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, "
    "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600005 milliseconds before timing out."
)


def _made_line(rng: random.Random) -> str:
    step = f"epoch 0 step {rng.randrange(10 ** rng.randrange(1, 5))} | loss 2.{rng.randrange(9999)}"
    kind = rng.randrange(10)
    if kind == 0:
        return ""
    if kind == 1:
        return rng.choice(_PASSED_ROOTS) + step + " | " + "x" * rng.randrange(90)
    if kind == 2:
        return "  " + step + " | " + "z" * rng.randrange(120)  # indented: continues any line
    if kind == 3:
        return step[: rng.randrange(5, 20)]  # short
    if kind == 4:
        return _GLOG + step
    if kind == 5:
        return f"2026-1{rng.randrange(4)}-{rng.randrange(40):02d} 19:23:51,750 - INFO - t - {step}"
    if kind == 6:
        return _TIMEOUT  # read, and wrapped: it takes the identity passed on
    if kind == 7:
        return "[rank3]:" + step  # tagged, read
    return step + " | " + "y" * rng.randrange(120)  # long or not, headerless


def test_made_texts_scan_through_feed_split_as_line_by_line() -> None:
    rng = random.Random(20)
    for _ in range(300):
        lines = [_made_line(rng) for _ in range(rng.randrange(1, 60))]
        _alike("\n".join(lines) + "\n")


def test_run_codes_are_each_lines_and_known_for_a_bench_rank_log(tmp_path: Path) -> None:
    log = tmp_path / "stdout.rank3.out"
    bench_all.write_log(log, Job(ranks=16), 3, "node00000", 10003, 400_000)
    lines, shapes = _split(log.read_text())
    short = [(line, shape) for line, shape in zip(lines, shapes, strict=True) if line]
    code_of = scanner_module._run_code
    each = bytes(code_of(wrap_shape.wrap_facts(line, shape)) for line, shape in short)
    wrap_shape.forget()
    assert wrap_shape.run_codes(*map(list, zip(*short, strict=True)), code_of) == each
    # remembered now: the step lines' runs are known without asking line by line
    steps = [(line, shape) for line, shape in short if " step " in line]
    assert len(steps) > 1000
    step_lines, step_shapes = map(list, zip(*steps, strict=True))
    known = wrap_shape.known_facts(step_lines, step_shapes)
    assert known is not None
    assert [known[shape] for shape in step_shapes] == [
        wrap_shape.wrap_facts(line, shape) for line, shape in steps
    ]


def test_known_codes_are_each_lines_facts_for_dates_valid_or_not() -> None:
    # A line's facts are its shape's and its read digits' classes' (a date's month and
    # day): the codes known of a shape's first entry must be each line's own, here with
    # a code for every fact (text start, library) and dates that are none among them.
    registry: dict[wrap_shape.WrapFacts, int] = {}

    def code_of(facts: wrap_shape.WrapFacts) -> int:
        return registry.setdefault(facts, len(registry))

    rng = random.Random(9)
    known = 0
    for _ in range(300):
        lines = []
        head = rng.choice(
            ["2026-1{}-{:02d} 19:23:51,750 - INFO - t - ", "I1{}{:02d} 1:2:3.4 5 a.py:6] "]
        )
        for _ in range(rng.randrange(1, 40)):
            month, day = rng.choice(["0", "1", "3", "9"]), rng.randrange(40)
            lines.append(
                head.format(month, day) + f"step {rng.randrange(10 ** rng.randrange(1, 4))}"
            )
        _, shapes = _split("\n".join(lines) + "\n")
        pairs = zip(lines, shapes, strict=True)
        each = bytes(code_of(wrap_shape.wrap_facts(line, shape)) for line, shape in pairs)
        known += wrap_shape.known_facts(lines, shapes) is not None
        assert wrap_shape.run_codes(lines, shapes, code_of) == each
    assert len(registry) > 1
    assert known > 30  # the known codes were asked, and answered


def test_the_digits_read_of_a_run_of_one_date_are_each_lines() -> None:
    # known_facts cuts each line's span once and, where every line's is the same, pairs
    # each distinct shape with its digits: the pairs must be those each line reads, also
    # where a line is too short to hold the places (then none is known).
    rng = random.Random(21)
    for _ in range(300):
        date = rng.choice(["2026-11-21 ", "2026-03-09 ", "2026-1"])
        lines = [
            date + rng.choice(["x", "19:23:51 step ", "loss "]) + str(rng.randrange(10**4))
            for _ in range(rng.randrange(1, 30))
        ]
        shapes = [
            line.encode().translate(bytes.maketrans(b"123456789", b"0" * 9)) for line in lines
        ]
        places = tuple(sorted(rng.sample(range(12), rng.randrange(1, 4)), reverse=True))
        distinct = dict.fromkeys(shapes, wrap_shape.WrapFacts(False, True, False, False, False, 0))
        try:
            each: set[tuple[bytes, object]] | None = {
                (shape, operator.itemgetter(*places)(line))
                for line, shape in zip(lines, shapes, strict=True)
            }
        except IndexError:
            each = None
        assert wrap_shape._read_digits(lines, shapes, distinct, places) == each
