"""The DataLoader's pin-memory thread failed to receive a batch from a worker that was gone

## What it means
A rank printed `Exception in thread …` with a traceback through the DataLoader's
pin-memory thread (torch/utils/data/_utils/pin_memory.py `_pin_memory_loop`) receiving a
batch that a worker process had shared through a file descriptor
(torch/multiprocessing/reductions.py `rebuild_storage_fd` → multiprocessing's
resource_sharer: `ConnectionResetError`, `ConnectionRefusedError`, `FileNotFoundError`).
The worker that held the descriptor had already exited. That happens when the process
shuts down with batches still in flight: the workers end first, the pin-memory thread is
still draining their queue. torch's own loop calls it "weird things [that] can happen when
shutting down, e.g., fd being closed when tensors are shared via fds", and ends quietly
when the iterator was shut down properly; PyTorch's maintainers call the printed error
harmless at exit (pytorch/pytorch#9127).

## Why it hangs
It does not. The traceback is printed as the process exits (the end of training, or a
script that leaves with a DataLoader iterator still alive); nothing waits on it. If the
training itself stopped early, another line says why (a worker killed, a timeout), and
other rules name it.

## Evidence used
A traceback read from text of a non-main thread whose frames show the pin-memory loop and,
inside it, the receipt of a shared batch (views/workers.py; a traceback cut below those
frames still says so, parsers/stacks/pin_memory.py), and nothing else that stopped: no
timeout, no rank's death, no live stack, no other rule's error. One traceback whose
place in the run the paste does not show: a hint.

## How to confirm
Check that the run had finished its work before the traceback (the last step or epoch
logged is the configured one, the checkpoint was written) and that the process exited.
If the traceback came mid-run, look for the worker's own death above it
(`DataLoader worker (pid …) is killed by signal`), which is the cause.

## How to fix
Nothing to fix for a hang. To silence it, let the DataLoader iterator end before the
process exits (exhaust it or `del` it, so its `_shutdown_workers` sets the done event), or
upgrade torch: later releases shut the pin-memory thread down before the workers. A worker
that dies mid-run (host memory, `/dev/shm` too small in a container) is another failure:
raise `--shm-size`, lower `num_workers`.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.views.deaths import first_deaths, is_wave
from hangdoc.analyzer.views.workers import pin_memory_receipt_failures
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Rule, RuleContext


class PinMemoryAtExit(Rule):
    __doc__ = __doc__
    id = "HD112"
    name = "pin-memory-at-exit"
    summary = "the DataLoader's pin-memory thread failed to receive a batch from an exited worker"
    categories = (Category.NOT_A_HANG,)
    severity = Severity.WARNING
    requires = frozenset()
    after = True  # speaks only when no other rule found what stopped the job

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        ev = ctx.evidence
        failures = pin_memory_receipt_failures(ev.processes)
        if not failures:
            return
        if any(f.severity in (Severity.CRITICAL, Severity.ERROR) for f in ctx.prior):
            return  # something stopped or failed: the thread's error is its aftermath
        if any(p.stack_samples for p in ev.processes):
            return  # a live stack says where a rank was: the stack rules judge it
        tl = ctx.timeline
        if first_deaths(tl) or any(
            is_wave(p) and p.kind != EventKind.AGENT_TERMINATING for p in tl.events
        ):
            return  # a rank died or timed out: not the end of a finished run
        first = failures[0]
        ranks = sorted({f.process.rank for f in failures if f.process.rank is not None})
        who = f"rank {ranks[0]}'s" if len(ranks) == 1 else "a rank's"
        yield Finding(
            rule=self.id,
            category=Category.NOT_A_HANG,
            severity=Severity.WARNING,
            title=(
                f"{who} DataLoader pin-memory thread failed to receive a batch from a worker "
                "that had exited: shutdown noise, not a hang"
            ),
            explanation=(
                "The traceback is the DataLoader's pin-memory thread (_pin_memory_loop) "
                "receiving a batch a worker had shared through a file descriptor "
                "(rebuild_storage_fd): the worker was gone. That happens when the process "
                "exits with batches in flight; torch's own loop calls it the weird things of "
                "shutting down, and nothing in these inputs shows a timeout, a death or a "
                "blocked rank. It is most likely what was taken for the problem."
            ),
            fix=(
                "Nothing to fix for a hang; let the DataLoader iterator end (exhaust or del "
                "it) before the process exits, or upgrade torch. If the run stopped early, "
                "look above for the worker's own death (DataLoader worker … is killed by "
                "signal): raise the container's /dev/shm, lower num_workers."
            ),
            evidence=(
                EvidenceRef(
                    first.source,
                    f"thread {first.thread.name or '?'} in _pin_memory_loop, receiving a "
                    "shared batch",
                    first.process.rank,
                    first.line,
                ),
            ),
            # One traceback whose place in the run is not shown: a hint.
            strength=Strength.HINT,
            says_not_hung=True,
        )


RULE = PinMemoryAtExit
