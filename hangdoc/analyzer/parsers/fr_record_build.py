"""Build CollectiveRecords at the rate a 16,384-rank flight recorder analysis needs.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (a
frozen class refuses plain assignment): 2.6 µs for the 17 fields of a record. The
flight recorder path creates millions (every tensor-parallel group has its own group
name, so one history entry in eight is a record nobody created before), so that
alone was seconds. Here each field is stored through its slot descriptor directly,
which the frozen check never sees: 0.8 µs, and the record is the same object the
dataclass would have built (equal, same hash, still frozen to everyone else).

``FIELD_NAMES`` is the order of the tuples these functions take; a test checks that
it is the dataclass's field order, so a field added to the model and not here fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from operator import attrgetter
from typing import Any

from hangdoc.analyzer.model import CollectiveRecord, Frame, OpState

FIELD_NAMES = (
    "group", "seq_id", "op", "state", "input_sizes", "output_sizes", "dtypes", "is_p2p",
    "peer", "record_id", "time_created_ns", "source", "group_desc", "p2p_seq_id",
    "output_dtypes", "backend", "frames",
)  # fmt: skip
if tuple(f.name for f in fields(CollectiveRecord)) != FIELD_NAMES:  # pragma: no cover
    raise ImportError(
        "analyzer/parsers/fr_record_build.py lists other fields than CollectiveRecord has"
    )

_ALL_BUT_GROUP = attrgetter(*FIELD_NAMES[1:])
_slots: Mapping[str, Any] = CollectiveRecord.__dict__
_new = object.__new__
_group = _slots["group"].__set__
_seq_id = _slots["seq_id"].__set__
_op = _slots["op"].__set__
_state = _slots["state"].__set__
_input_sizes = _slots["input_sizes"].__set__
_output_sizes = _slots["output_sizes"].__set__
_dtypes = _slots["dtypes"].__set__
_is_p2p = _slots["is_p2p"].__set__
_peer = _slots["peer"].__set__
_record_id = _slots["record_id"].__set__
_time_created_ns = _slots["time_created_ns"].__set__
_source = _slots["source"].__set__
_group_desc = _slots["group_desc"].__set__
_p2p_seq_id = _slots["p2p_seq_id"].__set__
_output_dtypes = _slots["output_dtypes"].__set__
_backend = _slots["backend"].__set__
_frames = _slots["frames"].__set__


def record_from_fields(
    group: str,
    seq_id: int,
    op: str,
    state: OpState,
    input_sizes: tuple[tuple[int, ...], ...],
    output_sizes: tuple[tuple[int, ...], ...],
    dtypes: tuple[str, ...],
    is_p2p: bool,
    peer: int | None,
    record_id: int | None,
    time_created_ns: int | None,
    source: str,
    group_desc: str | None,
    p2p_seq_id: int | None,
    output_dtypes: tuple[str, ...],
    backend: str | None,
    frames: tuple[Frame, ...],
) -> CollectiveRecord:
    """``CollectiveRecord(*fields)``, every field given, without the frozen-init cost."""
    record: CollectiveRecord = _new(CollectiveRecord)
    _group(record, group)
    _seq_id(record, seq_id)
    _op(record, op)
    _state(record, state)
    _input_sizes(record, input_sizes)
    _output_sizes(record, output_sizes)
    _dtypes(record, dtypes)
    _is_p2p(record, is_p2p)
    _peer(record, peer)
    _record_id(record, record_id)
    _time_created_ns(record, time_created_ns)
    _source(record, source)
    _group_desc(record, group_desc)
    _p2p_seq_id(record, p2p_seq_id)
    _output_dtypes(record, output_dtypes)
    _backend(record, backend)
    _frames(record, frames)
    return record


def with_group(template: CollectiveRecord, group: str) -> CollectiveRecord:
    """A copy of ``template`` in another group (a sibling tensor-parallel group's op)."""
    return record_from_fields(group, *_ALL_BUT_GROUP(template))
