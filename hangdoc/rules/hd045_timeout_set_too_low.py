"""The collective timeout is configured far below any real operation: not a hang

## What it means
The timeout lines print the limit the job configured for its collectives, and it is
below one second (`Timeout(ms)=1`, `Timed out waiting 5ms for recv`): less than NCCL
needs to launch a single kernel on a busy GPU, thousands of times below the defaults
(10 minutes for NCCL since torch 2.2, 30 minutes before and for gloo). The watchdog
aborted a collective that was merely running, not stuck. The job did not hang; its
timeout setting made every collective "time out".

## Why it hangs
It does not. `init_process_group(timeout=…)`, `new_group(timeout=…)`, HF
`--ddp_timeout`, Accelerate `InitProcessGroupKwargs(timeout=…)` or a test harness set
the limit in the wrong unit (milliseconds read as seconds, a `timedelta(milliseconds=…)`
for `timedelta(seconds=…)`) or on purpose to exercise the timeout path; the watchdog
then tears the job down at its first collective.

## Evidence used
The configured limit the timeout lines carry: torch's NCCL watchdog line
`Watchdog caught collective operation timeout: WorkNCCL(SeqNum=…, OpType=…,
Timeout(ms)=N) ran for M milliseconds before timing out.` (formatted by
`WorkNCCL::checkTimeout` and `operator<<(std::ostream&, const WorkNCCL&)` in
torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp), the blocking-wait variant, gloo's
`Timed out waiting Nms for recv/send operation`, and store timeouts that name their
limit (`Timed out initializing process group in store based barrier on rank: 0, …
timeout=0:00:00.001000)`, a `str(timedelta)` from distributed_c10d's
`_store_based_barrier`). Every timeout line that names its limit must name one below a
second.

## How to confirm
Read the timeout passed to `init_process_group`/`new_group` (or the framework's option)
in the job's configuration; `ran for M milliseconds` in the same line shows how little
time the collective had.

## How to fix
Set a real timeout (minutes: `init_process_group(timeout=timedelta(minutes=30))`,
`--ddp_timeout 1800`), or leave the default. Only then, if the job still times out,
diagnose a hang.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.torch_pg import CollectiveTimeout, StoreTimeout, Work
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text

# Below this, a configured collective timeout cannot be meant to catch a hang: one NCCL
# kernel launch, a cudaEventQuery loop or the first connection set-up takes longer.
TOO_LOW_MS = 1000


def _limit_ms(p: Placed) -> int | None:
    """The configured limit a timeout line names: a collective's ``Timeout(ms)=``, a
    store's wait, or the store-based barrier's timedelta."""
    payload = p.event.payload
    if isinstance(payload, Work):
        return payload.timeout_ms
    if isinstance(payload, StoreTimeout):
        ms = payload.timeout_ms
        return ms if ms is not None else payload.barrier_timeout_ms
    return None


def _limits(timeouts: list[Placed]) -> list[tuple[Placed, int]]:
    return [(p, ms) for p in timeouts if (ms := _limit_ms(p)) is not None]


def _shown(ms: int) -> str:
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:g} s"


class TimeoutSetTooLow(Rule):
    __doc__ = __doc__
    id = "HD045"
    name = "timeout-set-too-low"
    summary = "the configured collective timeout is below a second: a setting, not a hang"
    categories = (Category.NOT_A_HANG,)
    severity = Severity.WARNING
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        timeouts = ctx.timeline.of(EventKind.COLLECTIVE_TIMEOUT, EventKind.STORE_TIMEOUT)
        limits = _limits(timeouts)
        if not limits or any(ms >= TOO_LOW_MS for _, ms in limits):
            return
        low = [p for p, _ in limits]
        limit = max(ms for _, ms in limits)
        ranks = sorted({p.rank for p in low if p.rank is not None})
        first = low[0]
        work = first.event.payload_as(Work)
        op, seq = (work.op, work.seq) if work is not None else (None, None)
        what = f"{op} #{seq}" if op and seq is not None else (op or "a collective")
        timed_out = first.event.payload_as(CollectiveTimeout)
        ran = timed_out.ran_ms if timed_out is not None else None
        ran_text = f" after {_shown(ran)}" if ran is not None else ""
        who = ranks_text(ranks) if ranks else "the job"
        yield Finding(
            rule=self.id,
            category=Category.NOT_A_HANG,
            severity=Severity.WARNING,
            title=f"the collective timeout is set to {_shown(limit)}: {who} aborted {what}"
            f"{ran_text}; a setting, not a hang",
            explanation=(
                f"The timeout lines name the configured limit, {_shown(limit)}: far below "
                "what any real collective needs (the defaults are 10 or 30 minutes). The "
                f"watchdog aborted {what}{ran_text} while it was simply running. Nothing "
                "was stuck; the timeout setting is wrong (a unit mix-up, or set low on "
                "purpose to test the timeout path)."
            ),
            fix=(
                "Pass a real timeout (init_process_group(timeout=timedelta(minutes=30)), "
                "new_group(timeout=...), HF --ddp_timeout in seconds, Accelerate "
                "InitProcessGroupKwargs(timeout=...)) or keep the default; if the job still "
                "times out with it, analyze again."
            ),
            waiting_ranks=tuple(ranks),
            evidence=tuple(limited_refs(low, limit=4)),
            # The line states the setting outright; what it does not say is whether the
            # job would also have hung with a sane timeout.
            strength=Strength.STATED,
            says_not_hung=True,
        )


RULE = TimeoutSetTooLow
