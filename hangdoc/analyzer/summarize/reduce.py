"""The reductions a node summary applies, and its human-facing digests.

Each reduction keeps what a rule reads and drops bulk that no rule reads, and says how
much it dropped (the summary records the counts, so a reader can tell a short flight
recorder buffer from a cut one). Pure functions over the model.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from hangdoc.analyzer.model import (
    CollectiveRecord,
    LogEvent,
    OpState,
    ProcessEvidence,
    ProcSample,
    ProcState,
)
from hangdoc.analyzer.views.kernel import wchan_kind
from hangdoc.collectors.jobformat import CollectiveBrief, GroupRankState, GroupState, LogHighlight

# Completed collectives kept per process group before the unfinished ones: enough to
# compare what ranks did just before the hang, few enough to stay small.
FR_COMPLETED_TAIL = 8
# Unfinished collectives kept per group (a job that queued more is already lost).
FR_PENDING_MAX = 64
# Log events kept per rank: the first and the last half of this many.
LOG_EVENTS_PER_RANK = 200
JOB_LOG_EVENTS = 2000
LOG_HIGHLIGHTS = 20


def reduce_proc(proc: ProcessEvidence) -> tuple[list[ProcSample], int]:
    """Keep the /proc threads a rule can use: the main thread, threads py-spy saw (rules
    join them on the thread id), and any thread ever not plainly asleep or ever waiting on
    a file system. A C++ helper thread asleep on a futex at every sample tells the rules
    nothing, and real ranks have dozens of them. Returns the samples and how many threads
    were left out."""
    samples = proc.proc_samples
    if not samples:
        return [], 0
    keep: set[int] = set()
    if proc.pid is not None:
        keep.add(proc.pid)
    for stack in proc.stack_samples:
        keep.update(t.os_thread_id for t in stack.threads if t.os_thread_id is not None)
    every: set[int] = set()
    for sample in samples:
        for t in sample.threads:
            every.add(t.tid)
            if (
                t.state not in (ProcState.SLEEPING, ProcState.IDLE)
                or wchan_kind(t.wchan) == "filesystem"
            ):
                keep.add(t.tid)
    if keep >= every:
        return list(samples), 0
    reduced = [
        dataclasses.replace(s, threads=tuple(t for t in s.threads if t.tid in keep))
        for s in samples
    ]
    return reduced, len(every - keep)


def fr_window(records: Sequence[CollectiveRecord]) -> list[CollectiveRecord]:
    """The flight recorder frontier of one rank, in buffer order.

    Per (group, p2p): the last FR_COMPLETED_TAIL completed records and the unfinished ones
    after them, plus the buffer's first record, which tells a reader whether the ring
    wrapped (record id 0 is still there) exactly as the whole buffer would."""
    if len(records) <= FR_COMPLETED_TAIL + 1:
        return list(records)
    keep: set[int] = {0}
    by_group: dict[tuple[str, bool], list[int]] = {}
    for index, record in enumerate(records):
        by_group.setdefault((record.group, record.is_p2p), []).append(index)
    for indices in by_group.values():
        completed = [i for i in indices if records[i].state == OpState.COMPLETED]
        tail = completed[-FR_COMPLETED_TAIL:]
        start = tail[0] if tail else indices[0]
        pending = [i for i in indices if i >= start and records[i].state != OpState.COMPLETED]
        keep.update(tail)
        keep.update(pending[:FR_PENDING_MAX])
    return [records[i] for i in sorted(keep)]


def cap_events(events: list[LogEvent], cap: int) -> list[LogEvent]:
    """The first and the last ``cap // 2`` events: how it started and where it ended."""
    if len(events) <= cap:
        return list(events)
    half = cap // 2
    return [*events[:half], *events[-half:]]


def _brief(record: CollectiveRecord) -> CollectiveBrief:
    return {
        "seq": record.seq_id,
        "op": record.op,
        "state": record.state,
        "input_sizes": [list(s) for s in record.input_sizes],
        "dtypes": list(record.dtypes),
    }


def fr_groups(processes: list[ProcessEvidence]) -> list[GroupState]:
    """Per process group, the ranks that share a last completed collective and the same
    unfinished ones: a node's flight recorder state in a few lines."""
    states: dict[str, dict[str, GroupRankState]] = {}
    descs: dict[str, str | None] = {}
    for proc in processes:
        if proc.rank is None or not proc.collectives:
            continue
        last: dict[str, CollectiveRecord] = {}
        pending: dict[str, list[CollectiveRecord]] = {}
        for record in proc.collectives:
            if record.is_p2p:
                continue
            descs.setdefault(record.group, record.group_desc)
            if record.state == OpState.COMPLETED:
                last[record.group] = record
                pending.pop(record.group, None)
            else:
                pending.setdefault(record.group, []).append(record)
        for group in sorted(set(last) | set(pending)):
            done = last.get(group)
            state: GroupRankState = {
                "ranks": [],
                "last_completed": _brief(done) if done is not None else None,
                "pending": [_brief(r) for r in pending.get(group, [])[:FR_PENDING_MAX]],
            }
            key = json.dumps([state["last_completed"], state["pending"]], sort_keys=True)
            held = states.setdefault(group, {}).setdefault(key, state)
            held["ranks"].append(proc.rank)
    return [
        {
            "group": group,
            "desc": descs.get(group),
            "states": sorted(states[group].values(), key=lambda s: s["ranks"]),
        }
        for group in sorted(states)
    ]


def log_highlights(processes: list[ProcessEvidence], job: list[LogEvent]) -> list[LogHighlight]:
    """Per kind of log event: how many, on which ranks, and the first one."""
    kinds: dict[str, LogHighlight] = {}
    firsts: dict[str, tuple[float, int]] = {}
    everything = [(p.rank, e) for p in processes for e in p.log_events]
    everything += [(None, e) for e in job]
    for order, (rank, event) in enumerate(everything):
        entry = kinds.get(event.kind)
        if entry is None:
            entry = kinds[event.kind] = {
                "kind": event.kind, "count": 0, "ranks": [], "first_time": event.time,
                "first_text": event.text[:300], "source": event.source,
            }  # fmt: skip
            firsts[event.kind] = (event.time if event.time is not None else float("inf"), order)
        entry["count"] += 1
        if rank is not None and rank not in entry["ranks"]:
            entry["ranks"].append(rank)
        when = (event.time if event.time is not None else float("inf"), order)
        if when < firsts[event.kind]:
            firsts[event.kind] = when
            entry["first_time"] = event.time
            entry["first_text"] = event.text[:300]
            entry["source"] = event.source
    ordered = sorted(kinds.values(), key=lambda h: (-h["count"], h["kind"]))
    for entry in ordered:
        entry["ranks"].sort()
    return ordered[:LOG_HIGHLIGHTS]
