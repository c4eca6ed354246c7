"""A rank ran out of GPU memory; the others then timed out waiting for it

## What it means
A rank raised `torch.OutOfMemoryError` (or NCCL reported `Cuda failure 'out of
memory'`) before the other ranks timed out. The rank died or stopped participating,
so its peers waited in a collective until the watchdog or the launcher killed them.

## Why it hangs
The out-of-memory rank leaves the training loop (its exception propagates, or an
`except` swallows it and skips a collective); the others block in their next
collective for the full process-group timeout.

## Evidence used
CUDA out-of-memory messages in tracebacks, `torchrun` error files and NCCL WARN lines,
ordered in time against the timeout wave (analyzer/views/timeline.py). An OOM printed *after*
the timeouts is a consequence of the teardown (gh:NVIDIA/nccl/issues/1284) and is not
reported, nor is NCCL's "Cuda failure 'out of memory'" of a call that allocates or pins
*host* memory (its WARN's place, looked up in every NCCL release: HD206's set-up failure).
An OOM the rank lived through (its stacks show it alive, blocked in a collective after it:
a handler caught it and went on) is reported weaker: the collectives that no longer match
are what the others wait for (HD002). An OOM whose own lines name no rank (one
traceback, printed once) is the rank's that the launcher reports as the one worker that
exited with an error code of its own (views/deaths.py ``one_exit``: srun's "task 3: Exited
with exit code 1", Lightning's "[rank: 3] Child process with PID … terminated with code
1", torchrun's, DeepSpeed's, torch.multiprocessing's).

## How to confirm
The cited line shows the allocation that failed and how much memory was in use.
`nvidia-smi` or `torch.cuda.memory_summary()` on that rank at the failing step shows
the peak; ranks often differ because of uneven batch lengths or rank-0-only work.

## How to fix
Lower the memory peak on that rank: smaller or length-bucketed batches, activation
checkpointing, `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` against
fragmentation, ZeRO/FSDP sharding, no rank-0-only evaluation on the training GPU.
Never catch an OOM on one rank and continue: the ranks then disagree on collectives.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.views.deaths import DeathHow, first_deaths, one_exit, one_failure
from hangdoc.analyzer.views.timeline import precedes_wave, victims, wave
from hangdoc.analyzer.views.training import survived_errors
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import Shift, shifted


class CudaOomFirst(Rule):
    __doc__ = __doc__
    id = "HD031"
    name = "cuda-oom-first"
    summary = "a rank ran out of GPU memory before the others timed out"
    categories = (Category.CUDA_OOM,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        deaths = first_deaths(tl)
        ooms = [d for d in deaths if d.how == DeathHow.CUDA_OOM]
        if not ooms:
            return
        wave_events = wave(tl)
        leading = [d for d in ooms if precedes_wave(d.placed, wave_events) is not False]
        if not leading:
            return
        earlier_crash = [
            d
            for d in deaths
            if d.how != DeathHow.CUDA_OOM
            and d.certain
            and d.placed.index < leading[0].placed.index
            and precedes_wave(d.placed, [leading[0].placed]) is True
        ]
        if earlier_crash:
            return  # another rank died first: HD030 names it
        culprits = sorted({d.rank for d in leading if d.rank is not None})
        joined = ""
        if not culprits and one_failure(leading):
            # The OOM's own lines name no rank; the launcher names the one worker that
            # exited with an error of its own: the OOM is that worker's.
            exits = [d for d in deaths if precedes_wave(d.placed, wave_events) is not False]
            exited = one_exit(exits)
            if exited is not None and exited.rank is not None:
                culprits = [exited.rank]
                joined = (
                    f" The out-of-memory error's own lines name no rank; the launcher reports "
                    f"rank {exited.rank} as the one worker that exited with an error of its "
                    f"own ({exited.placed.event.text.strip()[:120]}): the error is taken to be "
                    "that worker's."
                )
                leading = [*leading, exited]
        waiting = sorted(victims(tl) - set(culprits))
        who = ranks_text(culprits) if culprits else "a rank (rank unknown)"
        first = leading[0]
        title = f"{who} ran out of GPU memory: {first.summary}"
        if waiting:
            title += f"; {ranks_text(waiting)} then timed out"
        ordered = precedes_wave(first.placed, wave_events)
        explanation = (
            f"{who} hit CUDA out-of-memory ({first.summary}) before the other ranks reported "
            "any timeout; the others then waited for it in a collective."
            if wave_events
            else f"{who} hit CUDA out-of-memory ({first.summary}); no other failure precedes it."
        ) + joined
        # The OOM is one direct signal; its time before the timeouts states the cause.
        strength = shifted(Strength.SIGNAL, Shift.ORDER_SHOWN) if ordered else Strength.SIGNAL
        severity = Severity.CRITICAL
        acts = [ctx.activities[r] for r in culprits if r in ctx.activities]
        if acts and len(survived_errors(acts)) == len(culprits):
            # The culprits' stacks show them alive, blocked in a collective after the OOM: a
            # handler caught it and they went on. It is why they parted from the others,
            # not what the others wait for: the stack rules say where they wait (HD002).
            strength, severity = shifted(strength, Shift.CONTRADICTED), Severity.ERROR
            explanation += (
                f" But the stacks show {who} alive after it, blocked in a collective: it lived "
                "through the error (a handler caught it and went on, skipping what the step "
                "had left to do), so the ranks now wait in collectives that do not match; "
                "the stack findings say which."
            )
        yield Finding(
            rule=self.id,
            category=Category.CUDA_OOM,
            severity=severity,
            title=title,
            explanation=explanation,
            fix=(
                "Lower the peak GPU memory of that rank (batch size or length bucketing, "
                "activation checkpointing, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, "
                "sharding with FSDP/ZeRO); never catch an OOM on one rank and go on."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(waiting),
            evidence=tuple(limited_refs([d.placed for d in leading], limit=6)),
            strength=strength,
        )


RULE = CudaOomFirst
