"""The flight recorder shows ranks issued different collectives at one sequence number

## What it means
On one process group, the n-th collective is not the same op on every rank: for
example ranks 0-6 recorded all_reduce as collective #812 and rank 7 recorded
all_gather (or barrier) as #812. The flight recorder numbers each group's collectives
per rank, so the same number must be the same op everywhere.

## Why it hangs
Collectives are matched by the order each rank issues them. A rank that issued an
extra collective, skipped one, or called a different one (a rank-dependent branch,
rank-0-only logging or evaluation, an exception handler that calls a collective) waits
in an op nobody else joins, and the others wait in theirs. With NCCL mismatched ops may
also "complete" with garbage and hang a few collectives later.

## Evidence used
Every rank's flight recorder dump (pickle or JSON): per process group, the op recorded
at each collective_seq_id. The op most ranks recorded is taken as intended; a tie is
reported as such. The entries (file, rank, record id) are listed in the finding.

## How to confirm
Look at the call sites of both ops (in FR pickles: the `frames` of the entries; in the
stacks: the user frame of each side). The rank whose op is odd took a code path the
others did not; its previous entries show whether it skipped one or added one.

## How to fix
Make every rank issue the same collectives in the same order on every group: move
rank-dependent work out of collectives (compute on one rank, then broadcast from a call
all ranks make), run metric gathering on all ranks, and never call a collective from a
branch that depends on the rank or on per-rank data.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.views.fr_matching import Kind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.fr_text import mismatch_finding

FIX = (
    "Make the odd ranks issue the same collective as the others at this point: compare "
    "the call sites of both ops and remove the rank- or data-dependent branch between "
    "them (an extra or skipped collective on some ranks shifts every later one)."
)


class FrCollectiveTypeMismatch(Rule):
    __doc__ = __doc__
    id = "HD011"
    name = "fr-collective-type-mismatch"
    summary = "flight recorder: ranks issued different collectives at one sequence number"
    categories = (Category.COLLECTIVE_TYPE_MISMATCH,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.FLIGHT_RECORDER})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        result = ctx.fr_match
        for problem in result.of_kind(Kind.TYPE):
            yield mismatch_finding(
                self.id,
                Category.COLLECTIVE_TYPE_MISMATCH,
                problem,
                result,
                ctx,
                FIX,
                Strength.CONCLUSIVE,
            )


RULE = FrCollectiveTypeMismatch
