"""Every collected rank is still creating its process group

## What it means
The main thread of every collected rank is inside process-group creation: in
`init_process_group` / `new_group` (the store-based barrier, `_store_based_barrier`,
the TCPStore handshake, `torch.distributed.rendezvous`) or in the elastic agent's
rendezvous (`dynamic_rendezvous.py`, the c10d rendezvous backend). No rank got as far as
training, and none moved between samples.

## Why it hangs
Creating a group is collective: it completes only when every member has arrived at the
store and checked in. A member that never started, started with another world size,
is still busy before its own `init_process_group` (loading or downloading on one rank
only), or cannot reach MASTER_ADDR:MASTER_PORT keeps every other member waiting there.

Also: every collected rank waits in the collective a wrapper runs while it is built
(`DistributedDataParallel.__init__`'s parameter check and broadcast, DeepSpeed's
`_broadcast_model`, FSDP's module sync): the job's first NCCL collective, inside which NCCL
creates and connects the communicator (lower confidence: the stacks show where, not why).

## Evidence used
The main-thread stacks (py-spy, faulthandler, tracebacks) of every collected rank,
matched against the frames of torch.distributed's group creation and rendezvous
(analyzer/views/catalog.py, Activity.RENDEZVOUS), and progress between samples. With a known
world size, ranks that were not collected are named as the ones the others wait for.
Native stacks count too (gdb/pstack `bt`, `py-spy dump --native`): a main thread whose
innermost torch frame is a store read (`c10d::TCPStore::doGet`/`doWait`/`get`/`wait`,
`c10d::detail::TCPClient::receiveValue`, `c10d::PrefixStore::get`, from
torch/csrc/distributed/c10d/TCPStore.cpp and PrefixStore.cpp) is in the rendezvous. A
single pasted stack of a process of unknown rank in such a frame gives a weak finding
(a hint), as does one collected rank alone (docs/confidence.md).
Where the collector read the ranks' environment (process.json), their rendezvous settings
(MASTER_ADDR, MASTER_PORT, WORLD_SIZE: what the env:// rendezvous reads) are compared: a
rank whose value, or lack of one, differs from a value every other rank shares meets at
another store, and is named as the one the others wait for, with both values.
The ranks' own lines before the group is created that state the world size they pass
(Lightning's "MEMBER: 1/8", Ray Train's "world_size=8", a job's own "Initializing process
group: rank 0 of 8": parsers/logs/phases.py) are compared with the ranks that exist: a
group of 8 that the launcher started 4 ranks of (WORLD_SIZE=4, all of them collected)
waits for members that never started (a node counted that was not launched).

## How to confirm
Collect the ranks that are missing; check the launcher's world size and MASTER_ADDR /
MASTER_PORT on every node, the port from every node (`nc -zv MASTER_ADDR MASTER_PORT`),
and what the late ranks do before `init_process_group`.

## How to fix
Start the same world size everywhere, make MASTER_ADDR reachable from every node, and
call `init_process_group` before any rank-specific long work (or raise its `timeout`).
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, LogEvent, Severity, Strength
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.analyzer.views.activity import RankActivity, classify_process
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.nccl_setup import FIRST_COLLECTIVES
from hangdoc.analyzer.views.rendezvous_settings import OddSetting, odd_rendezvous
from hangdoc.analyzer.vocabulary import Phase
from hangdoc.rules.base import Rule, RuleContext
from hangdoc.rules.culprit import proc_source
from hangdoc.rules.refs import stack_refs


class StuckInGroupCreation(Rule):
    __doc__ = __doc__
    id = "HD207"
    name = "stuck-in-group-creation"
    summary = "every collected rank is still in init_process_group / new_group / rendezvous"
    categories = (Category.NCCL_INIT,)
    severity = Severity.ERROR
    # A single pasted stack of a process of unknown rank is read too (_lone): no ranked
    # stacks is not a reason to skip the rule.
    requires = frozenset()

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        live = [a for a in ctx.activities.values() if not a.process.exited]
        if not live:
            lone = self._lone(ctx)
            if lone is not None:
                yield lone
            return
        if not all(a.main is not None and a.main.has(Activity.RENDEZVOUS) for a in live):
            first = self._first_collective(ctx, live)
            if first is not None:
                yield first
            return
        progress = [ctx.progress(a.process) for a in live]
        if any(p.progressed for p in progress):
            return
        ranks = tuple(sorted(a.rank for a in live))
        calls = sorted({a.waiting_call.api for a in live if a.waiting_call is not None})
        world = ctx.evidence.expected_world_size() or 0
        missing = sorted(set(range(world)) - set(ctx.evidence.ranked())) if world else []
        what = _store_read(calls[0]) if calls else "process-group creation"
        explanation = (
            f"{plural_ranks(ranks).capitalize()} are all still in {what} "
            f"(rank {live[0].rank}: {live[0].description()}); no collected rank got further."
        )
        if all(p.comparable for p in progress):
            explanation += " None of them moved between samples."
        if missing:
            explanation += (
                f" {plural_ranks(missing).capitalize()} of WORLD_SIZE={world} were not "
                "collected: they are the ones the group waits for (not started, crashed, "
                "late, or unable to reach the store)."
            )
        # Which rank is at another store: its rendezvous settings differ from the value
        # every other rank shares (views/rendezvous_settings.py).
        odd = [] if missing else odd_rendezvous(ctx.evidence, ranks)
        odd_ranks = tuple(sorted({r for s in odd for r in s.ranks}))
        # A group larger than the job: the ranks say they create a group of more members
        # than the launcher started, all of which are here (views: the init markers).
        stated = None if missing or odd_ranks else _stated_world(live, world)
        if stated is not None:
            size, said_rank, said = stated
            explanation += (
                f" The ranks' own lines say they create a group of {size} (rank "
                f"{said_rank}: {said.text!r}), but the job started {world} "
                f"(WORLD_SIZE={world}, all collected): ranks {world}-{size - 1} never "
                "started, and the group waits for them (a world size that counts nodes or "
                "processes that were not launched)."
            )
        elif not missing:
            explanation += (
                " A member that never arrived, a different world size, or a store that some "
                "ranks cannot reach keeps the group from completing."
            )
        if odd_ranks:
            one = len(odd_ranks) == 1
            explanation += (
                " Their rendezvous settings differ: "
                + "; ".join(s.text() for s in odd)
                + f". {plural_ranks(odd_ranks).capitalize()} "
                + ("meets" if one else "meet")
                + " at another store (or none), and the others wait for "
                + ("it." if one else "them.")
            )
        yield Finding(
            rule=self.id,
            category=Category.NCCL_INIT,
            severity=Severity.ERROR,
            title=f"every collected rank waits in {what}"
            + (f"; {plural_ranks(missing)} never arrived" if missing else "")
            + (f"; {odd[0].text()}" if odd_ranks else "")
            + (
                f" for a group of {stated[0]}, but the job started {world} ranks"
                if stated is not None
                else ""
            ),
            explanation=explanation,
            fix=(
                "Collect or check the missing ranks; start the same world size everywhere, "
                "make MASTER_ADDR:MASTER_PORT reachable from every node, and call "
                "init_process_group before rank-specific long work."
            ),
            culprit_ranks=tuple(missing) or odd_ranks,
            waiting_ranks=tuple(r for r in ranks if r not in odd_ranks),
            evidence=tuple(stack_refs(live, limit=3))
            + tuple(_env_refs(ctx, odd))
            + ((_line_ref(stated[1], stated[2]),) if stated is not None else ()),
            # The category is what the stacks show; which member is late they do not, but
            # for ranks never collected. One stack alone is weak: one process caught in a
            # store read may be passing through.
            strength=Strength.SIGNAL
            if (missing or odd_ranks or stated) and len(live) > 1
            else Strength.HINT,
        )

    def _lone(self, ctx: RuleContext) -> Finding | None:
        """The one stack the inputs hold, of a process whose rank is unknown (a single
        pasted gdb ``bt``, pstack or py-spy dump), blocked in the rendezvous or a store
        read: weak, since one process in a store read may only be passing through."""
        stacked = [p for p in ctx.evidence.processes if p.has_stacks()]
        if len(stacked) != 1 or stacked[0].exited:
            return None
        activity = classify_process(-1, stacked[0])
        if activity is None or activity.main is None or not activity.main.has(Activity.RENDEZVOUS):
            return None
        call = activity.waiting_call
        what = _store_read(call.api) if call is not None else "process-group creation"
        return Finding(
            rule=self.id,
            category=Category.NCCL_INIT,
            severity=Severity.ERROR,
            title=f"the one collected process waits in {what}",
            explanation=(
                f"The inputs hold one stack; its main thread is in {what} "
                f"({activity.description()}): the process is still creating its process "
                "group, waiting for keys that other members have not written to the store. "
                "With no other rank's stack, hangdoc cannot say which member is missing."
            ),
            fix=(
                "Collect the stacks of every rank; check that all of them started with the "
                "same world size and reach MASTER_ADDR:MASTER_PORT, and what the missing "
                "ones do before init_process_group."
            ),
            evidence=tuple(stack_refs([activity], limit=1)),
            strength=Strength.HINT,
        )

    def _first_collective(self, ctx: RuleContext, live: list[RankActivity]) -> Finding | None:
        """Every rank in the collective a wrapper runs while it is being built (DDP's
        parameter check and broadcast, DeepSpeed's model broadcast, FSDP's sync): the job's
        first NCCL collective, which creates the communicator."""
        if len(live) < 2 or not all(a.in_collective for a in live):
            return None
        builders = [_builder(a) for a in live]
        if not all(builders) or any(ctx.progress(a.process).progressed for a in live):
            return None
        ranks = tuple(sorted(a.rank for a in live))
        what = sorted({b for b in builders if b})[0]
        return Finding(
            rule=self.id,
            category=Category.NCCL_INIT,
            severity=Severity.ERROR,
            title=f"every collected rank is stuck in the first collective, inside {what}",
            explanation=(
                f"{plural_ranks(ranks).capitalize()} wait in a collective that {what} runs "
                f"while it is built (rank {live[0].rank}: {live[0].description()}). It is the "
                "job's first NCCL collective: NCCL creates and connects the communicator "
                "inside it, so a hang there is most often communicator setup (interfaces, "
                "peer-to-peer access between the GPUs, a rank that never got there)."
            ),
            fix=(
                "Rerun with NCCL_DEBUG=INFO and look for the last init line; try "
                "NCCL_P2P_DISABLE=1 (peer access, IOMMU/ACS) and NCCL_SOCKET_IFNAME; check "
                "that every rank constructs the wrapper."
            ),
            waiting_ranks=ranks,
            evidence=tuple(stack_refs(live, limit=3)),
            strength=Strength.HINT,  # the stacks show where, not why
        )


# Wrapper construction that runs the job's first collectives (file suffix, functions): the
# wrappers' first collectives, and DDP's constructor that calls them (a live stack shows it).
_BUILDERS: tuple[tuple[str, frozenset[str], str], ...] = (
    ("torch/nn/parallel/distributed.py", frozenset({"__init__"}), "DistributedDataParallel()"),
    *FIRST_COLLECTIVES,
)


def _env_refs(ctx: RuleContext, odd: list[OddSetting]) -> list[EvidenceRef]:
    """The environments that differ, and one that agrees, cited by their process.json."""
    procs = ctx.evidence.ranked()
    refs: list[EvidenceRef] = []
    for setting in odd:
        values = dict(zip(setting.ranks, setting.values, strict=True))
        for rank in (*setting.ranks[:3], *setting.others[:1]):
            if rank not in procs:
                continue
            value = values.get(rank, setting.agreed)
            said = f"{setting.key}={value}" if value is not None else f"no {setting.key}"
            refs.append(
                EvidenceRef(
                    source=proc_source(procs[rank]),
                    detail=f"rank {rank} environment: {said}",
                    rank=rank,
                )
            )
    return refs


def _stated_world(live: list[RankActivity], world: int) -> tuple[int, int, LogEvent] | None:
    """The world size every live rank's own init line states, where it exceeds the job's
    (``world``: WORLD_SIZE, every rank of which is live), with one such line."""
    if not world or len(live) != world:
        return None
    sizes: set[int] = set()
    first: tuple[int, LogEvent] | None = None
    for activity in live:
        said = [
            (m.world_size, e)
            for e in activity.process.log_events
            if (m := e.payload_as(PhaseMarker)) is not None
            and m.phase is Phase.INIT
            and m.world_size
        ]
        if not said:
            return None
        sizes.update(size for size, _ in said)
        first = first or (activity.rank, said[-1][1])
    if len(sizes) != 1 or first is None or (size := next(iter(sizes))) <= world:
        return None
    return size, *first


def _line_ref(rank: int, event: LogEvent) -> EvidenceRef:
    return EvidenceRef(
        source=event.source, detail=f"rank {rank}: {event.text}", rank=rank, line=event.line
    )


def _builder(activity: RankActivity) -> str | None:
    main = activity.main
    if main is None:
        return None
    for frame in main.thread.frames:
        for suffix, functions, name in _BUILDERS:
            if frame.file.endswith(suffix) and frame.function_leaf in functions:
                return name
    return None


def _store_read(api: str) -> str:
    """A native store frame (catalog "native c10d store") in words; other calls as is."""
    if api.startswith("native c10d store"):
        return f"a c10d store read ({api.removeprefix('native c10d store ')})"
    return api


RULE = StuckInGroupCreation
