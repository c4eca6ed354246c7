"""The watchdog's view of each rank: the last collective it reported per process group.

The NCCL watchdog (and blocking-wait / gloo timeouts) logs, per rank, the SeqNum and the
operation that timed out and the last enqueued / completed work. HD032 (a lagging rank),
HD033 (different operations at one SeqNum) and HD034 (different sizes) compare them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hangdoc.analyzer.payloads.torch_pg import Backend, CollectiveTimeout, InGroup, Work
from hangdoc.analyzer.views.timeline import Placed, Timeline
from hangdoc.analyzer.vocabulary import EventKind

DEFAULT_PG = "default"  # key of records whose process group is the default one or unknown


@dataclass(slots=True)
class WatchRecord:
    """What one rank's watchdog said about one process group."""

    rank: int
    pg: str
    seq: int | None = None
    op: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    pg_known: bool = False
    events: list[Placed] = field(default_factory=list)


def _pg_key(group: InGroup) -> tuple[str, bool]:
    pg = group.pg
    if pg is None:
        return DEFAULT_PG, False
    if pg == "0" or group.pg_desc == "default_pg":
        return DEFAULT_PG, True
    return pg, True


def watch_records(tl: Timeline) -> dict[str, dict[int, WatchRecord]]:
    """Per process group, per rank: the failing collective and the rank's PG status.

    A timeout line without a PG prefix (torch ≥2.4 prints it in the next line) takes the
    PG of the same rank's status line for the same sequence number."""
    status_pg: dict[tuple[int, int], tuple[str, bool]] = {}
    for p in tl.of(EventKind.WATCHDOG_STATUS):
        status = p.event.payload_as(Work)
        if p.rank is not None and status and status.seq is not None and status.pg is not None:
            status_pg[(p.rank, status.seq)] = _pg_key(status)
    out: dict[str, dict[int, WatchRecord]] = {}
    kinds = (EventKind.COLLECTIVE_TIMEOUT, EventKind.WATCHDOG_STATUS, EventKind.DUMP_SIGNAL)
    for p in tl.of(*kinds):
        work = p.event.payload_as(Work)
        if p.rank is None or work is None:
            continue
        seq = work.seq
        if isinstance(work, CollectiveTimeout) and work.backend == Backend.GLOO:
            pg, known = "gloo", True
        elif work.pg is None and seq is not None and (p.rank, seq) in status_pg:
            pg, known = status_pg[(p.rank, seq)]
        else:
            pg, known = _pg_key(work)
        rec = out.setdefault(pg, {}).setdefault(p.rank, WatchRecord(p.rank, pg))
        rec.pg_known = rec.pg_known or known
        rec.events.append(p)
        if (
            seq is not None
            and p.kind != EventKind.DUMP_SIGNAL
            and (rec.seq is None or seq < rec.seq)
        ):
            rec.seq = seq
        if isinstance(work, CollectiveTimeout):
            rec.op = rec.op or work.op
            rec.numel_in = rec.numel_in if rec.numel_in is not None else work.numel_in
            rec.numel_out = rec.numel_out if rec.numel_out is not None else work.numel_out
        enq, done = work.last_enqueued, work.last_completed
        if enq is not None:
            rec.last_enqueued = max(
                enq, rec.last_enqueued if rec.last_enqueued is not None else enq
            )
        if done is not None:
            rec.last_completed = max(
                done, rec.last_completed if rec.last_completed is not None else done
            )
    return out


def split_by(records: dict[int, WatchRecord], key: str) -> dict[object, list[int]]:
    """Ranks per value of ``key`` among records that carry it, for the common SeqNum."""
    groups: dict[object, list[int]] = {}
    for rank, rec in sorted(records.items()):
        value = getattr(rec, key)
        if rec.seq is not None and value is not None:
            groups.setdefault((rec.seq, value), []).append(rank)
    return groups


def minority(
    groups: dict[object, list[int]], records: dict[int, WatchRecord] | None = None
) -> tuple[list[int], list[int], object, object]:
    """(culprit ranks, majority ranks, culprit value, majority value).

    When the largest groups are equally large (two ranks, one value each), ``records``
    break the tie by the watchdog's "last enqueued work" (ProcessGroupNCCL.cpp, "PG
    status: last enqueued work: N, last completed work: M"): ranks that already enqueued
    work past the failing collective went on with the program, so the group that did not
    is the one that diverged; without that, the order is arbitrary but stable."""

    def went_on(ranks: list[int]) -> int:
        if records is None:
            return 0
        done = [r.last_enqueued for k in ranks if (r := records.get(k)) is not None]
        seqs = [r.seq for k in ranks if (r := records.get(k)) is not None and r.seq is not None]
        known = [d for d in done if d is not None]
        return 1 if known and seqs and max(known) > max(seqs) else 0

    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), -went_on(kv[1]), str(kv[0])))
    major_value, major = ordered[0]
    culprits = sorted(r for _, ranks in ordered[1:] for r in ranks)
    minor_value = ordered[1][0] if len(ordered) > 1 else None
    return culprits, sorted(major), minor_value, major_value


def unnamed_timeouts(tl: Timeline) -> dict[str, list[int]]:
    """Per process group, the sequence numbers of collective timeouts whose rank is not
    known: a line whose rank prefix a paste's cut took (``… Watchdog caught collective
    operation timeout: WorkNCCL(SeqNum=…``) is still a rank stuck at that number, and
    counts where the ranks' numbers are compared (views/silence.py ``behind_in``)."""
    out: dict[str, list[int]] = {}
    for p in tl.of(EventKind.COLLECTIVE_TIMEOUT):
        work = p.event.payload_as(CollectiveTimeout)
        if p.rank is not None or work is None or work.seq is None:
            continue
        pg = "gloo" if work.backend == Backend.GLOO else _pg_key(work)[0]
        out.setdefault(pg, []).append(work.seq)
    return out
