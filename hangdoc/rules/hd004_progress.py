"""The job is making progress: slow, not hung

## What it means
Between the samples hangdoc took, ranks moved: their main-thread stacks changed, their
stdout/stderr files grew, or their read/write system-call counters advanced while the
main thread ran. A job that moves is slow (or legitimately busy), not deadlocked.

## Why it hangs
It does not: it only looks hung, because a step, an evaluation, a checkpoint or the
first iteration (compilation, data loading warm-up) takes longer than the person
watching expected. It can still hit the collective timeout if one rank's work outlasts
it.

## Evidence used
Two or more live samples per rank: the main thread's Python call path in each (py-spy),
the same thread at every sample (its OS thread id), and from /proc the size of the files
behind fd 1 and 2, the process's rchar/wchar/syscr/syscw counters, and the main thread's
CPU time and voluntary context switches. A chattering background thread alone does not
count as progress, and neither does a stack read from text (a traceback in a log, a
stack dump the job printed, a paste): it has no time, and may be from before the hang.

## How to confirm
Collect again with more samples and a longer interval (`hangdoc collect --samples 5
--interval 10`): a slow job keeps moving. Watch the job's own log for new steps.

## How to fix
Nothing is hung. If one rank stands out as slowest (it is busy while the others wait in
collectives), balance its work (data sharding, rank-0-only work such as logging or
saving) or raise the process-group timeout so that the slow phase fits inside it.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import (
    Category,
    EvidenceRef,
    Finding,
    ProcessEvidence,
    Severity,
    Strength,
)
from hangdoc.analyzer.ranges import format_ranks, plural_ranks
from hangdoc.analyzer.views.activity import classify_thread
from hangdoc.analyzer.views.progress import RankProgress
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.strength import Shift, shifted


def _samples_in_collective(process: ProcessEvidence) -> int:
    count = 0
    for sample in process.stack_samples:
        main = sample.main_thread()
        if main is not None and classify_thread(main).collective is not None:
            count += 1
    return count


class Progress(Rule):
    __doc__ = __doc__
    id = "HD004"
    name = "progress-between-samples"
    summary = "ranks moved between samples: slow, not hung"
    categories = (Category.NOT_A_HANG,)
    severity = Severity.INFO
    requires = frozenset({Need.SAMPLES})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        all_ranked = ctx.evidence.ranked()
        ranked = {r: p for r, p in all_ranked.items() if not p.exited}
        progress = {r: ctx.progress(p) for r, p in ranked.items()}
        comparable = {r: p for r, p in progress.items() if p.comparable}
        moved = sorted(r for r, p in comparable.items() if p.progressed)
        if not moved:
            return
        stuck = sorted(r for r, p in comparable.items() if not p.progressed)
        # A rank the job expects but nobody collected died before the collection or sits on
        # a node not collected: while some collected ranks wait, a busy one may only be
        # late to the wait the missing rank never joins.
        world = ctx.evidence.expected_world_size() or 0
        never_seen = world > len(all_ranked) and len(moved) < len(comparable)
        if len(ranked) < len(all_ranked) or len(comparable) < len(ranked) or never_seen:
            # A rank died or could not be sampled twice: movement of the others proves
            # nothing about the job as a whole.
            yield self._partial(moved, sorted(set(all_ranked) - set(moved)), comparable)
            return
        waiting_stuck = [
            r for r in stuck if r in ctx.activities and ctx.activities[r].in_collective
        ]
        all_moved = not stuck
        busy_while_others_wait = bool(stuck) and len(waiting_stuck) == len(stuck)
        if not (all_moved or busy_while_others_wait):
            yield self._partial(moved, stuck, comparable)
            return
        slowest = self._slowest(ranked, moved) if all_moved else moved
        span = max((p.span_s for p in comparable.values() if p.span_s), default=None)
        span_text = f" in the {span:.1f} s between samples" if span else " between samples"
        if all_moved:
            title = f"all {len(moved)} ranks made progress{span_text}: slow, not hung"
            strength = Strength.CORROBORATED  # every rank moved, and the samples show it
        else:
            title = (
                f"{plural_ranks(moved)} {'is' if len(moved) == 1 else 'are'} still working while "
                f"{plural_ranks(waiting_stuck)} wait: slow, not hung"
            )
            strength = Strength.SIGNAL  # the busy ranks moved; the others may be stuck
        if not all(comparable[r].strong for r in moved):
            strength = shifted(strength, Shift.WEAK_PROGRESS)
        explanation = self._explain(moved, comparable, span_text)
        if slowest:
            explanation += (
                f" {plural_ranks(slowest).capitalize()} stood out: busy while the others "
                "waited in collectives, so the job runs at its pace."
            )
        yield Finding(
            rule=self.id,
            category=Category.NOT_A_HANG,
            severity=Severity.INFO,
            title=title,
            explanation=explanation,
            fix=(
                "Nothing is deadlocked. If a phase is legitimately long (first step, "
                "evaluation, checkpoint), raise the process-group timeout "
                "(init_process_group(timeout=...)) so it fits; if one rank is slowest, "
                "balance its work. Collect again with --samples 5 --interval 10 to be sure."
            ),
            culprit_ranks=tuple(slowest),
            waiting_ranks=tuple(waiting_stuck),
            evidence=tuple(self._refs(moved, ranked, comparable)),
            strength=strength,
            says_not_hung=True,
        )

    @staticmethod
    def _slowest(ranked: dict[int, ProcessEvidence], moved: list[int]) -> list[int]:
        """Ranks never seen in a collective while the others mostly were."""
        waits = {r: _samples_in_collective(ranked[r]) for r in moved}
        never = [r for r, n in waits.items() if n == 0]
        others = [n for r, n in waits.items() if n > 0]
        if never and len(never) < len(moved) and len(others) >= len(never):
            return sorted(never)
        return []

    @staticmethod
    def _explain(moved: list[int], comparable: dict[int, RankProgress], span_text: str) -> str:
        example = comparable[moved[0]]
        reasons = "; ".join(example.reasons) or "its counters advanced"
        return (
            f"{plural_ranks(moved).capitalize()} moved{span_text} "
            f"(rank {moved[0]}: {reasons}). A deadlocked rank does not move."
        )

    def _partial(
        self, moved: list[int], stuck: list[int], comparable: dict[int, RankProgress]
    ) -> Finding:
        return Finding(
            rule=self.id,
            category=Category.UNKNOWN,
            severity=Severity.INFO,
            title=f"{plural_ranks(moved)} moved between samples, {plural_ranks(stuck)} did not",
            explanation=(
                f"Only some ranks moved between samples ({format_ranks(moved)}); the others "
                f"({format_ranks(stuck)}) stayed where they were, and not all of those are in "
                "a collective. Parts of the job may be progressing while others are stuck."
            ),
            fix="Collect again with more samples (--samples 5 --interval 10).",
            culprit_ranks=(),
            evidence=(),
            strength=Strength.ABSENCE,
        )

    @staticmethod
    def _refs(
        moved: list[int], ranked: dict[int, ProcessEvidence], comparable: dict[int, RankProgress]
    ) -> list[EvidenceRef]:
        refs = []
        for rank in moved[:8]:
            proc = ranked[rank]
            source = next((s for s in proc.sources if s.endswith("process.json")), None)
            refs.append(
                EvidenceRef(
                    source=source or proc.primary_source(),
                    detail=f"rank {rank}: " + ("; ".join(comparable[rank].reasons) or "moved"),
                    rank=rank,
                )
            )
        return refs


RULE = Progress
