"""Silence as evidence: what the ranks that said nothing, or said less, tell about a hang.

When a collective hangs, the ranks that entered it time out and say so; the rank that
cannot report is often the one to look at. This view reads, for every rank of the job:

* **how many ranks the job has**, from every source that says (``JobSize``): a rank's
  WORLD_SIZE, NCCL's ``nranks`` of its largest communicator, a framework's init line, the
  store-based barrier's ``world_size``, a flight recorder's ``pg_config`` or its
  analyser's report;
* **what each rank said** (``Voice``): stacks, a flight recorder dump, log lines of its
  own; its own timeouts (the watchdog, a blocking wait, gloo, a status line, a dump it
  signalled itself, a monitored barrier it reached); the notices it only received (a
  dump signal naming another rank, "Observed flight recorder dump signal from another
  rank"); a death; and what other processes said of it (a launcher's report, the rank a
  dump signal names as the one that timed out, a barrier's or an analyser's list);
* **the first rank to time out** on one clock, against the ranks only notified by others
  (``Silence.first``, ``Silence.notified_only``);
* **ranks behind** (``Behind``, per process group): the watchdog's ``last enqueued`` of a
  rank stops short of the sequence number the others are stuck at, or a rank has nothing
  in flight (``last enqueued == last completed``) while the others wait in work past its
  last: it never entered the collective. The sequence number is *stated* by a timeout or
  status line of that group, or *inferred* from the others' status (their first
  uncompleted work: ``last completed + 1``);
* **quiet ranks**: ranks that printed something, but no timeout of their own in any
  group and no notice, while others timed out (NCCL's lines of a communicator's set-up
  alone do not count: printed when it came up, they place the rank nowhere later); and
  for each, whether the evidence **covers** its silence past the others' timeouts
  (``Cover``): its live stacks or flight recorder dump, or something of its own after a
  timeout of theirs — a line it printed, the launcher's report of its end — later in the
  same text, or later beyond the hosts' skew and the watchdog's poll by the times of
  other files. Without that, its silence may only be where a paste ends: NCCL's
  watchdogs fire within seconds of each other, so its own timeout may lie just past the
  cut. A quiet rank is **abreast** when its last line of the job is the same progress
  line, at the same counts, as the last line a rank that timed out printed before its
  timeout (log_compare.same_progress): the last thing seen of it puts it where the others
  were, not behind;
* **unheard ranks**: ranks the job's size says exist from which nothing at all came: no
  dump, no stack, no log line, and no other process's report of them; and ranks **heard
  only at set-up**: all that came of them is NCCL's lines of a communicator coming up
  (``Init COMPLETE``, channels, transports), printed once at the start, so nothing places
  them anywhere when the others timed out (an ``NCCL_DEBUG=INFO`` console shows every
  rank's init, then the timeouts of all but one);
* **the one gap** (``Gap``): the one rank, heard or not, that neither timed out nor was
  notified while every other rank of the job (or, its size unknown, below the highest
  that timed out) did: the rank the others were waiting for. Seen in the casebook:
  yolov5 #4409 (ranks 1-3 time out in BROADCAST while rank 0's validation bar goes on),
  Ultra-Fast-Lane-Detection-v2 #119 (ranks 1-3 time out in ALLREDUCE after "Evaluating
  the results…", rank 0 silent). A paste cut after rank 3 of 8 still leaves rank 0 as the
  only gap below 3; ranks above the highest one are never guessed.

How strong each silence is differs (the rules say it with a ``Strength``): a status line
that shows a rank never enqueued the op states it; a rank that printed other lines but no
timeout is a hint; a rank that printed nothing may just be missing from the paste.

torch's sources of the watchdog's lines: ProcessGroupNCCL.cpp (``Watchdog caught
collective operation timeout``, ``failure detected by watchdog at work sequence id: N PG
status: last enqueued work: M, last completed work: K``; the heartbeat monitor's
``Received a dump signal due to a collective timeout from (this local rank| rank R) …
Last enqueued NCCL work: M, last completed NCCL work: K``, whose numbers are the status
of the group that prints it; ``Observed flight recorder dump signal from another rank via
TCPStore``). A dump signal "from this local rank" means this process's own watchdog
fired, in some group: a rank whose printing group shows nothing in flight then timed out
in another group, and is not behind in this one.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from hangdoc.analyzer.model import Evidence, LogLine
from hangdoc.analyzer.payloads.launch import LauncherReport, SignalName
from hangdoc.analyzer.payloads.nccl import NcclInit
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import (
    CollectiveTimeout,
    DumpSignal,
    FrReport,
    MissingRanks,
    MonitoredBarrier,
    Reporter,
    StoreError,
    StoreTimeout,
    Work,
)
from hangdoc.analyzer.views.deaths import Death, first_deaths
from hangdoc.analyzer.views.log_compare import masked, same_progress
from hangdoc.analyzer.views.timeline import SKEW_S, Placed, Timeline
from hangdoc.analyzer.views.watchdog import (
    NEAR_SEQ,
    WatchRecord,
    inside_rooted,
    unnamed_timeouts,
    watch_records,
)
from hangdoc.analyzer.vocabulary import Clock, EventKind


class SizeFrom(enum.StrEnum):
    """A source of the job's number of ranks."""

    WORLD_SIZE = "WORLD_SIZE"  # a rank's environment
    NCCL_NRANKS = "NCCL's nranks"  # the largest communicator's init line
    INIT_LINE = "an init line"  # a framework's distributed-init line
    STORE_BARRIER = "the store-based barrier"  # its world_size
    FLIGHT_RECORDER = "a flight recorder's pg_config"
    FR_REPORT = "the flight recorder analyser"


@dataclass(frozen=True, slots=True)
class JobSize:
    """How many ranks the job has, and which sources say so (those that give that
    number); ``world`` is None when none says, or when a rank is named at or above it (a
    group's size taken for the job's, or ranks of a larger job)."""

    world: int | None
    said_by: tuple[SizeFrom, ...] = ()


class SeqFrom(enum.StrEnum):
    """How the sequence number the others are stuck at is known."""

    STATED = "stated"  # a timeout or status line of the group names it
    INFERRED = "inferred"  # the others' status: their first uncompleted work


@dataclass(frozen=True, slots=True)
class Behind:
    """Ranks of one process group whose watchdog status shows they never entered the
    collective the others are stuck in."""

    pg: str
    seq: int
    seq_from: SeqFrom
    op: str | None
    ranks: tuple[int, ...]  # never entered it
    waiting: tuple[int, ...]  # entered it (stuck at it, or enqueued past it)
    last_enqueued: dict[int, int]  # the behind ranks' last enqueued work
    events: tuple[Placed, ...]  # the lines that say so: the behind ranks' first


@dataclass(frozen=True, slots=True)
class Gap:
    """The one rank that did not time out while the others did."""

    rank: int
    waiters: tuple[int, ...]  # the ranks that timed out
    world_known: bool  # the gap was read over the job's size, not the waiters' span


class Cover(enum.StrEnum):
    """What shows that a quiet rank's silence lasted past the others' timeouts."""

    LIVE = "its live stacks or flight recorder dump"
    LATER_LINE = "a line of its own after the others' timeout"
    LAUNCHER = "the launcher's report of its end, after the others' timeout"


@dataclass(slots=True)
class Voice:
    """What one rank said, and what others said of it."""

    rank: int
    stacks: bool = False
    live_stacks: bool = False  # sampled from the running process, not a pasted traceback
    flight_recorder: bool = False
    lines: int = 0  # log events and log lines of its own
    # Of those, NCCL's lines of a communicator's creation (init, channels, interfaces):
    # printed once when the communicator came up, they say nothing of where the rank was
    # when the others timed out, long after.
    setup_lines: int = 0
    timeouts: list[Placed] = field(default_factory=list)  # its own timeouts, in job order
    notices: list[Placed] = field(default_factory=list)  # another rank's timeout reached it
    reported: list[Placed] = field(default_factory=list)  # others' lines about it
    death: Death | None = None

    @property
    def timed_out(self) -> bool:
        return bool(self.timeouts)

    @property
    def heard(self) -> bool:
        """Anything at all came from this rank or about it."""
        return bool(self.stacks or self.flight_recorder or self.lines or self.reported)

    @property
    def setup_only(self) -> bool:
        """All that came of this rank is NCCL's lines of a communicator coming up."""
        return bool(
            self.lines
            and self.lines == self.setup_lines
            and not (self.stacks or self.flight_recorder or self.reported)
            and not (self.timeouts or self.notices or self.death)
        )


@dataclass(frozen=True, slots=True)
class Silence:
    """The view: the job's size, each rank's voice, and the silences that stand out."""

    job: JobSize
    voices: dict[int, Voice]
    first: Placed | None  # the first own timeout of the job, on one clock
    notified_only: tuple[int, ...]  # ranks notified of another's timeout, none of their own
    behind: tuple[Behind, ...]
    quiet: tuple[int, ...]  # heard, but no timeout of their own and no notice
    # The quiet ranks whose silence the evidence covers past the others' timeouts, and by
    # what; a quiet rank not here may have timed out past where the text ends.
    covered: dict[int, Cover]
    # Quiet ranks whose last line is the progress line, at the same counts, that a rank
    # which timed out printed last before its timeout.
    abreast: tuple[int, ...]
    # Ranks below ``unheard_below`` from which (or about which) nothing at all came: the
    # job's size when a source gives it, else one more than the highest rank heard (a gap
    # in the ranks that reported; ranks above the highest are never guessed).
    unheard: tuple[int, ...]
    unheard_below: int | None
    # Ranks (below ``unheard_below`` too) of which nothing came but NCCL's lines of a
    # communicator's set-up: no timeout, notice, death, stack, dump or report of them.
    setup_only: tuple[int, ...]
    dead: frozenset[int]  # ranks whose death (a certain one) the logs show
    gap: Gap | None  # the one rank that neither timed out nor was notified
    # Own timeouts whose rank is not known (a paste's cut took the "[Rank N]" of the line),
    # other than a named rank's own timeout printed again: each is some rank's timeout, and
    # may be any silent rank's. A silence is no evidence while one of these could be its
    # rank's own (``silence_sure``).
    unattributed: tuple[Placed, ...] = ()

    @property
    def silence_sure(self) -> bool:
        """No timeout of an unknown rank could be a silent rank's own: an inference from a
        rank's silence (it never timed out, it is the one gap, nothing came of it) holds
        only then."""
        return not self.unattributed

    @property
    def timed_out(self) -> tuple[int, ...]:
        return tuple(sorted(r for r, v in self.voices.items() if v.timed_out))

    @property
    def heard(self) -> tuple[int, ...]:
        return tuple(sorted(r for r, v in self.voices.items() if v.heard))


# Own timeouts: the rank waited in a collective (or its own watchdog fired).
_TIMEOUT_KINDS = (
    EventKind.COLLECTIVE_TIMEOUT,
    EventKind.WATCHDOG_STATUS,
    EventKind.DUMP_SIGNAL,
    EventKind.MONITORED_BARRIER,
)


def own_timeout(p: Placed) -> bool | None:
    """True for a rank's own timeout, False for a notice of another rank's, None else."""
    kind = p.kind
    if kind == EventKind.COLLECTIVE_TIMEOUT:
        return True
    if kind == EventKind.WATCHDOG_STATUS:
        status = p.event.payload_as(Work)
        return True if status is not None and status.seq is not None else None
    if kind == EventKind.DUMP_SIGNAL:
        dump = p.event.payload_as(DumpSignal)
        if dump is None or dump.reporter is None or dump.reporter == Reporter.UNKNOWN:
            return None
        return dump.reporter == Reporter.SELF
    if kind == EventKind.MONITORED_BARRIER:
        barrier = p.event.payload_as(MonitoredBarrier)
        # A rank that reached the barrier and heard nothing back waited in it.
        return True if barrier is not None and barrier.reporter == Reporter.PEER else None
    return None


def job_size(evidence: Evidence, tl: Timeline) -> JobSize:
    """The job's number of ranks from every source that says it (the largest: a
    communicator of a sub-group is smaller than the job)."""
    said: dict[SizeFrom, int] = {}

    def note(source: SizeFrom, size: int | None) -> None:
        if size is not None and size > 0:
            said[source] = max(size, said.get(source, 0))

    for proc in evidence.processes:
        note(SizeFrom.WORLD_SIZE, proc.world_size)
    for p in tl.of(EventKind.NCCL_INIT):
        init = p.event.payload_as(NcclInit)
        note(SizeFrom.NCCL_NRANKS, init.nranks if init is not None else None)
    for p in tl.of(EventKind.PHASE):
        marker = p.event.payload_as(PhaseMarker)
        note(SizeFrom.INIT_LINE, marker.world_size if marker is not None else None)
    for p in tl.of(EventKind.STORE_TIMEOUT):
        store = p.event.payload_as(StoreTimeout)
        if store is not None and store.error in (
            StoreError.STORE_BARRIER,
            StoreError.STORE_BARRIER_WAIT,
        ):
            note(SizeFrom.STORE_BARRIER, store.expected)
    for group in evidence.process_groups.values():
        note(SizeFrom.FLIGHT_RECORDER, len(group.ranks) if group.ranks else None)
    for p in tl.of(EventKind.FR_MISSING_RANKS, EventKind.FR_MISMATCH):
        report = p.event.payload_as(FrReport)
        note(SizeFrom.FR_REPORT, report.world_size if report is not None else None)
    if not said:
        return JobSize(None)
    world = max(said.values())
    named = set(evidence.ranked()) | tl.ranks()
    if named and max(named) >= world:
        return JobSize(None)
    return JobSize(world, tuple(s for s in SizeFrom if said.get(s) == world))


def _reports(p: Placed) -> Iterable[int]:
    """The ranks another process's line speaks of: the rank a dump signal names as the
    one that timed out, a launcher's entry, a barrier's, Horovod's or an analyser's list."""
    dump = p.event.payload_as(DumpSignal)
    if dump is not None and dump.peer_rank is not None:
        yield dump.peer_rank
    report = p.event.payload_as(LauncherReport)
    if report is not None and report.rank is not None:
        yield report.rank
    barrier = p.event.payload_as(MonitoredBarrier)
    if barrier is not None:
        yield from barrier.ranks
    missing = p.event.payload_as(MissingRanks)
    if missing is not None:
        yield from missing.ranks
    fr = p.event.payload_as(FrReport)
    if fr is not None:
        yield from fr.missing
        if fr.culprit is not None:
            yield fr.culprit


# NCCL's lines of a communicator's set-up (nccl.py: "… Init COMPLETE", "Channel 00 : 0[0] ->
# 1[1] via P2P/IPC", "NET/IB : Using …", "NCCL version …").
_SETUP_KINDS = frozenset(
    {
        EventKind.NCCL_INIT,
        EventKind.NCCL_TRANSPORT,
        EventKind.NCCL_NETWORK,
        EventKind.NCCL_VERSION,
    }
)


def _voices(evidence: Evidence, tl: Timeline, deaths: list[Death]) -> dict[int, Voice]:
    voices: dict[int, Voice] = {}

    def voice(rank: int) -> Voice:
        return voices.setdefault(rank, Voice(rank))

    for proc in evidence.processes:
        if proc.rank is None:
            continue
        v = voice(proc.rank)
        v.stacks = v.stacks or proc.has_stacks()
        v.live_stacks = v.live_stacks or bool(proc.stack_samples)
        v.flight_recorder = v.flight_recorder or bool(proc.collectives)
        v.lines += len(proc.log_events) + len(proc.log_lines)
        v.setup_lines += sum(e.kind in _SETUP_KINDS for e in proc.log_events)
    for p in tl.events:
        if p.rank is not None:
            own = own_timeout(p)
            if own is True:
                voice(p.rank).timeouts.append(p)
            elif own is False:
                voice(p.rank).notices.append(p)
        for named in _reports(p):
            if named != p.rank:
                voice(named).reported.append(p)
    for death in deaths:
        if death.rank is not None and death.certain:
            v = voice(death.rank)
            v.death = v.death or death
    return voices


# Two ranks' timeouts closer than this are not ordered: the watchdog polls its work every
# second or two, so ranks that entered a collective together time out within that.
WATCHDOG_POLL_S = 2.0


def _same_timeout(a: Placed, b: Placed) -> bool:
    """``a`` and ``b`` print one timeout: the same kind, and the same work (group, sequence
    number, operation) timed out after the same time, as far as both say it, one of the
    sequence number and the time run said by both (a rank's watchdog line printed again in
    the exception it raises, or its rank prefix lost in one copy). A cut takes the group's
    prefix and the start of the work's description with the rank's: what one line lacks
    does not differ."""
    if a.kind != b.kind:
        return False
    wa, wb = a.event.payload_as(Work), b.event.payload_as(Work)
    if wa is None or wb is None:
        return False  # nothing typed to tell them one
    ta, tb = a.event.payload_as(CollectiveTimeout), b.event.payload_as(CollectiveTimeout)
    ran_a = ta.ran_ms if ta is not None else None
    ran_b = tb.ran_ms if tb is not None else None
    pairs = ((wa.seq, wb.seq), (ran_a, ran_b), (wa.pg, wb.pg), (wa.pg_id, wb.pg_id), (wa.op, wb.op))
    if any(x is not None and y is not None and x != y for x, y in pairs):
        return False
    return any(x is not None and y is not None for x, y in pairs[:2])


def unattributed_timeouts(tl: Timeline, voices: dict[int, Voice]) -> tuple[Placed, ...]:
    """Own timeouts of no known rank that are not a named rank's own timeout printed again
    (``_same_timeout``): each may be the timeout of a rank the text shows silent."""
    named = [p for v in voices.values() for p in v.timeouts]
    return tuple(
        p
        for p in tl.events
        if p.rank is None and own_timeout(p) is True and not any(_same_timeout(p, q) for q in named)
    )


def _earlier(a: Placed, b: Placed) -> bool:
    """``a`` certainly came before ``b`` by their times on one clock: beyond the
    watchdog's polling within one file, beyond it and the hosts' skew across files."""
    if a.event.time is None or b.event.time is None:
        return False  # a time borrowed from a neighbouring line orders nothing
    if a.when is None or b.when is None or a.clock != b.clock or a.clock is None:
        return False
    margin = WATCHDOG_POLL_S + (0.0 if a.event.source == b.event.source else SKEW_S)
    return a.when < b.when - margin


def first_timeout(voices: Iterable[Voice]) -> Placed | None:
    """The own timeout that came before every other rank's first one, by their times on
    one clock; None when no rank's timeout stands first (or only one rank timed out)."""
    firsts = [v.timeouts[0] for v in voices if v.timeouts]
    for candidate in firsts:
        # lazily: most candidates fail at the first other rank (a list of the others for
        # each was quadratic: 0.1 s at 1,500 ranks)
        rank = candidate.rank
        others = (p for p in firsts if p.rank != rank)
        if any(p.rank != rank for p in firsts) and all(_earlier(candidate, p) for p in others):
            return candidate
    return None


@dataclass(frozen=True, slots=True)
class _Firsts:
    """The others' earliest timeouts, as a later line is checked against them: the first
    timeout line of each text, and the earliest own-timed timeout of each text and clock."""

    line: dict[str, int]
    timed: dict[tuple[str, Clock], Placed]

    @classmethod
    def of(cls, timeouts: Iterable[Placed]) -> _Firsts:
        line: dict[str, int] = {}
        timed: dict[tuple[str, Clock], Placed] = {}
        for p in timeouts:
            source = p.event.source
            if p.event.line:
                line[source] = min(line.get(source, p.event.line), p.event.line)
            if p.event.time is not None and p.when is not None and p.clock is not None:
                key = (source, p.clock)
                known = timed.get(key)
                if known is None or known.when is None or p.when < known.when:
                    timed[key] = p
        return cls(line, timed)

    def followed_by(self, item: Placed | LogLine) -> bool:
        """``item`` certainly came after one of the timeouts: later in the same text, or,
        as an event with its own time, later on one clock beyond the watchdog's poll (and
        the hosts' skew across files). A line's place in another text, or a time borrowed
        from a neighbouring line, orders nothing."""
        return self.placed_after(item) is not None

    def placed_after(self, item: Placed | LogLine) -> bool | None:
        """How ``item`` is after one of the timeouts: True by its place in the same text,
        False by its own time; None when it is not."""
        source = item.source if isinstance(item, LogLine) else item.event.source
        line = item.line if isinstance(item, LogLine) else item.event.line
        first = self.line.get(source)
        if first is not None and line:
            return True if line > first else None
        if isinstance(item, Placed) and any(_earlier(t, item) for t in self.timed.values()):
            return False
        return None


# New lines of a quiet rank placed after the others' timeouts in the same text that show
# it went on: one may be a line it printed before them, placed after by a shared console's
# interleaving (each rank's stdout is buffered on its own; a console takes the ranks'
# records in turn), two show it kept printing. One with its own time beyond the watchdog's
# poll is enough.
_LATER_LINES = 2


def _cover(voice: Voice, lines: list[LogLine], own: list[Placed], firsts: _Firsts) -> Cover | None:
    """What shows that ``voice``'s rank said nothing of a timeout past the others' ones:
    its live state, or something of its own (``lines``, ``own`` events) or the launcher's
    report of it after their first timeouts. A later line that repeats, word for word, one
    it printed before carries nothing new: a paste given twice repeats them all."""
    if voice.live_stacks or voice.flight_recorder:
        return Cover.LIVE
    said = [p for p in own if p.event.payload_as(LauncherReport) is None]
    # The launcher's report of its end, unless the end is an abort: torch's watchdog aborts
    # the process whose own collective timed out (SIGABRT, exit code -6), so such an end
    # says as much that the rank timed out too, its line not in the text, as that it was
    # elsewhere.
    launcher = [
        p
        for p in (*own, *voice.reported)
        if (report := p.event.payload_as(LauncherReport)) is not None
        and report.signal != SignalName.SIGABRT
    ]
    earlier: set[str] = set()
    placed: set[str] = set()  # after the timeouts by their place in the same text
    timed: set[str] = set()  # after them by their own time
    texts = [(line.text, firsts.placed_after(line)) for line in lines]
    texts += [(p.event.text, firsts.placed_after(p)) for p in said]
    for text, by_place in texts:
        if by_place is None:
            earlier.add(text)
        else:
            (placed if by_place else timed).add(text)
    if timed - earlier or len(placed - earlier) >= _LATER_LINES:
        return Cover.LATER_LINE
    if any(firsts.followed_by(p) and p.event.text not in earlier for p in launcher):
        return Cover.LAUNCHER
    return None


def _last_before(lines: list[LogLine], timeouts: list[Placed]) -> LogLine | None:
    """A rank's last line of the job before its own first timeout in the same text (all of
    its lines when the timeout is in another text or has no place)."""
    first = timeouts[0].event if timeouts else None
    kept = [
        line
        for line in lines
        if first is None or line.source != first.source or not first.line or line.line < first.line
    ]
    return kept[-1] if kept else None


def _job_lines(evidence: Evidence) -> dict[int, list[LogLine]]:
    """Each rank's own log lines, in the order its processes hold them."""
    out: dict[int, list[LogLine]] = {}
    for proc in evidence.processes:
        if proc.rank is not None and proc.log_lines:
            out.setdefault(proc.rank, []).extend(proc.log_lines)
    return out


def _own_events(tl: Timeline) -> dict[int, list[Placed]]:
    """Each rank's own events, in the job's order."""
    out: dict[int, list[Placed]] = {}
    for p in tl.events:
        if p.rank is not None:
            out.setdefault(p.rank, []).append(p)
    return out


def _abreast(
    quiet: Iterable[int], lines: dict[int, list[LogLine]], voices: dict[int, Voice]
) -> tuple[int, ...]:
    """The quiet ranks whose last line is the progress line, at the same counts, that the
    ranks which timed out printed last before their timeout (those whose last line is of
    the same template; at least one)."""
    lasts = [
        (r, last, masked(last.text))
        for r, v in voices.items()
        if v.timed_out and (last := _last_before(lines.get(r, []), v.timeouts)) is not None
    ]
    found: list[int] = []
    for rank in quiet:
        own = lines.get(rank)
        if not own:
            continue
        template = masked(own[-1].text)
        alike = [(r, last) for r, last, of in lasts if of == template]
        if alike and same_progress([(rank, own[-1]), *alike]):
            found.append(rank)
    return tuple(found)


def _seq_of(
    records: dict[int, WatchRecord], unnamed: Sequence[int] = ()
) -> tuple[int, SeqFrom] | None:
    """The sequence number most ranks of a group are stuck at: stated by their timeout or
    status lines (``unnamed``: those of timeout lines whose rank is not known, each a rank
    too), else inferred from the status of the ranks with work in flight (the first work
    they have not completed)."""
    stated = Counter([*(r.seq for r in records.values() if r.seq is not None), *unnamed])
    if stated:
        return max(stated.items(), key=lambda kv: (kv[1], kv[0]))[0], SeqFrom.STATED
    in_flight = Counter(
        r.last_completed + 1
        for r in records.values()
        if r.last_enqueued is not None
        and r.last_completed is not None
        and r.last_enqueued > r.last_completed
    )
    if in_flight:
        return max(in_flight.items(), key=lambda kv: (kv[1], kv[0]))[0], SeqFrom.INFERRED
    return None


def _mixed_groups(records: dict[int, WatchRecord]) -> bool:
    """Lines without a PG prefix (torch < 2.3) from several process groups land in one
    bucket; a rank naming several SeqNums there shows it, and their numbers do not
    compare."""
    if any(rec.pg_known for rec in records.values()):
        return False
    return any(
        len({w.seq for p in rec.events if (w := p.event.payload_as(Work)) and w.seq is not None})
        > 1
        for rec in records.values()
    )


def behind_in(
    pg: str, records: dict[int, WatchRecord], dead: frozenset[int], unnamed: Sequence[int] = ()
) -> Behind | None:
    """The ranks of one group that never entered the collective the others are stuck at:
    their last enqueued work is below its sequence number, or (no enqueued number) their
    own timeout is at an earlier one. Only a minority: when most ranks are behind, the
    few ahead may as well be the ones that diverged. ``unnamed``: the sequence numbers of
    timeout lines of the group whose rank is not known (a cut prefix), ranks all the same."""
    found = _seq_of(records, unnamed)
    if found is None or _mixed_groups(records):
        return None
    seq, seq_from = found
    behind: dict[int, int] = {}
    for rank, rec in records.items():
        if rank in dead:
            continue
        if rec.last_enqueued is not None and rec.last_enqueued < seq:
            behind[rank] = rec.last_enqueued
        elif (
            rec.seq is not None
            and rec.seq < seq
            and not (rec.last_enqueued is not None and rec.last_enqueued >= seq)
            and (rec.pg_known or seq - rec.seq <= NEAR_SEQ)
            and not inside_rooted(rec, seq)
        ):
            # Its own failure at an earlier work: stopped before. Without a group named
            # (torch < 2.3 prints none), SeqNums far apart may be two groups' (or two
            # runs') counters, as watchdog.apart reads them: not compared. Inside a rooted
            # collective the others finished as its senders (a broadcast's receiver one
            # SeqNum behind its root): in it, not behind it (watchdog.inside_rooted).
            behind[rank] = rec.seq - 1
    if not behind or len(behind) >= len(records) + len(unnamed):
        return None
    waiting = tuple(sorted(set(records) - set(behind) - dead))
    if not waiting:
        return None
    ops = Counter(r.op for r in records.values() if r.op and r.seq == seq).most_common(1)
    ranks = tuple(sorted(behind))
    return Behind(
        pg=pg,
        seq=seq,
        seq_from=seq_from,
        op=ops[0][0] if ops else None,
        ranks=ranks,
        waiting=waiting,
        last_enqueued=behind,
        events=tuple(p for r in ranks for p in records[r].events[:1]),
    )


def one_gap(job: JobSize, voices: dict[int, Voice]) -> Gap | None:
    """The one rank of the job (its size unknown: below the highest rank that timed out)
    that neither timed out nor was notified of a timeout, while every other one did."""
    waiters = sorted(r for r, v in voices.items() if v.timed_out)
    if not waiters:
        return None
    span = range(job.world) if job.world is not None else range(waiters[-1] + 1)
    gap = [r for r in span if r not in voices or not (voices[r].timed_out or voices[r].notices)]
    if len(gap) != 1:
        return None
    return Gap(gap[0], tuple(waiters), job.world is not None)


def silence(evidence: Evidence, tl: Timeline) -> Silence:
    """The view (see the module docstring); a function of the Evidence and its timeline."""
    deaths = first_deaths(tl)
    voices = _voices(evidence, tl, deaths)
    dead = frozenset(r for r, v in voices.items() if v.death is not None)
    job = job_size(evidence, tl)
    timed_out = {r for r, v in voices.items() if v.timed_out}
    notified_only = tuple(sorted(r for r, v in voices.items() if v.notices and not v.timed_out))
    unattributed = unattributed_timeouts(tl, voices) if timed_out else ()
    # The one rank that did not time out may be the one whose timeout lost its rank.
    gap = one_gap(job, voices)
    unnamed = unnamed_timeouts(tl)
    behind = tuple(
        b
        for pg, records in sorted(watch_records(tl).items())
        if (b := behind_in(pg, records, dead, unnamed.get(pg, ())))
    )
    quiet: tuple[int, ...] = ()
    covered: dict[int, Cover] = {}
    abreast: tuple[int, ...] = ()
    unheard: tuple[int, ...] = ()
    setup_only: tuple[int, ...] = ()
    bound: int | None = None
    if timed_out:
        quiet = tuple(
            sorted(
                r
                for r, v in voices.items()
                if v.heard
                and not v.timed_out
                and not v.notices
                and v.death is None
                and (v.stacks or v.flight_recorder or v.lines > v.setup_lines)
            )
        )
        lines = _job_lines(evidence)
        own = _own_events(tl)
        firsts = _Firsts.of(p for v in voices.values() for p in v.timeouts)
        for rank in quiet:
            cover = _cover(voices[rank], lines.get(rank, []), own.get(rank, []), firsts)
            if cover is not None:
                covered[rank] = cover
        abreast = _abreast(quiet, lines, voices)
        heard = [r for r, v in voices.items() if v.heard]
        bound = job.world if job.world is not None else (max(heard) + 1 if heard else None)
        if bound is not None:
            unheard = tuple(r for r in range(bound) if r not in voices or not voices[r].heard)
            setup_only = tuple(r for r in range(bound) if r in voices and voices[r].setup_only)
    return Silence(
        job=job,
        voices=voices,
        first=first_timeout(voices.values()),
        notified_only=notified_only,
        behind=behind,
        quiet=quiet,
        covered=covered,
        abreast=abreast,
        unheard=unheard,
        unheard_below=bound,
        setup_only=setup_only,
        dead=dead,
        gap=gap if unattributed == () else None,
        unattributed=unattributed,
    )
