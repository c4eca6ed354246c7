"""A save is slow, not stuck: the file it writes grows

## What it means
Some ranks wait in a collective while a rank is outside it writing a file (a
checkpoint, usually), and the file grew between samples: its write offset or size went
up. The job is slow, not hung — the waiting ranks will go on once the save finishes,
unless the save outlasts the process-group timeout.

## Why it hangs
It does not, yet. It looks hung because the save takes longer than the person watching
expected (a large model to slow or shared storage, an object-store upload). It turns
into a real failure when the save outlasts the collective timeout (10 minutes for NCCL
by default): the waiting ranks then abort.

## Evidence used
From /proc at every sample: the files the rank holds open for writing with their
offsets (``/proc/PID/fdinfo``) and, on local file systems, sizes; the sample times (for
the rate); the ranks' stacks (who waits in a collective, who saves).

## How to confirm
`ls -l FILE` twice, or `cat /proc/PID/fdinfo/FD`: the size/offset keeps growing.
Estimate the remaining time from the rate and the expected checkpoint size.

## How to fix
Nothing is stuck. Make saves cheaper for the others: save asynchronously
(``torch.distributed.checkpoint.async_save``), write to local disk and upload in the
background, shard the save across ranks, or raise the process-group timeout above the
longest save.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks, verb
from hangdoc.analyzer.views.activity import RankActivity
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.iofacts import FileTrack, growing_files
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.culprit import proc_source, victims
from hangdoc.rules.refs import stack_refs

_WRITING = re.compile(r"(?i)write|save|upload|dump|flush|copy|persist|serializ")


def _main_writes(activity: RankActivity) -> bool:
    """The main thread itself is saving: a checkpoint frame, or a user frame named so.
    (A background thread's growing log must not pass for a stuck rank's progress.)"""
    main = activity.main
    if main is None:
        return False
    if main.has(Activity.CHECKPOINT_SAVE):
        return True
    return main.user_frame is not None and bool(_WRITING.search(main.user_frame.function_leaf))


class SlowSave(Rule):
    __doc__ = __doc__
    id = "HD104"
    name = "slow-save-progressing"
    summary = "a rank outside the collective writes a file that grows: slow, not hung"
    categories = (Category.NOT_A_HANG,)
    severity = Severity.INFO
    requires = frozenset({Need.PROC, Need.SAMPLES})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        live = {r: a for r, a in ctx.activities.items() if not a.process.exited}
        outside = sorted(r for r, a in live.items() if not a.in_collective)
        if not outside:
            return
        if not all(_main_writes(live[r]) for r in outside):
            return  # a rank outside the collectives does something else: not a slow save
        writers = {r: growing_files(live[r].process) for r in outside}
        if not all(writers.values()):
            return  # its file does not grow: a stall (HD103) or unknown, not slow
        waiting = victims(ctx, outside)
        if len(waiting) + len(outside) < len(live):
            return
        yield self._finding(ctx, writers, waiting)

    def _finding(
        self, ctx: RuleContext, writers: dict[int, list[FileTrack]], waiting: tuple[int, ...]
    ) -> Finding:
        ranks = tuple(sorted(writers))
        first = ranks[0]
        activity = ctx.activities[first]
        saving = activity.main is not None and activity.main.has(Activity.CHECKPOINT_SAVE)
        what = "its checkpoint" if saving else "a file"
        files = writers[first]
        title = (
            f"{plural_ranks(ranks)} {verb(ranks, 'is', 'are')} still writing {what} "
            f"({files[0].short_progress()})"
            + (
                f" while {plural_ranks(waiting)} {verb(waiting, 'waits', 'wait')}: slow, not hung"
                if waiting
                else ": slow, not hung"
            )
        )
        explanation = (
            f"Rank {first} is outside the collectives ({activity.description()}) and the "
            f"file it writes grows: {'; '.join(f.progress_text() for f in files[:3])}. "
            "A stuck write does not move; this one does, so the job is slow, not hung."
        )
        if waiting:
            explanation += (
                f" {plural_ranks(waiting).capitalize()} wait in a collective for it and will go "
                "on when the write finishes — unless it outlasts the process-group timeout."
            )
        refs = [
            EvidenceRef(
                source=proc_source(ctx.activities[r].process),
                detail=f"rank {r}: {f.progress_text()}",
                rank=r,
            )
            for r in ranks
            for f in writers[r][:2]
        ]
        refs.extend(stack_refs([ctx.activities[r] for r in ranks], limit=2))
        return Finding(
            rule=self.id,
            category=Category.NOT_A_HANG,
            severity=Severity.INFO,
            title=title,
            explanation=explanation,
            fix=(
                "Nothing is stuck. Save asynchronously (torch.distributed.checkpoint."
                "async_save), write to local disk and upload in the background, shard the "
                "save across ranks, or raise the process-group timeout above the longest save."
            ),
            culprit_ranks=ranks,
            waiting_ranks=waiting,
            evidence=tuple(refs),
            strength=Strength.CORROBORATED,  # outside the collective, and its file grows
            says_not_hung=True,
        )


RULE = SlowSave
