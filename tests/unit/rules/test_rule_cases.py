"""Every rule's cases, as data: ``fixtures/rule_cases/HDnnn.toml`` (format in its README).

One parametrized test loads each named case, runs ``load_paths(inputs)`` + ``analyze()``
as ``hangdoc analyze`` does, and checks that the rule fires or stays silent as the case
says (and, when given, the finding's category, culprit ranks, severity and rank). A
coverage test holds every registered rule to a case file with a positive and a negative
case; the registry's own rules (a ``since`` per row, ids never reused) are checked here too.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Finding
from hangdoc.rules import _MODULES, RETIRED, all_rules, check_ids, check_new_id, rule_rows
from hangdoc.rules.base import Rule

ROOT = Path(__file__).resolve().parents[3]
CASE_DIR = ROOT / "fixtures" / "rule_cases"

_KEYS = frozenset(
    {"source", "inputs", "text", "format", "fires", "category", "culprit_ranks", "severity"}
    | {"primary"}
)
_FIRING_ONLY = ("category", "culprit_ranks", "severity", "primary")


@dataclass(frozen=True, slots=True)
class RuleCase:
    """One named case of one rule's case file."""

    rule: str
    name: str
    source: str
    inputs: tuple[str, ...]
    text: tuple[tuple[str, str], ...]  # (file name, content) written to a temp folder
    fires: bool
    category: str | None = None
    culprit_ranks: tuple[int, ...] | None = None
    severity: str | None = None
    primary: bool = False

    @property
    def id(self) -> str:
        return f"{self.rule}:{self.name}"


def _str_list(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings")
    return tuple(value)


def _case(rule: str, name: str, raw: object) -> RuleCase:
    where = f"{rule}.toml [cases.{name}]"
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: not a table")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}")
    source, fires = raw.get("source"), raw.get("fires")
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"{where}: says no 'source'")
    if not isinstance(fires, bool):
        raise ValueError(f"{where}: 'fires' must be true or false")
    inputs = _str_list(raw.get("inputs", []), f"{where}: 'inputs'")
    for item in inputs:
        pure = PurePosixPath(item)
        if pure.is_absolute() or ".." in pure.parts or not (ROOT / pure).exists():
            raise ValueError(f"{where}: input {item!r} is not a path inside the repository")
    text_raw = raw.get("text", {})
    if not isinstance(text_raw, dict) or not all(isinstance(v, str) for v in text_raw.values()):
        raise ValueError(f"{where}: 'text' must be a table of file name = content")
    for file_name in text_raw:
        if PurePosixPath(file_name).name != file_name or file_name in ("", ".", ".."):
            raise ValueError(f"{where}: text file name {file_name!r} is not a plain name")
    if text_raw and not str(raw.get("format", "")).strip():
        raise ValueError(f"{where}: inline 'text' must say its documented 'format'")
    if not inputs and not text_raw:
        raise ValueError(f"{where}: no 'inputs' and no 'text'")
    if not fires and any(key in raw for key in _FIRING_ONLY):
        raise ValueError(f"{where}: {list(_FIRING_ONLY)} are for firing cases only")
    category, severity = raw.get("category"), raw.get("severity")
    if fires and not isinstance(category, str):
        raise ValueError(f"{where}: a firing case names its 'category'")
    culprits = raw.get("culprit_ranks")
    if culprits is not None and (
        not isinstance(culprits, list) or not all(isinstance(r, int) for r in culprits)
    ):
        raise ValueError(f"{where}: 'culprit_ranks' must be a list of ranks")
    primary = raw.get("primary", False)
    if not isinstance(primary, bool) or (severity is not None and not isinstance(severity, str)):
        raise ValueError(f"{where}: 'primary' must be a bool and 'severity' a string")
    return RuleCase(
        rule=rule,
        name=name,
        source=source,
        inputs=inputs,
        text=tuple(sorted(text_raw.items())),
        fires=fires,
        category=category if isinstance(category, str) else None,
        culprit_ranks=None if culprits is None else tuple(culprits),
        severity=severity,
        primary=primary,
    )


def load_case_file(path: Path) -> list[RuleCase]:
    """The cases of one file; ValueError (naming the file and case) when it is malformed."""
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    if doc.get("rule") != path.stem:
        raise ValueError(f"{path.name}: 'rule' must be {path.stem!r}")
    if set(doc) - {"rule", "cases"}:
        raise ValueError(f"{path.name}: unknown keys {sorted(set(doc) - {'rule', 'cases'})}")
    cases = doc.get("cases")
    if not isinstance(cases, dict) or not cases:
        raise ValueError(f"{path.name}: no [cases.NAME] tables")
    return [_case(path.stem, name, raw) for name, raw in cases.items()]


def _load_all() -> tuple[list[RuleCase], list[str]]:
    found: list[RuleCase] = []
    errors: list[str] = []
    for path in sorted(CASE_DIR.glob("*.toml")):
        try:
            found.extend(load_case_file(path))
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            errors.append(f"{path.name}: {exc}")
    return found, errors


CASES, LOAD_ERRORS = _load_all()


@functools.cache
def _findings_of(inputs: tuple[str, ...]) -> tuple[Finding, ...]:
    """Cases that share their inputs share one analysis."""
    return tuple(analyze(load_paths([ROOT / p for p in inputs])).findings)


def _findings(case: RuleCase, tmp_path: Path) -> Sequence[Finding]:
    if not case.text:
        return _findings_of(case.inputs)
    written = []
    for file_name, content in case.text:
        (tmp_path / file_name).write_text(content, encoding="utf-8")
        written.append(tmp_path / file_name)
    return analyze(load_paths([*(ROOT / p for p in case.inputs), *written])).findings


def _matches(case: RuleCase, finding: Finding) -> bool:
    return (
        finding.rule == case.rule
        and (case.category is None or finding.category.value == case.category)
        and (case.culprit_ranks is None or finding.culprit_ranks == case.culprit_ranks)
        and (case.severity is None or finding.severity.value == case.severity)
    )


def _show(findings: Sequence[Finding]) -> list[tuple[str, str, str, tuple[int, ...]]]:
    return [(f.rule, f.category.value, f.severity.value, f.culprit_ranks) for f in findings]


def test_case_files_are_well_formed() -> None:
    assert CASE_DIR.is_dir()
    assert LOAD_ERRORS == []


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule_case(case: RuleCase, tmp_path: Path) -> None:
    # GIVEN the case's inputs, WHEN analysed as `hangdoc analyze` would
    findings = _findings(case, tmp_path)
    # THEN the rule fires or stays silent as the case says, with what the case expects
    fired = [f for f in findings if f.rule == case.rule]
    assert bool(fired) is case.fires, _show(findings)
    if case.fires:
        assert any(_matches(case, f) for f in fired), _show(fired)
    if case.primary:
        assert _matches(case, findings[0]), _show(findings)


def test_every_registered_rule_has_a_positive_and_a_negative_case() -> None:
    by_rule: dict[str, set[bool]] = {}
    for case in CASES:
        by_rule.setdefault(case.rule, set()).add(case.fires)
    lacking = {
        rule.id: sorted({"positive", "negative"} - {"positive" if f else "negative" for f in fs})
        for rule in all_rules()
        for fs in [by_rule.get(rule.id, set())]
        if fs != {True, False}
    }
    assert lacking == {}, f"add cases in fixtures/rule_cases/<id>.toml: {lacking}"


def test_case_files_belong_to_registered_rules() -> None:
    registered = {rule.id for rule in all_rules()}
    stray = sorted(p.stem for p in CASE_DIR.glob("*.toml") if p.stem not in registered)
    assert stray == [], "case files of rules that are not registered"
    assert sorted(p.name for p in CASE_DIR.iterdir() if p.suffix != ".toml") == ["README.md"]


# -- the registry ---------------------------------------------------------------------


def test_every_registry_row_says_since() -> None:
    rows = rule_rows()
    assert len(rows) == len(_MODULES) == len(all_rules())
    lacking = [row.module for _, row in rows if not row.since.strip()]
    assert lacking == [], "give each a RuleRow(module, since) in rules/__init__.py"
    assert [rule for rule, _ in rows] == list(all_rules())


def test_retired_ids_are_not_registered() -> None:
    assert not {rule.id for rule in all_rules()} & set(RETIRED)


def _rule_with_id(rule_id: str) -> type[Rule]:
    base = all_rules()[1]
    return type("Impostor", (base,), {"id": rule_id})


def test_a_new_rule_cannot_take_a_retired_id() -> None:
    with pytest.raises(ValueError, match="retired"):
        check_ids([all_rules()[0], _rule_with_id("HD998")], retired={"HD998": "test"})


def test_a_new_rule_cannot_take_an_existing_id() -> None:
    taken = all_rules()[1].id
    with pytest.raises(ValueError, match="duplicate"):
        check_ids([*all_rules(), _rule_with_id(taken)])
    with pytest.raises(ValueError, match="taken"):
        check_new_id(taken.lower())
    check_new_id("HD998")  # free


def test_check_new_id_refuses_retired_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    import hangdoc.rules as registry

    monkeypatch.setattr(registry, "RETIRED", {"HD998": "removed in a test"})
    with pytest.raises(ValueError, match="retired"):
        registry.check_new_id("HD998")
