"""Reading torch's own flight recorder pickles without building every entry.

Unpickling a 2,000-entry dump builds ~100,000 objects (a dict of 21 keys per entry,
its lists, its big ints), and the reducer then touches them all a second time, only
to find that almost every entry is the same op, at the same sequence number, as on
the other ranks. That was two thirds of a 16,384-rank analysis.

torch's C++ pickler writes every history entry with the same opcodes: each key a memo
reference, each string a memo reference once it was seen, ints and bools inline. One
regular expression per key order (compiled once per file layout, in C) matches such an
entry, and its groups are the few fields the matching needs, as bytes. An entry the
expression does not match exactly (the first entries of a file, which introduce its
strings and frames; anything unusual) goes to the restricted unpickler with the memo
so far, as does everything around the entries (header, tail). Every byte of the file
is read by one of the two, and each piece starts where the previous one ended on an
opcode boundary (checked by a walk over the opcodes), so the result is the one the
unpickler would give. Anything the scanner is not sure of raises :class:`ScanRefused`
and the caller reads the file whole, as before.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from typing import Any

from hangdoc.common.safe_unpickle import load_with_memo

__all__ = ["Run", "ScanRefused", "ScannedDump", "scan"]


class ScanRefused(Exception):
    """The file is not in the shape the scanner reads; read it whole instead."""


# Opcodes a plain-data pickle of protocol 2-4 uses: the length of their argument.
_BY_LENGTH4, _BY_LENGTH1, _UNKNOWN = -1, -2, -3
_ARGS = {
    0x80: 1,  # PROTO
    0x95: 8,  # FRAME
    0x7D: 0, 0x5D: 0, 0x29: 0,  # EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE
    0x28: 0, 0x75: 0, 0x65: 0, 0x74: 0, 0x6C: 0, 0x64: 0,  # MARK SETITEMS APPENDS TUPLE LIST DICT
    0x73: 0, 0x61: 0, 0x85: 0, 0x86: 0, 0x87: 0,  # SETITEM APPEND TUPLE1-3
    0x4E: 0, 0x88: 0, 0x89: 0,  # NONE NEWTRUE NEWFALSE
    0x4B: 1, 0x4D: 2, 0x4A: 4, 0x47: 8,  # BININT1 BININT2 BININT BINFLOAT
    0x71: 1, 0x72: 4, 0x68: 1, 0x6A: 4, 0x94: 0,  # BINPUT LONG_BINPUT BINGET LONG_BINGET MEMOIZE
    0x58: _BY_LENGTH4,  # BINUNICODE: 4-byte length, then UTF-8
    0x8A: _BY_LENGTH1, 0x8C: _BY_LENGTH1,  # LONG1, SHORT_BINUNICODE
}  # fmt: skip
_STEP = [_ARGS.get(op, _UNKNOWN) for op in range(256)]  # STOP (0x2E) too: never inside
_MARK_CHANGE = [0] * 256
_MARK_CHANGE[0x28] = 1
for _closer in (0x75, 0x65, 0x74, 0x6C, 0x64):  # pop back to the MARK
    _MARK_CHANGE[_closer] = -1
_BINUNICODE = 0x58
_STOP = 0x2E

_LONG1 = rb"\x8a(?:\x01.|\x02..|\x03...|\x04....|\x05.{5}|\x06.{6}|\x07.{7}|\x08.{8})"
_INT = rb"(?:K.|M..|J....|" + _LONG1 + rb")"
_REF = rb"(?:h.|j....)"
_VALUES: dict[str, bytes] = {
    "int": _INT,
    "opt_int": rb"(?:N|" + _INT + rb")",
    "ref": _REF,
    "pair": _REF + _REF + rb"\x86",
    "sizes": rb"\]\((?:\]\(" + _INT + rb"*+e)*+e",
    "refs": rb"\]\(" + _REF + rb"*+e",
    "bool": rb"[\x88\x89]",
    # an unknown key: a value the matching never reads, so never a memo reference (a
    # reference to nothing would go unnoticed; the whole read would refuse the file)
    "scalar": rb"(?:N|\x88|\x89|G.{8}|" + _INT + rb")",
}
_KINDS = {
    "record_id": "int", "pg_id": "int", "collective_seq_id": "int", "p2p_seq_id": "int",
    "op_id": "int", "seq_id": "int", "timeout_ms": "int", "time_created_ns": "opt_int",
    "time_discovered_started_ns": "opt_int", "time_discovered_completed_ns": "opt_int",
    "process_group": "pair", "thread_name": "ref", "thread_id": "ref", "profiling_name": "ref",
    "state": "ref", "input_sizes": "sizes", "output_sizes": "sizes", "input_dtypes": "refs",
    "output_dtypes": "refs", "retired": "bool", "is_p2p": "bool",
}  # fmt: skip
# Fields the matching needs: every entry the scanner reads has them all.
KEY_FIELDS = (
    "process_group", "collective_seq_id", "p2p_seq_id", "profiling_name", "record_id", "state",
    "retired", "is_p2p", "input_sizes", "input_dtypes", "output_sizes", "output_dtypes",
)  # fmt: skip
# How each key is captured. "own": alone, its pickled bytes part of the key (ints torch
# writes one way); "shape": in a span of neighbouring keys whose values repeat (memo
# references), replaced by one id per distinct span; "time": alone, for the frontier
# only; "any": in a span when one is open, else skipped (same on every entry of a file);
# anything else is skipped (changes per entry and the matching does not need it).
_CAPTURE = {
    "record_id": "own", "collective_seq_id": "own", "p2p_seq_id": "own",
    "time_created_ns": "time",
    "process_group": "shape", "profiling_name": "shape", "input_sizes": "shape",
    "input_dtypes": "shape", "output_sizes": "shape", "output_dtypes": "shape",
    "state": "shape", "retired": "shape", "is_p2p": "shape",
    "pg_id": "any", "thread_name": "any", "thread_id": "any", "timeout_ms": "any",
}  # fmt: skip
_ENTRIES_KEY = b"X\x07\x00\x00\x00entries"


def _memo_dict(memo: object) -> dict[int, object]:
    return memo.copy()  # type: ignore[attr-defined,no-any-return]


def _ref_bytes(memo_id: int) -> bytes:
    return b"h" + bytes((memo_id,)) if memo_id < 256 else b"j" + memo_id.to_bytes(4, "little")


@dataclass(frozen=True, slots=True)
class Group:
    """One capture group of a layout's entry expression."""

    kind: str  # own | shape | time | frames
    key: str  # the entry's key (own, time, frames); "" for a span of several
    ref: bytes  # the key's memo reference (own, time, frames): to rebuild the entry


@dataclass(slots=True)
class Layout:
    """One key order with its memo references: the expressions that read such entries."""

    entry: re.Pattern[bytes]  # from after the frames list (or the dict's start) to its end
    gap: re.Pattern[bytes] | None  # an entry's start up to there, when frames come first
    groups: tuple[Group, ...]
    kind_id: bytes  # the first bytes of every key: which grouping made it
    frames_prefix: bytes  # a frames-first entry's bytes before its frames
    known_gaps: set[bytes] = field(default_factory=lambda: {b""})


_LAYOUTS: dict[tuple[tuple[str, bytes], ...], Layout] = {}
# Ids are never reused while the process lives: a byte key made with one stays unique.
_SHAPE_IDS: dict[tuple[object, ...], bytes] = {}
_KIND_IDS: dict[tuple[str, ...], bytes] = {}


def _new_id(table: dict[Any, bytes], key: object, width: int) -> bytes:
    found = table.get(key)
    if found is None:
        found = table[key] = len(table).to_bytes(width, "little")
    return found


def _layout(first: dict[Any, Any], memo_dict: dict[int, object]) -> Layout:
    ids: dict[str, int] = {}
    for memo_id, value in memo_dict.items():
        if value.__class__ is str:
            ids.setdefault(value, memo_id)
    keys = list(first)
    if not all(key.__class__ is str and key in ids for key in keys):
        raise ScanRefused("entry keys are not memoized strings")
    refs = tuple((key, _ref_bytes(ids[key])) for key in keys)
    layout = _LAYOUTS.get(refs)
    if layout is None:
        if len(_LAYOUTS) > 64:
            _LAYOUTS.clear()
        layout = _LAYOUTS[refs] = _build_layout(refs)
    return layout


def _build_layout(refs: tuple[tuple[str, bytes], ...]) -> Layout:
    if not set(KEY_FIELDS) <= {key for key, _ in refs}:
        raise ScanRefused("entries lack fields the matching needs (an older version)")
    frames_first = refs[0][0] == "frames"
    parts = [b"e" if frames_first else rb"\}\("]
    groups: list[Group] = []
    open_span = False
    for key, ref in refs[1:] if frames_first else refs:
        kind = "refs" if key == "frames" else _KINDS.get(key, "scalar")
        piece = re.escape(ref) + _VALUES[kind]
        capture = "frames" if key == "frames" else _CAPTURE.get(key, "skip")
        if capture == "any":
            capture = "shape" if open_span else "skip"
        if capture == "shape" and open_span:
            parts[-1] = parts[-1][:-1] + piece + b")"  # extend the open span
        elif capture == "shape":
            parts.append(b"(" + piece + b")")
            groups.append(Group("shape", "", b""))
        elif capture in ("own", "time", "frames"):
            parts.append(re.escape(ref) + b"(" + _VALUES[kind] + b")")
            groups.append(Group(capture, key, ref))
        else:
            parts.append(piece)
        open_span = capture == "shape"
    parts.append(b"u")
    gap = None
    if frames_first:
        frames_ref = re.escape(refs[0][1])
        gap = re.compile(rb"\}\(" + frames_ref + rb"\]\(" + _REF + rb"*+", re.DOTALL)
    # what a byte key is made of, in order: never the memo references (they differ
    # between files whose keys are the same), or equal entries would not share records
    kinds = tuple(g.key or g.kind for g in groups if g.kind in ("own", "shape"))
    return Layout(
        entry=re.compile(b"".join(parts), re.DOTALL),
        gap=gap,
        groups=tuple(groups),
        frames_prefix=b"}(" + refs[0][1] + b"](" if frames_first else b"",
        kind_id=_new_id(_KIND_IDS, (frames_first, kinds), 2),
    )


def _op_end(data: bytes, pos: int) -> int:
    """Where the opcode at ``pos`` ends (raises ScanRefused on one it does not know)."""
    op = data[pos]
    size = _STEP[op]
    if size >= 0:
        return pos + 1 + size
    if size == _BY_LENGTH4:
        return pos + 5 + int.from_bytes(data[pos + 1 : pos + 5], "little")
    if size == _BY_LENGTH1:
        return pos + 2 + data[pos + 1]
    raise ScanRefused(f"opcode {op:#04x} at byte {pos}")


def _walk(data: bytes, pos: int, end: int, depth: int = 0, until_depth: int = -1) -> int:
    """Step over whole opcodes from ``pos``: to ``end`` exactly, or until a closing
    opcode brings ``depth`` (open MARKs) down to ``until_depth``; where it stopped.

    The loop of :func:`_op_end`, inlined: it runs over every opcode of the entries
    the expression does not read (a few hundred per file).
    """
    step, marks = _STEP, _MARK_CHANGE
    while pos < end:
        op = data[pos]
        size = step[op]
        if size >= 0:
            pos += 1 + size
        elif size == _BY_LENGTH4:
            pos += 5 + int.from_bytes(data[pos + 1 : pos + 5], "little")
        elif size == _BY_LENGTH1:
            pos += 2 + data[pos + 1]
        else:
            raise ScanRefused(f"opcode {op:#04x} at byte {pos}")
        change = marks[op]
        if change:
            depth += change
            if depth == until_depth and change < 0:
                return pos
    if pos != end:
        raise ScanRefused(f"an opcode straddles byte {end}")
    return pos


def _walk_past_stop(data: bytes) -> int:
    """Where the STOP opcode that ends ``data`` (a dump's tail) is, plus one."""
    stop = data.rfind(b".")
    if stop < 0:
        raise ScanRefused("no STOP opcode")
    _walk(data, 0, stop)  # the STOP is an opcode, not a byte inside one
    return stop + 1


def _locate(data: bytes) -> int:
    """Where the first entry of the root dict's ``entries`` list ends."""
    if data[:4] != b"\x80\x02}(":
        raise ScanRefused("not torch's pickler's root dict")
    pos, depth, last, strings = 4, 1, None, {}
    while True:
        op = data[pos]
        if depth == 1 and op == 0x5D and data[pos + 1] == 0x28 and last == "entries":
            break
        end = _op_end(data, pos)
        if op == _BINUNICODE:
            last = data[pos + 5 : end].decode("utf-8", "surrogatepass")
        elif op in (0x71, 0x72):  # BINPUT: remember the strings the header memoizes
            strings[int.from_bytes(data[pos + 1 : end], "little")] = last
        elif op in (0x68, 0x6A):
            last = strings.get(int.from_bytes(data[pos + 1 : end], "little"))
        else:
            last = None
            depth += _MARK_CHANGE[op]
            if depth < 1 or op == _STOP:
                raise ScanRefused("no entries list")
        pos = end
    start = pos + 2
    if data[start : start + 2] != b"}(":
        raise ScanRefused("entries do not start with a dict")
    end = _walk(data, start, len(data), depth=2, until_depth=2)
    if end == len(data):
        raise ScanRefused("the first entry does not end")
    return end


def _memo_values(memo: dict[int, object], refs: bytes, start: int, stop: int) -> list[object]:
    """The objects a run of memo references (BINGET, LONG_BINGET) names."""
    out: list[object] = []
    pos = start
    while pos < stop:
        if refs[pos] == 0x68:
            key, pos = refs[pos + 1], pos + 2
        else:
            key, pos = int.from_bytes(refs[pos + 1 : pos + 5], "little"), pos + 5
        if key not in memo:
            raise ScanRefused("a memo reference to nothing")
        out.append(memo[key])
    return out


def _freeze(value: object) -> object:
    if value.__class__ is list:
        return tuple(map(_freeze, value))
    return value


@dataclass(slots=True)
class Run:
    """Consecutive entries the layout's expression read, and the memo they refer to."""

    layout: Layout
    memo: object  # the unpickler's memo at the run (see load_with_memo)
    memo_dict: dict[int, object]  # the same, as a dict (memo id -> object)
    columns: list[list[bytes]]  # per capture group, per entry
    heads: list[bytes]  # per entry, its bytes before the match (its frames, frames first)
    own_frames: dict[int, list[Any]] = field(default_factory=dict)  # read by the unpickler
    _shapes: dict[bytes, Shape] = field(default_factory=dict)  # per distinct span

    def byte_keys(self) -> list[bytes]:
        """Per entry, one bytes object that is equal across files for equal entries.

        Ints stay as pickled (torch writes each int one way); each span of memo
        references becomes the id of what it decodes to.
        """
        groups, columns = self.layout.groups, self.columns
        spans = [c for g, c in zip(groups, columns, strict=True) if g.kind == "shape"]
        distinct = list(set().union(*spans))
        self._shapes = dict(zip(distinct, map(_shape_of, self._load_spans(distinct)), strict=True))
        return self._joined(None, {raw: shape.full for raw, shape in self._shapes.items()})

    def siblings(self, indices: Sequence[int]) -> list[tuple[bytes, str] | None]:
        """Per entry at ``indices``: its key with its group's name left out, and that name.

        Tensor-parallel groups differ only in name: an op of one is the same op of a
        sibling group, renamed (``fr_reduce``). None for an entry whose process group
        is not a (name, description) pair. Call after :meth:`byte_keys`.
        """
        shapes = self._shapes
        keys = self._joined(indices, {raw: shape.sibling for raw, shape in shapes.items()})
        names: list[str | None] = [None] * len(indices)
        for group, column in zip(self.layout.groups, self.columns, strict=True):
            if group.kind == "shape":
                for at, index in enumerate(indices):
                    name = shapes[column[index]].group_name
                    if name is not None:
                        names[at] = name
        pairs = zip(keys, names, strict=True)
        return [(key, name) if name is not None else None for key, name in pairs]

    def _joined(self, indices: Sequence[int] | None, ids: dict[bytes, bytes]) -> list[bytes]:
        """Keys of the entries at ``indices`` (None: all), spans replaced through ``ids``."""
        parts: list[Any] = [repeat(self.layout.kind_id)]
        for group, column in zip(self.layout.groups, self.columns, strict=True):
            picked = column if indices is None else list(map(column.__getitem__, indices))
            if group.kind == "own":
                parts.append(picked)
            elif group.kind == "shape":
                parts.append(map(ids.__getitem__, picked))
        return list(map(b"".join, zip(*parts, strict=False)))  # kind_id repeats forever

    def _load_spans(self, spans: Sequence[bytes]) -> list[dict[str, Any]]:
        body = b"".join(b"}(" + span + b"u" for span in spans)
        value, _ = load_with_memo(b"\x80\x02](" + body + b"e.", self.memo)
        if not isinstance(value, list) or len(value) != len(spans):
            raise ScanRefused("spans did not unpickle as expected")
        return value

    def entries(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """The entries at ``indices`` without frames and times (in one load)."""
        pieces: list[Iterable[bytes]] = []
        for group, column in zip(self.layout.groups, self.columns, strict=True):
            picked = map(column.__getitem__, indices)
            if group.kind == "own":
                pieces.append(map(group.ref.__add__, picked))
            elif group.kind == "shape":
                pieces.append(picked)
        return self._load_spans(list(map(b"".join, zip(*pieces, strict=True))))

    def entry(self, index: int) -> dict[str, Any]:
        """What a frontier record keeps of its entry: frames and creation time."""
        out: dict[str, Any] = {}
        frames = self.own_frames.get(index)
        if frames is None and self.layout.gap is not None:
            head = self.heads[index]
            frames = _memo_values(self.memo_dict, head, len(self.layout.frames_prefix), len(head))
        if frames is not None:
            out["frames"] = frames
        for group, column in zip(self.layout.groups, self.columns, strict=True):
            if group.kind == "time":
                out["time_created_ns"], _ = load_with_memo(b"\x80\x02" + column[index] + b".")
            elif group.kind == "frames":
                out["frames"] = _memo_values(
                    self.memo_dict, column[index], 2, len(column[index]) - 1
                )
        return out


@dataclass(frozen=True, slots=True)
class Shape:
    """What a span of an entry's repeating fields means, as ids valid in this process."""

    full: bytes
    sibling: bytes  # the same without the group's name (when it has a process_group)
    group_name: str | None


def _shape_of(span: dict[str, Any]) -> Shape:
    fields = tuple((k, _freeze(span[k])) for k in KEY_FIELDS if k in span)
    full = _new_id(_SHAPE_IDS, fields, 4)
    group = span.get("process_group")
    if group.__class__ is not tuple or len(group) != 2 or group[0].__class__ is not str:
        return Shape(full, full, None)
    unnamed = tuple((k, group[1]) if k == "process_group" else (k, v) for k, v in fields)
    return Shape(full, _new_id(_SHAPE_IDS, ("unnamed", *unnamed), 4), group[0])


@dataclass(slots=True)
class ScannedDump:
    """A dump read by :func:`scan`: its root without entries, and the entries in pieces."""

    root: dict[Any, Any]
    pieces: list[Run | list[Any]]  # a Run, or entries the unpickler read (any shape)


def scan(data: bytes) -> ScannedDump:
    """Read a dump torch's C++ pickler wrote (raises ScanRefused for any other shape).

    The caller holds the memory guard (``safe_unpickle.memory_guard``) around it.
    """
    try:
        return _scan(data)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise ScanRefused(f"{type(exc).__name__}: {exc}") from None


def _scan(data: bytes) -> ScannedDump:
    first_end = _locate(data)
    head, memo = load_with_memo(data[:first_end] + b"eu.")
    if not isinstance(head, dict) or not isinstance(first := head.get("entries"), list):
        raise ScanRefused("root is not a dict with entries")
    if len(first) != 1 or not isinstance(first[0], dict):
        raise ScanRefused("first entry is not a dict")
    memo_dict = _memo_dict(memo)
    layout = _layout(first[0], memo_dict)
    # split: [bytes before match 1, its groups..., bytes before match 2, ..., the rest]
    parts = layout.entry.split(data[first_end:])
    width = len(layout.groups) + 1
    count = len(parts) // width
    if not count:
        raise ScanRefused("no entry in the layout of the first")
    heads = parts[0::width]
    columns = [parts[i::width] for i in range(1, width)]
    pieces: list[Run | list[Any]] = [first]
    run_from = 0
    own_frames: dict[int, list[Any]] = {}
    known = layout.known_gaps
    for index in compress(range(count), map(operator.not_, map(known.__contains__, heads))):
        gap = heads[index]
        if layout.gap.fullmatch(gap) if layout.gap is not None else not gap:
            if len(known) < 4096:
                known.add(gap)
            continue
        _walk(gap, 0, len(gap))
        if index > run_from:
            pieces.append(
                _run(layout, memo, memo_dict, columns, heads, run_from, index, own_frames)
            )
        whole, memo = load_with_memo(b"\x80\x02](" + gap + (b"eue." if layout.gap else b"e."), memo)
        memo_dict = _memo_dict(memo)
        if not isinstance(whole, list):
            raise ScanRefused("entries between matches did not unpickle as a list")
        own_frames = {}
        if layout.gap is not None:
            last = whole.pop() if whole else None
            if not (isinstance(last, dict) and list(last) == ["frames"]):
                raise ScanRefused("an entry's start did not unpickle as expected")
            own_frames[0] = last["frames"]
        if whole:
            pieces.append(whole)
        run_from = index
    pieces.append(_run(layout, memo, memo_dict, columns, heads, run_from, count, own_frames))
    tail = heads[count]
    tail_end = _walk_past_stop(tail)
    rest, _ = load_with_memo(b"\x80\x02}(" + _ENTRIES_KEY + b"](" + tail[:tail_end], memo)
    if not isinstance(rest, dict) or not isinstance(trailing := rest.pop("entries", None), list):
        raise ScanRefused("the end of the dump did not unpickle as expected")
    if trailing:
        pieces.append(trailing)
    root = {key: value for key, value in head.items() if key != "entries"}
    root.update(rest)
    return ScannedDump(root, pieces)


def _run(
    layout: Layout,
    memo: object,
    memo_dict: dict[int, object],
    columns: list[list[bytes]],
    heads: list[bytes],
    start: int,
    stop: int,
    own_frames: dict[int, list[Any]],
) -> Run:
    heads = heads[start:stop]
    if layout.gap is not None:  # a frames reference to nothing: the whole read refuses it
        skip = len(layout.frames_prefix)
        for head in set(heads[1:] if own_frames else heads):  # own_frames: the first only
            _memo_values(memo_dict, head, skip, len(head))
    return Run(layout, memo, memo_dict, [c[start:stop] for c in columns], heads, own_frames)
