"""Every event the log parser makes carries its kind's payload class (payloads.PAYLOAD_OF):
a summary reads a payload back by its event's kind, so an event whose payload is of
another class would come back different (summaries/codec.py)."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.payloads import payload_class
from hangdoc.analyzer.payloads.base import NO_PAYLOAD
from tests.unit.logs.helpers import FIXTURES, ROOT, parse

_LOGS = sorted(
    p
    for folder in (FIXTURES, ROOT / "fixtures" / "pastes" / "logs")
    for p in folder.rglob("*")
    if p.is_file() and p.suffix in (".txt", ".log", ".json", ".csv", "")
)


def test_every_event_of_the_fixture_logs_has_its_kinds_payload_class() -> None:
    wrong: list[str] = []
    seen = 0
    for path in _LOGS:
        parsed = parse(path)
        events = [*parsed.job_log_events, *(e for p in parsed.processes for e in p.log_events)]
        for event in events:
            seen += 1
            cls = payload_class(event.kind)
            if event.payload is not NO_PAYLOAD and type(event.payload) is not cls:
                wrong.append(f"{Path(event.source).name}:{event.line} {event.kind} {cls}")
    assert seen > 1000  # the fixtures hold events of every family
    assert not wrong
