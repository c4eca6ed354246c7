"""What a line recogniser returns (one event, before rank attribution and timing), and
the LogEvent it becomes."""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoc.analyzer.model import LogEvent
from hangdoc.analyzer.payloads import NO_PAYLOAD, EventPayload
from hangdoc.analyzer.vocabulary import Clock, EventKind, RankFrom


@dataclass(slots=True)
class Hit:
    """A recognised line. ``rank`` is a *global* rank the content itself names (a
    ChildFailedError entry, a DeepSpeed ``[Rank 3]``); prefixes and NCCL host:pid are
    resolved later by the scanner."""

    kind: EventKind
    fields: dict[str, str] = field(default_factory=dict)
    rank: int | None = None
    host: str | None = None
    pid: int | None = None
    text: str | None = None  # replaces the line as the event's text (multi-line blocks)
    key: tuple[object, ...] | None = None  # duplicate suppression within one rank
    payload: EventPayload = NO_PAYLOAD


def put(fields: dict[str, str], key: str, value: object) -> None:
    """Set a field when the value is known (fields are strings; None means absent)."""
    if value is not None and value != "":
        fields[key] = str(value)


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def log_event(
    kind: EventKind,
    text: str,
    source: str,
    line: int | None,
    time: float | None,
    fields: dict[str, str],
    payload: EventPayload = NO_PAYLOAD,
    *,
    host: str | None = None,
    pid: int | None = None,
    local_rank: int | None = None,
    rank_from: RankFrom | None = None,
    clock: Clock | None = None,
    repeats: int = 0,
) -> LogEvent:
    """The event of a recognised line. The process it is about is the one its words name
    (``host``/``pid``/``local_rank`` the recogniser read), else the one that printed it
    (the arguments: the line's prefix or NCCL header)."""
    rest = dict(fields)
    named_host = rest.pop("host", None)
    named_pid = _int(rest.pop("pid", None))
    named_local = _int(rest.pop("local_rank", None))
    tid = _int(rest.pop("tid", None))
    cuda_dev = _int(rest.pop("cuda_dev", None))
    folded = _int(rest.pop("n_lines", None)) or 0
    return LogEvent(
        kind,
        text,
        source,
        line,
        time,
        tuple(sorted(rest.items())),
        payload,
        host=named_host if named_host is not None else host,
        pid=named_pid if named_pid is not None else pid,
        tid=tid,
        cuda_dev=cuda_dev,
        local_rank=named_local if named_local is not None else local_rank,
        rank_from=rank_from,
        clock=clock,
        repeats=repeats,
        folded_lines=folded,
    )
