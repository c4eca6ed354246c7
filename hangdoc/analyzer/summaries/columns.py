"""A node's per-rank records as columns (``hangdoc.summary/6``): one table per record
kind for the whole node, one column per field, instead of one JSON object per record.

Why: reading the summaries of 16,384 ranks built about 650,000 such records (26 flight
recorder records, 13 log events, 2 /proc samples a rank), each a dict of a dozen keys in
``json.loads`` and then a record by a generated constructor call that read its keys one
by one: that was most of reading a summary. A column is read by a few bulk operations
instead: the records are made bare and each field's slot filled by one ``map`` over the
column (in C, as ``log_window._lines`` builds a window's lines), and a column whose rows
repeat a few values (an op, a state, a group, a kind, a payload) is written as those
values once and an index a row, so each distinct value is decoded once and the rows share
it (the records are frozen: sharing one is what interning does).

A table: ``{"rows": [records of each rank, in the order of the summary's ranks], "c":
{field: column}}``. A column is one of

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
from collections.abc import Callable, Sequence
from typing import Any

from hangdoc.analyzer.model import CollectiveRecord, GpuState, LogEvent, ProcSample
from hangdoc.analyzer.summaries.codec import (
    _MISSING,
    _PATH_FIELDS,
    DecodeContext,
    FrameTable,
    _defaults,
    _ident,
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
_drain = collections.deque[object](maxlen=0).extend
# A column of a few values repeated is written as the values and an index a row when it
# has at most this share of distinct values (a kind, a state, an op, a group).
_DISTINCT_SHARE = 0.5


def _key(value: Any) -> object:
    """A hashable stand-in for an encoded value (1, 1.0 and True apart)."""
    if value is None or isinstance(value, str | int | float):
        return (type(value), value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def encode_table(cls: type, groups: Sequence[Sequence[Any]], frames: FrameTable) -> Table:
    """The records of each rank (``groups``, in the summary's order of ranks) as one table."""
    hints = typing.get_type_hints(cls)
    defaults = _defaults(cls)
    records = [record for group in groups for record in group]
    columns: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        values = [getattr(record, f.name) for record in records]
        default = defaults[f.name]
        if not values or (default is not _MISSING and all(v == default for v in values)):
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
    return {"rows": [len(group) for group in groups], "c": columns}


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    set: Callable[[Any, Any], None]  # the slot's descriptor: fills it past a frozen class
    decode: Callable[[Any, DecodeContext], Any]
    default: object  # _MISSING: none
    factory: Callable[[], Any] | None
    shared: bool  # its values may be shared by rows (not a list, dict or set)


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
        out.append(
            _Field(f.name, getattr(cls, f.name).__set__, dec,
                   f.default if f.default is not dataclasses.MISSING else _MISSING,
                   factory, origin not in (list, dict, set))
        )  # fmt: skip
    return tuple(out)


def _values(column: Any, count: int, field: _Field, ctx: DecodeContext) -> Sequence[Any]:
    """A column's ``count`` values, decoded; a value shared by rows is decoded once."""
    decode = field.decode
    if type(column) is list:
        if len(column) != count:
            raise ValueError(f"a column of {field.name} does not have a value a row")
        return column if decode is _ident else [decode(v, ctx) for v in column]
    if type(column) is not dict:
        raise TypeError(f"a column of {field.name} is not a list or a dict")
    if "k" in column:
        if not field.shared:
            return [decode(column["k"], ctx) for _ in range(count)]
        return [decode(column["k"], ctx)] * count
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
    return list(map(values.__getitem__, rows))


def _payloads(columns: dict[str, Any], kinds: Sequence[Any], ctx: DecodeContext) -> list[Any]:
    """A LogEvent table's payloads, each read as its row's kind's class (codec's
    ``payload_decoder``): a (payload, kind) pair that repeats is read once."""
    count = len(kinds)
    column = columns.get("payload", _MISSING)
    if column is _MISSING:
        return [_plan(LogEvent)[_PAYLOAD].default] * count
    read = payload_decoder()
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
    out = []
    start = 0
    for size in counts:
        out.append(records[start : start + size])
        start += size
    return out
