"""A catalog match as an event: its kind and its typed values.

The log scanner will turn this into a ``LogEvent`` once typed payloads land (issue 20);
until then this is the whole contract between the catalog and the scanner: an
:class:`EventDraft` says which ``EventKind`` the line is, the category it supports and
how strongly (from ``meanings.toml``), and the values its slots carry, typed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.catalog.matcher import CatalogMatch, Matcher
from hangdoc.analyzer.vocabulary import EventKind

_INT = re.compile(r"[-+]?\d+")
_FLOAT = re.compile(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")
# An address as NCCL prints it ("10.0.0.1<41234>", "[fe80::1%ib0]:41234"): the port apart.
_PEER = re.compile(r"^\[?(?P<host>[^\s<>\[\]]+?)\]?(?:<(?P<port>\d+)>|:(?P<port2>\d{2,5}))?$")

Value = int | float | str


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
    )


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
