"""Every log rule is registered, documented, in its id range, and in docs/logs.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hangdoc.analyzer.model import DOC_SECTIONS
from hangdoc.rules import _MODULES
from hangdoc.rules.base import Need, Rule, validate_rule
from tests.unit.logs.helpers import LOG_RULE_MODULES, RECORDED, ROOT, log_rules

_ALLOWED = [(30, 59), (200, 299), (300, 349)]


@pytest.mark.parametrize("rule", log_rules(), ids=lambda r: r.id)
def test_rule_contract(rule: type[Rule]) -> None:
    validate_rule(rule)
    number = int(rule.id[2:])
    assert any(lo <= number <= hi for lo, hi in _ALLOWED), rule.id
    assert rule.requires == frozenset({Need.LOGS})
    docs = rule.docs()
    for section in DOC_SECTIONS:
        assert len(docs[section]) > 40, f"{rule.id}: '{section}' is too thin"
    assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", rule.name)


def test_modules_are_registered_and_ids_unique() -> None:
    for name in LOG_RULE_MODULES:
        assert name in _MODULES
    ids = [r.id for r in log_rules()]
    assert len(ids) == len(set(ids))


def test_docs_page_lists_every_rule() -> None:
    page = (ROOT / "docs" / "logs.md").read_text()
    for rule in log_rules():
        assert f"| {rule.id} | {rule.name} |" in page


@pytest.mark.parametrize("path", sorted(RECORDED.glob("*.log")), ids=lambda p: p.name)
def test_recorded_logs_say_how_they_were_made(path: Path) -> None:
    head = path.read_text().splitlines()[:4]
    assert head[0].startswith("# hangdoc fixture: recorded by fixtures/logs/record.py")
    assert "torch 2.13" in head[1] and head[2].startswith("# command:")


def test_public_fixtures_name_their_source() -> None:
    for path in sorted((ROOT / "fixtures" / "logs" / "public").iterdir()):
        if path.suffix in (".csv", ".json", ".md"):
            continue  # formats without comments: sources in public/README.md
        head = "\n".join(path.read_text().splitlines()[:4])
        assert "source" in head and ("https://" in head or "FORMATS.md" in head), path.name
