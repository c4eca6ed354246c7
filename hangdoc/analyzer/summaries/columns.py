"""A node's per-rank records as columns (``hangdoc.summary/6``; /7: the node's equal
records written once): one table per record kind for the whole node, one column per
field, instead of one JSON object per record.

Why: reading the summaries of 16,384 ranks built about 670,000 such records (26 flight
recorder records, 13 log events, 2 /proc samples a rank), each a dict of a dozen keys in
``json.loads`` and then a record by a generated constructor call that read its keys one
by one: that was most of reading a summary. A column is read by a few bulk operations
instead: the records are made bare and each field's slot filled by one ``map`` over the
column (in C, as ``log_window._lines`` builds a window's lines), and a column whose rows
repeat a few values (an op, a state, a group, a kind, a payload) is written as those
values once and an index a row, so each distinct value is decoded once and the rows share
it (the records are frozen: sharing one is what interning does).

A table: ``{"rows": [records of each rank, in the order of the summary's ranks], "c":
{field: column}}``; from /7 also, where the node's ranks hold equal records (their flight
recorders' shared history: about half a node's records in the all-inputs benchmark),
``"d": the number of distinct records, "u": [each row's index into them]``, and the
columns are of the distinct records. The node finds which are equal once, when it writes
its summary; the reader builds each distinct record once and the rows share it, as the raw
path's flight recorder workers intern the records of many ranks (the records are frozen,
and the analysis compares them by identity first: ``views/fr_mismatch._new_records``).
A column is one of

* absent: every row has the field's default;
* ``{"k": value}``: every row has this one value;
* ``{"v": [values], "i": [each row's index into them]}``: a few values, repeated;
* ``[value, ...]``: each row's own value;

each value as the dict form writes it (codec.py: enums by value, frames by their index in
the summary's frame table, paths with the dump token). A field the reader does not know
(written by a newer hangdoc) is ignored; one it needs and does not find makes the summary
damaged, as a missing key does in the dict form.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import json
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from hangdoc.analyzer.model import CollectiveRecord, GpuState, LogEvent, ProcSample
from hangdoc.analyzer.payloads import payload_class
from hangdoc.analyzer.payloads.base import NO_PAYLOAD, EventPayload
from hangdoc.analyzer.summaries.codec import (
    _MISSING,
    _PATH_FIELDS,
    _SCALARS,
    DecodeContext,
    FrameTable,
    _defaults,
    _ident,
    _optional_inner,
    _path_decoder,
    decoder,
    encoder,
    payload_decoder,
)

Table = dict[str, Any]
# The tables of a summary (``NodeSummary.tables``), each the records of one field of the
# ranks' ProcessEvidence: proc_samples, collectives, log_events, gpu.
TABLES: dict[str, type] = {
    "proc": ProcSample,
    "collectives": CollectiveRecord,
    "log_events": LogEvent,
    "gpu": GpuState,
}
_TABLE_CLASSES = frozenset(TABLES.values())  # (a payload's table is read by its event's)
_drain = collections.deque[object](maxlen=0).extend
# A column of a few values repeated is written as the values and an index a row when it
# has at most this share of distinct values (a kind, a state, an op, a group).
_DISTINCT_SHARE = 0.5


def _key(value: Any) -> object:
    """A hashable stand-in for an encoded value (1, 1.0 and True apart)."""
    if value is None or isinstance(value, str | int | float):
        return (type(value), value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# Equal records are written once (``"u"``) when the distinct ones are at most this share
# of the rows: an index a row costs a few bytes, a record tens.
_SHARED_ROWS = 0.9


def _shareable(cls: type) -> bool:
    """Records of ``cls`` may be one object for several rows: frozen, and no field holds a
    list, dict or set (a row could change what another reads)."""
    params = getattr(cls, "__dataclass_params__", None)
    return bool(params is not None and params.frozen) and all(f.shared for f in _plan(cls))


def _distinct(cls: type, records: list[Any], frames: FrameTable) -> tuple[list[Any], list[int]]:
    """The distinct records (equal as written: 1, 1.0 and True apart) and each row's
    index into them."""
    encode = encoder(cls)
    index: dict[str, int] = {}
    distinct: list[Any] = []
    rows: list[int] = []
    for record in records:
        key = json.dumps(encode(record, frames), sort_keys=True, separators=(",", ":"))
        at = index.get(key)
        if at is None:
            at = index[key] = len(distinct)
            distinct.append(record)
        rows.append(at)
    return distinct, rows


def encode_table(
    cls: type, groups: Sequence[Sequence[Any]], frames: FrameTable, *, share: bool = True
) -> Table:
    """The records of each rank (``groups``, in the summary's order of ranks) as one table;
    equal records once where that pays, unless not ``share`` (a /6 table)."""
    hints = typing.get_type_hints(cls)
    defaults = _defaults(cls)
    records = [record for group in groups for record in group]
    table: Table = {"rows": [len(group) for group in groups]}
    if share and len(records) > 1 and cls in _TABLE_CLASSES and _shareable(cls):
        unique, at = _distinct(cls, records, frames)
        if len(unique) <= _SHARED_ROWS * len(records):
            records = unique
            table["d"], table["u"] = len(unique), at
    columns: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        values = [getattr(record, f.name) for record in records]
        default = defaults[f.name]
        if not values or (default is not _MISSING and all(v == default for v in values)):
            continue
        if cls is LogEvent and f.name == "payload":
            by_kind = _payloads_by_kind(records, frames)
            if by_kind is not None:
                columns[f.name] = by_kind
                continue
        encode = encoder(hints[f.name])
        encoded = [encode(v, frames) for v in values]
        index: dict[object, int] = {}
        rows = [index.setdefault(_key(e), len(index)) for e in encoded]
        if len(index) == 1:
            columns[f.name] = {"k": encoded[0]}
        elif len(index) <= _DISTINCT_SHARE * len(encoded):
            distinct: list[object] = [None] * len(index)
            for row, value in zip(rows, encoded, strict=True):
                distinct[row] = value
            columns[f.name] = {"v": distinct, "i": rows}
        else:
            columns[f.name] = encoded
    table["c"] = columns
    return table


def _payloads_by_kind(events: Sequence[LogEvent], frames: FrameTable) -> dict[str, Any] | None:
    """A table's payloads as a table per kind (``{"t": {kind: table of that kind's
    payloads}, "e": [rows without one]}``): a kind's payloads are its class's records,
    read column by column like the events. None when a payload is not of its kind's class
    (the column is then written a payload a row, which reads it as the kind's class)."""
    groups: dict[str, list[EventPayload]] = {}
    empty: list[int] = []
    for row, event in enumerate(events):
        payload = event.payload
        if payload == NO_PAYLOAD:
            empty.append(row)
        elif type(payload) is payload_class(event.kind):
            groups.setdefault(event.kind.value, []).append(payload)
        else:
            return None
    tables = {kind: encode_table(type(group[0]), [group], frames) for kind, group in groups.items()}
    return {"t": {kind: table["c"] for kind, table in tables.items()}, "e": empty}


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    set: Callable[[Any, Any], None]  # the slot's descriptor: fills it past a frozen class
    decode: Callable[[Any, DecodeContext], Any]
    default: object  # _MISSING: none
    factory: Callable[[], Any] | None
    shared: bool  # its values may be shared by rows (not a list, dict or set)
    # a scalar's types, exact as JSON gives them (None: not a scalar): a value read back
    # as another type would break the rules that compare it (codec's ``_checked``)
    types: frozenset[type] | None


@functools.cache
def _plan(cls: type) -> tuple[_Field, ...]:
    """How a table of ``cls`` is read, field by field (once per class)."""
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} records cannot be built bare from columns")
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        dec = decoder(tp)
        if f.name in _PATH_FIELDS:
            dec = _path_decoder(tp, dec)
        factory = None if f.default_factory is dataclasses.MISSING else f.default_factory
        origin = typing.get_origin(tp) or tp
        inner = _optional_inner(tp)
        allowed = _SCALARS.get(inner if inner is not None else tp)
        types = None
        if allowed is not None:
            types = frozenset((*allowed, type(None)) if inner is not None else allowed)
        out.append(
            _Field(f.name, getattr(cls, f.name).__set__, dec,
                   f.default if f.default is not dataclasses.MISSING else _MISSING,
                   factory, origin not in (list, dict, set), types)
        )  # fmt: skip
    return tuple(out)


def _values(column: Any, count: int, field: _Field, ctx: DecodeContext) -> Sequence[Any]:
    """A column's ``count`` values, decoded; a value shared by rows is decoded once."""
    decode = field.decode
    if type(column) is list:
        if len(column) != count:
            raise ValueError(f"a column of {field.name} does not have a value a row")
        values = column if decode is _ident else [decode(v, ctx) for v in column]
        _check(field, values)
        return values
    if type(column) is not dict:
        raise TypeError(f"a column of {field.name} is not a list or a dict")
    if "k" in column:
        if not field.shared:
            return [decode(column["k"], ctx) for _ in range(count)]
        one = decode(column["k"], ctx)
        _check(field, (one,))
        return [one] * count
    distinct, rows = column["v"], column["i"]
    if type(distinct) is not list or type(rows) is not list:
        raise TypeError(f"a column of {field.name} is not values and indices")
    if len(rows) != count:
        raise ValueError(f"a column of {field.name} does not have a value a row")
    if rows and min(rows) < 0:  # (a negative index would pick a value from the end)
        raise IndexError(f"a column of {field.name} names a value that is not there")
    if not field.shared:
        return [decode(distinct[row], ctx) for row in rows]
    values = [decode(v, ctx) for v in distinct]
    _check(field, values)
    return list(map(values.__getitem__, rows))


def _raw(column: Any, count: int) -> Sequence[Any]:
    """A column's values as written, one a row (a column ``_values`` has read: checked)."""
    if type(column) is list:
        return column
    if "k" in column:
        return [column["k"]] * count
    return list(map(column["v"].__getitem__, column["i"]))


def _check(field: _Field, values: Sequence[Any]) -> None:
    if field.types is not None and not all(map(field.types.__contains__, map(type, values))):
        raise TypeError(f"a column of {field.name} holds a value that is not a {field.types}")


def _payloads(columns: dict[str, Any], kinds: Sequence[Any], ctx: DecodeContext) -> list[Any]:
    """A LogEvent table's payloads, each read as its row's kind's class (codec's
    ``payload_decoder``): a (payload, kind) pair that repeats is read once."""
    count = len(kinds)
    column = columns.get("payload", _MISSING)
    if column is _MISSING:
        return [_plan(LogEvent)[_PAYLOAD].default] * count
    read = payload_decoder()
    if type(column) is dict and "t" in column:
        return _payloads_of_kinds(column, _raw(columns["kind"], count), ctx)
    if type(column) is list:
        if len(column) != count:
            raise ValueError("a column of payload does not have a value a row")
        return [read(kind, raw, ctx) for kind, raw in zip(kinds, column, strict=True)]
    if type(column) is not dict:
        raise TypeError("a column of payload is not a list or a dict")
    if "k" in column:
        distinct, rows = [column["k"]], [0] * count
    else:
        distinct, rows = column["v"], column["i"]
        if type(distinct) is not list or type(rows) is not list or len(rows) != count:
            raise ValueError("a column of payload is not values and indices, one a row")
        if rows and min(rows) < 0:
            raise IndexError("a column of payload names a value that is not there")
    seen: dict[tuple[int, Any], Any] = {}
    out = []
    for row, kind in zip(rows, kinds, strict=True):
        payload = seen.get((row, kind))
        if payload is None:
            payload = seen[(row, kind)] = read(kind, distinct[row], ctx)
        out.append(payload)
    return out


def _payloads_of_kinds(
    column: dict[str, Any], written: Sequence[Any], ctx: DecodeContext
) -> list[Any]:
    """The payload column as a table per kind (``_payloads_by_kind``): each kind's table
    read as its class's records, then dealt to that kind's rows in order (``written``:
    each row's kind as written, so two kinds this version does not know stay apart)."""
    tables, empty = column["t"], column["e"]
    if type(tables) is not dict or type(empty) is not list:
        raise TypeError("a column of payload is not tables by kind")
    count = len(written)
    if not all(type(row) is int and 0 <= row < count for row in empty):
        raise IndexError("a column of payload names a row that is not there")
    missing = frozenset(empty)
    wanted: dict[Any, int] = {}
    for row, kind in enumerate(written):
        if row not in missing:
            wanted[kind] = wanted.get(kind, 0) + 1
    if set(tables) != set(wanted):
        raise ValueError("a column of payload does not have a table of each row's kind")
    kind_of = _kind_decoder()
    dealt: dict[Any, Iterator[Any]] = {}
    for kind, columns in tables.items():
        table = {"rows": [wanted[kind]], "c": columns}
        dealt[kind] = iter(decode_table(payload_class(kind_of(kind, ctx)), table, ctx)[0])
    return [NO_PAYLOAD if row in missing else next(dealt[kind]) for row, kind in enumerate(written)]


def _shared_rows(cls: type, table: dict[str, Any], rows: int) -> tuple[list[int], int]:
    """(each row's index into the distinct records, how many distinct records) of a table
    that writes equal records once; checked: an index a row, each to a record there, and
    only for records that may be shared."""
    shared, count = table["u"], table["d"]
    if type(shared) is not list or type(count) is not int or count < 0:
        raise TypeError(f"a table of {cls.__name__} has shared rows that are not indices")
    if not _shareable(cls):
        raise ValueError(f"a table of {cls.__name__} shares records that may not be shared")
    if len(shared) != rows:
        raise ValueError(f"a table of {cls.__name__} does not have an index a row")
    if shared and (set(map(type, shared)) != {int} or min(shared) < 0 or max(shared) >= count):
        raise IndexError(f"a table of {cls.__name__} names a record that is not there")
    return shared, count


@functools.cache
def _kind_decoder() -> Callable[[Any, DecodeContext], Any]:
    return decoder(typing.get_type_hints(LogEvent)["kind"])


_PAYLOAD = next(n for n, f in enumerate(dataclasses.fields(LogEvent)) if f.name == "payload")
_KIND = next(n for n, f in enumerate(dataclasses.fields(LogEvent)) if f.name == "kind")


def decode_table(cls: type, table: Any, ctx: DecodeContext) -> list[list[Any]]:
    """A table → each rank's records (in the order of the summary's ranks). Raises
    (KeyError, TypeError, ValueError, IndexError) on a damaged one."""
    if type(table) is not dict:
        raise TypeError(f"a table of {cls.__name__} is not an object")
    counts, columns = table["rows"], table["c"]
    if type(counts) is not list or type(columns) is not dict:
        raise TypeError(f"a table of {cls.__name__} is not rows and columns")
    if not all(type(c) is int and c >= 0 for c in counts):
        raise ValueError(f"a table of {cls.__name__} has a count that is not a number of rows")
    count = sum(counts)
    shared = table.get("u")
    if shared is not None:  # (/7: the columns are of the distinct records)
        shared, count = _shared_rows(cls, table, count)
    plan = _plan(cls)
    filled: list[Sequence[Any] | None] = []
    for field in plan:
        column = columns.get(field.name, _MISSING)
        if column is _MISSING:
            if field.default is not _MISSING:
                filled.append([field.default] * count)
            elif field.factory is not None:
                filled.append([field.factory() for _ in range(count)])
            elif count:
                raise KeyError(field.name)
            else:
                filled.append([])
        elif cls is LogEvent and field.name == "payload":
            filled.append(None)  # (read once the kinds are)
        else:
            filled.append(_values(column, count, field, ctx))
    if cls is LogEvent:
        kinds = filled[_KIND]
        assert kinds is not None
        filled[_PAYLOAD] = _payloads(columns, kinds, ctx)
    records: list[Any] = list(map(object.__new__, itertools.repeat(cls, count)))
    for field, values in zip(plan, filled, strict=True):
        _drain(map(field.set, records, values))  # type: ignore[arg-type]
    if shared is not None:
        records = list(map(records.__getitem__, shared))
    out = []
    start = 0
    for size in counts:
        out.append(records[start : start + size])
        start += size
    return out
