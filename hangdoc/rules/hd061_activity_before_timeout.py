"""The job said it was saving or evaluating just before the collectives timed out

## What it means
The last lines the job printed before the first collective timeout say what it was
doing: saving a checkpoint ("Saving checkpoint. This may take some time…", "Getting full
model state dict took 114 s"), evaluating ("Evaluating the results…", "Running
validation"), gathering metrics, reading data. The ranks that timed out were waiting for
the rank that was still doing it: a save or an evaluation that takes longer than the
collective timeout, or that runs on some ranks only.

With no timeout at all, a log whose last lines are an evaluation's (detectron2's
evaluator: "Inference done 4313/4313", "Total inference time …", then nothing) says the
job stopped there: weakly, as any log that ends.

## Why it hangs
While one rank (often rank 0) writes a checkpoint or evaluates, the others go on to the
next collective and wait there. If the work takes longer than the process-group timeout,
or the others never take part in it (a rank-0-only save that gathers state, an evaluation
that all-reduces on some ranks only), the watchdog tears the job down.

## Evidence used
The job's own lines (not NCCL's or torch's) just before the first collective or store
timeout of a log file, read with the vocabulary of the job's own names
(docs/own_code.md), and the frameworks' phase markers and progress bars there, including
a tqdm bar that the timeout message interrupted on the same line (a validation bar named
by its mAP columns, a dataset-preprocessing bar: then the rank was busy outside any
collective). A training step's report (a line with a loss) ends the look-back: the job
was training. So does a bar whose own clock says its work was due to end long before the
timeout fired (elapsed plus tqdm's estimate of the time left under half the watchdog's
`Timeout(ms)`, no later state printed): the work had ended or stopped advancing by then,
and the bar shows neither what the ranks waited for nor work outlasting the timeout
(lightning #5646: "5/6 [00:14<00:03, 3.19s/it]", then 30-minute timeouts). The rank is the
one that printed the line when a prefix says so, else the one rank that did not report the
timeout while the others did (views/silence.py, its gap: yolov5 #4409,
Ultra-Fast-Lane-Detection-v2 #119). An evaluation is named only where
something shows a rank evaluating apart from the ranks that waited: the line's own rank
not among those that timed out, or that one silent rank. When the line names no rank and
one rank alone reported the timeout, the paste is that rank's log: the rank that printed
the evaluation is the one that waited in the collective, so nothing shows evaluation on
some ranks only (its own collective may as well have waited for any rank, for any reason:
llm-foundry #423, "[Eval batch=1/90]" then rank 0's all-gather timeout), and the finding
is not made. The heartbeat monitor's "watchdog got
stuck" is not counted: it is the watchdog thread blocked in a CUDA/NCCL call, not ranks
waiting for a busy peer. Crashes, OOMs and network errors, when present, outrank this
finding.

Begin and end markers pair up (views/last_words.py ``unfinished``): DeepSpeed's checkpoint
engines ("[Torch] Checkpoint … is about to be saved!", "[Torch] Saving …" / "[Torch]
Saved …", "… is ready now!", "zero checkpoint saved"), Megatron's ("saving checkpoint at
iteration" / "successfully saved checkpoint"), HF Trainer's ("***** Running Evaluation
*****" / "{'eval_loss': …}"), mmengine's "Epoch(val)" lines, detectron2's "Start inference
on N batches" / "Evaluation results for …". A save or an evaluation that began and did not
end before the timeouts, further back than the last lines or in the log of a rank that
stops in it while the others time out, is named (a hint, like the last lines); an
evaluation that reported its metrics had ended. With no timeout, a log whose last line
(one stray line allowed) is such a begin, or that someone stopped there (the launcher's
"Killing subprocess" after a ^C, a KeyboardInterrupt: accelerate #2724), is named weakly
(the absence of a signal: docs/confidence.md).

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

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, LogEvent, Severity, Strength
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.ranges import format_ranks
from hangdoc.analyzer.views.activity_table import PHASES, TABLE, Activity, phrase
from hangdoc.analyzer.views.last_words import last_words, stopped_during, unfinished
from hangdoc.analyzer.vocabulary import EventKind, Phase
from hangdoc.rules.base import Rule, RuleContext

# Not the heartbeat monitor's "watchdog got stuck": that is the watchdog thread itself
# blocked in a CUDA/NCCL call (ProcessGroupNCCL's HeartbeatMonitor), not ranks waiting in
# a collective for a peer that is busy elsewhere.
_FAILURES = frozenset(
    (
        EventKind.COLLECTIVE_TIMEOUT,
        EventKind.STORE_TIMEOUT,
        EventKind.WATCHDOG_TEARDOWN,
    )
)
# Someone stopped the job from outside: DeepSpeed's launcher (launch.py sigkill_handler,
# on SIGINT/SIGTERM: "Killing subprocess N"), torchrun's agent ("Received Signals.SIGINT
# death signal, shutting down workers"). It ends the log; it says nothing of the cause.
_STOPS = frozenset({EventKind.AGENT_TERMINATING, EventKind.AGENT_SIGNAL})


def _interrupt(event: LogEvent) -> bool:
    """A KeyboardInterrupt: someone stopped the job (the parser read it: Sign.INTERRUPT)."""
    return event.kind == EventKind.EXCEPTION and Sign.INTERRUPT in event.payload.signs


# Events that say nothing went wrong: progress and counts only.
_QUIET = frozenset({EventKind.PHASE, EventKind.DATA_COUNT})
# What the job's last lines may say it was doing: work one rank does while the others
# wait (the phase markers that begin it count too, and those that end it stop the search:
# a training bar or step report after a save or an evaluation says the job went back to
# training, whatever the lines before it said).
_TELLING = frozenset({Activity.CHECKPOINT_SAVE, Activity.EVAL, Activity.PREPROCESS})
_PHASES: dict[Phase, Activity | None] = {
    phase: mark.begins if mark.begins in _TELLING else None
    for phase, mark in PHASES.items()
    if mark.begins in _TELLING or mark.ends & _TELLING
}


def _printer_waited(
    meaning: Activity, rank: int | None, gap: bool, timed_out: set[int | None]
) -> bool:
    """An evaluation whose printer cannot be told apart from the one rank that timed out:
    the line names no rank, no rank stayed silent, and a single rank reported the timeout
    (the paste is that rank's log). Evaluation *on some ranks* claims a rank evaluating
    while others waited; here the rank that evaluated is the one that waited, so the
    claim has no evidence. A save is not held to this: a save that hangs is the cause
    whichever ranks run it."""
    if TABLE[meaning].category is not Category.EVAL_SOME_RANKS or rank is not None or gap:
        return False
    return len(timed_out - {None}) == 1


class ActivityBeforeTimeout(Rule):
    __doc__ = __doc__
    id = "HD061"
    name = "activity-before-timeout"
    summary = "the job's last lines before the timeouts say it was saving or evaluating"
    categories = (
        Category.CHECKPOINT_SAVE,
        Category.EVAL_SOME_RANKS,
        Category.DATALOADER,
        Category.RANK_DIVERGENCE,
    )
    severity = Severity.ERROR
    # The job's own lines are enough (a log that only stops); events are checked inside.
    requires = frozenset()

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        said = last_words(ctx.evidence, _FAILURES, EventKind.PHASE, _PHASES)
        if said is None:
            yield from self._open_before_timeout(ctx) or self._stopped(ctx)
            return
        timed_out = {
            p.rank
            for p in ctx.evidence.processes
            if any(e.kind == EventKind.COLLECTIVE_TIMEOUT for e in p.log_events)
        }
        rank = said.rank if said.rank not in timed_out else None  # a waiter is no culprit
        quiet = ctx.silence.gap if said.rank is None else None
        if quiet is not None:
            rank = quiet.rank  # the one rank that did not time out was doing it
        if _printer_waited(said.meaning, said.rank, quiet is not None, timed_out):
            return
        who = f"rank {rank}" if rank is not None else "the job"
        doing = phrase(said.meaning)
        text = said.line.text.strip()
        yield Finding(
            rule=self.id,
            category=TABLE[said.meaning].category,
            severity=self.severity,
            title=f"the collectives timed out while {who} was {doing}: {text[:90]!r}",
            explanation=(
                f"The last thing {who} printed before the first timeout was {text[:200]!r} "
                f"({said.line.source}:{said.line.line}): it was {doing}. The ranks that timed "
                "out were waiting in a collective for the work to end, or for a rank that "
                "does it alone."
                + (
                    f" Every rank but {quiet.rank} reported the timeout "
                    f"({format_ranks(list(quiet.waiters))}): rank {quiet.rank} was not waiting "
                    "in the collective, it was still busy."
                    if quiet is not None
                    else ""
                )
            ),
            fix=TABLE[said.meaning].after_timeout_fix,
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
            # The job's last lines before the timeouts: one indirect signal, with or
            # without a rank (HD032 reads the same gap in its own way and comes first on a
            # tie).
            strength=Strength.HINT,
        )

    def _open_before_timeout(self, ctx: RuleContext) -> list[Finding]:
        """A save or an evaluation that a framework marker began and no marker ended,
        before the timeouts: further back than the last lines (other lines came between),
        or in the log of a rank that reported no timeout and stops in it while the others
        timed out (rank 0 alone saving while ranks 1-7 wait in their next collective)."""
        ev = ctx.evidence
        opens = unfinished(ev, _FAILURES)
        failing = {u.failure.source for u in opens if u.failure is not None}
        events = [*ev.job_log_events, *(e for p in ev.processes for e in p.log_events)]
        if not any(e.kind in _FAILURES for e in events):
            return []
        timed_out = {
            p.rank
            for p in ev.processes
            if any(e.kind == EventKind.COLLECTIVE_TIMEOUT for e in p.log_events)
        }
        # In a file with a failure: begun before it. In a file without one: the log ends in it.
        usable = [u for u in opens if u.failure is not None or (u.at_end and u.begin.source)]
        usable = [u for u in usable if u.failure is not None or u.begin.source not in failing]
        if not usable:
            return []
        usable.sort(key=lambda u: (u.rank is None or u.rank in timed_out, u.begin.line))
        found = usable[0]
        rank = found.rank if found.rank not in timed_out else None
        quiet = ctx.silence.gap if found.rank is None else None
        if quiet is not None:
            rank = quiet.rank
        if _printer_waited(found.meaning, found.rank, quiet is not None, timed_out):
            return []
        who = f"rank {rank}" if rank is not None else "the job"
        doing = phrase(found.meaning)
        text = found.begin.text.strip()
        failure = found.failure or next(e for e in events if e.kind in _FAILURES)
        return [
            Finding(
                rule=self.id,
                category=TABLE[found.meaning].category,
                severity=self.severity,
                title=f"{who} began {doing.replace('running ', '')} and never finished it "
                f"before the timeouts: {text[:80]!r}",
                explanation=(
                    f"{who[0].upper() + who[1:]} printed {text[:200]!r} "
                    f"({found.begin.source}:{found.begin.line}), the framework's line that "
                    "begins the work, and never the line that ends it (the save's 'Saved' or "
                    "'ready', the evaluation's metrics, or a training step after it); then the "
                    "collectives timed out. The ranks that timed out were waiting for it."
                ),
                fix=TABLE[found.meaning].after_timeout_fix,
                culprit_ranks=(rank,) if rank is not None else (),
                evidence=(
                    EvidenceRef(found.begin.source, text[:300], rank, found.begin.line),
                    EvidenceRef(failure.source, failure.text[:300], None, failure.line),
                ),
                # A begin without its end: a clear marker, but further from the timeout
                # than the last lines; still one indirect signal.
                strength=Strength.HINT,
            )
        ]

    def _stopped(self, ctx: RuleContext) -> Iterable[Finding]:
        """No timeout at all: the log just ends in an evaluation. Only when the
        inputs hold nothing else (no stack, no event but progress lines) may this speak,
        and weakly: the job stopped printing there, which is all a log that ends can say."""
        ev = ctx.evidence
        if any(p.has_stacks() for p in ev.processes):
            return
        events = [*ev.job_log_events, *(e for p in ev.processes for e in p.log_events)]
        loud = [e for e in events if e.kind not in _QUIET]
        if loud:
            # Only someone stopping the job from outside (the launcher's signal handler, a
            # KeyboardInterrupt) may follow, and only a begun save or evaluation speaks then.
            if all(e.kind in _STOPS or _interrupt(e) for e in loud):
                yield from self._stopped_in_save(ctx)
            return
        stop = stopped_during(ev)
        if stop is None:
            yield from self._stopped_in_save(ctx)
            return
        last = stop.lines[-1]
        who = f"rank {stop.rank}" if stop.rank is not None else "the job"
        doing = phrase(stop.meaning)
        text = last.text.strip()
        yield Finding(
            rule=self.id,
            category=TABLE[stop.meaning].category,
            severity=self.severity,  # a cause (weak: see the strength), not a remark
            title=f"the log stops while {who} was {doing}: {text[:90]!r}",
            explanation=(
                f"The last lines {who} printed ({last.source}:{last.line}) say it was "
                f"{doing}, and nothing came after them: no error and no timeout. Work that "
                "one rank does alone at that point (the main process computing metrics, "
                "writing a checkpoint) is where such a job usually waits; the others wait "
                "for it in their next collective. A log that ends is weak evidence: take "
                "the stacks of every rank to confirm."
            ),
            fix=TABLE[stop.meaning].after_timeout_fix,
            culprit_ranks=(stop.rank,) if stop.rank is not None else (),
            evidence=tuple(
                EvidenceRef(line.source, line.text.strip()[:300], stop.rank, line.line)
                for line in stop.lines
            ),
            strength=Strength.ABSENCE,  # a log that ends: the absence of what came next
        )

    def _stopped_in_save(self, ctx: RuleContext) -> Iterable[Finding]:
        """The log's last line is a framework's marker that begins a save or an
        evaluation (DeepSpeed's "[Torch] Saving …/mp_rank_00_model_states.pt..."), and its
        end never came. Weak, as any log that ends (the caller checked there is nothing
        else): the absence of a signal."""
        ends = [u for u in unfinished(ctx.evidence, _FAILURES, _STOPS) if u.at_end]
        if not ends:
            return
        ends.sort(key=lambda u: (u.rank is None, u.begin.source, u.begin.line))
        found = ends[0]
        who = f"rank {found.rank}" if found.rank is not None else "the job"
        doing = phrase(found.meaning)
        text = found.begin.text.strip()
        yield Finding(
            rule=self.id,
            category=TABLE[found.meaning].category,
            severity=self.severity,
            title=f"the log stops after {who} began {doing.replace('running ', '')}: {text[:80]!r}",
            explanation=(
                f"The last line {who} printed ({found.begin.source}:{found.begin.line}) is the "
                "framework's line that begins the work, and the line that ends it never came: "
                "no error and no timeout after it. A log that ends is weak evidence: take the "
                "stacks of every rank to confirm."
            ),
            fix=TABLE[found.meaning].after_timeout_fix,
            culprit_ranks=(found.rank,) if found.rank is not None else (),
            evidence=(EvidenceRef(found.begin.source, text[:300], found.rank, found.begin.line),),
            strength=Strength.ABSENCE,  # a log that ends: the absence of what came next
        )


RULE = ActivityBeforeTimeout
