"""No cause could be established from the evidence

## What it means
No rule found a hang pattern it could stand behind: the stacks, process states and other
inputs do not show ranks divided between collectives and other work, a dead rank,
mismatched collectives, or a failure in the logs. hangdoc says so instead of guessing.

## Why it hangs
Unknown. Either the evidence does not cover the cause (no stacks, only some ranks, no
logs), or the job is not hung at all.

## Evidence used
Everything that was loaded; this finding lists what was there and what was missing.

## How to confirm
Collect more: `hangdoc collect --all` on every node of the job, at least two samples,
with NCCL_DEBUG=INFO and the flight recorder enabled for the next run.

## How to fix
First collect the evidence this finding lists as missing, then analyze again.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks, verb
from hangdoc.rules.base import Need, Rule, RuleContext

_NEXT_STEPS = {
    Need.STACKS: "stacks of every rank (`hangdoc collect --all` on each node, or py-spy dump)",
    Need.SAMPLES: "two or more samples a few seconds apart (hangdoc collect does this)",
    Need.WORLD_SIZE: "the job's WORLD_SIZE (hangdoc collect reads it from the environment)",
    Need.FLIGHT_RECORDER: "the flight recorder (TORCH_FR_BUFFER_SIZE=2000, hangdoc.hook)",
    Need.LOGS: "the ranks' stderr with NCCL_DEBUG=INFO",
}


class NoCause(Rule):
    __doc__ = __doc__
    id = "HD000"
    name = "no-cause-found"
    summary = "no cause could be established; says what to collect next"
    categories = (Category.UNKNOWN,)
    severity = Severity.INFO
    requires = frozenset()
    fallback = True

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        have = [str(n) for n in Need if ctx.has(n)]
        missing = [n for n in _NEXT_STEPS if not ctx.has(n)]
        ranks = len(ctx.evidence.ranked())
        explanation = (
            f"The inputs hold {ranks} rank(s) with "
            + (", ".join(have) if have else "no usable evidence")
            + ". No rule found a hang pattern in them, so the cause is unknown."
        )
        fix = "Collect next time: " + "; ".join(_NEXT_STEPS[n] for n in missing) + "."
        if not missing:
            fix = "Collect again later and compare: if nothing moved, look below Python."
        # A partial answer: the cause is unknown, but a weaker finding may still say
        # which ranks stand out; say so, and name them, rather than nothing.
        suspects = next((f for f in ctx.prior if f.culprit_ranks), None)
        title = "no cause found in the evidence"
        culprits: tuple[int, ...] = ()
        if suspects is not None:
            culprits = suspects.culprit_ranks
            title += f"; {plural_ranks(culprits)} {verb(culprits, 'stands', 'stand')} out"
            # The strength, not the calibrated probability: that is of the finding's
            # category (often unknown, and then usually right), not of its ranks.
            explanation += (
                f" What is known: {suspects.title} ({suspects.rule}, "
                f"strength: {suspects.strength.word}). That says where to look, not yet why."
            )
        yield Finding(
            rule=self.id,
            category=Category.UNKNOWN,
            severity=Severity.INFO,
            title=title,
            explanation=explanation,
            fix=fix,
            culprit_ranks=culprits,
            strength=Strength.NONE,
        )


RULE = NoCause
