"""When the cause is unknown, hangdoc still says what is known (issue 15, partial answers):
the ranks that stand out, from a weaker finding, with the category left unknown."""

from __future__ import annotations

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import Category, Evidence, LogLine, ProcessEvidence, Verdict


def _evidence(last_step: dict[int, int]) -> Evidence:
    procs = []
    for rank, last in last_step.items():
        lines = [
            LogLine(f"step {s} loss {1 / (s + 1):.3f}", f"rank{rank}.log", s + 1)
            for s in range(last + 1)
        ]
        procs.append(ProcessEvidence(rank=rank, log_lines=lines))
    return Evidence(processes=procs)


def test_a_lagging_rank_is_named_although_the_cause_is_unknown() -> None:
    # GIVEN logs where rank 2's progress stopped behind the others' and nothing else
    diagnosis = analyze(_evidence({0: 40, 1: 40, 2: 31, 3: 40}))
    # THEN the verdict stays inconclusive and the category unknown, but rank 2 is named
    primary = diagnosis.primary
    assert diagnosis.verdict is Verdict.INCONCLUSIVE and primary is not None
    assert primary.category is Category.UNKNOWN and primary.culprit_ranks == (2,)
    assert "rank 2 stands out" in primary.title and "HD060" in primary.explanation
    # the suspect's strength, not its calibrated probability (that is of its category)
    suspect = next(f for f in diagnosis.findings if f.rule == "HD060")
    assert f"strength: {suspect.strength.word}" in primary.explanation
    assert "%" not in primary.explanation


def test_nothing_pointing_anywhere_names_nobody() -> None:
    diagnosis = analyze(_evidence({0: 40, 1: 40, 2: 40, 3: 40}))
    primary = diagnosis.primary
    assert primary is not None and primary.category is Category.UNKNOWN
    assert primary.culprit_ranks == () and "stands out" not in primary.title
