"""A rank the job expects has no live process

## What it means
The job's WORLD_SIZE (from the ranks' environment) says ranks 0..N-1 exist, but for some
of them no process was found on a node that was collected — or a rank's process exited
while hangdoc was collecting. Such a rank died (killed by the OOM killer or the
scheduler, a segfault, an uncaught exception) or never started.

## Why it hangs
The survivors keep waiting for the dead rank in their next collective. With NCCL and
asynchronous error handling off, or with gloo before any connection to the dead rank
exists, nothing tells them it is gone: they wait until the process-group timeout, or
forever.

## Evidence used
WORLD_SIZE, LOCAL_WORLD_SIZE, RANK and LOCAL_RANK of every collected rank (/proc
environ), the host each rank runs on, and the collector's record of processes that
exited during collection. A rank is called dead only when the node it should run on was
collected (its local rank is missing there) or its process was seen exiting; ranks that
belong to nodes that were not collected are listed as not collected, not dead.

## How to confirm
On the node of the missing rank: `dmesg -T | grep -iE 'killed process|out of memory'`
for the OOM killer, the rank's own stderr for a traceback or a signal, torchrun's
ChildFailedError block (exitcode -9 is SIGKILL, -6 SIGABRT, -11 SIGSEGV), and the
scheduler's log for a node failure.

## How to fix
Fix what killed the rank (memory, a crash, a node fault). So that survivors fail fast
instead of hanging, keep TORCH_NCCL_ASYNC_ERROR_HANDLING at its default (torchrun sets
it), use a reasonable process-group timeout, and run under torchrun (or an elastic
agent) so a dead worker tears the job down and can restart it.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import (
    Category,
    EvidenceRef,
    Finding,
    ProcessEvidence,
    Severity,
    Strength,
)
from hangdoc.analyzer.ranges import format_ranks, plural_ranks, verb
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import stack_refs
from hangdoc.rules.strength import Shift, shifted


def _expected_on_collected_hosts(procs: Iterable[ProcessEvidence]) -> tuple[set[int], int]:
    """Global ranks that should run on the hosts we have, and how many ranks those hold."""
    by_host: dict[str, list[ProcessEvidence]] = {}
    for proc in procs:
        by_host.setdefault(proc.host or "?", []).append(proc)
    expected: set[int] = set()
    capacity = 0
    for members in by_host.values():
        local_sizes = [p.local_world_size for p in members if p.local_world_size]
        bases = {
            p.rank - p.local_rank
            for p in members
            if p.rank is not None and p.local_rank is not None
        }
        if not local_sizes or len(bases) != 1:
            continue
        size = max(local_sizes)
        capacity += size
        base = bases.pop()
        expected.update(range(base, base + size))
    return expected, capacity


class MissingRank(Rule):
    __doc__ = __doc__
    id = "HD003"
    name = "missing-rank"
    summary = "a rank the job expects has no live process"
    categories = (Category.RANK_DEAD, Category.UNKNOWN)
    severity = Severity.CRITICAL
    requires = frozenset({Need.WORLD_SIZE})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        ev = ctx.evidence
        world = ev.expected_world_size()
        if world is None:
            return
        ranked = ev.ranked()
        exited = sorted(r for r, p in ranked.items() if p.exited)
        missing = set(range(world)) - set(ranked)
        expected_here, capacity = _expected_on_collected_hosts(ranked.values())
        all_hosts_collected = capacity >= world
        dead = sorted(missing if all_hosts_collected else missing & expected_here)
        not_collected = sorted(missing - set(dead))
        waiting = [a for a in ctx.activities.values() if a.in_collective and not a.process.exited]
        waiting_ranks = tuple(sorted(a.rank for a in waiting))
        culprits = sorted(set(dead) | set(exited))
        if culprits:
            yield self._dead(ctx, culprits, dead, exited, world, waiting_ranks)
        if not_collected:
            yield self._not_collected(not_collected, world, bool(expected_here))

    def _dead(
        self,
        ctx: RuleContext,
        culprits: list[int],
        dead: list[int],
        exited: list[int],
        world: int,
        waiting_ranks: tuple[int, ...],
    ) -> Finding:
        ev = ctx.evidence
        hosts = sorted({p.host for p in ev.processes if p.host})
        where = ", ".join(hosts) if 0 < len(hosts) <= 3 else f"the {len(hosts)} collected nodes"
        if not hosts:
            where = "the collected node"
        parts: list[str] = []
        if dead:
            parts.append(
                f"The job has WORLD_SIZE={world}, but no process of {plural_ranks(dead)} "
                f"exists on {where}, where its other "
                "local ranks run."
            )
        if exited:
            parts.append(f"The process of {plural_ranks(exited)} exited during collection.")
        if waiting_ranks:
            waiting_acts = [ctx.activities[r] for r in waiting_ranks]
            ops = sorted({a.waiting_call.op for a in waiting_acts if a.waiting_call})
            parts.append(
                f"{plural_ranks(waiting_ranks).capitalize()} are waiting in "
                f"{' / '.join(ops)} for it, and will until the timeout."
            )
        refs: list[EvidenceRef] = []
        for host, info in sorted(ev.hosts.items()):
            if info.manifest:
                on_host = [p.rank for p in ev.processes if p.host == host and p.rank is not None]
                refs.append(
                    EvidenceRef(
                        source=info.manifest,
                        detail=f"ranks found on {host}: {format_ranks(on_host)}",
                    )
                )
        for rank in exited:
            proc = ev.ranked()[rank]
            refs.append(
                EvidenceRef(source=proc.primary_source(), detail="process exited", rank=rank)
            )
        if waiting_ranks:
            refs.extend(stack_refs([ctx.activities[r] for r in waiting_ranks], limit=2))
        return Finding(
            rule=self.id,
            category=Category.RANK_DEAD,
            severity=Severity.CRITICAL,
            title=f"{plural_ranks(culprits)} {'is' if len(culprits) == 1 else 'are'} dead"
            + (
                f" while {plural_ranks(waiting_ranks)} {verb(waiting_ranks, 'waits', 'wait')} "
                f"for {verb(culprits, 'it', 'them')}"
                if waiting_ranks
                else ""
            ),
            explanation=" ".join(parts),
            fix=(
                "Find what killed it: `dmesg -T | grep -iE 'killed process|out of memory'` on "
                "its node, its stderr, torchrun's ChildFailedError (exitcode -9 = SIGKILL, "
                "-6 = SIGABRT). Keep asynchronous error handling on and run under torchrun so "
                "survivors fail fast instead of hanging."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=waiting_ranks,
            evidence=tuple(refs),
            # No live process of the rank; ranks that wait for it agree.
            strength=shifted(Strength.SIGNAL, Shift.AGREES) if waiting_ranks else Strength.SIGNAL,
        )

    def _not_collected(self, ranks: list[int], world: int, knew_hosts: bool) -> Finding:
        how = (
            "they belong to nodes that were not collected"
            if knew_hosts
            else "the dump does not say which node they run on (no LOCAL_WORLD_SIZE)"
        )
        return Finding(
            rule=self.id,
            category=Category.UNKNOWN,
            severity=Severity.INFO,
            title=f"{plural_ranks(ranks)} of {world} were not collected",
            explanation=(
                f"WORLD_SIZE is {world}, but the inputs hold no stacks for "
                f"{plural_ranks(ranks)}; {how}. They may be alive or dead: the evidence "
                "does not say."
            ),
            fix="Run `hangdoc collect --all` on every node of the job and analyze all dumps "
            "together.",
            culprit_ranks=(),
            strength=Strength.ABSENCE,
        )


RULE = MissingRank
