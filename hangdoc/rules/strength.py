"""Named reasons that make a finding's evidence stronger or weaker (docs/confidence.md).

A rule states the strength of its evidence (``Strength`` in the model) and, where one
fact strengthens or weakens it — the samples show nothing moved, as many ranks on each
side, one line that may be where a paste was cut — steps between the levels by one of
these reasons, never by adding to a number. Each reason says how far it steps and why,
so that the same fact weighs the same in every rule.
"""

from __future__ import annotations

import enum

from hangdoc.analyzer.model import Strength


class Shift(enum.Enum):
    """A reason to step a finding's strength up (positive) or down (negative)."""

    step: int
    why: str

    AGREES = (1, "another independent signal agrees")
    NOTHING_MOVED = (1, "no rank moved between the samples")
    ORDER_SHOWN = (1, "the logs' times show it came before the other ranks' errors")
    STACKS_AGREE = (
        2,
        "the stacks set the same ranks apart: a strong source of its own agrees on who, "
        "and the log says why",
    )
    SOME_MOVED = (-1, "some ranks moved between the samples: perhaps a slow rank")
    MOSTLY_OUTSIDE = (-1, "more ranks are outside the collective than in it")
    TIE = (-1, "as many ranks on each side: which side is wrong is a guess")
    ONE_SAMPLE = (-1, "one sample only: stuck, or caught in passing")
    MAY_BE_CUT = (-1, "one line that may be where an excerpt was cut")
    GROUP_UNKNOWN = (-1, "the lines do not name their process group: two groups may coincide")
    OTHER_READINGS = (-1, "the same message also comes from harmless or other causes")
    WEAK_PROGRESS = (-1, "only I/O counters moved, not the stack or the output")
    PEERS_ASSUMED = (-1, "the peers are inferred from the rank order, not read")
    SIZE_NOT_STATED = (
        -1,
        "no source states the job's size: the silent rank is a gap among those that reported",
    )
    SILENCE_NOT_COVERED = (
        -1,
        "nothing of the silent rank after the others' timeouts: its own may lie past where "
        "the text ends",
    )
    SEVERAL_SILENT = (-1, "several ranks are silent: which of them is the one is a guess")
    CAUSE_UNREAD = (
        -1,
        "an exception whose words neither the parser's signs nor the message catalog read, "
        "and whose traceback shows no stage: it may have a more specific cause, or be a "
        "consequence",
    )
    WORDS_UNREAD = (
        -1,
        "its words are not known: only where it was raised (a set-up entry point) says what failed",
    )
    CONTRADICTED = (-2, "an independent source says otherwise")
    RANKS_UNKNOWN = (
        -1,
        "the stacks name no rank: how many ranks each side holds, and which side is odd, "
        "is unknown",
    )

    def __init__(self, step: int, why: str) -> None:
        self.step = step
        self.why = why


def shifted(strength: Strength, *shifts: Shift) -> Strength:
    """``strength`` stepped by each reason in turn, kept within ABSENCE..CONCLUSIVE (a
    weakened cause is still a cause: only HD000's abstention is NONE)."""
    level = int(strength) + sum(s.step for s in shifts)
    return Strength(min(max(level, Strength.ABSENCE), Strength.CONCLUSIVE))


def agreeing(first: Strength, count: int, ceiling: Strength) -> Strength:
    """The strength of ``count`` independent signals that agree: the first one's, one
    step up (``Shift.AGREES``) for each further one, at most ``ceiling``."""
    return min(shifted(first, *[Shift.AGREES] * max(count - 1, 0)), ceiling)
