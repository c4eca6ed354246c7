"""What a line recogniser returns: one event, before rank attribution and timing."""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoc.analyzer.vocabulary import EventKind


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


def put(fields: dict[str, str], key: str, value: object) -> None:
    """Set a field when the value is known (fields are strings; None means absent)."""
    if value is not None and value != "":
        fields[key] = str(value)
