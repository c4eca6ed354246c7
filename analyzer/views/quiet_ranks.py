"""The rank that did not time out: the one the others were waiting for.

When a collective hangs because one rank is elsewhere (saving, evaluating, preprocessing
alone), every *other* rank's watchdog fires: ``[Rank 1] Watchdog caught collective
operation timeout…`` from ranks 1, 2 and 3, and nothing from rank 0, which is still busy
(ProcessGroupNCCL's watchdog reports only the work of its own rank; the rank that never
issued the collective has nothing to time out). The same holds for gloo's monitored
barrier: "Rank N successfully reached monitoredBarrier, but received errors while waiting
for send/recv from rank 0" comes from the ranks that arrived.

Seen in the casebook: yolov5 #4409 (ranks 1-3 time out in BROADCAST while rank 0's
validation bar goes on), Ultra-Fast-Lane-Detection-v2 #119 (ranks 1-3 time out in
ALLREDUCE after "Evaluating the results…", rank 0 silent).

The gap is read over the job's ranks when WORLD_SIZE is known, else over 0..the highest
rank that timed out: a paste cut after rank 3 of 8 still leaves rank 0 as the only gap
below 3, and ranks above the highest one are never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.model import Evidence
from hangdoc.analyzer.payloads.torch_pg import MonitoredBarrier, Reporter
from hangdoc.analyzer.vocabulary import EventKind

_WAITING = frozenset({EventKind.COLLECTIVE_TIMEOUT})


@dataclass(frozen=True, slots=True)
class QuietRank:
    rank: int
    waiters: tuple[int, ...]  # the ranks that reported the timeout
    world_known: bool  # the gap was read over WORLD_SIZE, not over the reporters' span


def waiting_ranks(evidence: Evidence) -> set[int]:
    """Ranks that reported a collective timeout of their own (watchdog, blocking wait,
    gloo), or that reached a monitored barrier and heard nothing back."""
    found: set[int] = set()
    for process in evidence.processes:
        if process.rank is None:
            continue
        for event in process.log_events:
            if event.kind in _WAITING:
                found.add(process.rank)
                break
            barrier = event.payload_as(MonitoredBarrier)
            if barrier is not None and barrier.reporter == Reporter.PEER:
                found.add(process.rank)
                break
    return found


def quiet_rank(evidence: Evidence) -> QuietRank | None:
    """The one rank that did not time out while the others did, if exactly one."""
    waiters = waiting_ranks(evidence)
    if not waiters:
        return None
    world = evidence.expected_world_size()
    if world is not None and max(waiters) >= world:
        world = None  # group ranks of a larger job, or a wrong WORLD_SIZE: do not guess
    span = range(world) if world is not None else range(max(waiters) + 1)
    gap = [r for r in span if r not in waiters]
    if len(gap) != 1:
        return None
    return QuietRank(gap[0], tuple(sorted(waiters)), world is not None)
