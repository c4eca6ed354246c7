"""Which global rank each event belongs to (FORMATS.md §8.8).

Evidence, strongest first:

1. a ``[rankN]:`` (or mpirun ``[1,N]<stdout>``) prefix on the line — global rank;
2. a rank the content names globally (ChildFailedError ``rank :``, Slurm task, DeepSpeed
   ``[Rank N]``, Lightning ``GLOBAL_RANK``);
3. NCCL host:pid mapped through the process's init line of the *largest* communicator
   (the default group, whose comm ranks are global ranks), or a pid named with a rank
   elsewhere in the file (ChildFailedError ``exitcode : -9 (pid: 812)``), or a process
   whose own lines (a pid in their prefix: Ray's ``(RayTrainWorker pid=1942, ip=…)``,
   vLLM's ``(VllmWorker rank=3 pid=2004)``) name one global rank and no other, as
   step 7 reads them (Ray Train's ``Setting up process group for: env://… [rank=0,
   world_size=2]``); a report naming that pid (Ray's ``Worker PID: 1942 Worker exit
   type: SYSTEM_ERROR``, torchrun's ``failed (exitcode: -9) … (pid: 1942)``, the
   kernel's ``Out of memory: Killed process 1942 (python)``) is then about that rank;
4. torchrun's ``[defaultN]:`` local rank, mapped to a global rank where lines carry both
   prefixes, else taken as the global rank when nothing shows more than one node;
5. the watchdog's ``[Rank N]`` when its process group is the default one (group ranks
   of other groups are not global);
6. for a file whose lines name no rank at all, the file name (``rank3.log``,
   ``stderr-3.txt``, ``attempt_0/3/stderr.log``: hangdoc/common/rank_names.py);
7. the rank the line's own words name (parsers/logs/mentions.py: ``[rank: 3]``, ``Rank 3,
   world_size 8: …``, ``rank=3``; a local rank or a device named, mapped as 4 maps a
   local rank; SGLang's ``PP1 TP3`` coordinates, with the tensor-parallel size the file
   shows), never a peer's. Weaker than a file's name: a rank's own file that speaks of
   another rank is still its own (the log parser applies the file's name first).

Anything else stays unattributed (a job-level event) rather than guessed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.logs.mentions import Mention, coordinate_rank, find_mention
from hangdoc.analyzer.parsers.logs.scanner import RawEvent
from hangdoc.analyzer.payloads.nccl import NcclInit
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import (
    ConnectionLost,
    InGroup,
    MissingRanks,
    MonitoredBarrier,
)
from hangdoc.analyzer.vocabulary import EventKind, RankFrom

# Reports about the whole job: their ranks live in their fields, not in a prefix.
JOB_LEVEL = frozenset(
    {
        EventKind.RAS_REPORT,
        EventKind.RAS_MISMATCH,
        EventKind.RAS_DEAD,
        EventKind.RAS_INCOMPLETE,
        EventKind.RAS_ERROR,
        EventKind.FR_MISSING_RANKS,
        EventKind.FR_MISMATCH,
        EventKind.GPU_TOPOLOGY,
        EventKind.GPU_STATUS,
        EventKind.NCCL_VERSION,
        EventKind.AGENT_SIGNAL,
        EventKind.GPU_XID,
        EventKind.HOST_OOM_KILL,
    }
)
_DEFAULT_PGS = frozenset({"0", "default_pg"})
# Reports whose named pid is the process they are about (a launcher's, a driver's): the
# rank of that pid is theirs.
_NAMES_ITS_PROCESS = frozenset(
    {EventKind.WORKER_FAILED, EventKind.AGENT_TERMINATING, EventKind.ACTOR_DIED}
)
# Ray's reports of an actor it killed or lost: the rank the actor's name pins is that of
# the pid they name.
_NAMES_ITS_ACTOR = frozenset({EventKind.ACTOR_DIED, EventKind.HOST_OOM_KILL})
# Messages whose ranks are their payload's: torch.distributed's (c10d's ``[Rank N]`` is the
# rank in the message's process group; a monitored barrier's or Horovod's list names the
# ranks that failed; a lost connection names its peer) and an NCCL communicator's init
# line (its rank is the communicator's, global only in the default one: step 3). Their
# words are not read for a mention (step 7), only the coordinates that tag the line.
_RANKS_IN_FIELDS = (InGroup, MonitoredBarrier, MissingRanks, ConnectionLost, NcclInit)


@dataclass(slots=True)
class RankMaps:
    """Identity facts collected over the whole file, used to attribute every event."""

    hostpid_rank: dict[tuple[str, int], int] = field(default_factory=dict)
    pid_rank: dict[int, int] = field(default_factory=dict)
    local_to_global: dict[int, int] = field(default_factory=dict)
    local_is_global: bool = False
    world_size: int | None = None
    # The rank each event's words name (by the event's identity), read once.
    mentions: dict[int, Mention] = field(default_factory=dict)
    tensor_size: int | None = None  # the tensor-parallel size the coordinates show
    one_replica: bool = True  # the coordinates name one data-parallel replica at most


def build_maps(
    events: list[RawEvent],
    prefix_hostpid: dict[tuple[str, int], set[int]],
    pid_rank: dict[int, int],
    local_to_global: dict[int, set[int]],
) -> RankMaps:
    maps = RankMaps(pid_rank=dict(pid_rank))
    inits = [
        (e.host, e.pid, init)
        for e in events
        if isinstance(init := e.payload, NcclInit) and e.host is not None and e.pid is not None
    ]
    nranks = [init.nranks or 0 for _, _, init in inits]
    largest = max(nranks, default=0)
    maps.world_size = largest or None
    for (host, pid, init), size in zip(inits, nranks, strict=True):
        if size == largest and host is not None and pid is not None and init.rank is not None:
            maps.hostpid_rank.setdefault((host, pid), init.rank)
    # A pid alone (Ray/vLLM "(RayWorkerWrapper pid=4009)" prefixes carry the pid and an IP,
    # never the host name NCCL prints): the default communicator's init line of that pid,
    # when no other host has a process with the same pid and another rank.
    by_pid: dict[int, set[int]] = {}
    for (_host, pid), rank in maps.hostpid_rank.items():
        by_pid.setdefault(pid, set()).add(rank)
    for pid, ranks in by_pid.items():
        if len(ranks) == 1:
            maps.pid_rank.setdefault(pid, next(iter(ranks)))
    for key, ranks in prefix_hostpid.items():
        if len(ranks) == 1:
            maps.hostpid_rank[key] = next(iter(ranks))
    for local, ranks in local_to_global.items():
        if len(ranks) == 1:
            maps.local_to_global[local] = next(iter(ranks))
    for event in events:
        if (
            event.kind in _NAMES_ITS_ACTOR
            and event.content_rank is not None
            and event.named_pid is not None
        ):
            # a Ray actor's report whose actor name pins its rank (parsers/logs/
            # ray_actors.py): that pid is the rank's, for the reports naming it
            maps.pid_rank.setdefault(event.named_pid, event.content_rank)
        if event.kind is EventKind.CHILD_FAILURE and event.content_rank is not None:
            named_local = event.named_local_rank
            if named_local is not None and named_local >= 0:
                maps.local_to_global.setdefault(named_local, event.content_rank)
        said_world = _world_size(event)
        if event.kind is EventKind.PHASE and said_world:
            maps.world_size = max(maps.world_size or 0, said_world)
    _read_mentions(events, maps)
    _pid_mentions(events, maps)
    hosts = {h for h, _ in maps.hostpid_rank} | {
        e.named_host for e in events if e.kind is EventKind.CHILD_FAILURE
    }
    hosts.discard(None)
    mismatched = any(local != glob for local, glob in maps.local_to_global.items())
    maps.local_is_global = not mismatched and len(hosts) <= 1
    return maps


def resolve_rank(event: RawEvent, maps: RankMaps) -> tuple[int | None, RankFrom | None]:
    """The event's global rank and how it was found (None when unknown)."""
    if event.kind in JOB_LEVEL:
        if event.kind is EventKind.HOST_OOM_KILL and event.named_pid in maps.pid_rank:
            # The kernel's line is the host's, but the process it killed is a rank's
            # when its pid is known ("Out of memory: Killed process 2003 (python)").
            return maps.pid_rank[event.named_pid], RankFrom.PID
        return None, None
    if event.prefix_rank is not None:
        return event.prefix_rank, RankFrom.PREFIX
    if event.content_rank is not None:
        return event.content_rank, RankFrom.CONTENT
    if event.host is not None and event.pid is not None:
        rank = maps.hostpid_rank.get((event.host, event.pid))
        if rank is not None:
            return rank, RankFrom.NCCL_INIT
    if event.pid is not None and event.pid in maps.pid_rank:
        return maps.pid_rank[event.pid], RankFrom.PID
    named = event.named_pid
    if event.kind in _NAMES_ITS_PROCESS and named is not None and named >= 0:
        rank = maps.pid_rank.get(named)
        if rank is not None:
            return rank, RankFrom.PID
    local = event.local_rank
    if local is None and event.kind in (EventKind.WORKER_FAILED, EventKind.EXCEPTION):
        # The launcher's report names the worker's local rank (torchrun "local_rank: 3",
        # DeepSpeed's "--local_rank=3" in the command it reports; mp.spawn's "-- Process 3
        # terminated with the following error:" above the child's traceback): the same
        # mapping as a [default3]: prefix.
        named_local = event.named_local_rank
        local = named_local if named_local is not None and named_local >= 0 else None
    if local is not None:
        if local in maps.local_to_global:
            return maps.local_to_global[local], RankFrom.LOCAL_RANK
        if maps.local_is_global:
            return local, RankFrom.LOCAL_RANK_SINGLE_NODE
    group = event.payload
    if isinstance(group, InGroup) and group.group_rank is not None and event.host is None:
        pg = group.pg
        if pg is None or pg in _DEFAULT_PGS or group.pg_desc == "default_pg":
            return group.group_rank, RankFrom.GROUP_RANK
    return None, None


def mentioned_rank(event: RawEvent, maps: RankMaps) -> tuple[int | None, RankFrom | None]:
    """The rank the event's own words name (step 7), for an event nothing stronger gave
    one: a global rank as named, a local rank or a device through the local ranks' map,
    coordinates through the tensor-parallel size."""
    mention = maps.mentions.get(id(event))
    if mention is None:
        return None, None
    if mention.how is RankFrom.MENTION:
        return mention.rank, mention.how
    if mention.how is RankFrom.COORDINATES:
        if not maps.one_replica:
            return None, None  # two replicas' "TP3" are two processes, each its world's 3
        rank = coordinate_rank(mention, maps.tensor_size)
        return (rank, mention.how) if rank is not None else (None, None)
    local = mention.local_rank
    if local is None:
        return None, None
    if local in maps.local_to_global:
        return maps.local_to_global[local], mention.how
    if maps.local_is_global:
        return local, mention.how
    return None, None


def _read_mentions(events: list[RawEvent], maps: RankMaps) -> None:
    """Each event's mention, and what the coordinates among them show of the job's shape."""
    tensors: list[int] = []
    replicas: set[int | None] = set()
    for event in events:
        if event.kind in JOB_LEVEL or event.named_local_rank is not None:
            continue  # (a launcher's report read the local rank its words name)
        mention = find_mention(event.text)
        if mention is None:
            continue
        if mention.how is not RankFrom.COORDINATES and (
            isinstance(event.payload, _RANKS_IN_FIELDS) or _header_names_writer(event)
        ):
            continue  # its words' rank is its payload's; a scheduler's coordinates are a tag
        maps.mentions[id(event)] = mention
        if mention.how is RankFrom.COORDINATES:
            replicas.add(mention.data)
            if mention.tensor is not None:
                tensors.append(mention.tensor)
    # SGLang prints a TP coordinate only when tp_size > 1: the size is known when the
    # lines show every tensor-parallel rank from 0.
    if tensors and max(tensors) >= 1 and set(tensors) == set(range(max(tensors) + 1)):
        maps.tensor_size = max(tensors) + 1
    maps.one_replica = len(replicas) <= 1


def _pid_mentions(events: list[RawEvent], maps: RankMaps) -> None:
    """A pid whose lines name one global rank as their own (a rank prefix, a rank the
    content names globally, or step 7's mention, of the events that carry the pid in
    their prefix), none another, and no other pid that rank:
    that process's rank, for its other lines and the reports naming its pid. A pid two
    hosts' lines share, or one the maps already know, is left alone."""
    said: dict[int, set[int]] = {}
    hosts: dict[int, set[str | None]] = {}
    for event in events:
        if event.pid is None or event.kind in JOB_LEVEL:
            continue
        rank = event.prefix_rank if event.prefix_rank is not None else event.content_rank
        if rank is None:
            mention = maps.mentions.get(id(event))
            if mention is None or mention.how is not RankFrom.MENTION:
                continue
            rank = mention.rank
        if rank is None:
            continue
        said.setdefault(event.pid, set()).add(rank)
        hosts.setdefault(event.pid, set()).add(event.host)
    claimed = Counter(next(iter(ranks)) for ranks in said.values() if len(ranks) == 1)
    for pid, ranks in said.items():
        if len(ranks) != 1 or len(hosts[pid]) != 1 or pid in maps.pid_rank:
            continue
        rank = next(iter(ranks))
        if claimed[rank] == 1 and rank not in maps.pid_rank.values():
            maps.pid_rank[pid] = rank


def _header_names_writer(event: RawEvent) -> bool:
    """An NCCL line's ``host:pid:tid`` header names the process that wrote it: a rank in
    its words is another's ("Bootstrap Root : rank 1 of 8 ranks has already checked in"
    is the root's report about rank 1), and the header maps to a rank or to none (step 3)."""
    return event.host is not None and event.pid is not None


def _world_size(event: RawEvent) -> int | None:
    """The world size a distributed-init line names."""
    return event.payload.world_size if isinstance(event.payload, PhaseMarker) else None
