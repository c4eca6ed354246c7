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

## How to confirm
`dmesg -T | grep -i -E 'killed process|oom'` on the node for a Killed worker; `df -h
/dev/shm` for a bus error (a container's default 64 MB shm is too small for the workers'
batches); run with `num_workers=0` to see the error in the main process.

## How to fix
Killed: lower the workers' memory (fewer workers, smaller prefetch_factor, no copy of a
large dataset per worker), or give the node more memory. Bus error: give the container
more shared memory (`--shm-size`, `--ipc=host`) or use `file_system` sharing
(`torch.multiprocessing.set_sharing_strategy('file_system')`). Segfault: find the native
library that crashes in the worker (decoding, augmentations), and set
`DataLoader(timeout=...)` so a stuck worker raises instead of hanging the job.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.launch import LoaderWorkerDied
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext


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


RULE = DataloaderWorkerDied
