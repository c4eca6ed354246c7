"""Model records ↔ JSON for node summaries, derived from the dataclasses themselves.

Why generic: a summary must carry every field the rules read, and the model grows issue by
issue (fields are appended, never renamed: model.py's convention). An encoder and a
decoder built from each dataclass's own field types follow those additions without an
edit here, so a summary written today keeps up with tomorrow's rules. A field the
writer did not know is absent in the JSON and gets its default when read.

Why precompiled: decoding the summaries of 16,384 ranks builds about a million records;
each class gets one closure per field the first time it is seen, so the hot path is a
dict lookup and a constructor call, not type introspection.

Frames are never written inline: every :class:`Frame` (in stacks and in flight recorder
records alike) becomes an index into the summary's frame table, so a frame shared by
thousands of threads is written once and read back as one shared object.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import operator
import types
import typing
from collections.abc import Callable
from typing import Any

from hangdoc.analyzer.model import Frame, LogEvent
from hangdoc.analyzer.payloads import payload_class
from hangdoc.analyzer.payloads.base import NO_PAYLOAD, EventPayload
from hangdoc.analyzer.vocabulary import parse_enum

# A summary written on the node refers to the dump it sits in by this token; the reader
# puts the display path of that dump in its place (paths in reports stay clickable).
DUMP_TOKEN = "@"
_PATH_FIELDS = frozenset({"source", "sources", "path", "manifest"})

Encoder = Callable[[Any, "FrameTable"], Any]
Decoder = Callable[[Any, "DecodeContext"], Any]


class FrameTable:
    """The frames of one summary, numbered in first-seen order."""

    def __init__(self) -> None:
        self.rows: list[list[object]] = []
        self._index: dict[Frame, int] = {}

    def add(self, frame: Frame) -> int:
        index = self._index.get(frame)
        if index is None:
            index = len(self.rows)
            self._index[frame] = index
            row: list[object] = [frame.function, frame.file, frame.line, int(frame.native)]
            if frame.locals:
                row.append([list(pair) for pair in frame.locals])
            self.rows.append(row)
        return index

    def add_all(self, frames: tuple[Frame, ...]) -> list[int]:
        return [self.add(f) for f in frames]


# Frames decoded from any summary, shared across summaries: 2,048 nodes of one job repeat
# the same few hundred frames.
_FRAMES: dict[tuple[object, ...], Frame] = {}
_FRAMES_MAX = 1 << 20


def decode_frames(rows: list[Any]) -> list[Frame]:
    """The frame table of a summary → Frames (interned across summaries)."""
    out: list[Frame] = []
    cache = _FRAMES
    for row in rows:
        key = (row[0], row[1], row[2], row[3]) if len(row) == 4 else None
        frame = cache.get(key) if key is not None else None
        if frame is None:
            locals_ = tuple((str(n), str(v)) for n, v in row[4]) if len(row) > 4 else ()
            frame = Frame(
                function=str(row[0]),
                file=str(row[1]),
                line=row[2] if isinstance(row[2], int) else None,
                native=bool(row[3]),
                locals=locals_,
            )
            if key is not None:
                if len(cache) >= _FRAMES_MAX:
                    cache.clear()
                cache[key] = frame
        out.append(frame)
    return out


@dataclasses.dataclass(slots=True)
class DecodeContext:
    """What decoding one summary needs besides the JSON: its frames and its display path."""

    frames: list[Frame]
    display: str
    # Each path relocated once: a rank's 1,500 log lines name the same file, and one
    # shared string is cheaper to look up than to build (and to keep) 1,500 times.
    relocated: dict[str, str] = dataclasses.field(default_factory=dict)

    def relocate(self, path: str) -> str:
        found = self.relocated.get(path)
        if found is None:
            found = self.relocated[path] = self._relocate(path)
        return found

    def _relocate(self, path: str) -> str:
        if path == DUMP_TOKEN:
            return self.display
        if path.startswith(DUMP_TOKEN + "/"):
            return self.display + path[len(DUMP_TOKEN) :]
        return path

    def relocate_text(self, text: str) -> str:
        """Notes name files inside the dump anywhere in their text."""
        return text.replace(DUMP_TOKEN + "/", self.display + "/") if DUMP_TOKEN in text else text


_ENCODERS: dict[object, Encoder] = {}
_DECODERS: dict[object, Decoder] = {}
_MISSING = object()


def _ident(value: Any, _ctx: Any) -> Any:
    return value


def encoder(tp: object) -> Encoder:
    """The JSON encoder of a type (a model dataclass, a container of them, a scalar)."""
    found = _ENCODERS.get(tp)
    if found is None:
        found = _build_encoder(tp)
        _ENCODERS[tp] = found
    return found


def decoder(tp: object) -> Decoder:
    """The inverse of :func:`encoder`; raises (KeyError, TypeError, ValueError) on bad JSON."""
    found = _DECODERS.get(tp)
    if found is None:
        found = _build_decoder(tp)
        _DECODERS[tp] = found
    return found


def _optional_inner(tp: object) -> object | None:
    """``X | None`` → X; anything else → None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args: list[object] = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return None


def _container(tp: object) -> tuple[object, tuple[Any, ...]]:
    return typing.get_origin(tp), typing.get_args(tp)


def _build_encoder(tp: object) -> Encoder:
    if tp is Frame:
        return lambda value, table: table.add(value)
    if tp is EventPayload:  # a LogEvent's payload: each kind's own class
        return _payload_encoder()
    inner = _optional_inner(tp)
    if inner is not None:
        enc = encoder(inner)
        return lambda value, table: None if value is None else enc(value, table)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return lambda value, _table: value.value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_encoder(tp)
    origin, args = _container(tp)
    if origin in (tuple, list):
        elem = encoder(args[0]) if args else _ident
        if elem is _ident:
            return lambda value, _table: list(value)
        return lambda value, table: [elem(v, table) for v in value]
    if origin is dict:
        val = encoder(args[1])
        if val is _ident:
            return lambda value, _table: dict(value)
        return lambda value, table: {k: val(v, table) for k, v in value.items()}
    return _ident


def _payload_encoder() -> Encoder:
    """A payload by its own class's fields (the base class's too: an ACTOR_DIED's)."""
    by_class: dict[type, Encoder] = {EventPayload: _dataclass_encoder(EventPayload)}

    def encode(value: Any, table: FrameTable) -> object:
        cls = type(value)
        found = by_class.get(cls)
        if found is None:
            found = by_class[cls] = encoder(cls)
        return found(value, table)

    return encode


def _defaults(cls: type) -> dict[str, object]:
    out: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = _MISSING
    return out


def _dataclass_encoder(cls: type) -> Encoder:
    hints = typing.get_type_hints(cls)
    defaults = _defaults(cls)
    fields = [(f.name, encoder(hints[f.name]), defaults[f.name]) for f in dataclasses.fields(cls)]

    def encode(value: Any, table: FrameTable) -> dict[str, object]:
        out: dict[str, object] = {}
        for name, enc, default in fields:
            item = getattr(value, name)
            if default is _MISSING or item != default:
                out[name] = enc(item, table)
        return out

    return encode


def _build_decoder(tp: object) -> Decoder:
    if tp is Frame:
        return lambda value, ctx: ctx.frames[value]
    if tp is LogEvent:
        return _event_decoder()
    inner = _optional_inner(tp)
    if inner is not None:
        dec = decoder(inner)
        if dec is _ident:
            return _ident
        return lambda value, ctx: None if value is None else dec(value, ctx)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_decoder(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_decoder(tp)
    origin, args = _container(tp)
    if origin is tuple:
        if (len(args) == 2 and args[1] is Ellipsis) or len(args) == 1:
            elem = decoder(args[0])
            if elem is _ident:
                return lambda value, _ctx: tuple(value)
            return lambda value, ctx: tuple([elem(v, ctx) for v in value])
        parts = [decoder(a) for a in args]
        if all(d is _ident for d in parts):
            return lambda value, _ctx: tuple(value)
        return lambda value, ctx: tuple(d(v, ctx) for d, v in zip(parts, value, strict=True))
    if origin is list:
        elem = decoder(args[0]) if args else _ident
        if elem is _ident:
            return lambda value, _ctx: list(value)
        if elem is decoder_of_dataclass(args[0]):
            return _dataclass_decoder(args[0], many=True)
        return lambda value, ctx: [elem(v, ctx) for v in value]
    if origin is dict:
        val = decoder(args[1])
        if val is _ident:
            return lambda value, _ctx: dict(value)
        return lambda value, ctx: {k: val(v, ctx) for k, v in value.items()}
    return _ident


def _event_decoder() -> Decoder:
    """A LogEvent: its payload is read as its kind's class (an unknown kind's as the base
    class), and its scalars must have their declared types, or the summary is damaged.

    The payload is decoded inside the event's one constructor call (a job's events are
    tens of thousands: reading the payload as the base class first and then replacing
    it built each event twice and its payload twice)."""
    kind_of = decoder(typing.get_type_hints(LogEvent)["kind"])
    read = payload_decoder()

    def payload(value: Any, ctx: DecodeContext) -> object:
        if "payload" not in value:
            return NO_PAYLOAD
        return read(kind_of(value["kind"], ctx), value["payload"], ctx)

    return _dataclass_decoder(LogEvent, computed={"payload": payload})


PayloadDecoder = Callable[[Any, Any, "DecodeContext"], EventPayload]


@functools.cache
def payload_decoder() -> PayloadDecoder:
    """(a decoded event kind, a payload's JSON) → the payload, read as the kind's class and
    its scalars checked (an empty one as the base class, as the event's field reads it):
    the one reading of a payload, for events written whole and written as columns."""
    base = decoder(EventPayload)
    payloads: dict[type, Decoder] = {}

    def read(kind: Any, raw: Any, ctx: DecodeContext) -> EventPayload:
        if not raw:
            return base(raw, ctx)  # type: ignore[no-any-return]
        cls = payload_class(kind)
        found = payloads.get(cls)
        if found is None:
            found = payloads[cls] = _checked(cls, decoder(cls))
        return found(raw, ctx)  # type: ignore[no-any-return]

    return read


_SCALARS: dict[object, tuple[type, ...]] = {
    int: (int,),
    float: (int, float),
    str: (str,),
    bool: (bool,),
}


def _checked(cls: type, read: Decoder) -> Decoder:
    """``read`` followed by a check of the record's scalar fields against their types: a
    payload field read back as the wrong type would break the rules that compare it."""
    hints = typing.get_type_hints(cls)
    checks: list[tuple[str, tuple[type, ...]]] = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        inner = _optional_inner(tp)
        allowed = _SCALARS.get(inner if inner is not None else tp)
        if allowed is not None:
            checks.append((f.name, (*allowed, type(None)) if inner is not None else allowed))

    # The same check in C first: the exact types JSON gives (a job's payloads are
    # hundreds of thousands); a record that fails it is checked again one field at a time,
    # which decides (a subclass passes there) and names the field.
    if not checks:
        return read
    read_all = operator.attrgetter(*(name for name, _ in checks), "__class__")  # (a tuple)
    exact = (*(frozenset(allowed) for _, allowed in checks), frozenset({cls}))
    contains = frozenset.__contains__

    def decode(value: Any, ctx: DecodeContext) -> object:
        record = read(value, ctx)
        if all(map(contains, exact, map(type, read_all(record)))):
            return record
        for name, allowed in checks:
            item = getattr(record, name)
            if not isinstance(item, allowed) or (isinstance(item, bool) and bool not in allowed):
                raise TypeError(f"{cls.__name__}.{name} is {type(item).__name__}")
        return record

    return decode


def _enum_decoder(enum_cls: type[enum.Enum]) -> Decoder:
    """An enum's value as its member. The words of the evidence (vocabulary.py, the model's
    states) have an UNKNOWN member, which a value this version does not know becomes: a
    summary written by a newer hangdoc, or a damaged one, still loads."""
    if issubclass(enum_cls, enum.StrEnum) and "UNKNOWN" in enum_cls.__members__:
        lenient = enum_cls
        # the members by value, looked up first (a job's records hold a hundred thousand
        # enum values); anything else goes to parse_enum, which decides as before
        members: dict[str, enum.StrEnum] = {m.value: m for m in enum_cls}

        def decode(value: Any, _ctx: DecodeContext) -> object:
            if type(value) is str:
                found = members.get(value)
                if found is not None:
                    return found
            return parse_enum(lenient, value)

        return decode
    return lambda value, _ctx: enum_cls(value)


def _path_decoder(tp: object, base: Decoder) -> Decoder:
    if tp is str or _optional_inner(tp) is str:
        return lambda value, ctx: None if value is None else ctx.relocate(value)
    if typing.get_origin(tp) is list:
        return lambda value, ctx: [ctx.relocate(v) for v in value]
    return base


_RECORD_DECODERS: dict[type, Decoder] = {}


def decoder_of_dataclass(tp: object) -> Decoder | None:
    """The written decoder of a dataclass that is decoded field by field (not a Frame,
    not a LogEvent, whose decoders are their own); None for any other type."""
    if not isinstance(tp, type):
        return None
    return _RECORD_DECODERS.get(tp)


def _dataclass_decoder(
    cls: type, many: bool = False, computed: dict[str, Decoder] | None = None
) -> Decoder:
    """A decoder written for ``cls`` (as attrs and dataclasses write their __init__): one
    keyword argument per field, a field absent from the JSON gets its default. ``many``:
    the decoder of a list of them, the same expression in one comprehension (a rank's
    1,500 log lines, a job's million: one function call per record less). ``computed``:
    fields whose value a decoder reads from the whole record (absent or not), not from
    their own key."""
    hints = typing.get_type_hints(cls)
    namespace: dict[str, object] = {"cls": cls}
    args: list[str] = []
    for number, f in enumerate(dataclasses.fields(cls)):
        dec = decoder(hints[f.name])
        if f.name in _PATH_FIELDS:
            dec = _path_decoder(hints[f.name], dec)
        key = repr(f.name)
        if computed is not None and f.name in computed:
            namespace[f"computed{number}"] = computed[f.name]
            args.append(f"{f.name}=computed{number}(v, ctx)")
            continue
        value = f"v[{key}]"
        if dec is not _ident:
            namespace[f"dec{number}"] = dec
            value = f"dec{number}(v[{key}], ctx)"
        if f.default is not dataclasses.MISSING:
            namespace[f"default{number}"] = f.default
            value = f"{value} if {key} in v else default{number}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"factory{number}"] = f.default_factory
            value = f"{value} if {key} in v else factory{number}()"
        args.append(f"{f.name}={value}")
    record = "cls(" + ", ".join(args) + ")"
    if many:
        source = f"def decode(value, ctx):\n    return [{record} for v in value]\n"
    else:
        source = f"def decode(v, ctx):\n    return {record}\n"
    exec(source, namespace)  # the text is built from field names only, never from input
    decode: Decoder = namespace["decode"]  # type: ignore[assignment]
    if not many and computed is None:
        _RECORD_DECODERS[cls] = decode
    return decode
