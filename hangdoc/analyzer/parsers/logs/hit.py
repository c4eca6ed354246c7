"""What a line recogniser returns (one event, before rank attribution and timing), and
the LogEvent it becomes."""

from __future__ import annotations

from dataclasses import dataclass

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
    return LogEvent(
        kind,
        text,
        source,
        line,
        time,
        finish_payload(payload, text),
        host=who.named_host if who.named_host is not None else who.host,
        pid=who.named_pid if who.named_pid is not None else who.pid,
        tid=who.tid,
        cuda_dev=who.cuda_dev,
        partial_header=who.partial_header,
        local_rank=(who.named_local_rank if who.named_local_rank is not None else who.local_rank),
        rank_from=rank_from,
        clock=clock,
        repeats=repeats,
        folded_lines=folded_lines,
    )
