"""What a line recogniser returns (one event, before rank attribution and timing), and
the LogEvent it becomes."""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoc.analyzer.model import LogEvent
from hangdoc.analyzer.parsers.logs.errors import finish_payload
from hangdoc.analyzer.payloads.base import NO_PAYLOAD, EventPayload
from hangdoc.analyzer.vocabulary import Clock, EventKind, RankFrom


@dataclass(slots=True)
class Hit:
    """A recognised line and what the recogniser read from it (``payload``).

    ``rank`` is a *global* rank the content itself names (a ChildFailedError entry, a
    DeepSpeed ``[Rank 3]``); ``host``/``pid`` (and ``tid``, ``cuda_dev``) are the printing
    process's, from an NCCL header; prefixes are resolved later by the scanner. The
    ``named_*`` are the process the line is about when its words name one (a launcher's
    report of a worker, the OOM killer's victim)."""

    kind: EventKind
    fields: dict[str, str] = field(default_factory=dict)
    rank: int | None = None
    host: str | None = None
    pid: int | None = None
    text: str | None = None  # replaces the line as the event's text (multi-line blocks)
    key: tuple[object, ...] | None = None  # duplicate suppression within one rank
    payload: EventPayload = NO_PAYLOAD
    tid: int | None = None
    cuda_dev: int | None = None
    named_host: str | None = None
    named_pid: int | None = None
    named_local_rank: int | None = None
    partial_header: bool = False  # NCCL's host:pid:tid [dev] header was cut or mangled


def put(fields: dict[str, str], key: str, value: object) -> None:
    """Set a field when the value is known (fields are strings; None means absent)."""
    if value is not None and value != "":
        fields[key] = str(value)


def as_int(value: str | None) -> int | None:
    """A number read from a line (a regex group), or None when there is none."""
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


@dataclass(slots=True)
class Origin:
    """Who printed a line and whom it is about, as the scanner found them."""

    host: str | None = None
    pid: int | None = None
    local_rank: int | None = None
    tid: int | None = None
    cuda_dev: int | None = None
    named_host: str | None = None
    named_pid: int | None = None
    named_local_rank: int | None = None
    partial_header: bool = False


def log_event(
    kind: EventKind,
    text: str,
    source: str,
    line: int | None,
    time: float | None,
    fields: dict[str, str],
    payload: EventPayload = NO_PAYLOAD,
    *,
    origin: Origin | None = None,
    rank_from: RankFrom | None = None,
    clock: Clock | None = None,
    repeats: int = 0,
    folded_lines: int = 0,
) -> LogEvent:
    """The event of a recognised line. The process it is about is the one its words name,
    else the one that printed it (the line's prefix or NCCL header)."""
    who = origin if origin is not None else Origin()
    rest = dict(fields)
    named_host = rest.pop("host", None) or who.named_host
    named_pid = as_int(rest.pop("pid", None))
    named_pid = named_pid if named_pid is not None else who.named_pid
    named_local = as_int(rest.pop("local_rank", None))
    named_local = named_local if named_local is not None else who.named_local_rank
    tid = as_int(rest.pop("tid", None))
    cuda_dev = as_int(rest.pop("cuda_dev", None))
    folded = as_int(rest.pop("n_lines", None)) or folded_lines
    return LogEvent(
        kind,
        text,
        source,
        line,
        time,
        tuple(sorted(rest.items())),
        finish_payload(payload, text),
        host=named_host if named_host is not None else who.host,
        pid=named_pid if named_pid is not None else who.pid,
        tid=tid if tid is not None else who.tid,
        cuda_dev=cuda_dev if cuda_dev is not None else who.cuda_dev,
        partial_header=who.partial_header,
        local_rank=named_local if named_local is not None else who.local_rank,
        rank_from=rank_from,
        clock=clock,
        repeats=repeats,
        folded_lines=folded,
    )
