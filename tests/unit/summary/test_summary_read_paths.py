"""The cheaper paths of reading a node summary and analysing what it gives give what the
plain ones gave: log windows built in C are the records LogLine's own __init__ builds,
an event's payload decoded inside its one constructor call is the payload decoded after
it, enums looked up by value are what parse_enum says, the second redaction pass with its
memo hides what it hid, and the timeline's kind index and first_deaths' memo answer as
the scans they replace — on the recorded dumps."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest

from hangdoc.analyzer.loading.loader import load_dump
from hangdoc.analyzer.loading.redaction import redact_evidence
from hangdoc.analyzer.model import Evidence, LogEvent, LogLine, ProcessEvidence
from hangdoc.analyzer.payloads.base import NO_PAYLOAD, EventPayload
from hangdoc.analyzer.summaries.codec import DecodeContext, decoder
from hangdoc.analyzer.summaries.log_window import (
    TemplateFormats,
    TemplateTable,
    decode_window,
    encode_window,
)
from hangdoc.analyzer.views.deaths import _first_deaths, first_deaths
from hangdoc.analyzer.views.timeline import Timeline
from hangdoc.analyzer.vocabulary import EventKind, RankFrom, parse_enum
from hangdoc.common.redact import REDACTED

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
LOGGED = sorted(p.parent for p in FIXTURES.rglob("manifest.json") if any(p.parent.glob("*/logs/*")))
IDS = [str(p.relative_to(FIXTURES)) for p in LOGGED]


def test_windows_built_in_c_are_the_records_the_dataclass_builds() -> None:
    # GIVEN every log window of the recorded dumps (each rank's, and the job's own), as
    # digests
    windows = [
        lines
        for dump in LOGGED
        for evidence in [load_dump(dump, "D")]
        for lines in [evidence.job_log_lines, *(p.log_lines for p in evidence.processes)]
        if lines
    ]
    assert len(windows) > 10
    for lines in windows:
        table = TemplateTable()
        raw = json.loads(json.dumps(encode_window(lines, table)))
        # WHEN each is read back
        back = decode_window(raw, TemplateFormats(table.rows), lambda path: path)
        # THEN each line is a LogLine as its own __init__ builds it: equal, hashed
        # alike, every field set, and frozen
        built = [LogLine(x.text, x.source, x.line, x.benign) for x in back]
        assert back == lines == built
        assert [hash(x) for x in back] == [hash(x) for x in built]
        assert all(type(x) is LogLine for x in back)
        with pytest.raises(dataclasses.FrozenInstanceError):
            back[0].text = "changed"  # type: ignore[misc]


def test_a_window_line_gets_the_benign_default_where_the_digest_has_no_mark() -> None:
    table = TemplateTable()
    lines = [LogLine("step 1 loss 2.5", "/a", 1), LogLine("step 2 loss 2.4", "/a", 2)]
    back = decode_window(encode_window(lines, table), TemplateFormats(table.rows), str)
    assert [x.benign for x in back] == [None, None]
    assert repr(back[1]) == repr(lines[1])


def _event(raw: dict[str, object]) -> LogEvent:
    event: LogEvent = decoder(LogEvent)(raw, DecodeContext([], "node1"))
    return event


def test_an_event_without_a_payload_gets_the_shared_empty_one() -> None:
    event = _event({"kind": "nccl_init", "text": "t", "source": "s"})
    assert event.payload is NO_PAYLOAD


def test_an_empty_payload_is_read_as_the_base_class_and_a_null_one_is_damage() -> None:
    # (as the event's own field decoder read them before: {} is every default, null is
    # a summary the reader refuses)
    assert _event({"kind": "nccl_init", "text": "t", "source": "s", "payload": {}}).payload == (
        EventPayload()
    )
    with pytest.raises(TypeError):
        _event({"kind": "nccl_init", "text": "t", "source": "s", "payload": None})


@pytest.mark.parametrize("value", ["nccl_init", "no such kind", "", 3, None, ["nccl_init"]])
def test_an_enum_looked_up_by_value_is_what_parse_enum_says(value: object) -> None:
    read = decoder(EventKind)
    assert read(value, DecodeContext([], "n")) is parse_enum(EventKind, value)
    assert decoder(RankFrom)(value, DecodeContext([], "n")) is parse_enum(RankFrom, value)


def test_the_memo_of_the_redaction_pass_hides_each_value_as_before() -> None:
    # GIVEN two ranks whose events carry the same token-bearing message and a field whose
    # name says secret
    token = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    payload = EventPayload(message=f"login with {token}", exc_type="AuthError")
    processes = [
        ProcessEvidence(
            rank=rank,
            log_events=[
                LogEvent(EventKind.EXCEPTION, f"rank {rank} {token}", "s", payload=payload)
            ],
        )
        for rank in (0, 1)
    ]
    # WHEN the Evidence is redacted
    evidence = redact_evidence(Evidence(processes=processes))
    # THEN the token is gone from every event, text and payload, the same way for both
    for proc in evidence.processes:
        event = proc.log_events[0]
        assert token not in event.text
        assert event.payload.message is not None and token not in event.payload.message
    first, second = (p.log_events[0].payload for p in evidence.processes)
    assert first == second and REDACTED in (first.message or "")


@pytest.mark.parametrize("dump", LOGGED, ids=IDS)
def test_the_timeline_by_kind_gives_what_scanning_every_event_gave(dump: Path) -> None:
    timeline = Timeline(load_dump(dump, "D"))
    kinds = [*sorted({p.kind for p in timeline.events}), EventKind.UNKNOWN]
    asks = [(k,) for k in kinds] + list(itertools.combinations(kinds[:6], 2))
    asks += [tuple(kinds[:4]), (kinds[0], kinds[0]), ()]
    for ask in asks:
        wanted = {k.value for k in ask}
        assert timeline.of(*ask) == [p for p in timeline.events if p.kind in wanted]
    # a caller's list is its own
    timeline.of(kinds[0]).clear()
    assert timeline.of(kinds[0]) == [p for p in timeline.events if p.kind == kinds[0]]


@pytest.mark.parametrize("dump", LOGGED, ids=IDS)
def test_first_deaths_once_per_timeline_is_what_each_call_found(dump: Path) -> None:
    # GIVEN a recorded dump's timeline, and the deaths found by reading it afresh
    evidence = load_dump(dump, "D")
    timeline = Timeline(evidence)
    fresh = _first_deaths(timeline)
    # WHEN first_deaths is asked twice (the caller changing its list in between), and of
    # another timeline of the same evidence
    found = first_deaths(timeline)
    found.clear()
    # THEN each answer is the fresh one
    assert first_deaths(timeline) == fresh
    assert first_deaths(Timeline(evidence)) == fresh


def _with_secrets(cls: type, token: str) -> object:
    """A record of ``cls`` whose every text field holds ``token`` (others at default)."""
    import typing

    hints = typing.get_type_hints(cls)
    values: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if tp in (str, str | None):
            values[f.name] = f"said {token}"
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            return None  # (a field this test cannot fill)
    return cls(**values)


def test_every_payload_class_is_redacted_whether_or_not_it_has_other_fields() -> None:
    # GIVEN an event of every payload class, every text field of its payload holding a
    # token (classes with only text fields, and classes with tuples, records, enums too)
    from hangdoc.analyzer.payloads import PAYLOAD_OF

    token = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    events = []
    for kind, cls in PAYLOAD_OF.items():
        payload = _with_secrets(cls, token)
        if payload is not None:
            events.append(LogEvent(kind, "line", "s", payload=payload))  # type: ignore[arg-type]
    assert len(events) > 20
    # WHEN redacted THEN no payload keeps it
    evidence = redact_evidence(Evidence(processes=[ProcessEvidence(rank=0, log_events=events)]))
    assert all(token not in repr(e.payload) for e in evidence.processes[0].log_events)


def test_environments_redacted_with_the_memo_are_what_redact_env_gives() -> None:
    # GIVEN environments that share names and values, with secret names and tokens in values
    from hangdoc.analyzer.loading.redaction import _Memo
    from hangdoc.common.redact import redact_env

    token = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    envs = [
        {"RANK": str(rank), "HF_TOKEN": token, "NCCL_DEBUG": "INFO", "URL": f"x?key={token}"}
        for rank in range(4)
    ]
    envs += [load_dump(dump, "D").processes[0].env for dump in LOGGED]
    memo = _Memo()
    # WHEN redacted through one memo THEN each is redact_env's, and a dict of its own
    for env in envs + envs:
        got = memo.env(env)
        assert got == redact_env(env) and got is not env
    assert token not in repr([memo.env(e) for e in envs])
