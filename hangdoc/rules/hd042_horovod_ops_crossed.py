"""Horovod's stall report shows ranks waiting in different ops

## What it means
Horovod's coordinator warns when some ranks have submitted an op (a named tensor to
all-reduce, all-gather or broadcast) and others have not for longer than
`HOROVOD_STALL_CHECK_TIME_SECONDS` (60 s). Here one report shows the ranks on different
ops: some submitted op X and not op Y, others submitted Y and not X. Each side waits in an
op the other never submits: the ranks issued different collectives, the first of the two
readings Horovod's own warning offers ("different ranks are trying to submit different
tensors").

## Why it hangs
Horovod runs an op only once every rank has submitted it. Ranks that submit different ops
(a loss averaged on some ranks only, a branch on the data's shape that skips some
gradients, a metric or a sync op submitted on one rank) each wait for the others to
submit theirs, forever.

## Evidence used
One stall report (horovod/common/operations.cc, later stall_inspector.cc): the old
one-line form "Stalled ops: <op> [ready ranks: …], …", the per-op lines "<op> [missing
ranks: …]" after "Stalled ops:", or the per-rank lines "R: [<op>, …]" after "Stalled
ranks:"/"Missing ranks:" (views/stall_report.py). Ops of two different reports are not
compared. The culprits are the smaller side, the ranks that went the other way (a
"missing" report leaves out the ranks that submitted every op, which are on neither
side); with as many ranks on each side, every rank the report names. Not: two ops Horovod
named itself, of one kind ("broadcast.noname.3765" against "broadcast.noname.3873": the
kind and the process's running count of ops, horovod/torch/mpi_ops_v2.cc GetOpName); those
ranks are in the same kind of op, out of step by the number of ops each issued before
(HD037 names them).

## How to confirm
Run with `HOROVOD_TIMELINE=timeline.json` and look at which ops each rank submits at the
step that stalls; print the tensor names each rank submits.

## How to fix
Make every rank submit the same ops in the same order: no collective under a rank- or
data-dependent condition (compute the loss average on every rank, keep every variable
trainable on every rank), the same model and optimizer everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.torch_pg import MissingRanks
from hangdoc.analyzer.views.stall_report import crossing
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import ranks_text


class HorovodOpsCrossed(Rule):
    __doc__ = __doc__
    id = "HD042"
    name = "horovod-ops-crossed"
    summary = "Horovod's stall report shows ranks waiting in different ops"
    categories = (Category.COLLECTIVE_TYPE_MISMATCH,)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        for p in ctx.timeline.of(EventKind.MISSING_RANKS):
            report = p.event.payload_as(MissingRanks)
            found = crossing(report) if report is not None else None
            if found is None or found.out_of_step:
                continue  # one auto-named kind of op at different counts: HD037
            others = ranks_text(found.others) if found.others else "other ranks"
            yield Finding(
                rule=self.id,
                category=Category.COLLECTIVE_TYPE_MISMATCH,
                severity=Severity.ERROR,
                title=(
                    f"{ranks_text(found.culprits)} submitted {found.culprit_op[:60]} while "
                    f"{others} submitted {found.other_op[:60]} (Horovod's stall check)"
                ),
                explanation=(
                    "Horovod's stall report shows the ranks on different ops: "
                    f"{found.culprit_op} was submitted by {ranks_text(found.culprits)} and not "
                    f"by {others}, {found.other_op} by {others} and not by "
                    f"{ranks_text(found.culprits)}. Horovod runs an op only once every rank "
                    "submitted it, so each side waits for an op the other never submits."
                ),
                fix=(
                    "Make every rank submit the same ops in the same order: find the rank- or "
                    "data-dependent branch that submits one of these ops on some ranks only."
                ),
                culprit_ranks=found.culprits,
                waiting_ranks=found.others,
                evidence=(p.ref(),),
                strength=Strength.STATED,  # the report names both sides' ops
            )
            return  # one report says it; later ones repeat it


RULE = HorovodOpsCrossed
