"""A DataLoader worker process died (killed, segfault, bus error) or timed out

## What it means
torch printed its own message for a DataLoader worker that died: "DataLoader worker (pid
N) is killed by signal: Killed", "… exited unexpectedly", "Unexpected segmentation fault /
bus error encountered in worker", or "DataLoader timed out after N seconds". The rank that
owned the worker raised (or waits for a batch that never comes), so it never reaches the
next collective, and the other ranks wait in it until the timeout.

## Why it hangs
A worker killed by the kernel's OOM killer (signal: Killed) or one that crashes in native
code takes its batch with it. With the default `timeout=0` the main process may wait for
it; otherwise it raises and dies while the other ranks block in their next collective.

## Evidence used
torch's DataLoader messages in the logs (torch/utils/data/dataloader.py and
torch/csrc/DataLoader.cpp), with the rank a prefix or the file gives; a bus error or the
words "shared memory" point at /dev/shm. torch's shared-memory allocator failing on the
``/dev/shm/torch_*`` files the workers pass batches through ("unable to write to file
</torch_…>: No space left on device", "unable to open shared memory object </torch_…>
… Too many open files"; aten/src/ATen/MapAllocator.cpp) counts too: it is how the
workers' batches reach the main process (torch.multiprocessing shares tensors that way
outside DataLoaders too, in other data-loading workers).
The lines are read wherever they are: in a log, or printed above a faulthandler dump.

A worker that could not be started counts too: a rank's exception raised in Python's
multiprocessing start path (its traceback's innermost frames: process.py ``start``,
popen_fork.py / popen_spawn_posix.py ``_launch``, util.py ``spawnv_passfds``; fork failing
with ``OSError: [Errno 12] Cannot allocate memory``, a dataset that cannot be pickled for
a spawned worker), before the others' timeouts (parsers/logs/tb_stage.py). torch's
DataLoader starts its workers there (``_MultiProcessingDataLoaderIter.__init__``:
``w.daemon = True; w.start()``); frames of torch.multiprocessing starting the ranks, or of
a Pool or an executor, make it no worker's. A traceback that shows the DataLoader's own
frames is one direct signal; one cut above the start path, a rank's child process that
failed to start, is stated one step weaker (the ranks' children are most often their
DataLoader workers, not always).

A forked child using CUDA its parent initialised counts too, one step weaker still: an
abort ("terminate called after throwing an instance of 'c10::Error'") whose what() is
the CUDA runtime's "initialization error" (Sign.CUDA_AFTER_FORK, parsers/logs/scanner.py):
C++ code outside any Python call used CUDA state made before, in a process where CUDA
cannot initialise, which is a child forked after CUDA was initialised (torch's notes on
multiprocessing: the CUDA runtime does not support the fork start method; from Python the
child gets "Cannot re-initialize CUDA in forked subprocess"). A rank's forked children are
most often its DataLoader workers; the GPU and its driver are not in question.

A host-memory error (Python's MemoryError, ENOMEM) raised in a DataLoader worker process
counts too: its traceback shows the worker's own loop (torch/utils/data/_utils/worker.py
``_worker_loop``), or it is the main process's re-raise of it, torch/_utils.py's
ExceptionWrapper "Caught MemoryError in DataLoader worker process N" (the death-kind
table's worker-memory row, analyzer/views/death_kind.py). The worker's host memory ran
out; any other exception a worker raised is the dataset's own error, a crash.

## How to confirm
`dmesg -T | grep -i -E 'killed process|oom'` on the node for a Killed worker; `df -h
/dev/shm` for a bus error (a container's default 64 MB shm is too small for the workers'
batches); run with `num_workers=0` to see the error in the main process.

## How to fix
Could not start (fork/spawn failed with ENOMEM): the rank's memory (or the node's
overcommit limit) does not allow another process: fewer workers, `persistent_workers=True`
so they are not forked again each epoch, less memory held by the rank before its
DataLoader starts, or the `spawn`/`forkserver` start method. Killed: lower the workers'
memory (fewer workers, smaller prefetch_factor, no copy of a large dataset per worker), or
give the node more memory. Bus error: give the container
more shared memory (`--shm-size`, `--ipc=host`) or use `file_system` sharing
(`torch.multiprocessing.set_sharing_strategy('file_system')`). Segfault: find the native
library that crashes in the worker (decoding, augmentations), and set
`DataLoader(timeout=...)` so a stuck worker raises instead of hanging the job.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.launch import ExceptionRaised, LoaderWorkerDied
from hangdoc.analyzer.views.deaths import Death, first_deaths
from hangdoc.analyzer.views.timeline import precedes_wave, wave
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import Shift, shifted


class DataloaderWorkerDied(Rule):
    __doc__ = __doc__
    id = "HD109"
    name = "dataloader-worker-died"
    summary = "a DataLoader worker was killed, crashed or timed out (torch's own message)"
    categories = (Category.DATALOADER,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        events = ctx.timeline.of(EventKind.DATALOADER_WORKER_DIED)
        if not events:
            starts = _failed_starts(ctx)
            if starts:
                yield self._not_started(starts)
                return
            forked = _forked_cuda(ctx)
            if forked:
                yield self._forked_cuda(forked)
                return
            starved = _worker_memory(ctx)
            if starved:
                yield self._worker_memory(starved)
            return
        first = events[0]
        died = first.event.payload_as(LoaderWorkerDied) or LoaderWorkerDied()
        ranks = tuple(sorted({p.rank for p in events if p.rank is not None}))
        how = f"killed by {died.signal}" if died.signal else "gone"
        if died.timeout_s:
            how = f"timed out after {died.timeout_s} s"
        who = (
            f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"
            if ranks
            else "a rank"
        )
        shm = " (shared memory: /dev/shm too small)" if died.shm else ""
        shm_error = died.shm_error
        if shm_error:
            how = "could not pass its batch through shared memory" + (
                f" ({shm_error})" if shm_error != "failed" else ""
            )
        was = "" if shm_error else "was "
        yield Finding(
            rule=self.id,
            category=Category.DATALOADER,
            severity=self.severity,
            title=f"a DataLoader worker of {who} {was}{how}{shm}",
            explanation=(
                f"torch reported that a DataLoader worker of {who} {was}{how}{shm}: "
                f"{(died.message or first.event.text)[:200]!r}. The rank lost its "
                "batch: it raised or waits, and never reaches the collective the other "
                "ranks wait in."
            ),
            fix=(
                "Killed: the kernel's OOM killer took the worker; lower the workers' memory "
                "(fewer workers, smaller prefetch_factor) or add memory. Bus error: more "
                "/dev/shm (--shm-size, --ipc=host) or set_sharing_strategy('file_system'). "
                "Too many open files: raise the fd limit (ulimit -n) or use the 'file_system' "
                "sharing strategy. "
                "Segfault: the native code the worker runs (decoding, augmentation). Set "
                "DataLoader(timeout=...) so a stuck worker raises."
            ),
            culprit_ranks=ranks,
            evidence=tuple(p.ref() for p in events[:3]),
            strength=Strength.STATED,  # torch's own message for the worker
        )

    def _not_started(self, starts: list[Death]) -> Finding:
        """A rank could not start a worker process (the docstring's last paragraph of
        "Evidence used")."""
        first = starts[0]
        ranks = sorted({d.rank for d in starts if d.rank is not None})
        who = ranks_text(ranks) if ranks else "a rank (rank unknown)"
        shown = any(_by_dataloader(d) for d in starts)
        worker = "a DataLoader worker" if shown else "a worker process"
        return Finding(
            rule=self.id,
            category=Category.DATALOADER,
            severity=Severity.CRITICAL if shown else Severity.ERROR,
            title=f"{who} could not start {worker}: {first.summary}",
            explanation=(
                f"{who} raised {first.summary!r} while starting {worker} (its traceback "
                "ends in Python's multiprocessing start path: fork or spawn of the child "
                "failed). The rank's DataLoader never got its batches, so the rank left the "
                "training loop and the other ranks waited for it in their next collective."
                + (
                    ""
                    if shown
                    else " The traceback does not show what started the child; in a "
                    "training rank that is most often its DataLoader (it starts num_workers "
                    "daemon processes, again each epoch unless persistent_workers)."
                )
            ),
            fix=(
                "Fork/spawn failing with 'Cannot allocate memory' is the rank's memory (or "
                "the node's overcommit limit, vm.overcommit_memory) refusing another process: "
                "fewer DataLoader workers, persistent_workers=True, less host memory held by "
                "the rank before the DataLoader starts, or the spawn/forkserver start method; "
                "an object that cannot be pickled for a spawned worker: make the dataset and "
                "collate function picklable."
            ),
            culprit_ranks=tuple(ranks),
            evidence=tuple(limited_refs([d.placed for d in starts], limit=4)),
            # The rank's traceback shows the start failing; a DataLoader's frames say
            # whose worker it was, without them it is the likeliest owner only.
            strength=Strength.SIGNAL if shown else shifted(Strength.SIGNAL, Shift.OTHER_READINGS),
        )

    def _worker_memory(self, starved: list[Death]) -> Finding:
        """A DataLoader worker ran out of host memory (the docstring's paragraph on
        MemoryError in a worker)."""
        ranks = sorted({d.rank for d in starved if d.rank is not None})
        who = ranks_text(ranks) if ranks else "a rank (rank unknown)"
        return Finding(
            rule=self.id,
            category=Category.DATALOADER,
            severity=Severity.CRITICAL,
            title=f"a DataLoader worker of {who} ran out of host memory: {starved[0].summary}",
            explanation=(
                f"{who} raised {starved[0].summary!r} from a DataLoader worker process (the "
                "worker's own loop, or torch's re-raise of what a worker raised: \"Caught "
                "MemoryError in DataLoader worker process N\"): the host's memory ran out "
                "in the worker. The rank left the training loop, and the other ranks waited "
                "for it in their next collective."
            ),
            fix=(
                "Lower the workers' memory: fewer workers, a smaller prefetch_factor, no "
                "per-worker copy of a large dataset (Python lists of objects are copied on "
                "access in forked workers: keep the index in numpy arrays or on disk), or "
                "give the node more memory; num_workers=0 shows the same code's use in the "
                "rank itself."
            ),
            culprit_ranks=tuple(ranks),
            evidence=tuple(limited_refs([d.placed for d in starved], limit=4)),
            strength=Strength.SIGNAL,
        )

    def _forked_cuda(self, forked: list[Death]) -> Finding:
        """A forked child aborted on CUDA state its parent made (the docstring's
        paragraph on CUDA_AFTER_FORK)."""
        ranks = sorted({d.rank for d in forked if d.rank is not None})
        who = ranks_text(ranks) if ranks else "a rank (rank unknown)"
        return Finding(
            rule=self.id,
            category=Category.DATALOADER,
            severity=Severity.ERROR,
            title=f"a process forked by {who} aborted using CUDA: {forked[0].summary}",
            explanation=(
                "A process aborted on an uncaught C++ exception whose message is the CUDA "
                "runtime's initialization error: C++ code outside any Python call used CUDA "
                "state made before, in a process where CUDA cannot initialise. That is a "
                "child forked after its parent initialised CUDA, in a training rank most "
                "often a DataLoader worker (CUDA tensors in the dataset or the collate "
                "function, or a CUDA call in a worker); the worker's batch never comes and "
                "the rank stops, while the other ranks wait for it."
            ),
            fix=(
                "Keep CUDA out of DataLoader workers: return CPU tensors from the dataset "
                "and collate_fn and move them to the GPU in the training loop; or start the "
                "workers with multiprocessing_context='spawn' (or 'forkserver'). Check with "
                "num_workers=0, where the same code runs in the rank itself."
            ),
            culprit_ranks=tuple(ranks),
            evidence=tuple(limited_refs([d.placed for d in forked], limit=4)),
            # The abort's what() shows CUDA in a forked child; whose child, is not shown.
            strength=shifted(Strength.SIGNAL, Shift.OTHER_READINGS),
        )


def _forked_cuda(ctx: RuleContext) -> list[Death]:
    """The forked children's CUDA aborts (Death.after_fork) before the others' timeouts."""
    tl = ctx.timeline
    forked = [d for d in first_deaths(tl) if d.after_fork]
    if not forked:
        return []
    wave_events = wave(tl)
    return [d for d in forked if precedes_wave(d.placed, wave_events) is not False]


def _worker_memory(ctx: RuleContext) -> list[Death]:
    """The deaths of a host-memory error raised in a DataLoader worker (the death-kind
    table's worker-memory row) before the others' timeouts."""
    tl = ctx.timeline
    found = [
        d
        for d in first_deaths(tl)
        if (kind := d.kind) is not None and kind.row.name == "worker-memory"
    ]
    if not found:
        return []
    wave_events = wave(tl)
    return [d for d in found if precedes_wave(d.placed, wave_events) is not False]


def _by_dataloader(death: Death) -> bool:
    raised = death.placed.event.payload_as(ExceptionRaised)
    return raised is not None and raised.by_dataloader


def _failed_starts(ctx: RuleContext) -> list[Death]:
    """The ranks' failures to start a worker process that came before the others'
    timeouts (after them, a failure is the teardown's)."""
    tl = ctx.timeline
    starts = [d for d in first_deaths(tl) if d.worker_start]
    if not starts:
        return []
    wave_events = wave(tl)
    return [d for d in starts if precedes_wave(d.placed, wave_events) is not False]


RULE = DataloaderWorkerDied
