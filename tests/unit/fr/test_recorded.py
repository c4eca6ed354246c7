"""The recorded real FR cases (fixtures/fr/<case>, made by fixtures/fr/record.py from live
hung gloo jobs through the hook) are diagnosed as planted, from the dump (FR JSON +
stacks) and from the FR pickles alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import InputKind
from hangdoc.analyzer.views.fr_matching import Kind
from tests.unit.fr.frdata import matched

FR = Path(__file__).resolve().parents[3] / "fixtures" / "fr"
CASES = sorted(p.parent.name for p in FR.glob("*/EXPECTED.json"))


def _expected(case: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FR / case / "EXPECTED.json").read_text())
    return doc


def test_all_five_cases_are_recorded() -> None:
    assert CASES == [
        "mismatched_op",
        "mismatched_size",
        "missing_and_mismatch",
        "rank_died",
        "skipped_collective",
    ]


@pytest.mark.parametrize("case", CASES)
def test_recorded_case_names_the_planted_culprit(case: str) -> None:
    expected = _expected(case)
    ev = load_paths([FR / case / "dump"])
    # every live rank's FR came through the hook and was read without error
    fr_inputs = [i for i in ev.inputs if i.kind is InputKind.FLIGHT_RECORDER]
    assert fr_inputs and all(i.error is None for i in fr_inputs)
    assert all(i.path.endswith("flight_recorder.hook.json") for i in fr_inputs)
    diagnosis = analyze(ev)
    primary = diagnosis.findings[0]
    assert diagnosis.verdict.value == "hang"
    assert primary.category.value == expected["category"], diagnosis.findings
    assert list(primary.culprit_ranks) == expected["culprit_ranks"], diagnosis.findings
    fr_findings = [f for f in diagnosis.findings if "HD010" <= f.rule <= "HD029"]
    assert any(
        f.category.value == expected["category"]
        and list(f.culprit_ranks) == expected["culprit_ranks"]
        for f in fr_findings
    ), fr_findings
    for also in expected.get("also", []):
        assert any(
            f.category.value == also["category"] and list(f.culprit_ranks) == also["culprit_ranks"]
            for f in fr_findings
        ), fr_findings


@pytest.mark.parametrize("case", CASES)
def test_pickles_of_the_same_buffers_give_the_same_problems(case: str) -> None:
    from_dump = matched(load_paths([FR / case / "dump"]))
    ev = load_paths([FR / case / "pickle"])
    for proc in ev.processes:
        proc.world_size = 4
    from_pickle = matched(ev)

    def key(result: Any) -> list[tuple[Kind, str, int | None, tuple[int, ...]]]:
        return [(p.kind, p.group, p.seq, p.blamed) for p in result.problems]

    assert key(from_pickle) == key(from_dump)
    # the pickles carry the call stacks: the mismatch says where each side issued its op
    if case == "mismatched_op":
        problem = from_pickle.problems[0]
        frames = problem.variants[1][1].frames
        assert any(f.function.endswith("call") and "scenario.py" in f.file for f in frames)
