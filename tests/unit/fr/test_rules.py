"""The FR rules (HD010-HD017): contract, a positive and a negative case each, the order of
findings (root cause first), rank ranges and the wavefront at 1,000+ ranks."""

from __future__ import annotations

from typing import Any

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import (
    Category,
    Evidence,
    Finding,
    Frame,
    Severity,
    StackSample,
    Strength,
    ThreadStack,
)
from hangdoc.rules import all_rules
from hangdoc.rules.base import Rule, validate_rule
from hangdoc.rules.fr_text import wavefront
from tests.unit.fr.frdata import Rank, add_process, evidence, matched, pg_config

FR_RULES: tuple[type[Rule], ...] = tuple(r for r in all_rules() if "HD010" <= r.id <= "HD029")
WORLD4 = pg_config({"0": ("default_pg", range(4))})


def _run(ev: Evidence) -> list[Finding]:
    return analyze(ev, rules=FR_RULES, calibrate=False).findings  # the rules' own confidence


def _by_rule(findings: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for finding in findings:
        out.setdefault(finding.rule, []).append(finding)
    return out


def test_rules_are_registered_and_documented() -> None:
    ids = [r.id for r in FR_RULES]
    assert ids == ["HD010", "HD011", "HD012", "HD013", "HD014", "HD015", "HD016", "HD017"]
    for rule in FR_RULES:
        validate_rule(rule)
        assert rule.name.startswith("fr-") and rule.summary


def _mismatch(op: str = "all_reduce", dtype: str = "Float", size: int = 4) -> Evidence:
    """Ranks 0,1,3 wait in all_reduce #3; rank 2 issued ``op`` with ``size``/``dtype``."""
    docs = {r: Rank().ops(2).op(state="scheduled").dump(WORLD4) for r in range(4)}
    docs[2] = (
        Rank()
        .ops(2)
        .op(
            op,
            sizes=((size,),),
            dtype=dtype,
            state="scheduled",
            out=((4, 4),) if op == "all_gather" else None,
        )
        .dump(WORLD4)
    )
    return evidence(docs)


@pytest.mark.parametrize(
    ("odd", "rule", "category"),
    [
        (_mismatch(op="all_gather"), "HD011", Category.COLLECTIVE_TYPE_MISMATCH),
        (_mismatch(size=8), "HD012", Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH),
        (_mismatch(dtype="BFloat16"), "HD013", Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH),
    ],
    ids=["type", "size", "dtype"],
)
def test_mismatch_rules_fire_on_the_odd_rank(odd: Evidence, rule: str, category: Category) -> None:
    findings = _run(odd)
    top = findings[0]
    assert (top.rule, top.category, top.severity) == (rule, category, Severity.CRITICAL)
    assert top.culprit_ranks == (2,) and top.waiting_ranks == (0, 1, 3)
    assert "#3 on default_pg (group 0)" in top.title and "ranks 0-1,3" in top.title
    # the finding links to the FR entries that prove it, in each rank's own file
    sources = {e.rank: e.source for e in top.evidence}
    assert sources[2] == "fr/rank2" and sources[0] == "fr/rank0"
    assert any("record 2" in e.detail for e in top.evidence)


def test_mismatch_rules_stay_quiet_on_a_consistent_job() -> None:
    docs = {r: Rank().ops(30).dump(WORLD4) for r in range(4)}
    assert _run(evidence(docs)) == []


def test_missing_rank_names_where_it_is_from_its_stacks() -> None:
    docs = {r: Rank().ops(5).op(state="scheduled").dump(WORLD4) for r in range(3)}
    docs[3] = Rank().ops(5).dump(WORLD4)
    ev = evidence(docs)
    frames = (Frame("save_checkpoint", "/job/train.py", 31), Frame("main", "/job/train.py", 80))
    ev.ranked()[3].stack_samples.append(StackSample(0, None, (ThreadStack(frames, is_main=True),)))
    (finding,) = _run(ev)
    assert finding.rule == "HD010" and finding.category is Category.CHECKPOINT_SAVE
    assert finding.culprit_ranks == (3,) and finding.severity is Severity.CRITICAL
    assert "save_checkpoint (train.py:31)" in finding.explanation
    assert "all_reduce #6 on default_pg (group 0)" in finding.title


def test_root_cause_first_then_its_consequences() -> None:
    docs = {r: Rank().ops(3).op(state="scheduled").dump(WORLD4) for r in (0, 2, 3)}
    docs[1] = Rank().ops(2).op(sizes=((8,),), state="scheduled").dump(WORLD4)
    findings = _run(evidence(docs))
    assert [(f.rule, f.severity) for f in findings] == [
        ("HD012", Severity.CRITICAL),
        ("HD010", Severity.WARNING),
    ]
    assert findings[1].category is Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH
    assert "size mismatch at all_reduce #3" in findings[1].explanation


def test_every_independent_problem_is_reported() -> None:
    # rank 3 never came, rank 2 issued all_gather: fr_trace reports only the first
    docs = {r: Rank().ops(4).op(state="scheduled").dump(WORLD4) for r in (0, 1)}
    docs[2] = Rank().ops(4).op("all_gather", out=((4, 4),), state="scheduled").dump(WORLD4)
    docs[3] = Rank().ops(4).dump(WORLD4)
    by_rule = _by_rule(_run(evidence(docs)))
    assert by_rule["HD011"][0].culprit_ranks == (2,)
    assert by_rule["HD010"][0].culprit_ranks == (3,)
    assert all(f.severity is Severity.CRITICAL for f in (*by_rule["HD011"], *by_rule["HD010"]))


def test_dead_rank_without_dump() -> None:
    docs = {r: Rank().ops(5).op(state="scheduled").dump(WORLD4) for r in range(3)}
    ev = evidence(docs, world=4)
    for proc in ev.processes:
        proc.local_rank, proc.local_world_size, proc.host = proc.rank, 4, "node1"
    (finding,) = _run(ev)
    assert (finding.rule, finding.category) == ("HD015", Category.RANK_DEAD)
    assert finding.culprit_ranks == (3,) and finding.strength is Strength.STATED
    assert "node1" in finding.explanation
    # an exited process says it even more plainly: two signals agree
    add_process(ev, 3, exited=True)
    (finding,) = _run(ev)
    assert finding.category is Category.RANK_DEAD and finding.strength is Strength.CORROBORATED


def test_unmatched_send_and_pipeline_chain() -> None:
    docs = {
        0: Rank().send(1, src=0).dump(WORLD4),
        1: Rank().send(2, src=1).dump(WORLD4),
        2: Rank().ops(1).dump(WORLD4),
        3: Rank().ops(1).dump(WORLD4),
    }
    findings = _run(evidence(docs))
    assert [(f.rule, f.severity, f.culprit_ranks) for f in findings] == [
        ("HD014", Severity.CRITICAL, (2,)),
        ("HD014", Severity.WARNING, (1,)),
    ]
    assert findings[0].category is Category.P2P_DEADLOCK
    assert "peer itself waiting" in findings[1].title


def test_send_send_deadlock_is_one_cycle_finding() -> None:
    docs = {
        0: Rank().send(1, src=0).recv(1, dst=0).dump(WORLD4),
        1: Rank().send(0, src=1).recv(0, dst=1).dump(WORLD4),
    }
    (finding,) = _run(evidence(docs))
    assert (finding.rule, finding.category) == ("HD016", Category.P2P_DEADLOCK)
    assert finding.culprit_ranks == (0, 1) and "deadlock" in finding.title


def test_collective_cycle_finding() -> None:
    cfg = pg_config({"0": ("default_pg", range(4)), "5": ("tp", [2, 3])})
    tp: dict[str, Any] = {"group": "5", "desc": "tp"}
    docs = {r: Rank().ops(3).op(state="scheduled").dump(cfg) for r in (0, 1)}
    docs[2] = Rank().op(**tp).ops(3).op(state="scheduled").dump(cfg)
    docs[3] = Rank().op(**tp).ops(3).op(**tp, state="scheduled").dump(cfg)
    (finding,) = _run(evidence(docs))
    assert (finding.rule, finding.category) == ("HD016", Category.COLLECTIVE_TYPE_MISMATCH)


def test_all_waiting_is_information_only() -> None:
    docs = {r: Rank().ops(5).op(state="scheduled").dump(WORLD4) for r in range(4)}
    (finding,) = _run(evidence(docs))
    assert (finding.rule, finding.severity) == ("HD017", Severity.INFO)


def test_wavefront_stays_short_at_1024_ranks() -> None:
    docs = {r: Rank().ops(10).op(state="scheduled").dump() for r in range(1024) if r != 700}
    docs[700] = Rank().ops(9).dump()
    result = matched(evidence(docs, world=1024))
    lines = wavefront(result, "0")
    assert lines == [
        "Where each rank stopped on default_pg (group 0):",
        "  rank 700              #9 all_reduce [[4]] Float  done",
        "  ranks 0-699,701-1023  #11 all_reduce [[4]] Float  in flight",
    ]
    (finding,) = _run(evidence(docs, world=1024))
    assert finding.culprit_ranks == (700,) and "ranks 0-699,701-1023" in finding.title
