"""A catalog match as an event: its kind, its typed values and its kind's payload.

This is the whole contract between the catalog and the log scanner (which does not read
the catalog yet): an :class:`EventDraft` says which ``EventKind`` the line is, the
category it supports and how strongly (from ``meanings.toml``), the values its slots
carry, typed, and those values as the payload a ``LogEvent`` of that kind carries
(analyzer/payloads/: ``PAYLOAD_OF``), so that an event made from a catalog row reads the
same to the views and rules as one made by a hand-written recogniser.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.catalog.matcher import CatalogMatch, Matcher
from hangdoc.analyzer.payloads import payload_class
from hangdoc.analyzer.payloads.base import NO_PAYLOAD, EventPayload
from hangdoc.analyzer.vocabulary import EventKind

# A sign only where it starts the number: in a name ("VllmWorker-2") the dash is a
# separator, not a minus.
_INT = re.compile(r"(?<!\w)[-+]?\d+|\d+")
_FLOAT = re.compile(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")
# An address as NCCL prints it ("10.0.0.1<41234>", "[fe80::1%ib0]:41234"): the port apart.
_PEER = re.compile(r"^\[?(?P<host>[^\s<>\[\]]+?)\]?(?:<(?P<port>\d+)>|:(?P<port2>\d{2,5}))?$")

Value = int | float | str

# The payload field a catalog value fills: the first of these names that the kind's payload
# class has and whose type the value converts to (a value no field takes stays in
# ``values`` only). The values are named by the slot's expression in the source
# (meanings.toml ``[values]``): the watchdog's ``[Rank N]`` is a group rank, an NCCL
# transport error's rank is its peer's. Not filled: ``timeout`` and ``elapsed`` (their
# units differ from message to message), ``pid`` and ``local_rank`` (the process the line
# is about, an event's own fields, not its payload's).
_FILLS: dict[str, tuple[str, ...]] = {
    "seq": ("seq", "opcount"),
    "op": ("op", "collective"),
    "rank": ("group_rank", "rank", "peer_rank"),
    "nranks": ("nranks", "world_size"),
    "peer": ("peer",),
    "peer_port": ("port",),
    "exitcode": ("exit_code", "rc"),
    "error": ("error", "last_error", "message"),
    "errno_text": ("error", "last_error", "message"),
    "cuda_error": ("cuda_error", "error", "message"),
    "device": ("device", "gpu", "bus_id", "pci"),
    "signal": ("signal",),
    "xid": ("xid",),
    "key": ("keys", "store_key"),
    "interface": ("iface",),
    "size": ("count",),
    "comm": ("comm",),
    "process": ("name",),
    "process_group": ("pg", "group"),
    "path": ("error_file",),
}


# Fields that hold what a failure says in words ("invalid argument", "Connection reset by
# peer"): a slot that printed a bare number (NCCL 2.27's "CUDA error %d '%s'" prints the
# CUresult's number beside its words; a return value, a count) is a code, and a code read as
# the error makes "1" a CUDA error that no error table knows. The words, where the line has
# them, fill the field instead.
_WORDS_FIELDS = frozenset({"error", "last_error", "message", "cuda_error"})
_NUMBER = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|\d+)")


def _bare_number(value: Value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return _NUMBER.fullmatch(value.strip()) is not None


@dataclass(frozen=True, slots=True)
class EventDraft:
    """What a catalog row says a line is. ``kind`` is None for rows that say nothing
    about a hang (their meaning's strength is ``none``) and for rows without a meaning."""

    kind: EventKind | None
    category: str | None
    strength: str
    row_id: str
    project: str
    source: str  # "nccl src/transport/net_ib.cc (ncclIbTest) 2.18.1–2.27.7"
    values: dict[str, Value] = field(default_factory=dict)
    proposed_kind: str | None = None
    # ``values`` as ``kind``'s payload (the base record when the kind is None).
    payload: EventPayload = NO_PAYLOAD


def to_event(match: CatalogMatch, matcher: Matcher | None = None) -> EventDraft:
    """The event a match is. With ``matcher``, a slot whose text is itself a catalogued
    message (the watchdog's ``<work>`` is ``WorkNCCL(SeqNum=…, OpType=…)``) adds that
    message's values where the outer row has none of its own."""
    row = match.row
    meaning = row.meaning.for_text(match.text) if row.meaning is not None else None
    values: dict[str, Value] = {}
    for slot, name, declared, text in zip(
        row.slots, row.slot_values, row.value_types, match.captures, strict=False
    ):
        if not name or name in values or text is None:
            continue
        typed = _typed(text.strip(), declared, slot.type)
        if typed is None:
            continue
        if name == "peer" and isinstance(typed, str):
            peer = _PEER.match(typed)
            if peer is not None and (peer.group("port") or peer.group("port2")):
                values["peer_port"] = int(peer.group("port") or peer.group("port2"))
                typed = peer.group("host")
        values[name] = typed
    if matcher is not None:
        for slot, text in zip(row.slots, match.captures, strict=False):
            if slot.type != "text" or text is None or len(text) < 16:
                continue
            inner = matcher.match(text)
            if inner is None or inner.row is row:
                continue
            for key, value in to_event(inner).values.items():
                values.setdefault(key, value)
    kind: EventKind | None = None
    if meaning is not None and meaning.kind is not None:
        kind = EventKind(meaning.kind)
    first = row.sources[0] if row.sources else None
    where = (
        f"{first.file} ({first.function})"
        if first and first.function
        else (first.file if first else "")
    )
    return EventDraft(
        kind=kind,
        category=meaning.category if meaning else None,
        strength=meaning.strength if meaning else "none",
        row_id=row.id,
        project=row.project,
        source=f"{row.project} {where} {row.versions}".strip(),
        values=values,
        proposed_kind=meaning.proposed_kind if meaning else None,
        payload=(
            payload_of(kind, values, meaning.fields if meaning is not None else ())
            if kind is not None
            else NO_PAYLOAD
        ),
    )


def payload_of(
    kind: EventKind,
    values: dict[str, Value],
    fields: tuple[tuple[str, str | int | bool], ...] = (),
) -> EventPayload:
    """The payload of an event of ``kind`` whose line carries ``values`` (see ``_FILLS``;
    a value named like one of the payload's fields fills that field), with the row's
    constant ``fields`` (meanings.toml) over them."""
    cls = payload_class(kind)
    types_of = _field_types(cls)
    filled: dict[str, object] = {}
    for name, value in values.items():
        for candidate in (*_FILLS.get(name, ()), name):
            if candidate in filled or candidate not in types_of:
                continue
            if candidate in _WORDS_FIELDS and _bare_number(value):
                continue  # a code or a count, not the error's words (see _WORDS_FIELDS)
            typed = _as_field(value, types_of[candidate])
            if typed is not None:
                filled[candidate] = typed
                break
    for name, constant in fields:
        if name in types_of and (typed := _as_field(constant, types_of[name])) is not None:
            filled[name] = typed
        elif (member := _member_of(cls, name, constant)) is not None:
            filled[name] = (*filled.get(name, ()), member)  # type: ignore[misc]
    return cls(**filled)  # type: ignore[arg-type]  # checked against the field types


_FIELD_TYPES: dict[type, dict[str, object]] = {}


def _member_of(cls: type[EventPayload], name: str, constant: object) -> enum.Enum | None:
    """A constant for a field that holds several members of an enum (``signs``: what the
    message says, ``signs = "nvls_multicast"`` in meanings.toml): that member, or None."""
    if name not in {f.name for f in dataclasses.fields(cls)} or not isinstance(constant, str):
        return None
    hint = typing.get_type_hints(cls)[name]
    args = typing.get_args(hint)
    if typing.get_origin(hint) is not tuple or len(args) != 2 or args[1] is not Ellipsis:
        return None
    member_type = args[0]
    if not (isinstance(member_type, type) and issubclass(member_type, enum.Enum)):
        return None
    try:
        return member_type(constant)
    except ValueError:
        return None


def _field_types(cls: type[EventPayload]) -> dict[str, object]:
    """Each field of a payload class that holds one scalar (``X | None``, or a flag): its
    type."""
    out = _FIELD_TYPES.get(cls)
    if out is not None:
        return out
    hints = typing.get_type_hints(cls)
    out = _FIELD_TYPES[cls] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            if len(args) == 1:
                out[f.name] = args[0]
        elif hint is bool:
            out[f.name] = bool
    return out


def _as_field(value: Value, tp: object) -> object:
    """``value`` as a field of type ``tp``, or None when it is not one (an enum's member
    only when the value is one of its words: no ``UNKNOWN`` where a recogniser would know)."""
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value) if isinstance(value, str) else None
        except ValueError:
            return None
    if tp is bool:
        return value if isinstance(value, bool) else None
    if isinstance(value, bool):
        return None  # a flag fills only a flag
    if tp is int:
        if isinstance(value, int):
            return value
        return int(value) if isinstance(value, str) and _INT.fullmatch(value) else None
    if tp is float:
        return float(value) if isinstance(value, (int, float)) else None
    if tp is str:
        return value if isinstance(value, str) else str(value)
    return None


def _typed(text: str, declared: str | None, slot_type: str) -> Value | None:
    if not text:
        return None
    want = declared or {"int": "int", "uint": "int", "float": "float"}.get(slot_type, "str")
    if want == "int":
        m = _INT.search(text)
        return int(m.group(0)) if m is not None else None
    if want == "float":
        m = _FLOAT.search(text)
        return float(m.group(0)) if m is not None else None
    return text[:300]
