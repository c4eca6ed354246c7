"""Log events in time order, so the first failure is named as the cause.

A hung job's logs hold one cause and a wave of consequences: a rank dies (an exception,
a CUDA out-of-memory, the OOM killer, a GPU falling off the bus, a link going down)
and every other rank then times out in its next collective, is torn down by the
watchdog, loses its sockets, and is sent SIGTERM by the launcher. Listing all of it
hides the cause; this module orders the events and classifies them.

The vocabulary of event kinds is in ``analyzer/vocabulary.py``; what each event's line
said, typed, is its payload (``analyzer/payloads/``).
"""

from __future__ import annotations

import calendar
import collections
import itertools
import operator
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from typing import Any

from hangdoc.analyzer.model import Evidence, EvidenceRef, LogEvent
from hangdoc.analyzer.vocabulary import Clock, EventKind

# ---------------------------------------------------------------------------------------
# Ordering


@dataclass(frozen=True, slots=True)
class Placed:
    """One event of the job with its rank and its place in the job's order."""

    rank: int | None
    event: LogEvent
    index: int  # position in Timeline.events
    when: float | None  # own time, else the nearest time of its own file (same clock)
    clock: Clock | None

    @property
    def kind(self) -> EventKind:
        return self.event.kind

    def ref(self, detail: str | None = None) -> EvidenceRef:
        text = detail if detail is not None else self.event.text
        return EvidenceRef(
            source=self.event.source, detail=text[:300], rank=self.rank, line=self.event.line
        )


_INDEX = operator.attrgetter("index")

# Host clocks differ; closer than this, two files' events are not ordered by time.
SKEW_S = 2.0


class Timeline:
    """Every log event of the job, each file in line order, files merged by time.

    Untimed lines (NCCL INFO, tracebacks) take the time of the nearest timed line of
    their own file, so a traceback printed just before a timed watchdog line sorts
    before it; events of files without any time keep their file order only.
    """

    def __init__(self, evidence: Evidence) -> None:
        pairs: list[tuple[int | None, LogEvent]] = []
        for proc in evidence.processes:
            pairs.extend((proc.rank, e) for e in proc.log_events)
        pairs.extend((None, e) for e in evidence.job_log_events)
        by_source: dict[str, list[tuple[int | None, LogEvent]]] = {}
        for rank, event in pairs:
            by_source.setdefault(event.source, []).append((rank, event))
        year = _job_year(pairs)
        staged: list[
            tuple[tuple[int, float, str, int], int | None, LogEvent, float | None, Clock | None]
        ] = []
        for source, items in by_source.items():
            items.sort(key=lambda p: p[1].line if p[1].line is not None else 0)
            for rank, event, when, clock in _propagate(items, year):
                key = (
                    0 if when is not None else 1,
                    when if when is not None else 0.0,
                    source,
                    event.line or 0,
                )
                staged.append((key, rank, event, when, clock))
        staged.sort(key=_FIRST)
        self.events: list[Placed] = _placed(staged)
        self._by_kind: dict[EventKind, list[Placed]] | None = None  # (built by of())

    def of(self, *kinds: EventKind) -> list[Placed]:
        """The events of these kinds, in the job's order (a new list)."""
        by_kind = self._by_kind
        if by_kind is None:
            # The rules ask for kinds about a hundred times an analysis; a job of 16,384
            # ranks has a few hundred thousand events: each is read once, here.
            by_kind = self._by_kind = {}
            for p in self.events:
                by_kind.setdefault(p.event.kind, []).append(p)
        found = [by_kind.get(kind, []) for kind in dict.fromkeys(kinds)]
        if len(found) == 1:
            return list(found[0])
        return sorted(itertools.chain.from_iterable(found), key=_INDEX)

    def ranks(self) -> set[int]:
        """Every rank any event names (as owner or in a rank field)."""
        return {p.rank for p in self.events if p.rank is not None}


def _job_year(pairs: list[tuple[int | None, LogEvent]]) -> int | None:
    """The year of the job's fully dated stamps (ISO, ChildFailedError, Python logging)."""
    for _, event in pairs:
        if event.time is not None and event.clock == Clock.LOCAL:
            return time.gmtime(event.time).tm_year
    return None


def _with_year(when: float, year: int) -> float:
    """A year-less stamp moved to the job's year (glog lines next to ISO-stamped files)."""
    t = time.gmtime(when)
    if t.tm_year == year:
        return when
    try:
        base = calendar.timegm((year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, 0, 0, 0))
    except (ValueError, OverflowError):
        return when
    return base + (when - int(when))


def _propagate(
    items: list[tuple[int | None, LogEvent]], year: int | None
) -> list[tuple[int | None, LogEvent, float | None, Clock | None]]:
    out: list[tuple[int | None, LogEvent, float | None, Clock | None]] = []
    last: tuple[float, Clock] | None = None
    for rank, event in items:
        clock = event.clock
        if event.time is not None and clock == Clock.LOCAL_ASSUMED_YEAR and year is not None:
            event = replace(event, time=_with_year(event.time, year), clock=Clock.LOCAL)
            clock = Clock.LOCAL
        if event.time is not None and clock is not None:
            # Never step back within a file: line order is the truth there, and stamps
            # of different precision (ChildFailedError has whole seconds) would reorder.
            own = event.time if last is None or last[1] != clock else max(event.time, last[0])
            last = (own, clock)
            out.append((rank, event, own, clock))
        else:
            out.append((rank, event, last[0] if last else None, last[1] if last else None))
    following: tuple[float, Clock] | None = None
    for i in range(len(out) - 1, -1, -1):
        rank, event, known, clock = out[i]
        if event.time is not None and known is not None and clock is not None:
            following = (known, clock)
        elif known is None and following is not None:
            out[i] = (rank, event, following[0], following[1])
    return out


_FIRST = operator.itemgetter(0)
_drain = collections.deque[object](maxlen=0).extend
# Placed's fields, set column by column: a frozen dataclass's __init__ sets each field
# through object.__setattr__, a Python-level call per field, and a job of 16,384 ranks has
# over 200,000 events (the slots' own setters, mapped in C, set the same values).
_PLACED_SETTERS: tuple[Callable[[Placed, Any], None], ...] = tuple(
    getattr(Placed, f.name).__set__ for f in fields(Placed)
)


def _placed(
    staged: list[
        tuple[tuple[int, float, str, int], int | None, LogEvent, float | None, Clock | None]
    ],
) -> list[Placed]:
    """``Placed(rank, event, i, when, clock)`` of each staged event, in order."""
    events = list(map(object.__new__, itertools.repeat(Placed, len(staged))))
    if not events:
        return events
    _, ranks, evs, whens, clocks = zip(*staged, strict=True)
    columns = (ranks, evs, range(len(events)), whens, clocks)
    for setter, column in zip(_PLACED_SETTERS, columns, strict=True):
        _drain(map(setter, events, column))
    return events


def before(a: Placed, b: Placed) -> bool | None:
    """True when ``a`` certainly happened before ``b``; None when the logs cannot tell."""
    same_file = a.event.source == b.event.source
    if (
        same_file
        and a.event.line is not None
        and b.event.line is not None
        and a.event.line != b.event.line
    ):
        return a.event.line < b.event.line
    if a.when is None or b.when is None or a.clock != b.clock:
        return None
    tolerance = 0.0 if a.event.source == b.event.source else SKEW_S
    if a.when < b.when - tolerance:
        return True
    if a.when > b.when + tolerance:
        return False
    return None


# ---------------------------------------------------------------------------------------
# Causes and consequences


def wave(tl: Timeline) -> list[Placed]:
    """The timeout wave a failure is ordered against: collective, heartbeat, store
    timeouts. Lost connections are left out: a peer's death causes them at once, so
    they say nothing about which came first."""
    return tl.of(
        EventKind.COLLECTIVE_TIMEOUT,
        EventKind.HEARTBEAT_TIMEOUT,
        EventKind.STORE_TIMEOUT,
        EventKind.WATCHDOG_STATUS,
        EventKind.STALL_WATCHDOG,
    )


def victims(tl: Timeline) -> set[int]:
    """Ranks that reported waiting or being cut off (timeouts, lost peers, teardown)."""
    kinds = {
        k.value
        for k in (
            EventKind.COLLECTIVE_TIMEOUT,
            EventKind.HEARTBEAT_TIMEOUT,
            EventKind.STORE_TIMEOUT,
            EventKind.WATCHDOG_STATUS,
            EventKind.CONNECTION_LOST,
            EventKind.WATCHDOG_TEARDOWN,
            EventKind.NCCL_ERROR,
            EventKind.STALL_WATCHDOG,
        )
    }
    return {p.rank for p in tl.events if p.kind in kinds and p.rank is not None}


def precedes_wave(event: Placed, wave_events: Iterable[Placed]) -> bool | None:
    """True if ``event`` is before every wave event it can be ordered with (and at least
    one), False if some wave event is certainly before it, None if nothing is ordered."""
    verdicts = [before(event, w) for w in wave_events]
    if any(v is False for v in verdicts):
        return False
    if any(v is True for v in verdicts):
        return True
    return None
