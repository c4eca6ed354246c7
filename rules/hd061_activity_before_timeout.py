"""The job said it was saving or evaluating just before the collectives timed out

## What it means
The last lines the job printed before the first collective timeout say what it was
doing: saving a checkpoint ("Saving checkpoint. This may take some time…", "Getting full
model state dict took 114 s"), evaluating ("Evaluating the results…", "Running
validation"), gathering metrics, reading data. The ranks that timed out were waiting for
the rank that was still doing it: a save or an evaluation that takes longer than the
collective timeout, or that runs on some ranks only.

## Why it hangs
While one rank (often rank 0) writes a checkpoint or evaluates, the others go on to the
next collective and wait there. If the work takes longer than the process-group timeout,
or the others never take part in it (a rank-0-only save that gathers state, an evaluation
that all-reduces on some ranks only), the watchdog tears the job down.

## Evidence used
The job's own lines (not NCCL's or torch's) just before the first collective, store or
heartbeat timeout of a log file, read with the vocabulary of the job's own names
(docs/own_code.md); the rank that printed them when a prefix says so. Crashes, OOMs and
network errors, when present, outrank this finding.

## How to confirm
Time the save or the evaluation on its own, and compare with the timeout in the watchdog
line (`Timeout(ms)=…`). Take py-spy stacks of every rank the next time it hangs: the rank
still saving or evaluating stands out.

## How to fix
Save and evaluate on every rank (torch.distributed.checkpoint, a DistributedSampler for
the evaluation set), or keep rank-0-only work free of collectives and follow it with a
barrier every rank enters; raise the process-group timeout when the work is legitimately
long (`init_process_group(timeout=…)`, HF `--ddp_timeout`).
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity
from hangdoc.analyzer.views.last_words import last_words
from hangdoc.analyzer.views.meaning import CATEGORY_OF, DOING, Meaning
from hangdoc.analyzer.vocabulary import EventKind, Phase
from hangdoc.rules.base import Need, Rule, RuleContext

_FAILURES = frozenset(
    k.value
    for k in (
        EventKind.COLLECTIVE_TIMEOUT,
        EventKind.STORE_TIMEOUT,
        EventKind.HEARTBEAT_TIMEOUT,
        EventKind.WATCHDOG_TEARDOWN,
    )
)
# Framework phase markers the log parser recognises (analyzer/vocabulary.py Phase).
_PHASES: dict[str, Meaning | None] = {
    Phase.CHECKPOINT_SAVE.value: Meaning.CHECKPOINT,
    Phase.EVAL.value: Meaning.EVAL,
    Phase.CHECKPOINT_SAVED.value: None,
}
_FIX = {
    Meaning.CHECKPOINT: (
        "Make the save finish within the timeout on every rank, or save from every rank "
        "(torch.distributed.checkpoint); a rank-0-only save must not issue collectives, "
        "and a barrier every rank enters must follow it. Raise the process-group timeout "
        "if saves are legitimately long."
    ),
    Meaning.EVAL: (
        "Run evaluation on every rank (a DistributedSampler for the evaluation set), or keep "
        "the rank-0-only part free of collectives and follow it with a barrier; raise the "
        "process-group timeout if evaluation is legitimately long."
    ),
    Meaning.DATA: (
        "The data step before the timeout is slow or stuck on some rank: check its "
        "DataLoader workers and storage, and set DataLoader(timeout=...)."
    ),
}
_FIX[Meaning.METRICS] = _FIX[Meaning.EVAL]


class ActivityBeforeTimeout(Rule):
    __doc__ = __doc__
    id = "HD061"
    name = "activity-before-timeout"
    summary = "the job's last lines before the timeouts say it was saving or evaluating"
    categories = (
        Category.CHECKPOINT_SAVE,
        Category.EVAL_SOME_RANKS,
        Category.DATALOADER,
    )
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        said = last_words(ctx.evidence, _FAILURES, EventKind.PHASE.value, _PHASES)
        if said is None:
            return
        timed_out = {
            p.rank
            for p in ctx.evidence.processes
            if any(e.kind == EventKind.COLLECTIVE_TIMEOUT.value for e in p.log_events)
        }
        rank = said.rank if said.rank not in timed_out else None  # a waiter is no culprit
        who = f"rank {rank}" if rank is not None else "the job"
        doing = DOING[said.meaning].removeprefix("is ")
        text = said.line.text.strip()
        yield Finding(
            rule=self.id,
            category=CATEGORY_OF[said.meaning],
            severity=self.severity,
            title=f"the collectives timed out while {who} was {doing}: {text[:90]!r}",
            explanation=(
                f"The last thing {who} printed before the first timeout was {text[:200]!r} "
                f"({said.line.source}:{said.line.line}): it was {doing}. The ranks that timed "
                "out were waiting in a collective for the work to end, or for a rank that "
                "does it alone."
            ),
            fix=_FIX[said.meaning],
            culprit_ranks=(rank,) if rank is not None else (),
            evidence=(
                EvidenceRef(said.line.source, text[:300], rank, said.line.line),
                EvidenceRef(
                    said.failure.source,
                    said.failure.text[:300],
                    None,
                    said.failure.line,
                ),
            ),
            # Weaker without a rank: another rule that names the waiting-for rank wins.
            confidence=0.55 if rank is not None else 0.45,
        )


RULE = ActivityBeforeTimeout
