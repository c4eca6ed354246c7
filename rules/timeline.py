"""Log events in time order, so the first failure is named as the cause.

A hung job's logs hold one cause and a wave of consequences: a rank dies (an exception,
a CUDA out-of-memory, the OOM killer, a GPU falling off the bus, a link going down)
and every other rank then times out in its next collective, is torn down by the
watchdog, loses its sockets, and is sent SIGTERM by the launcher. Listing all of it
hides the cause; this module orders the events and classifies them.

It also owns the vocabulary of :class:`~hangdoc.analyzer.model.LogEvent` kinds and
their field names: the log parser writes them, the HD03x/HD2xx/HD3xx rules read them,
and keeping the list here (rules may not import parsers) leaves one definition.
"""

from __future__ import annotations

import calendar
import enum
import functools
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from hangdoc.analyzer.model import Evidence, EvidenceRef, LogEvent
from hangdoc.analyzer.ranges import format_ranks


class EventKind(enum.StrEnum):
    """What a recognised log line (or block) is. Values are stable: they reach JSON."""

    # torch.distributed process groups (FORMATS.md §2)
    COLLECTIVE_TIMEOUT = "collective_timeout"  # watchdog / blocking wait / gloo timeout
    WATCHDOG_STATUS = "watchdog_status"  # failed seq, last enqueued / completed
    WATCHDOG_TEARDOWN = "watchdog_teardown"  # "taking the entire process down", terminate
    HEARTBEAT_TIMEOUT = "heartbeat_timeout"  # monitor thread: watchdog got stuck
    DUMP_SIGNAL = "dump_signal"  # flight recorder dump requested (names who timed out)
    FAILED_COLLECTIVE_STACK = "failed_collective_stack"  # "Stack trace of the failed collective"
    NCCL_ERROR = "nccl_error"  # NCCL error class surfaced in torch (ncclRemoteError...)
    COLLECTIVE_MISMATCH = "collective_mismatch"  # TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprint
    MONITORED_BARRIER = "monitored_barrier_failure"
    STORE_TIMEOUT = "store_timeout"  # TCPStore / rendezvous waiting for clients
    CONNECTION_LOST = "connection_lost"  # peer closed / reset (gloo, NCCL service thread)
    # NCCL (FORMATS.md §1)
    NCCL_VERSION = "nccl_version"
    NCCL_INIT = "nccl_init"  # comm init start / complete / abort / destroy
    NCCL_NETWORK = "nccl_network"  # bootstrap and data interfaces, network plugin
    NCCL_TRANSPORT = "nccl_transport"  # channels via P2P / SHM / NET (one per process)
    NCCL_TRANSPORT_ERROR = "nccl_transport_error"  # IB completion, socket closed/reset
    NCCL_CONFIG_ERROR = "nccl_config_error"  # duplicate GPU, rank count mismatch
    NCCL_WARN = "nccl_warn"  # any other WARN
    NCCL_RETURN = "nccl_return"  # "file.cc:47 -> 3" chain with no WARN before it
    NCCL_COLL = "nccl_coll"  # last COLL line of one communicator on one process
    RAS_REPORT = "ras_report"  # ncclras status: one per communicator group line
    RAS_MISMATCH = "ras_mismatch"  # ranks at different operation counts
    RAS_DEAD = "ras_dead"  # processes considered dead / declared DEAD
    RAS_INCOMPLETE = "ras_incomplete"  # ranks/processes that did not answer
    RAS_ERROR = "ras_error"  # init / async errors per communicator
    # launchers (FORMATS.md §3)
    WORKER_FAILED = "worker_failed"  # torchrun agent: failed (exitcode: N) local_rank: L
    CHILD_FAILURE = "child_failure"  # one entry of a ChildFailedError block
    AGENT_TERMINATING = "agent_terminating"  # agent sends SIGTERM to the survivors
    AGENT_SIGNAL = "agent_signal"  # agent itself got a death signal (scheduler, user)
    ERROR_FILE = "error_file"  # TORCHELASTIC_ERROR_FILE contents
    ACTOR_DIED = "actor_died"  # Ray actor / worker died
    DATALOADER_WORKER_DIED = "dataloader_worker_died"  # torch's DataLoader worker messages
    # the rank's process
    EXCEPTION = "exception"  # uncaught Python exception (last line of a traceback)
    CUDA_OOM = "cuda_oom"
    CUDA_ERROR = "cuda_error"  # other CUDA errors (illegal access, ECC, assert)
    FATAL_SIGNAL = "fatal_signal"  # segfault, abort, bus error, "Killed"
    HOST_OOM_KILL = "host_oom_kill"  # kernel OOM killer
    # GPU (FORMATS.md §6)
    GPU_XID = "gpu_xid"
    GPU_STATUS = "gpu_status"  # one GPU row of nvidia-smi
    GPU_TOPOLOGY = "gpu_topology"  # nvidia-smi topo -m summary
    # flight recorder analyser text output (FORMATS.md §5)
    FR_MISSING_RANKS = "fr_missing_ranks"
    FR_MISMATCH = "fr_mismatch"
    # framework phase markers and progress bars (FORMATS.md §7)
    PHASE = "phase"
    DATA_COUNT = "data_count"  # a rank's number of batches/steps/samples (len(dataloader)…)


class Phase(enum.StrEnum):
    """Values of the ``phase`` field of PHASE events."""

    PREPROCESS = "preprocess"  # tokenizing, dataset map/filter, packing, downloading
    LOAD = "load"  # loading model / checkpoint shards
    TRAIN = "train"  # training steps / progress
    EVAL = "eval"
    CHECKPOINT_SAVE = "checkpoint_save"
    CHECKPOINT_SAVED = "checkpoint_saved"
    INIT = "init"  # distributed init / rendezvous messages of frameworks


# Field names shared by parser and rules (values are always strings).
F_SEQ = "seq"
F_OP = "op"
F_NUMEL_IN = "numel_in"
F_NUMEL_OUT = "numel_out"
F_TIMEOUT_MS = "timeout_ms"
F_RAN_MS = "ran_ms"
F_PG = "pg"  # process-group identity comparable across ranks (GUID/name, else id)
F_PG_DESC = "pg_desc"
F_GROUP_RANK = "group_rank"
F_LAST_ENQUEUED = "last_enqueued"
F_LAST_COMPLETED = "last_completed"
F_BACKEND = "backend"
F_HOST = "host"
F_PID = "pid"
F_PEER = "peer"  # ip or host of the remote side
F_PEER_RANK = "peer_rank"
F_ERROR = "error"  # error class / status words
F_EXIT_CODE = "exitcode"
F_SIGNAL = "signal"
F_LOCAL_RANK = "local_rank"
F_EXC_TYPE = "exc_type"
F_MESSAGE = "message"
F_RANKS = "ranks"  # a rank set written as ranges ("0-3,7")
F_COUNT = "count"
F_PHASE = "phase"
F_CLOCK = "clock"
F_RANK_FROM = "rank_from"  # how the rank was attributed (prefix, content, nccl, file, ...)


@functools.lru_cache(maxsize=262144)
def _as_dict(fields: tuple[tuple[str, str], ...]) -> dict[str, str]:
    return dict(fields)


def fget(event: LogEvent, key: str) -> str | None:
    """A field of an event (do not mutate what fields_of returns: it is shared)."""
    return _as_dict(event.fields).get(key)


def fint(event: LogEvent, key: str) -> int | None:
    value = fget(event, key)
    if value is None:
        return None
    try:
        return int(value, 0) if value.startswith(("0x", "-0x")) else int(value)
    except ValueError:
        return None


def fields_of(event: LogEvent) -> dict[str, str]:
    return _as_dict(event.fields)


# ---------------------------------------------------------------------------------------
# Ordering


@dataclass(frozen=True, slots=True)
class Placed:
    """One event of the job with its rank and its place in the job's order."""

    rank: int | None
    event: LogEvent
    index: int  # position in Timeline.events
    when: float | None  # own time, else the nearest time of its own file (same clock)
    clock: str | None

    @property
    def kind(self) -> str:
        return self.event.kind

    def get(self, key: str) -> str | None:
        return fget(self.event, key)

    def ref(self, detail: str | None = None) -> EvidenceRef:
        text = detail if detail is not None else self.event.text
        return EvidenceRef(
            source=self.event.source, detail=text[:300], rank=self.rank, line=self.event.line
        )


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
            tuple[tuple[int, float, str, int], int | None, LogEvent, float | None, str | None]
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
        staged.sort(key=lambda s: s[0])
        self.events: list[Placed] = [
            Placed(rank, event, i, when, clock)
            for i, (_, rank, event, when, clock) in enumerate(staged)
        ]

    def of(self, *kinds: EventKind) -> list[Placed]:
        wanted = {k.value for k in kinds}
        return [p for p in self.events if p.kind in wanted]

    def ranks(self) -> set[int]:
        """Every rank any event names (as owner or in a rank field)."""
        return {p.rank for p in self.events if p.rank is not None}


def _job_year(pairs: list[tuple[int | None, LogEvent]]) -> int | None:
    """The year of the job's fully dated stamps (ISO, ChildFailedError, Python logging)."""
    for _, event in pairs:
        if event.time is not None and fget(event, F_CLOCK) == "local":
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
) -> list[tuple[int | None, LogEvent, float | None, str | None]]:
    out: list[tuple[int | None, LogEvent, float | None, str | None]] = []
    last: tuple[float, str] | None = None
    for rank, event in items:
        clock = fget(event, F_CLOCK)
        if event.time is not None and clock == "local?" and year is not None:
            event = replace(
                event, time=_with_year(event.time, year), fields=_with_clock(event, "local")
            )
            clock = "local"
        if event.time is not None and clock is not None:
            # Never step back within a file: line order is the truth there, and stamps
            # of different precision (ChildFailedError has whole seconds) would reorder.
            own = event.time if last is None or last[1] != clock else max(event.time, last[0])
            last = (own, clock)
            out.append((rank, event, own, clock))
        else:
            out.append((rank, event, last[0] if last else None, last[1] if last else None))
    following: tuple[float, str] | None = None
    for i in range(len(out) - 1, -1, -1):
        rank, event, known, clock = out[i]
        if event.time is not None and known is not None and clock is not None:
            following = (known, clock)
        elif known is None and following is not None:
            out[i] = (rank, event, following[0], following[1])
    return out


def _with_clock(event: LogEvent, clock: str) -> tuple[tuple[str, str], ...]:
    return tuple((k, clock if k == F_CLOCK else v) for k, v in event.fields)


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


def ranks_text(ranks: Iterable[int]) -> str:
    values = sorted(set(ranks))
    return ("rank " if len(values) == 1 else "ranks ") + format_ranks(values)


def limited_refs(items: Iterable[Placed], limit: int = 8) -> list[EvidenceRef]:
    """Evidence pointers for a finding: the first ``limit``, then one summary line."""
    chosen = list(items)
    refs = [p.ref() for p in chosen[:limit]]
    if len(chosen) > limit:
        rest = sorted({p.rank for p in chosen[limit:] if p.rank is not None})
        more = f" ({ranks_text(rest)})" if rest else ""
        refs.append(
            EvidenceRef(
                source=chosen[limit].event.source,
                detail=f"{len(chosen) - limit} more similar lines{more}",
            )
        )
    return refs


_CACHE: list[tuple[Evidence, int, Timeline]] = []


def timeline_of(evidence: Evidence) -> Timeline:
    """One Timeline per Evidence (every log rule reads it; build it once)."""
    count = len(evidence.job_log_events) + sum(len(p.log_events) for p in evidence.processes)
    for cached, n, tl in _CACHE:
        if cached is evidence and n == count:
            return tl
    tl = Timeline(evidence)
    _CACHE[:] = [(evidence, count, tl)]
    return tl
