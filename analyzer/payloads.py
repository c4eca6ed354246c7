"""What each kind of log event carries: one small typed record per kind (or per family of
kinds that share their fields), written by the log parsers, read by views and rules.

A recogniser that knows a line reads its signals into these fields once, with their
types (sequence numbers and exit codes are ints, signals and phases are enums); nothing
downstream reads the line's words again. ``LogEvent.payload`` holds one of these
records; :data:`PAYLOAD_OF` says which class a kind's payload is, so a summary (and any
other serialised form) can be read back by its kind.

The serialised form (summaries, the notebook API's ``fields`` column) is the record's
fields by name, defaults left out, enums as their values (:func:`payload_fields`).
Imports nothing of hangdoc but the vocabulary.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from hangdoc.analyzer.vocabulary import EventKind


@dataclass(frozen=True, slots=True)
class EventPayload:
    """The payload of a kind whose line carries nothing beyond its kind, and the base of
    every other payload."""


NO_PAYLOAD = EventPayload()

# The payload class of each kind; a kind not listed carries an EventPayload.
PAYLOAD_OF: dict[EventKind, type[EventPayload]] = {}


def payload_class(kind: EventKind) -> type[EventPayload]:
    """The class of ``kind``'s payload."""
    return PAYLOAD_OF.get(kind, EventPayload)


def payload_fields(payload: EventPayload) -> dict[str, object]:
    """The payload as plain values, by field name: enums as their values, nested records
    as dicts, tuples as lists, fields at their default left out."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(payload):
        value = getattr(payload, f.name)
        if value == f.default:
            continue
        out[f.name] = _plain(value)
    return out


def _plain(value: object) -> object:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, EventPayload) or dataclasses.is_dataclass(value):
        return {
            f.name: _plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) != f.default
        }
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
