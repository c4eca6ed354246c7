"""Collectives timed out, but the logs do not say why

## What it means
The logs show the symptom — ranks timed out in a collective, the watchdog's heartbeat
monitor fired, or the store waited for clients — but nothing in them names a cause: no
rank crashed first, no network error, no mismatch, no lagging rank can be told apart.
hangdoc does not guess: the verdict stays *inconclusive*, and this finding says what
timed out and what to collect next time.

## Why it hangs
Some rank did not reach the collective (it was stuck elsewhere, in Python code, I/O or
a dataloader), or the collective itself could not complete (network, GPU). The
timeout messages of the waiting ranks look the same in every case.

## Evidence used
Collective, heartbeat and store timeouts (with their sequence numbers, operations and
process groups), and the absence of any cause that the other log rules (HD030-HD037,
HD039, HD041, HD042, HD2xx, HD3xx) recognise.

## How to confirm
Not possible from these logs alone. Reproduce with more evidence (below).

## How to fix
Collect next time: `hangdoc collect --all` on every node while the job hangs (py-spy
stacks of all ranks); flight recorder dumps (`TORCH_FR_BUFFER_SIZE=2000`,
`TORCH_NCCL_DUMP_ON_TIMEOUT=1`); every rank's stderr, not only rank 0's (`torchrun
--log-dir … --tee 3`); `NCCL_DEBUG=INFO` with `NCCL_DEBUG_FILE=/logs/nccl.%h.%p.log`;
`TORCH_DISTRIBUTED_DEBUG=DETAIL` on a reproduction; `dmesg -T` and `nvidia-smi` of each
node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.torch_pg import Work
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text

_COLLECT = (
    "Collect next time: `hangdoc collect --all` on every node while the job hangs; flight "
    "recorder dumps (TORCH_FR_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1); every rank's "
    "stderr (torchrun --log-dir … --tee 3); NCCL_DEBUG=INFO with "
    "NCCL_DEBUG_FILE=/logs/nccl.%h.%p.log; "
    "TORCH_DISTRIBUTED_DEBUG=DETAIL on a reproduction; dmesg -T and nvidia-smi of each node."
)


# The log rules whose findings explain a timeout; HD038 speaks only when none of them did
# (it runs after them and reads their findings in ctx.prior).
_CAUSAL_IDS = frozenset({
    "HD030", "HD031", "HD032", "HD033", "HD034", "HD035", "HD036", "HD037", "HD039",
    "HD041", "HD042",
    "HD200", "HD201", "HD202", "HD203", "HD204", "HD205", "HD300", "HD301", "HD302",
})  # fmt: skip


class TimeoutCauseUnknown(Rule):
    __doc__ = __doc__
    id = "HD038"
    name = "timeout-cause-unknown"
    summary = "collectives timed out and the logs do not show why"
    categories = (Category.UNKNOWN,)
    severity = Severity.WARNING
    requires = frozenset({Need.LOGS})
    after = True

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        symptoms = tl.of(
            EventKind.COLLECTIVE_TIMEOUT, EventKind.HEARTBEAT_TIMEOUT, EventKind.STORE_TIMEOUT
        )
        if not symptoms:
            return
        if any(
            f.rule in _CAUSAL_IDS and f.severity in (Severity.CRITICAL, Severity.ERROR)
            for f in ctx.prior
        ):
            return
        if any(f.says_not_hung for f in ctx.prior):
            return  # another rule explained the timeout as no hang (HD004, HD039, HD045)
        ranks = sorted({p.rank for p in symptoms if p.rank is not None})
        works = [w for p in symptoms if (w := p.event.payload_as(Work)) is not None and w.op]
        ops = Counter(f"{w.op} #{w.seq}" for w in works)
        what = ", ".join(op for op, _ in ops.most_common(3)) or "a collective"
        heartbeat = any(p.kind == EventKind.HEARTBEAT_TIMEOUT for p in symptoms)
        extra = (
            " The watchdog's heartbeat monitor also fired: a CUDA or NCCL call was blocked "
            "(a GPU or driver problem, or a thread holding the GIL inside a CUDA call)."
            if heartbeat
            else ""
        )
        yield Finding(
            rule=self.id,
            category=Category.UNKNOWN,
            severity=Severity.WARNING,
            title=f"{ranks_text(ranks) if ranks else 'ranks'} timed out in {what}; the logs do not "
            f"show why",
            explanation=(
                "The logs show the timeout but no cause: no rank failed first, no network "
                "or GPU error, no mismatch, and the ranks that timed out cannot be told "
                "apart from the ones that caused it." + extra
            ),
            fix=_COLLECT,
            waiting_ranks=tuple(ranks),
            evidence=tuple(limited_refs(symptoms, limit=5)),
            strength=Strength.ABSENCE,
        )


RULE = TimeoutCauseUnknown
