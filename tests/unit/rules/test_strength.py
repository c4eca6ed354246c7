"""The strengths of evidence (analyzer/model.py ``Strength``) and the named reasons a rule
steps between them (rules/strength.py)."""

from __future__ import annotations

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.rules.strength import Shift, agreeing, shifted


def test_levels_are_ordered_and_their_stated_probability_grows_with_them() -> None:
    levels = list(Strength)
    assert levels == sorted(levels)
    stated = [s.stated for s in levels]
    assert stated == sorted(stated) and len(set(stated)) == len(stated)
    assert Strength.NONE.stated == 0.0 and Strength.CONCLUSIVE.stated < 1.0
    assert all(s.meaning and s.word == s.name.lower() for s in levels)


def test_a_reason_steps_by_its_own_size_and_stays_within_the_scale() -> None:
    assert shifted(Strength.STATED, Shift.NOTHING_MOVED) is Strength.CORROBORATED
    assert shifted(Strength.SIGNAL, Shift.STACKS_AGREE) is Strength.CORROBORATED
    assert shifted(Strength.CORROBORATED, Shift.TIE, Shift.ONE_SAMPLE) is Strength.SIGNAL
    # at the top nothing is more than conclusive; at the bottom a weakened cause is still
    # a cause (only HD000's abstention is NONE)
    assert shifted(Strength.CONCLUSIVE, Shift.AGREES) is Strength.CONCLUSIVE
    assert shifted(Strength.HINT, Shift.CONTRADICTED) is Strength.ABSENCE
    assert all(s.step != 0 and s.why for s in Shift)


def test_agreeing_signals_step_up_one_each_up_to_the_ceiling() -> None:
    assert agreeing(Strength.SIGNAL, 1, Strength.STATED) is Strength.SIGNAL
    assert agreeing(Strength.SIGNAL, 2, Strength.STATED) is Strength.STATED
    assert agreeing(Strength.SIGNAL, 5, Strength.STATED) is Strength.STATED
    assert agreeing(Strength.HINT, 0, Strength.SIGNAL) is Strength.HINT


def test_a_finding_orders_by_strength_and_shows_its_stated_probability_until_calibrated() -> None:
    def finding(rule: str, strength: Strength) -> Finding:
        return Finding(rule, Category.RANK_DEAD, Severity.ERROR, "t", "e", "f", strength=strength)

    weak, strong = finding("HD001", Strength.HINT), finding("HD300", Strength.STATED)
    assert sorted([weak, strong], key=Finding.sort_key) == [strong, weak]
    assert strong.confidence == Strength.STATED.stated
    assert strong.to_json()["strength"] == "stated"
    # a calibrated probability never changes the order: the strength decides it
    calibrated = Finding("HD001", Category.RANK_DEAD, Severity.ERROR, "t", "e", "f",
                         strength=Strength.HINT, probability=0.99)  # fmt: skip
    assert sorted([calibrated, strong], key=Finding.sort_key) == [strong, calibrated]
    assert calibrated.confidence == 0.99
