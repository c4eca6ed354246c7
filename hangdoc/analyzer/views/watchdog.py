"""The watchdog's view of each rank: the last collective it reported per process group.

The NCCL watchdog (and blocking-wait / gloo timeouts) logs, per rank, the SeqNum and the
operation that timed out and the last enqueued / completed work. HD032 (a lagging rank),
HD033 (different operations at one SeqNum) and HD034 (different sizes) compare them.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable
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
    _place_unnamed(out)
    return out


def _place_unnamed(out: dict[str, dict[int, WatchRecord]]) -> None:
    """Timeouts that name no group (torch ≥2.4 prints the group in the status line after
    the timeout, which a paste may cut), of ranks the one named group does not hold, at a
    SeqNum near that group's: in that group. They cannot be the default group's by what
    they say, and with one group named beside them the default group is not in the text;
    they stay ``pg_known`` False (the rules weigh them as a guess)."""
    unnamed = out.get(DEFAULT_PG)
    named = [pg for pg in out if pg != DEFAULT_PG]
    if not unnamed or len(named) != 1 or any(rec.pg_known for rec in unnamed.values()):
        return
    group = out[named[0]]
    seqs = [rec.seq for rec in group.values() if rec.seq is not None]
    movable = [
        rank
        for rank, rec in unnamed.items()
        if rank not in group
        and rec.seq is not None
        and any(abs(rec.seq - seq) <= NEAR_SEQ for seq in seqs)
    ]
    if len(movable) != len(unnamed):
        return  # some are not near: the text may hold the default group too
    for rank in movable:
        rec = unnamed.pop(rank)
        rec.pg = named[0]
        group[rank] = rec
    del out[DEFAULT_PG]


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


# Appended for issue 21: ranks stuck at different SeqNums of one group, each in its own
# collective. Point-to-point OpTypes (c10d opTypeToString) are left out: a SEND and a RECV
# of one pipeline are apart by design (HD048, HD105 read them). Sizes may differ for the
# operations in UNEVEN_OK without anything being wrong (HD034 skips them too).
P2P_OPS = frozenset({"SEND", "RECV", "RECVANYSOURCE", "COALESCED"})
UNEVEN_OK = frozenset(
    {"ALLTOALL", "ALLTOALL_BASE", "SEND", "RECV", "GATHER", "SCATTER", "RECVANYSOURCE", "UNKNOWN"}
)
# Collectives with a root (c10d opTypeToString): one side of them can complete without the
# other — a broadcast's root once its data is sent (NCCL's ring pushes it into the next
# rank's buffers), a reduce's or a gather's senders, a scatter's root — so a rank may be
# one SeqNum past one of these while another is still inside it, in one sequence.
ROOTED_OPS = frozenset({"BROADCAST", "REDUCE", "GATHER", "SCATTER"})
# Without the process group in the lines, two ranks' SeqNums far apart may count two
# different groups (megatron and other multi-group jobs: hundreds or thousands apart); ranks
# of one group out of step by a few collectives are near. Beyond this gap, with the group
# unknown, nothing is compared.
NEAR_SEQ = 8


class ApartBy(enum.StrEnum):
    """What differs between the collectives the ranks are stuck in."""

    OP = "op"  # different OpTypes: a collective type mismatch
    SIZE = "size"  # one OpType, different NumelIn: a size mismatch


@dataclass(frozen=True, slots=True)
class Apart:
    """One group's ranks stuck in different collectives at different SeqNums."""

    pg: str
    by: ApartBy
    # (seq, op, numel_in) -> the ranks stuck there, the culprits' side first
    sides: tuple[tuple[tuple[int, str, int | None], tuple[int, ...]], ...]
    culprits: tuple[int, ...]
    waiting: tuple[int, ...]
    pg_known: bool


def _timeout_seqs(rec: WatchRecord) -> set[int]:
    return {
        w.seq
        for p in rec.events
        if p.kind == EventKind.COLLECTIVE_TIMEOUT
        and (w := p.event.payload_as(Work)) is not None
        and w.seq is not None
    }


def _one_past_rooted(stuck: dict[int, WatchRecord]) -> bool:
    """The ranks behind are inside a rooted collective (ROOTED_OPS) and every other rank
    is exactly one SeqNum further: those may have finished that very collective as its
    sender (a broadcast's root) and issued the program's next one, which is all their
    different OpType says. One sequence, one side lagging inside the rooted collective
    (its data never arrived, or it has not finished receiving): nothing shows the ranks
    issued different collectives (accelerate #934, ultralytics #1439: BROADCAST #1 on
    rank 1, ALLGATHER #2 on rank 0, the root)."""
    high = max(rec.seq for rec in stuck.values() if rec.seq is not None)
    return all(rec.seq == high or inside_rooted(rec, high) for rec in stuck.values())


def inside_rooted(rec: WatchRecord, seq: int) -> bool:
    """``rec``'s own timeout is in a rooted collective (ROOTED_OPS) one SeqNum below
    ``seq``, where other ranks of its group wait: it is inside the collective they
    completed (a broadcast's root done sending, its receiver never done), not behind in
    code of its own, and not in another collective than theirs."""
    return (
        rec.seq is not None
        and rec.seq == seq - 1
        and str(rec.op).upper() in ROOTED_OPS
        and (rec.last_enqueued is None or rec.last_enqueued < seq)
    )


def apart(pg: str, records: dict[int, WatchRecord], unnamed: Iterable[int] = ()) -> Apart | None:
    """The ranks of one group whose own watchdog timeouts name different SeqNums *and*
    different collectives (another OpType, or the same one with another NumelIn).

    A collective completes on a rank only when every rank of the group joined it, so ranks
    of one group cannot be stuck at different SeqNums unless their sequences of collectives
    differ: each side's collective was paired with another one on the other side. Where
    the stuck collectives themselves differ, the ranks issued different collectives (or
    sizes) at the point they met. Same OpType and size at different SeqNums (a broadcast
    root one ahead) says nothing of that kind and is left to HD032; nor does a rank one
    SeqNum past a rooted collective that the others are still inside, whatever its next
    collective is (``_one_past_rooted``).

    ``unnamed``: the SeqNums of this group's timeouts whose rank a cut took
    (``unnamed_timeouts``); each still is a rank on the side at its SeqNum, so a paste cut
    mid-line weighs the sides as the whole paste does."""
    stuck = {
        rank: rec
        for rank, rec in records.items()
        if rec.seq is not None and rec.op is not None and rec.seq in _timeout_seqs(rec)
    }
    if len(stuck) < 2:
        return None
    known = all(rec.pg_known for rec in stuck.values())
    if not known and any(len(_timeout_seqs(rec)) > 1 for rec in stuck.values()):
        return None  # one rank, several SeqNums, no group named: several groups in one
    seqs = {rec.seq for rec in stuck.values() if rec.seq is not None}
    if len(seqs) < 2 or (not known and max(seqs) - min(seqs) > NEAR_SEQ):
        return None
    ops = {str(rec.op).upper() for rec in stuck.values()}
    if ops & P2P_OPS:
        return None
    if _one_past_rooted(stuck):
        return None
    if len(ops) > 1:
        by = ApartBy.OP
    else:
        sizes = {rec.numel_in for rec in stuck.values()}
        if ops & UNEVEN_OK or None in sizes or len(sizes) < 2:
            return None
        by = ApartBy.SIZE
    sides: dict[tuple[int, str, int | None], list[int]] = {}
    for rank, rec in sorted(stuck.items()):
        key = (rec.seq or 0, str(rec.op), rec.numel_in if by is ApartBy.SIZE else None)
        sides.setdefault(key, []).append(rank)
    unheard = Counter(unnamed)
    # The culprits are the smaller side; on a tie, the side at the lower SeqNum: it issued
    # fewer collectives before the point they met, so it is the one that skipped some.
    ordered = sorted(sides.items(), key=lambda kv: (len(kv[1]) + unheard[kv[0][0]], kv[0][0]))
    culprits = tuple(ordered[0][1])
    waiting = tuple(sorted(r for _, ranks in ordered[1:] for r in ranks))
    return Apart(
        pg=pg,
        by=by,
        sides=tuple((key, tuple(ranks)) for key, ranks in ordered),
        culprits=culprits,
        waiting=waiting,
        pg_known=known,
    )


def paired_elsewhere(rec: WatchRecord, others: list[WatchRecord]) -> bool:
    """``rec``'s own status shows work in flight at a SeqNum that another rank of the group
    has completed (its status, or its timeout at a later SeqNum): that rank is not
    elsewhere but in a collective the others paired with another one of theirs. Which one
    its status does not say (a cut line, a status without its timeout): out of step, and
    nothing more (HD041 names it when both collectives show)."""
    if rec.last_enqueued is None or rec.last_completed is None:
        return False
    if rec.last_enqueued <= rec.last_completed:
        return False  # nothing in flight: it never entered the next collective
    stuck = rec.last_completed + 1
    return any(
        (o.last_completed is not None and o.last_completed >= stuck)
        or (o.seq is not None and o.seq > stuck and o.last_enqueued is None)
        for o in others
    )


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
