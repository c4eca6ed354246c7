"""Ranks waited at a "rank 0 first" gate while the main process did the gated work

## What it means
A rank's traceback stops where it entered a context manager that holds every rank but
the main one in a barrier until the main process has done the work inside it first:
transformers' `TrainingArguments.main_process_first` (its `dist.barrier()` before it
yields), accelerate's `main_process_first` / `local_main_process_first`
(`wait_for_everyone`), ultralytics' and YOLOv5's `torch_distributed_zero_first`
(`dist.barrier(device_ids=[local_rank])`). What it raised there (a timeout of that
barrier, the store's socket giving out, a Ctrl-C) was the wait for the main process,
which was still inside the gate: tokenizing, mapping or caching a dataset.

## Why it hangs
The work inside the gate runs on the main process alone and can take longer than the
process group's timeout (a large dataset tokenized with `num_proc`, a label cache built
from scratch). The other ranks sit in the barrier; when the timeout passes first, they
fail there while the main process is still working, or, with a long timeout, the job
only looks stuck.

## Evidence used
A traceback (of any rank but the main one, or of a rank not named) whose frames show it
entering such a gate: the caller's `with …main_process_first(…)` /
`with torch_distributed_zero_first(…)` line over the context manager's `__enter__`, or
the gate's own frame over its barrier (parsers/logs/tb_stage.py, `RANK_ZERO_FIRST`).
The main process is named as the rank the others waited for (rank 0; with
`local_main_process_first` and `torch_distributed_zero_first(local_rank)`, local rank 0
of each node). A store's warning right above such a traceback counts the same when the paste cut
the traceback before its exception line (the store's wait at the gate giving out:
views/gates.py). One traceback at the gate is one signal. Not when NCCL's set-up failed
(HD206): the gate's barrier is often the job's first collective, and what it raised is
then that set-up's failure. Where the main process's own
progress is shown advancing at the timeout, the job was slow rather than stuck: HD039
says so.

## How to confirm
Look for the main process's progress bar or log of the gated step (`Running tokenizer on
dataset`, `Scanning … labels`, `Caching images`) around the timeout, and how long it had
run.

## How to fix
Do the gated work before the distributed job (tokenize and save the dataset once, build
the cache in a separate step), or raise the process group's timeout
(`init_process_group(timeout=…)`, `ddp_timeout` in transformers' TrainingArguments) above
the time the work takes; with `datasets`, a persistent cache lets later runs skip it.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.launch import ExceptionRaised
from hangdoc.analyzer.views.gates import MAIN_RANK, gate_waits
from hangdoc.analyzer.views.nccl_setup import setup_failure
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text


class RankZeroFirstGate(Rule):
    __doc__ = __doc__
    id = "HD043"
    name = "rank-zero-first-gate"
    summary = "ranks failed waiting at a main-process-first gate while rank 0 did the work"
    categories = (Category.RANK_DIVERGENCE,)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        held = gate_waits(ctx.timeline)
        if not held or setup_failure(ctx.timeline) is not None:
            return  # the gate's barrier is often the first collective: its set-up failed
        waiting = sorted({p.rank for p in held if p.rank is not None})
        who = ranks_text(waiting) if waiting else "a rank (not named)"
        said = held[0].event.payload_as(ExceptionRaised)
        # (no exception: a store's warning over a traceback cut before its exception line)
        what = (said.exc_type or "an error") if said is not None else "the store's wait giving out"
        yield Finding(
            rule=self.id,
            category=Category.RANK_DIVERGENCE,
            severity=Severity.ERROR,
            title=f"{who} failed waiting at a main-process-first gate; rank 0 was doing "
            "the gated work",
            explanation=(
                f"{who[0].upper()}{who[1:]} raised {what} where it entered a context "
                "manager that holds every rank but the main one in a barrier until the main "
                "process has done the work inside it (main_process_first, "
                "torch_distributed_zero_first). It was waiting for rank 0, still inside the "
                "gate: preparing or caching the dataset, most often, longer than the "
                "process group's timeout."
            ),
            fix=(
                "Do the gated work before the distributed job (tokenize or cache the dataset "
                "once, in its own step), or raise the process group's timeout above the time "
                "it takes (init_process_group(timeout=…), ddp_timeout)."
            ),
            culprit_ranks=(MAIN_RANK,),
            waiting_ranks=tuple(waiting),
            evidence=tuple(limited_refs(held, limit=4)),
            strength=Strength.SIGNAL,
        )


RULE = RankZeroFirstGate
