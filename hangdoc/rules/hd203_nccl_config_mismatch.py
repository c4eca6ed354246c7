"""Processes disagree on the communicator: duplicate GPU, rank count, rank or NCCL version

## What it means
NCCL found processes that cannot form one communicator: two ranks on the same GPU
(`Duplicate GPU detected : rank 1 and rank 0 both on CUDA device …`), a bootstrap root
that received a different number of ranks than announced (`mismatch in rank count`), or
the init lines show one `commId` created with different `nranks`, or the same rank of a
`commId` claimed by two processes; or the nodes load different NCCL releases (each node's
`NCCL version 2.19.3+cuda12.3` line names another).

## Why it hangs
Communicator creation waits for exactly `nranks` distinct members. Extra, missing or
duplicated members never satisfy it (or fail with an invalid-usage error that other
ranks only see as a hang). Ranks of different NCCL releases are refused when the
communicator is created (`Mismatched NCCL version detected`), or fail earlier in a
bootstrap whose messages changed between the releases.

## Evidence used
NCCL WARN lines about duplicate GPUs, rank counts or a rank that checked in twice at
the bootstrap root (`Bootstrap Root : rank 1 of 8 ranks has already checked in`), all
NCCL init lines grouped by `commId`, and the NCCL version lines of each node (a node whose
file shows two versions is two runs of the job, not a mix).

## How to confirm
Check `CUDA_VISIBLE_DEVICES` and the `LOCAL_RANK` → device mapping of each process
(`torch.cuda.set_device(local_rank)` before `init_process_group`), and that every
node launches the same world size.

## How to fix
Give each process its own GPU (`torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))`,
`device_id=` in `init_process_group`), launch the same `--nnodes`/`--nproc-per-node`
everywhere, and do not reuse RANK values across nodes. Install one NCCL release on every
node.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.nccl import ConfigProblem, NcclConfigError, NcclInit, NcclVersion
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text

_DISAGREEMENTS = frozenset(
    {ConfigProblem.DUPLICATE_GPU, ConfigProblem.DUPLICATE_RANK, ConfigProblem.RANK_COUNT_MISMATCH}
)


class NcclConfigMismatch(Rule):
    __doc__ = __doc__
    id = "HD203"
    name = "nccl-config-mismatch"
    summary = "duplicate GPU, rank-count or rank disagreement between NCCL processes"
    categories = (Category.NCCL_INIT,)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        # The disagreements this rule is about (a config error of another problem, such as
        # a missing interface, is a setup failure: HD206).
        warns = [
            p
            for p in tl.of(EventKind.NCCL_CONFIG_ERROR)
            if (error := p.event.payload_as(NcclConfigError)) is not None
            and error.problem in _DISAGREEMENTS
        ]
        if warns:
            first = warns[0].event.payload_as(NcclConfigError) or NcclConfigError()
            if first.problem == ConfigProblem.DUPLICATE_GPU:
                ranks = sorted({v for v in (first.rank_a, first.rank_b) if v is not None})
                device = first.device
                title = f"two ranks on one GPU: {ranks_text(ranks)} share CUDA device {device}"
            elif first.problem == ConfigProblem.DUPLICATE_RANK:
                ranks = [first.rank_a] if first.rank_a is not None else []
                title = (
                    f"two processes started as comm {ranks_text(ranks)} (NCCL bootstrap root: "
                    f"already checked in, {first.count_a} ranks expected)"
                )
            else:
                ranks = []
                counts = f"{first.count_a} vs {first.count_b}"
                title = f"NCCL bootstrap saw a different number of ranks ({counts})"
            yield self._finding(title, warns, ranks)
        yield from self._versions(tl.of(EventKind.NCCL_VERSION))
        by_comm: dict[str, list[tuple[Placed, NcclInit]]] = {}
        for p in tl.of(EventKind.NCCL_INIT):
            init = p.event.payload_as(NcclInit)
            if init is not None and init.comm_id:
                by_comm.setdefault(init.comm_id, []).append((p, init))
        for comm_id, inits in sorted(by_comm.items()):
            events = [p for p, _ in inits]
            sizes = {init.nranks for _, init in inits}
            owners: dict[int | None, set[tuple[str | None, int | None]]] = {}
            for p, init in inits:
                owners.setdefault(init.rank, set()).add((p.event.host, p.event.pid))
            dup = sorted(r for r, who in owners.items() if len(who) > 1 and r is not None)
            if len(sizes) > 1:
                shown = sorted(str(s) if s is not None else "?" for s in sizes)
                yield self._finding(
                    f"communicator {comm_id} created with different sizes: {', '.join(shown)}",
                    events,
                    [],
                )
            elif dup:
                yield self._finding(
                    f"communicator {comm_id}: comm {ranks_text(dup)} claimed by more than one "
                    f"process",
                    events,
                    dup,
                )

    def _versions(self, lines: list[Placed]) -> Iterable[Finding]:
        """Nodes that load different NCCL releases: each node's version line (NCCL's
        "NCCL version 2.19.3+cuda12.3") names one release, and two nodes name two. NCCL
        checks that every rank runs its own version when a communicator is created (init.cc:
        "Mismatched NCCL version detected : rank %d version %d rank %d version %d", then
        ncclInvalidUsage), and its bootstrap's messages change between releases, so mixed
        nodes fail or hang while they set up. One node with two versions is two runs of
        the job (an upgrade between them), not a mix: no finding then."""
        by_host: dict[str, set[str]] = {}
        for p in lines:
            version = p.event.payload_as(NcclVersion)
            if version is not None and version.version and p.event.host is not None:
                by_host.setdefault(p.event.host, set()).add(version.version)
        if len(by_host) < 2 or any(len(seen) > 1 for seen in by_host.values()):
            return
        releases = {next(iter(seen)) for seen in by_host.values()}
        if len(releases) < 2:
            return
        shown = ", ".join(f"{host}: {next(iter(seen))}" for host, seen in sorted(by_host.items()))
        yield Finding(
            rule=self.id,
            category=Category.NCCL_INIT,
            severity=Severity.ERROR,
            title=f"the nodes load different NCCL versions ({shown})",
            explanation=(
                "Each node's NCCL version line names a different release. NCCL requires "
                "every rank of a communicator to run the same version (it checks when the "
                "communicator is created, and its bootstrap changes between releases), so "
                "the communicator cannot be set up across these nodes."
            ),
            fix=(
                "Install the same NCCL on every node (the same torch wheel or nvidia-nccl "
                "package, no LD_LIBRARY_PATH or NCCL_NET_PLUGIN pointing at another build); "
                "check with `python -c 'import torch; print(torch.cuda.nccl.version())'` on "
                "each node."
            ),
            evidence=tuple(limited_refs(lines, limit=4)),
            strength=Strength.SIGNAL,
        )

    def _finding(self, title: str, events: list[Placed], ranks: list[int]) -> Finding:
        return Finding(
            rule=self.id,
            category=Category.NCCL_INIT,
            severity=Severity.ERROR,
            title=title,
            explanation=(
                "NCCL processes disagree on who is in the communicator, so its creation "
                "cannot complete (or fails on some ranks and hangs the others)."
            ),
            fix=(
                "Bind each process to its own GPU (torch.cuda.set_device(LOCAL_RANK) before "
                "init_process_group), check CUDA_VISIBLE_DEVICES, and launch the same world size "
                "on every node."
            ),
            culprit_ranks=tuple(ranks),
            evidence=tuple(limited_refs(events, limit=4)),
            strength=Strength.STATED,
        )


RULE = NcclConfigMismatch
