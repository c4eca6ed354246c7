"""A count the job prints as its own work advances, and whether it went on past a timeout.

fixtures/cases/README.md (Labels, slow work or divergence): when one rank's long work
outlasts the collective timeout, the artifacts show it slow, not stuck, when "a progress
bar or counter of the busy rank [is] printed at, or interleaved with, the timeout lines,
its elapsed time near the timeout". A bar is tqdm's (parsers/logs/phases.py); a counter is
the job's own: a loop that reports every N items in a line of its making ("finish 885000,
taken 20619.9 seconds" while a resume fast-forwards its loader). It is known by its shape,
not its words: consecutive lines of one file that differ only in their numbers
(model.LINE_NUMBER, the numbers the ranks' logs are compared on), one of which grows from
each line to the next.

Its work is shown advancing at the timeout when it goes on after the first timeout line of
the same file: a line of the counter after it, or a line that reads the counter's clock
(the same "<verb> <seconds> seconds" phrase) with a later time ("resume finished, taken
22534.1 seconds"). Lines that report a loss are a training loop's (views/last_words.py's
rule: a loss line is training, whatever else it names), which other rules read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hangdoc.analyzer.model import LINE_NUMBER, Evidence, LogLine, LogWindow

_MIN_RUN = 3  # lines of one shape, a number growing across them
# The clock a counter prints: the time its work has taken so far, in seconds.
_CLOCK = re.compile(
    r"(?i)\b(taken|took|elapsed|time|spent)\W{0,3}(\d+(?:\.\d+)?)\s*(s|secs?|seconds)\b"
)
_LOSS = re.compile(r"(?i)\bloss")
# How close to the timeout line the counter must be: its last line before it (lines
# between: other ranks' or threads' words) and the line that shows it going on after it.
# A counter that stopped long before the timeout, or that a restart printed again later,
# says nothing about the moment of the timeout.
_BEFORE = 5
_AFTER = 20


@dataclass(frozen=True, slots=True)
class Counter:
    """A run of counter lines, and what shows its work going on after a timeout."""

    rank: int | None  # the rank whose log it is, when a prefix or its file says
    lines: tuple[LogLine, ...]  # the run, in order
    elapsed_s: float | None  # the clock of its last line, where it prints one
    after: LogLine | None = None  # its line, or its clock's, after the timeout line
    after_elapsed_s: float | None = None


def _numbers(text: str) -> list[float]:
    out: list[float] = []
    for m in LINE_NUMBER.finditer(text):
        try:
            out.append(float(m.group(0)))
        except ValueError:
            out.append(float("nan"))  # a time of day or a hex address: not a count
    return out


def _shape(text: str) -> str:
    return LINE_NUMBER.sub("#", text.strip())


def _clock(text: str) -> tuple[str, float] | None:
    """The counter's clock phrase with its number masked, and the seconds it says."""
    m = _CLOCK.search(text)
    if m is None:
        return None
    return f"{m.group(1).lower()} # {m.group(3).lower()}", float(m.group(2))


def _grows(run: Sequence[LogLine]) -> bool:
    """One number of the shape grows from each line of the run to the next."""
    values = [_numbers(line.text) for line in run]
    width = len(values[0])
    return any(
        all(values[i][k] < values[i + 1][k] for i in range(len(values) - 1)) for k in range(width)
    )


def _runs(lines: Sequence[LogLine], typed: set[tuple[str, int]]) -> Iterable[list[LogLine]]:
    """Maximal runs of consecutive lines of one file and one shape with numbers in it.
    A line a parser made an event of (``typed``: NCCL's channel lines, torch's watchdog
    lines of each rank) is a library's, whose numbers grow without counting the job's
    work."""
    run: list[LogLine] = []
    for line in lines:
        shape = _shape(line.text)
        if (
            run
            and line.source == run[-1].source
            and shape == _shape(run[-1].text)
            and line.line > run[-1].line
        ):
            run.append(line)
            continue
        if len(run) >= _MIN_RUN:
            yield run
        own = "#" in shape and (line.source, line.line) not in typed and not _LOSS.search(line.text)
        run = [line] if own else []
    if len(run) >= _MIN_RUN:
        yield run


def _went_on(
    rank: int | None, run: list[LogLine], lines: Sequence[LogLine], limit: int
) -> Counter | None:
    """The counter, where a line of it (or of its clock) is at or after line ``limit`` of
    its file; else None."""
    last = run[-1]
    clock = _clock(last.text)
    shape = _shape(last.text)
    for line in lines:
        if line.source != last.source or line.line < limit or line.line <= last.line:
            continue
        if line.line > limit + _AFTER:
            break
        said = _clock(line.text)
        again = _shape(line.text) == shape
        later = clock is not None and said is not None and said[0] == clock[0]
        if again or (later and said is not None and clock is not None and said[1] > clock[1]):
            return Counter(
                rank,
                tuple(run),
                clock[1] if clock else None,
                line,
                said[1] if said else None,
            )
    return None


def counters_past(evidence: Evidence, first_timeout: dict[str, int]) -> list[Counter]:
    """Counters of the files with a timeout (``first_timeout``: file → line of its first
    timeout) that begin before that line and go on after it (``Counter.after``)."""
    owned: list[tuple[int | None, Sequence[LogLine]]] = [(None, evidence.job_log_lines)]
    owned += [(p.rank, p.log_lines) for p in evidence.processes]
    typed = {
        (event.source, event.line)
        for event in (
            *evidence.job_log_events,
            *(e for p in evidence.processes for e in p.log_events),
        )
        if event.line and event.source in first_timeout
    }
    found: list[Counter] = []
    for rank, lines in owned:
        if isinstance(lines, LogWindow) and all(s not in first_timeout for s in lines.sources()):
            continue  # a node summary's window with no timeout in it: not built
        mine = [line for line in lines if line.source in first_timeout and line.line > 0]
        for run in _runs(mine, typed):
            if run[0].line >= first_timeout[run[0].source] or not _grows(run):
                continue
            limit = first_timeout[run[0].source]
            between = [line for line in mine if run[-1].line < line.line < limit]
            if len(between) > _BEFORE:
                continue  # the counter stopped well before the timeout
            past = [line for line in run if line.line >= limit]
            if past:  # the run itself goes on across the timeout line
                before = [line for line in run if line.line < limit]
                clock, said = _clock(before[-1].text), _clock(past[0].text)
                found.append(
                    Counter(
                        rank,
                        tuple(before),
                        clock[1] if clock else None,
                        past[0],
                        said[1] if said else None,
                    )
                )
                continue
            counter = _went_on(rank, run, mine, limit)
            if counter is not None:
                found.append(counter)
    return found
