"""The flight recorder analyser reported missing ranks or a mismatch

## What it means
`torchfrtrace` (or the older `tools/flight_recorder/fr_trace.py`) read every rank's
flight recorder dump and printed its verdict: "Not all ranks joining collective,
sequence number: N … missing ranks: {…}", or "Collective sequence number: N has errors"
with "error msg: Culprit rank R; Error type: …". Its text output was attached to the
ticket instead of the dumps.

## Why it hangs
Missing ranks never issued the collective the others wait in; a type, size, dtype or
state mismatch means the ranks issued different collectives at the same point.

## Evidence used
The analyser's text output: sequence number, process group, collective, missing ranks,
culprit rank and error type (COLLECTIVE_TYPE_MISMATCH, SIZE_OR_SYNTAX_MISMATCH,
COLLECTIVE_DTYPE_MISMATCH, COLLECTIVE_STATE_MISMATCH).

## How to confirm
Re-run the analyser with `--print_stack_trace` to see where each rank issued the
collective, and look at the missing ranks' own logs and stacks.

## How to fix
Make the missing ranks reach the same collectives (no rank-dependent collectives, no
early exits on some ranks); for mismatches, make operation, sizes and dtypes identical.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.torch_pg import FrError, FrReport
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text

_ERRORS = {
    FrError.COLLECTIVE_TYPE_MISMATCH: Category.COLLECTIVE_TYPE_MISMATCH,
    FrError.SIZE_OR_SYNTAX_MISMATCH: Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
    FrError.COLLECTIVE_DTYPE_MISMATCH: Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
    FrError.COLLECTIVE_STATE_MISMATCH: Category.RANK_DIVERGENCE,
}


def _report(p: Placed) -> FrReport:
    found = p.event.payload_as(FrReport)
    return found if found is not None else FrReport()


class FrTraceReport(Rule):
    __doc__ = __doc__
    id = "HD036"
    name = "frtrace-report"
    summary = "the flight recorder analyser named missing or mismatched ranks"
    categories = (
        Category.RANK_DIVERGENCE,
        Category.COLLECTIVE_TYPE_MISMATCH,
        Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
    )
    severity = Severity.CRITICAL
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        missing = tl.of(EventKind.FR_MISSING_RANKS)
        if missing:
            first = _report(min(missing, key=lambda p: _report(p).seq or 0))
            ranks = sorted(set(first.missing))
            waiting = sorted(set(first.expected) - set(ranks))
            what = first.collective or "a collective"
            seq = first.seq if first.seq is not None else "?"
            group = first.group_info or first.group or "?"
            yield Finding(
                rule=self.id,
                category=Category.RANK_DIVERGENCE,
                severity=Severity.CRITICAL if ranks else Severity.ERROR,
                title=f"{ranks_text(ranks) if ranks else 'some ranks'} never joined {what} #{seq} "
                f"(group {group})",
                explanation=(
                    f"The flight recorder analyser found that {ranks_text(ranks) or 'some ranks'} "
                    f"did not join {what} #{seq} of group {group} that the other ranks "
                    f"issued ({len(missing)} such report(s) in the output)."
                ),
                fix=(
                    "Find what the missing ranks were doing instead (their logs and stacks) and "
                    "make every rank issue the same collectives in the same order."
                ),
                culprit_ranks=tuple(ranks),
                waiting_ranks=tuple(waiting),
                evidence=tuple(limited_refs(missing, limit=4)),
                strength=Strength.STATED,  # the analyser names the ranks
            )
        for p in tl.of(EventKind.FR_MISMATCH)[:3]:
            report = _report(p)
            error = report.error.value if report.error is not None else "MISMATCH"
            culprit = report.culprit
            category = (
                _ERRORS.get(report.error, Category.COLLECTIVE_TYPE_MISMATCH)
                if report.error is not None
                else Category.COLLECTIVE_TYPE_MISMATCH
            )
            yield Finding(
                rule=self.id,
                category=category,
                severity=Severity.CRITICAL,
                title=f"flight recorder: {error.lower().replace('_', ' ')} at collective "
                f"#{report.seq}" + (f", culprit rank {culprit}" if culprit is not None else ""),
                explanation=(
                    "The flight recorder analyser reported: " + (report.detail or p.event.text)
                ),
                fix=(
                    "Make the collective identical on every rank (operation, sizes, dtypes) and "
                    "issued in the same order."
                ),
                culprit_ranks=(culprit,) if culprit is not None else (),
                evidence=(p.ref(),),
                strength=Strength.STATED,
            )


RULE = FrTraceReport
