"""Log events in node summaries: every payload class goes through the summaries codec and
comes back equal, and a summary written by a newer (or a hostile) hangdoc still loads:
kinds and enum values this version does not know become UNKNOWN members, and a payload
field of the wrong type makes the summary untrusted (the raw files are read instead),
never a traceback."""

from __future__ import annotations

import dataclasses
import enum
import json
import shutil
import types
import typing
from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Evidence, LogEvent
from hangdoc.analyzer.payloads import PAYLOAD_OF
from hangdoc.analyzer.payloads.base import EventPayload, Sign
from hangdoc.analyzer.payloads.launch import FatalReport, FatalSignal, SignalName
from hangdoc.analyzer.summaries.codec import DecodeContext, FrameTable, decoder, encoder
from hangdoc.analyzer.summarize.write import write_node_summary
from hangdoc.analyzer.vocabulary import Clock, EventKind, RankFrom
from hangdoc.collectors.jobformat import SUMMARY_NAME

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
# One kind per payload class (the first that PAYLOAD_OF maps to it); ACTOR_DIED carries
# the base class.
KIND_OF: dict[type[EventPayload], EventKind] = {EventPayload: EventKind.ACTOR_DIED}
for _kind, _cls in PAYLOAD_OF.items():
    KIND_OF.setdefault(_cls, _kind)


def _value(tp: object, name: str) -> object:
    """A value of type ``tp`` that is not a field's default: every field is written."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return _value(next(a for a in typing.get_args(tp) if a is not type(None)), name)
    if tp is bool:
        return True
    if tp is int:
        return 7
    if tp is float:
        return 2.5
    if tp is str:
        return f"{name} words"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return next(m for m in tp if m.name != "UNKNOWN")
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _record(tp)
    if typing.get_origin(tp) is tuple:
        return (_value(typing.get_args(tp)[0], name),)
    raise AssertionError(f"no sample value for {tp!r} ({name})")


def _record(cls: type) -> object:
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: _value(hints[f.name], f.name) for f in dataclasses.fields(cls)})


def _round_trip(event: LogEvent) -> LogEvent:
    raw = json.loads(json.dumps(encoder(LogEvent)(event, FrameTable())))
    decoded: LogEvent = decoder(LogEvent)(raw, DecodeContext([], "node1"))
    return decoded


@pytest.mark.parametrize("cls", sorted(KIND_OF, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_every_payload_class_round_trips(cls: type[EventPayload]) -> None:
    # GIVEN an event of the class's kind with every field of its payload written
    payload = _record(cls)
    assert isinstance(payload, cls)
    event = LogEvent(
        KIND_OF[cls], "the line", "rank0.log", 3, 1.5, payload,
        host="node1", pid=7, tid=8, cuda_dev=1, partial_header=True, local_rank=2,
        rank_from=RankFrom.PREFIX, clock=Clock.EPOCH, repeats=2, folded_lines=3,
    )  # fmt: skip
    # WHEN it is written to a summary's JSON and read back
    # THEN it is the same event, its payload of the same class
    back = _round_trip(event)
    assert back == event and type(back.payload) is cls


def _decode(raw: dict[str, object]) -> LogEvent:
    event: LogEvent = decoder(LogEvent)(raw, DecodeContext([], "node1"))
    return event


def test_kinds_and_values_this_version_does_not_know_load_as_unknown() -> None:
    # GIVEN events as a newer hangdoc writes them: a kind, a sign, a signal, a reporter
    # and an attribution this version has no member for
    newer = _decode(
        {
            "kind": "quantum_decoherence",
            "text": "x",
            "source": "rank0.log",
            "rank_from": "telepathy",
            "payload": {"message": "m", "signs": ["cuda_oom", "cosmic_ray"]},
        }
    )
    fatal = _decode(
        {
            "kind": "fatal_signal",
            "text": "y",
            "source": "rank0.log",
            "payload": {"signal": "SIGFUTURE", "reported_by": "someone new"},
        }
    )
    # THEN they are UNKNOWN members, and the rest is read as written
    assert newer.kind is EventKind.UNKNOWN and newer.rank_from is RankFrom.UNKNOWN
    assert newer.payload == EventPayload(message="m", signs=(Sign.CUDA_OOM, Sign.UNKNOWN))
    assert fatal.payload == FatalSignal(signal=SignalName.UNKNOWN, reported_by=FatalReport.UNKNOWN)


def test_a_payload_field_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(TypeError):
        _decode(
            {"kind": "worker_failed", "text": "z", "source": "s", "payload": {"exit_code": "9"}}
        )


def _every_enum(tp: object, seen: set[object]) -> set[type[enum.Enum]]:
    """The enums reachable from a type through its fields and containers."""
    if tp in seen:
        return set()
    seen.add(tp)
    found: set[type[enum.Enum]] = set()
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {tp}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        for hint in typing.get_type_hints(tp).values():
            found |= _every_enum(hint, seen)
        return found
    for arg in typing.get_args(tp):
        found |= _every_enum(arg, seen)
    return found


def test_every_enum_a_summary_carries_has_an_unknown_member() -> None:
    # A value a newer hangdoc writes must load as UNKNOWN (summaries/codec.py), not fail.
    roots: list[object] = [Evidence, *PAYLOAD_OF.values()]
    enums = set().union(*(_every_enum(root, set()) for root in roots))
    lacking = sorted(e.__name__ for e in enums if "UNKNOWN" not in e.__members__)
    assert not lacking


def test_a_hostile_summary_event_never_stops_the_analysis(tmp_path: Path) -> None:
    # GIVEN a node summary whose job events hold an unknown kind, and one whose payload
    # field has the wrong type
    copy = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / "dumps" / "checkpoint", copy)
    write_node_summary(copy)
    summary = json.loads((copy / SUMMARY_NAME).read_text())
    unknown = {"kind": "quantum_decoherence", "text": "x", "source": "@/rank0.log"}
    summary["job_log_events"] = [unknown]
    (copy / SUMMARY_NAME).write_text(json.dumps(summary))
    # WHEN it is loaded, THEN the unknown kind is read as UNKNOWN
    events = load_paths([copy]).job_log_events
    assert [e.kind for e in events] == [EventKind.UNKNOWN]
    # AND a wrong type makes the summary untrusted: the raw files are read instead
    summary["job_log_events"] = [
        {"kind": "worker_failed", "text": "z", "source": "s", "payload": {"exit_code": "9"}}
    ]
    (copy / SUMMARY_NAME).write_text(json.dumps(summary))
    evidence = load_paths([copy])
    assert any("raw files are read instead" in n for n in evidence.notes)
