"""views/watchdog.apart: ranks of one group stuck in different collectives at different
SeqNums (HD041), built from typed watchdog events as the log readers produce them."""

from __future__ import annotations

from hangdoc.analyzer.model import Evidence, LogEvent, ProcessEvidence
from hangdoc.analyzer.payloads.torch_pg import CollectiveTimeout
from hangdoc.analyzer.views.timeline import Timeline
from hangdoc.analyzer.views.watchdog import (
    Apart,
    ApartBy,
    WatchRecord,
    apart,
    paired_elsewhere,
    unnamed_timeouts,
    watch_records,
)
from hangdoc.analyzer.vocabulary import EventKind


def _apart(*stuck: tuple[int, int, str, int | None, str | None]) -> Apart | None:
    """``stuck``: (rank, SeqNum, OpType, NumelIn, PG index or None) of each rank's timeout."""
    evidence = Evidence()
    for i, (rank, seq, op, numel, pg) in enumerate(stuck):
        timeout = CollectiveTimeout(pg=pg, seq=seq, op=op, numel_in=numel, numel_out=numel)
        event = LogEvent(
            EventKind.COLLECTIVE_TIMEOUT, f"timeout {i}", "console.txt", line=i + 1, payload=timeout
        )
        evidence.processes.append(ProcessEvidence(rank=rank, log_events=[event]))
    groups = watch_records(Timeline(evidence))
    assert len(groups) == 1
    [(pg, records)] = groups.items()
    return apart(pg, records)


def test_different_ops_at_nearby_seqs_are_a_type_mismatch() -> None:
    found = _apart((0, 12, "_ALLGATHER_BASE", 513, None), (1, 10, "BROADCAST", 5000, None),
                   (2, 10, "BROADCAST", 5000, None))  # fmt: skip
    assert found is not None
    assert found.by is ApartBy.OP
    assert (found.culprits, found.waiting) == ((0,), (1, 2))


def test_same_op_other_size_is_a_size_mismatch_culprit_on_the_lower_seq_when_tied() -> None:
    found = _apart((0, 959, "ALLREDUCE", 545, None), (1, 963, "ALLREDUCE", 2560, None))
    assert found is not None
    assert found.by is ApartBy.SIZE
    assert found.culprits == (0,)


def test_same_op_same_size_or_sizes_unknown_is_not_apart() -> None:
    assert _apart((0, 5730, "BROADCAST", 36, None), (3, 5729, "BROADCAST", 36, None)) is None
    assert _apart((0, 7561, "ALLREDUCE", None, None), (1, 7559, "ALLREDUCE", 8, None)) is None


def test_sizes_that_may_differ_and_point_to_point_ops_are_left_out() -> None:
    assert _apart((0, 4, "ALLTOALL_BASE", 10, None), (1, 6, "ALLTOALL_BASE", 20, None)) is None
    assert _apart((0, 4, "SEND", 10, None), (1, 6, "ALLREDUCE", 10, None)) is None


def test_far_apart_seqs_compare_only_when_the_group_is_named() -> None:
    assert _apart((0, 33, "ALLREDUCE", 1, None), (3, 257, "BROADCAST", 1, None)) is None
    found = _apart((0, 33, "ALLREDUCE", 1, "0"), (3, 257, "BROADCAST", 1, "0"))
    assert found is not None and found.pg_known


def test_one_rank_alone_or_one_seq_is_not_apart() -> None:
    assert _apart((0, 33, "ALLREDUCE", 1, None)) is None
    assert _apart((0, 33, "ALLREDUCE", 1, None), (1, 33, "BROADCAST", 1, None)) is None


def test_a_rank_with_work_in_flight_that_another_completed_was_paired_elsewhere() -> None:
    # torch ≥ 2.3's status, "last enqueued NCCL work: N, last completed NCCL work: M"
    # (ProcessGroupNCCL.cpp): rank 1 has 215121 in flight, rank 0 completed it.
    stuck = WatchRecord(1, "default", seq=215121, last_enqueued=215121, last_completed=215120)
    ahead = WatchRecord(0, "default", seq=215122, last_enqueued=215122, last_completed=215121)
    assert paired_elsewhere(stuck, [ahead])
    # Nothing in flight: it never entered the next collective (behind, HD032).
    idle = WatchRecord(3, "default", last_enqueued=807, last_completed=807)
    waiting = WatchRecord(0, "default", seq=808, last_enqueued=811, last_completed=807)
    assert not paired_elsewhere(idle, [waiting])
    # In flight at the SeqNum the others are stuck at too: the same collective.
    late = WatchRecord(2, "default", seq=808, last_enqueued=808, last_completed=807)
    assert not paired_elsewhere(late, [waiting])


def test_a_timeout_whose_rank_a_cut_took_still_weighs_its_side() -> None:
    # The first line of a paste cut mid-way loses its "[rank2]:" prefix; the rank is still
    # at SeqNum 10, so the culprit stays the lone rank at 12 (not the tie's lower SeqNum).
    evidence = Evidence()
    for i, (rank, seq, op) in enumerate([(None, 10, "BROADCAST"), (0, 12, "_ALLGATHER_BASE"),
                                         (1, 10, "BROADCAST")]):  # fmt: skip
        timeout = CollectiveTimeout(pg=None, seq=seq, op=op, numel_in=5, numel_out=5)
        event = LogEvent(
            EventKind.COLLECTIVE_TIMEOUT, f"timeout {i}", "console.txt", line=i + 1, payload=timeout
        )
        evidence.processes.append(ProcessEvidence(rank=rank, log_events=[event]))
    tl = Timeline(evidence)
    [(pg, records)] = watch_records(tl).items()
    assert apart(pg, records).culprits == (1,)  # type: ignore[union-attr]
    found = apart(pg, records, unnamed_timeouts(tl).get(pg, ()))
    assert found is not None
    assert (found.culprits, found.waiting) == ((0,), (1,))
