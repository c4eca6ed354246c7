"""The only stack in the inputs shows what that process was doing

## What it means
A ticket often holds the stack of one process only: the rank the reporter could reach with
py-spy, gdb or pystack, or the faulthandler dump of the rank that timed out. With no other
rank to compare it with, hangdoc cannot say who waits for whom, but the stack still says
what this process was doing when it stopped: saving a checkpoint (torch.save, DCP,
save_pretrained… or the job's own writer), fetching a batch or tearing down DataLoader
workers, evaluating. That activity is the likely cause; the other ranks are presumably
waiting for this one in a collective.

## Why it hangs
A rank that never leaves a save, a data fetch or an evaluation never reaches the next
collective, and the other ranks wait in it until the timeout. A collective called from
inside a save or an evaluation on some ranks only (a rank-0-only `save_checkpoint` that
gathers state) blocks the same way.

## Evidence used
The main thread's stack of the one process whose stack the inputs hold (any stack format),
classified with the frame catalog and, where the catalog knows no frame, with what the
job's own names, open files and last log line say (docs/own_code.md). A traceback cut
before its exception line counts when its innermost frame shown is a checkpoint writer's
entry: every frame cut is inside the save; likewise one whose innermost frames shown are
the DataLoader iterator's receipt of a batch a worker shared (`_next_data` → `_get_data` →
`_try_get_data` → `_data_queue.get` → `_ForkingPickler.loads` → torch/multiprocessing/
reductions.py `rebuild_storage_fd`, or the resource sharer's `detach`/`get_connection`
inside it): torch's `_try_get_data` re-raises what fails there after checking for a dead
worker and for the file descriptors running out, so the failure is the DataLoader's
worker-to-main transport whatever the cut exception line said (a signal: the frames, not
the error; the fix: `torch.multiprocessing.set_sharing_strategy('file_system')`, a higher
`ulimit -n`, fewer workers). The pin-memory thread's receipt of the same batch is HD112's.
A process waiting in a collective inside the
job's own dataset preprocessing (``preprocess_dataset`` → ``main_process_first`` →
``barrier``) shows the ranks parted around work one rank does alone:
`rank_divergence_collective_vs_noncollective`, not a DataLoader, unless the work is shown
advancing when the waiter gave up (fixtures/cases/README.md: slow work is shown
advancing): the preprocessing's progress bar was live when the waiting rank's traceback
was written (tqdm ends no state of a bar with a newline, so the traceback is glued to its
last state, or follows it on the next line), not finished, with tqdm's estimate of time
left, and its elapsed time covers the shortest collective timeout torch sets by default
(10 minutes: NCCL's since torch 2.2). The work was then still running when the other rank
timed out waiting for it: slow, not hung, `not_a_hang_slow_or_benign` (a hint: one bar
and one traceback, nothing of the timeout's own value). Where the waiting process's
frames pass through a rank-0-first gate (transformers' or accelerate's
`main_process_first`, `torch_distributed_zero_first`: views/gates.py), it is one the gate
holds, and the rank named is the main process (rank 0), which does the gated work, not
the waiter. Where the one traceback of the inputs is cut before its exception line (its
innermost frame shown may be an outer call: it says nothing of where the process was) and
no death is shown, the bar it was written after still dates the failure: a preprocessing
bar live when it was written whose elapsed time lands just past one of torch's default
collective timeouts (10 or 30 minutes, within the two minutes a watchdog's abort and the
launcher's teardown take) is a waiter's timeout expiring while the work advanced, slow,
not hung (a hint); a traceback glued after a bar's last state on the same line (tqdm
ends no state with a newline) is read from its header on. A save next to a storage
error (EIO, ENOSPC), or whose traceback ends in a file-system call (os.makedirs) that
raised, is left to HD110: the storage's error decides.

## How to confirm
Take the stacks of every rank (`hangdoc collect --all` on every node, or `py-spy dump` of
each rank): the others should wait in a collective while this one is still where its stack
shows. Take a second sample a minute later to see whether it moves.

## How to fix
As for the activity: see the fix in the finding (a stuck or slow filesystem for a save, a
dead or blocked worker for the DataLoader, evaluation that runs on some ranks only).
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, ProcessEvidence, Severity, Strength
from hangdoc.analyzer.payloads.progress import PhaseMarker, Progress
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.analyzer.views.activity import (
    RankActivity,
    classify_process,
    waits_for_every_writer,
)
from hangdoc.analyzer.views.activity_table import TABLE, Activity, phases_beginning
from hangdoc.analyzer.views.deaths import first_deaths
from hangdoc.analyzer.views.gates import MAIN_RANK, stack_at_gate
from hangdoc.analyzer.views.save_errors import failed_save_calls
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.views.workers import receives_worker_batch
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Rule, RuleContext
from hangdoc.rules.causes import Cause, cause_of, key_frame_text
from hangdoc.rules.refs import stack_refs
from hangdoc.rules.strength import Shift, agreeing, shifted

# Activities that name a cause by themselves; a bare collective or a generic wait does not.
_TELLING = frozenset(
    {
        Category.CHECKPOINT_SAVE,
        Category.DATALOADER,
        Category.EVAL_SOME_RANKS,
        Category.IO_STALL,
        Category.PYTHON_DEADLOCK,
    }
)


def _preprocessing(activity: RankActivity, cause: Cause) -> bool:
    """The process is in the job's own dataset preprocessing (tokenizing, mapping: its
    frames say so), a rank's work alone before training: waiting in a collective inside
    it, the ranks parted there (fixtures/cases/README.md: one rank busy with work of its
    own, not shown advancing), a cause by itself though its category is the generic one."""
    if cause.category is not Category.RANK_DIVERGENCE:
        return False
    main = activity.main
    return (main is not None and main.has(Activity.PREPROCESS)) or any(
        s.meaning is Activity.PREPROCESS for s in cause.signals
    )


class LoneStack(Rule):
    __doc__ = __doc__
    id = "HD108"
    name = "lone-stack-activity"
    summary = "the only stack in the inputs shows a save, a data fetch or an evaluation"
    categories = tuple(sorted(_TELLING | {Category.RANK_DIVERGENCE, Category.NOT_A_HANG}))
    severity = Severity.ERROR
    requires = frozenset()

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        stacked = [p for p in ctx.evidence.processes if p.has_stacks()]
        if not stacked:
            # (no stack that goes to where its thread was: a traceback cut before its
            # exception line may still be the one written as a preprocessing bar stood)
            cut = self._cut_at_timeout(ctx)
            if cut is not None:
                yield cut
            return
        if len(stacked) != 1:
            return  # several processes: the cross-rank stack rules compare them
        process = stacked[0]
        activity = classify_process(process.rank if process.rank is not None else -1, process)
        if activity is None or activity.main is None:
            return
        cause = cause_of(activity, ctx.waits)
        gil_wait = False
        if cause.category not in _TELLING and not _preprocessing(activity, cause):
            gil = next((t for t in activity.threads if t.has(Activity.GIL_WAIT)), None)
            if gil is None:
                return
            # A native thread blocked taking the GIL (take_gil, PyEval_AcquireThread) in
            # a process that stopped: the thread holding the GIL waits for something this
            # one holds, the classic GIL/mutex inversion of C++ callbacks into Python.
            frame = next((f for t, f in gil.tag_frames if t is Activity.GIL_WAIT), None)
            row, gil_wait = TABLE[Activity.GIL_WAIT], True
            cause = Cause(
                row.category,
                f"has a thread {row.phrase}"
                + (f" ({frame.function})" if frame is not None else ""),
                row.fix,
            )
        if cause.category is Category.DATALOADER and receives_worker_batch(activity.main.thread):
            cause = _RECEIPT  # a traceback in the receipt of a worker's shared batch
        if cause.category is Category.CHECKPOINT_SAVE and _storage_error(ctx):
            # A save the storage failed (EIO, ENOSPC… logged or raised): the storage's own
            # error decides, and HD110 names it (fixtures/cases/README.md, Labels).
            return
        main = activity.main
        in_call = main.collective is not None
        who = process.label if process.rank is not None else "the process"
        # A process held at a rank-0-first gate (main_process_first: views/gates.py) waits
        # for the main process, which does the gated work: that one is the rank to name.
        gated = in_call and process.rank != MAIN_RANK and stack_at_gate(main.thread.frames)
        if in_call and _preprocessing(activity, cause):
            bar = _advancing_bar(ctx, process)
            if bar is not None:
                yield self._slow(process, activity, bar, gated=gated)
                return
        # A rank blocked in a collective inside a save's wait for every rank's writer
        # (Megatron's async-save completion check) asked whether the others are done: the
        # rank it waits for is still writing; this one is no culprit.
        waited = in_call and any(waits_for_every_writer(f) for f in main.thread.frames)
        culprits = (process.rank,) if process.rank is not None and not waited else ()
        if gated:
            culprits = (MAIN_RANK,)
        where = key_frame_text(activity)
        title = f"{who} {cause.doing}" + (
            f", waiting in {main.collective.op} inside it" if main.collective else ""
        )
        explanation = (
            f"The inputs hold the stack of one process only ({who}); it "
            f"{cause.doing} ({where})"
            + (
                f", and is blocked in {main.collective.op} there: a collective that only "
                "some ranks issue from inside this activity never completes"
                if main.collective
                else ""
            )
            + ". With no other rank's stack to compare, this activity is the likely cause: "
            "the other ranks presumably wait for this one in a collective."
        )
        if waited:
            explanation += (
                f" {who[0].upper() + who[1:]} is in the save's wait for every rank's writer"
                " to finish: it waits there for a rank still writing, the one to look at."
            )
        if culprits:
            explanation += f" Collect the other ranks' stacks to confirm ({plural_ranks(culprits)} "
            explanation += "is the one to compare with)."
        # One process's view, nothing to compare it with: at most one direct signal.
        strength = Strength.SIGNAL  # frames the catalog knows
        if cause.signals:  # the job's own names: one is a hint, each that agrees adds
            strength = agreeing(Strength.HINT, len(cause.signals), Strength.SIGNAL)
        if gil_wait:
            # One sample of a GIL wait: stuck, or caught in passing.
            strength = shifted(Strength.SIGNAL, Shift.ONE_SAMPLE)
        if in_call and main.has(Activity.CHECKPOINT_SAVE):
            # A collective inside a save: the classic rank-0-only save.
            strength = min(shifted(strength, Shift.AGREES), Strength.SIGNAL)
        yield Finding(
            rule=self.id,
            category=cause.category,
            severity=self.severity,
            title=title,
            explanation=explanation,
            fix=cause.fix,
            culprit_ranks=culprits,
            evidence=tuple(stack_refs([activity])),
            strength=strength,
        )

    def _cut_at_timeout(self, ctx: RuleContext) -> Finding | None:
        """The one traceback of the inputs, cut before its exception line, written as a
        preprocessing bar stood live (unfinished, time left) at an elapsed time just past
        one of torch's default collective timeouts, with no death shown: a process gave up
        at a waiter's timeout while the preprocessing still advanced. Its frames, cut,
        do not say where it was; the bar's clock says when it failed."""
        cut = [p for p in ctx.evidence.processes if p.cut_text_stacks()]
        if len(cut) != 1 or first_deaths(ctx.timeline):
            return None
        bar = _advancing_bar(ctx, cut[0], cut=True)
        meter = _meter(bar) if bar is not None else None
        if bar is None or meter is None or meter.elapsed_s is None:
            return None
        timeout = next(
            (t for t in _DEFAULT_TIMEOUTS_S if t <= meter.elapsed_s <= t + _TEARDOWN_S), None
        )
        if timeout is None:
            return None
        return Finding(
            rule=self.id,
            category=Category.NOT_A_HANG,
            severity=self.severity,
            title=f"not a hang: the dataset preprocessing was still advancing ({meter.meter} "
            f"after {meter.elapsed}) when a traceback cut it off, at torch's default "
            f"{timeout // 60}-minute collective timeout",
            explanation=(
                f"A traceback was written right after the preprocessing's progress bar "
                f"({bar.event.source}:{bar.event.line}: {meter.meter} after {meter.elapsed}, "
                "with time still left by tqdm's estimate): the work was advancing when a "
                f"process failed, {meter.elapsed_s - timeout} s past torch's default "
                f"{timeout // 60}-minute collective timeout counted from the bar's start. "
                "The ranks that do not preprocess wait in a collective meanwhile; their wait "
                "ran out while the work went on. Nothing was stuck; the work took longer "
                "than the collective timeout. The traceback is cut before its exception "
                "line, so the timeout itself is not shown."
            ),
            fix=(
                "Raise the process-group timeout for this phase (init_process_group("
                "timeout=timedelta(hours=2)), HF --ddp_timeout, and check that it reaches "
                "every rank), or preprocess and cache the dataset ahead of the job (more "
                "num_proc)."
            ),
            evidence=(bar.ref(),),
            strength=Strength.HINT,  # one bar and a cut traceback; the timeout not printed
            says_not_hung=True,
        )

    def _slow(
        self, process: ProcessEvidence, activity: RankActivity, bar: Placed, *, gated: bool
    ) -> Finding:
        """The waiter's traceback followed a live, advancing preprocessing bar that had
        run past the shortest default timeout: the work was slow, not stuck."""
        meter = _meter(bar)
        assert meter is not None
        who = process.label if process.rank is not None else "the process"
        return Finding(
            rule=self.id,
            category=Category.NOT_A_HANG,
            severity=self.severity,
            title=f"not a hang: the dataset preprocessing was still advancing ({meter.meter} "
            f"after {meter.elapsed}) when {who} gave up waiting for it",
            explanation=(
                f"The inputs hold the stack of one process only ({who}), waiting in a "
                f"collective inside the job's dataset preprocessing ({key_frame_text(activity)})."
                f" Its traceback was written right after the preprocessing's progress bar "
                f"({bar.event.source}:{bar.event.line}: {meter.meter} after {meter.elapsed}, "
                "with time still left by tqdm's estimate): the rank doing the work was "
                "still advancing when this one's wait ran out. Nothing was stuck; the work "
                "took longer than the collective timeout."
                + (
                    f" It waits at a main-process-first gate: rank {MAIN_RANK}, the main "
                    "process, is the one doing the work."
                    if gated
                    else ""
                )
            ),
            fix=(
                "Raise the process-group timeout for this phase (init_process_group("
                "timeout=timedelta(hours=2)), HF --ddp_timeout), or preprocess and cache the "
                "dataset ahead of the job (more num_proc)."
            ),
            culprit_ranks=(MAIN_RANK,) if gated else (),
            evidence=(bar.ref(), *stack_refs([activity])),
            strength=Strength.HINT,  # one bar and one traceback; the timeout is not printed
            says_not_hung=True,
        )


# The DataLoader iterator's receipt of a batch a worker shared (views/workers.py
# receives_worker_batch): its traceback there is the transport's failure, a dead worker or
# descriptors run out, which torch's _try_get_data tells apart in its exception line
# ("DataLoader worker (pid(s) …) exited unexpectedly"; "Too many open files …"; the
# descriptor's "received 0 items of ancdata" from multiprocessing's reduction.recvfds).
_RECEIPT = Cause(
    Category.DATALOADER,
    "failed receiving a batch a DataLoader worker shared through a file descriptor "
    "(torch.multiprocessing's rebuild_storage_fd in the iterator's _try_get_data)",
    "The worker-to-main transport of the DataLoader failed: a worker died (look for "
    "'DataLoader worker (pid …) exited unexpectedly' or a kill by signal above it) or the "
    "process ran out of file descriptors for the shared tensors ('Too many open files', "
    "'received 0 items of ancdata'). Call torch.multiprocessing.set_sharing_strategy("
    "'file_system') at the start of the script, raise the descriptor limit (ulimit -n), "
    "or use fewer workers (num_workers) or smaller prefetch_factor.",
)

# The shortest collective timeout torch sets by default: NCCL's 10 minutes since torch 2.2
# (gloo's and older NCCL's are 30): a bar that ran this long ran as long as a waiter can
# have waited with no timeout of its own set.
_DEFAULT_TIMEOUT_S = 600
# torch's default collective timeouts (NCCL's 10 minutes since torch 2.2; gloo's and older
# NCCL's 30: torch/distributed/constants.py default_pg_timeout, default_pg_nccl_timeout),
# and how long after one a waiter's failure may be printed: the watchdog's poll, its
# abort and the launcher's teardown take seconds, the waiter may have reached its wait a
# little after the bar began.
_DEFAULT_TIMEOUTS_S = (600, 1800)
_TEARDOWN_S = 120
_PREPROCESS_PHASES = phases_beginning(Activity.PREPROCESS)


def _meter(p: Placed) -> Progress | None:
    marker = p.event.payload_as(PhaseMarker)
    return marker.progress if marker is not None else None


def _advancing_bar(
    ctx: RuleContext, process: ProcessEvidence, *, cut: bool = False
) -> Placed | None:
    """A preprocessing bar live when one of the process's tracebacks was written (glued to
    it, or on the line just before it, in the same text), unfinished, with time left by
    its own estimate, and run for at least the shortest default collective timeout.
    ``cut``: of its tracebacks cut before their exception line only."""
    stacks = process.cut_text_stacks() if cut else process.text_stacks
    starts = {(t.source, t.line) for t in stacks if t.line is not None}
    for p in ctx.timeline.of(EventKind.PHASE):
        marker = p.event.payload_as(PhaseMarker)
        meter = marker.progress if marker is not None else None
        if marker is None or meter is None or marker.phase not in _PREPROCESS_PHASES:
            continue
        line = p.event.line
        if line is None or not (
            (p.event.source, line) in starts or (p.event.source, line + 1) in starts
        ):
            continue
        if meter.remaining_s is None or meter.remaining_s <= 0 or meter.elapsed_s is None:
            continue
        if meter.n is not None and meter.total is not None and meter.n >= meter.total:
            continue
        if meter.elapsed_s >= _DEFAULT_TIMEOUT_S:
            return p
    return None


def _storage_error(ctx: RuleContext) -> bool:
    """The inputs report a storage error (an errno of the file system, read by the log
    parser into the event's ``storage``)."""
    return any(p.event.payload.storage is not None for p in ctx.timeline.events) or bool(
        failed_save_calls(ctx.evidence)  # a file-system call raised in the save
    )


RULE = LoneStack
