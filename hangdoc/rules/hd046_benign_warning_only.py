"""The inputs hold only a warning that reports a hang already avoided

## What it means
The only thing the inputs show is a warning that sounds like a hang but that its own
library documents as harmless, such as huggingface/tokenizers' `The current process
just got forked, after parallelism has already been used. Disabling parallelism to avoid
deadlocks...`, or Open MPI's `Read -1, expected N, errno = 1` (its shared-memory
transport refused direct reads of a peer's memory in a container without CAP_SYS_PTRACE,
and carried on). No timeout, crash, error or stack of a blocked rank is there. The warning
is most likely what the reporter took for the problem; the process went on.

## Why it hangs
It does not. tokenizers switches a forked child to single-threaded mode precisely so that
its thread pool cannot deadlock there; the warning says it did so. The work may be slower
in that child, not stuck.

## Evidence used
Lines of the benign-warning catalog (analyzer/views/benign.py, each entry citing the
library that prints it), and the absence of everything else: no log event other than
informational ones (NCCL version and init, progress bars, phase markers), no stacks, and
no other rule's error. One line is weak evidence: a hint (docs/confidence.md).

## How to confirm
Watch the job after the warning: its progress bar or step counter keeps moving. If it
really stops, take py-spy dumps of every rank (`hangdoc collect --all`) and analyze them.

## How to fix
Nothing to fix for a hang. To silence the warning, set `TOKENIZERS_PARALLELISM=false`
(or `true`) in the environment before the tokenizer is first used, or create the
tokenizer after the fork (inside the worker).
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.views.benign import benign_lines
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Rule, RuleContext

# Log events that say nothing stopped or failed: version and set-up chatter, progress.
_INFORMATIONAL = frozenset(
    k.value
    for k in (
        EventKind.PHASE,
        EventKind.DATA_COUNT,
        EventKind.NCCL_VERSION,
        EventKind.NCCL_INIT,
        EventKind.NCCL_NETWORK,
        EventKind.NCCL_TRANSPORT,
        EventKind.GPU_STATUS,
        EventKind.GPU_TOPOLOGY,
    )
)


class BenignWarningOnly(Rule):
    __doc__ = __doc__
    id = "HD046"
    name = "benign-warning-only"
    summary = "only a known-harmless warning (tokenizers fork, Open MPI CMA EPERM) is in the inputs"
    categories = (Category.NOT_A_HANG,)
    severity = Severity.INFO
    requires = frozenset()
    after = True  # speaks only when no other rule found anything serious

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        ev = ctx.evidence
        if ctx.activities or any(p.has_stacks() for p in ev.processes):
            return  # a stack says where a rank was: the stack rules judge it
        if any(f.severity in (Severity.CRITICAL, Severity.ERROR) for f in ctx.prior):
            return
        events = [*ev.job_log_events, *(e for p in ev.processes for e in p.log_events)]
        if any(e.kind not in _INFORMATIONAL for e in events):
            return  # a timeout, an error, a death: something did stop
        found = [b for b in benign_lines(ev) if not (b.kind.alone and events)]
        if not found:
            return
        kinds = {b.kind.name: b.kind for b in found}
        what = "; ".join(k.what for k in kinds.values())
        yield Finding(
            rule=self.id,
            category=Category.NOT_A_HANG,
            severity=Severity.INFO,
            title=f"only {what} in the inputs: a harmless warning, not a hang",
            explanation=(
                f"The inputs show {what} ({len(found)} line(s)) and nothing that stopped: no "
                "timeout, error, crash or stack of a blocked rank. "
                + " ".join(k.why[:1].upper() + k.why[1:] + "." for k in kinds.values())
                + " The warning is most likely what was taken for a hang."
            ),
            fix=(
                "Nothing to fix for a hang; to silence the warning, "
                + "; ".join(k.fix for k in kinds.values() if k.fix)
                + ". If the job really stops, collect py-spy stacks of every rank "
                "(hangdoc collect --all) and analyze them."
            ),
            evidence=tuple(
                EvidenceRef(b.line.source, b.line.text[:300], None, b.line.line) for b in found[:3]
            ),
            # One line that the library calls harmless, and silence around it: a hint.
            strength=Strength.HINT,
            says_not_hung=True,
        )


RULE = BenignWarningOnly
