"""Matching across ranks on synthetic dumps in torch's shape: every problem kind, the
majority rule, ring buffers that start mid-stream, and root-versus-consequence."""

from __future__ import annotations

import random
from typing import Any

from hangdoc.analyzer.model import CollectiveRecord, OpState
from hangdoc.analyzer.views.fr_matching import Kind, MatchResult, latest_dump
from tests.unit.fr.frdata import Rank, add_process, evidence, matched, pg_config

WORLD4 = pg_config({"0": ("default_pg", range(4))})


def _kinds(result: MatchResult) -> list[tuple[Kind, str, int | None, tuple[int, ...]]]:
    return [(p.kind, p.group, p.seq, p.blamed) for p in result.problems]


def test_consistent_completed_job_has_no_problem() -> None:
    docs = {r: Rank().ops(20).op("barrier").dump(WORLD4) for r in range(4)}
    assert matched(evidence(docs)).problems == []


def test_rank_that_never_issued_the_collective() -> None:
    docs = {r: Rank().ops(5).op(state="scheduled").dump(WORLD4) for r in range(3)}
    docs[3] = Rank().ops(5).dump(WORLD4)
    result = matched(evidence(docs))
    assert _kinds(result) == [(Kind.MISSING, "0", 6, (3,))]
    problem = result.problems[0]
    assert problem.waiting == (0, 1, 2) and problem.root


def test_type_mismatch_culprit_by_majority_whatever_the_file_order() -> None:
    ranks = list(range(16))
    random.Random(7).shuffle(ranks)
    docs = {}
    for r in ranks:  # insertion order of the dumps is shuffled
        op = "all_gather" if r == 5 else "all_reduce"
        out = ((16, 4),) if r == 5 else None
        docs[r] = Rank().ops(3).op(op, out=out, state="scheduled").dump()
    result = matched(evidence(docs, world=16))
    assert _kinds(result) == [(Kind.TYPE, "0", 4, (5,))]
    assert result.problems[0].waiting == tuple(r for r in range(16) if r != 5)


def test_tie_blames_both_sides_and_says_so() -> None:
    docs = {
        0: Rank().op("all_reduce", state="scheduled").dump(),
        1: Rank().op("broadcast", state="scheduled").dump(),
    }
    (problem,) = matched(evidence(docs, world=2)).problems
    assert problem.kind is Kind.TYPE and problem.tie and problem.blamed == (0, 1)


def test_size_and_dtype_mismatches() -> None:
    docs = {r: Rank().ops(2).op(state="scheduled").dump(WORLD4) for r in range(4)}
    docs[1] = Rank().ops(2).op(sizes=((8,),), state="scheduled").dump(WORLD4)
    assert _kinds(matched(evidence(docs))) == [(Kind.SIZE, "0", 3, (1,))]
    docs[1] = Rank().ops(2).op(dtype="Half", state="scheduled").dump(WORLD4)
    assert _kinds(matched(evidence(docs))) == [(Kind.DTYPE, "0", 3, (1,))]


def test_all_gather_and_reduce_scatter_size_rules() -> None:
    good = {r: Rank().op("all_gather", sizes=((4,),), out=((4, 4),)).dump(WORLD4) for r in range(4)}
    assert matched(evidence(good)).problems == []
    # every rank agrees, but the output is sized for 2 ranks in a 4-rank group
    bad = {
        r: Rank().op("_all_gather_base", sizes=((4,),), out=((8,),)).dump(WORLD4) for r in range(4)
    }
    (problem,) = matched(evidence(bad)).problems
    assert problem.kind is Kind.SIZE and problem.blamed == (0, 1, 2, 3) and not problem.waiting
    rs_ok = {
        r: Rank().op("reduce_scatter", sizes=((16,),), out=((4,),)).dump(WORLD4) for r in range(4)
    }
    assert matched(evidence(rs_ok)).problems == []
    rs_bad = dict(rs_ok)
    rs_bad[2] = Rank().op("reduce_scatter", sizes=((12,),), out=((4,),)).dump(WORLD4)
    kinds = _kinds(matched(evidence(rs_bad)))
    assert kinds == [(Kind.SIZE, "0", 1, (2,))]


def test_all_to_all_sizes_may_differ_but_totals_must_agree() -> None:
    ok = {
        0: Rank().op("all_to_all", sizes=((6,),), out=((2,),)).dump(),
        1: Rank().op("all_to_all", sizes=((2,),), out=((6,),)).dump(),
    }
    assert matched(evidence(ok, world=2)).problems == []
    bad = {
        0: Rank().op("all_to_all", sizes=((6,),), out=((2,),)).dump(),
        1: Rank().op("all_to_all", sizes=((2,),), out=((7,),)).dump(),
    }
    (problem,) = matched(evidence(bad, world=2)).problems
    assert problem.kind is Kind.SIZE and problem.blamed == (0, 1)


def test_ring_buffers_starting_mid_stream_are_aligned() -> None:
    # rank 0 kept only its last 40 entries (seq 61-100 of 100), rank 1 all of them; both
    # wait in #101. Nothing before seq 61 may count as missing for rank 0.
    full = [Rank().ops(100).op(state="scheduled") for _ in range(4)]
    docs = {
        0: full[0].dump(WORLD4, first=61),
        1: full[1].dump(WORLD4),
        2: full[2].dump(WORLD4, first=90),
        3: full[3].dump(WORLD4, first=5),
    }
    result = matched(evidence(docs))
    assert [p.kind for p in result.problems] == [Kind.STALLED]
    assert result.ranks[0].wrapped and not result.ranks[1].wrapped


def test_wrapped_buffer_without_a_group_is_unknown_not_missing() -> None:
    tp = pg_config({"0": ("default_pg", range(2)), "1": ("tp", [0, 1])})
    docs = {
        0: Rank().op(group="1", desc="tp", state="scheduled").dump(tp),
        1: Rank().op(group="1", desc="tp").ops(50).dump(tp, first=10),
    }
    # rank 1's buffer lost its tp entry: whether it issued tp #1 is unknown, not "missing"
    assert all(p.kind is not Kind.MISSING for p in matched(evidence(docs)).problems)


def test_consequence_is_ranked_after_its_root() -> None:
    # dp = {0, 1, 3}, tp = {2, 3}. Rank 2 is busy (nothing in flight); rank 3 waits on tp
    # for it, so it never reaches dp #4, where ranks 0-1 wait: dp #4 is a consequence.
    cfg = pg_config({"0": ("default_pg", range(4)), "1": ("dp", [0, 1, 3]), "5": ("tp", [2, 3])})
    dp: dict[str, Any] = {"group": "1", "desc": "dp"}
    tp: dict[str, Any] = {"group": "5", "desc": "tp"}
    docs = {r: Rank().ops(3, **dp).op(**dp, state="scheduled").dump(cfg) for r in (0, 1)}
    docs[2] = Rank().op(**tp).dump(cfg)
    docs[3] = Rank().ops(3, **dp).op(**tp).op(**tp, state="scheduled").dump(cfg)
    result = matched(evidence(docs))
    by_key = {(p.group, p.seq): p for p in result.problems}
    on_tp, on_dp = by_key[("5", 2)], by_key[("1", 4)]
    assert (on_tp.blamed, on_tp.waiting, on_tp.root) == ((2,), (3,), True)
    assert (on_dp.blamed, on_dp.root, on_dp.after) == ((3,), False, [on_tp])
    assert result.problems[0] is on_tp


def test_collective_order_inversion_across_groups_is_a_cycle() -> None:
    # rank 2 waits in default #4 for rank 3; rank 3 waits in tp #2 for rank 2
    cfg = pg_config({"0": ("default_pg", range(4)), "5": ("tp", [2, 3])})
    tp: dict[str, Any] = {"group": "5", "desc": "tp"}
    docs = {r: Rank().ops(3).op(state="scheduled").dump(cfg) for r in (0, 1)}
    docs[2] = Rank().op(**tp).ops(3).op(state="scheduled").dump(cfg)
    docs[3] = Rank().op(**tp).ops(3).op(**tp, state="scheduled").dump(cfg)
    result = matched(evidence(docs))
    looped = [p for p in result.problems if p.cycle]
    assert {(p.group, p.seq, p.blamed) for p in looped} == {("0", 4, (3,)), ("5", 2, (2,))}


def test_propagated_missing_rank_stuck_in_a_mismatch() -> None:
    docs = {r: Rank().ops(2).op().op(state="scheduled").dump(WORLD4) for r in (0, 2, 3)}
    docs[1] = Rank().ops(2).op(sizes=((8,),), state="scheduled").dump(WORLD4)
    result = matched(evidence(docs))
    size, missing = result.problems
    assert (size.kind, size.seq, size.blamed, size.root) == (Kind.SIZE, 3, (1,), True)
    assert (missing.kind, missing.seq, missing.blamed) == (Kind.MISSING, 4, (1,))
    assert not missing.root and missing.after == [size]


def test_p2p_unmatched_send_blames_the_peer() -> None:
    docs = {
        0: Rank().ops(2).send(1, src=0).dump(WORLD4),
        1: Rank().ops(2).dump(WORLD4),
        2: Rank().ops(2).dump(WORLD4),
        3: Rank().ops(2).dump(WORLD4),
    }
    (problem,) = matched(evidence(docs)).problems
    assert (problem.kind, problem.waiting, problem.blamed, problem.root) == (
        Kind.P2P,
        (0,),
        (1,),
        True,
    )


def test_pipeline_chain_root_is_the_last_stage() -> None:
    # 0 -> 1 -> 2: rank 1 waits to send to 2 before receiving from 0; rank 2 is busy.
    docs = {
        0: Rank().send(1, src=0).dump(WORLD4),
        1: Rank().send(2, src=1).dump(WORLD4),
        2: Rank().ops(1).dump(WORLD4),
        3: Rank().ops(1).dump(WORLD4),
    }
    result = matched(evidence(docs))
    first = {p.waiting: p for p in result.problems}
    assert first[(1,)].root and first[(1,)].blamed == (2,)
    assert not first[(0,)].root and first[(0,)].after == [first[(1,)]]
    assert result.problems[0] is first[(1,)]


def test_p2p_cycle_is_a_deadlock() -> None:
    docs = {
        0: Rank().send(1, src=0).recv(1, dst=0).dump(WORLD4),
        1: Rank().send(0, src=1).recv(0, dst=1).dump(WORLD4),
    }
    result = matched(evidence(docs))
    assert [p.kind for p in result.problems] == [Kind.P2P, Kind.P2P]
    assert all(p.cycle and p.root for p in result.problems)


def test_matched_p2p_with_different_sizes() -> None:
    docs = {
        0: Rank().op("send", meta="0->1", sizes=((4,),), state="scheduled").dump(WORLD4),
        1: Rank().op("recv", meta="1<-0", sizes=((8,),), state="scheduled").dump(WORLD4),
    }
    kinds = {p.kind for p in matched(evidence(docs)).problems}
    assert Kind.SIZE in kinds and Kind.P2P not in kinds


def test_members_without_dump_while_all_others_wait() -> None:
    docs = {r: Rank().ops(5).op(state="scheduled").dump(WORLD4) for r in range(3)}
    result = matched(evidence(docs, world=4))
    assert _kinds(result) == [(Kind.NO_DUMP, "0", 6, (3,))]


def test_everyone_in_the_same_op_is_a_stall() -> None:
    docs = {r: Rank().ops(5).op(state="scheduled").dump(WORLD4) for r in range(4)}
    assert _kinds(matched(evidence(docs))) == [(Kind.STALLED, "0", 6, ())]


def test_coalesced_entries_sharing_a_seq_are_not_a_mismatch() -> None:
    def coalesced(rank: Rank) -> Rank:
        rank.op("all_reduce", sizes=((4,),)).op("all_reduce", sizes=((8,),))
        rank.entries[-1]["collective_seq_id"] = rank.entries[-2]["collective_seq_id"]
        rank.seqs["0"] -= 1
        return rank.op("coalesced", sizes=())

    docs = {r: coalesced(Rank().ops(2)).dump(WORLD4) for r in range(4)}
    assert matched(evidence(docs)).problems == []


def test_two_dumps_of_one_rank_use_the_newest() -> None:
    old = Rank().ops(3).op(state="scheduled")
    new = Rank().ops(5)
    ev = evidence({0: new.dump(WORLD4), 1: new.dump(WORLD4)}, world=2)
    stale = evidence({0: old.dump(WORLD4)}).processes[0].collectives
    ev.processes[0].collectives = stale + ev.processes[0].collectives
    assert latest_dump(ev.processes[0].collectives)[-1].record_id == 4
    assert matched(ev).problems == []


def test_stacks_say_the_blamed_rank_is_elsewhere() -> None:
    # rank 3's FR still shows an old op in flight, but its stacks say it is not in a
    # collective: the missing-rank problem is a root, not a consequence
    cfg = pg_config({"0": ("default_pg", range(4)), "7": ("x", [3])})
    docs = {r: Rank().ops(5).op(state="scheduled").dump(cfg) for r in range(3)}
    docs[3] = Rank().ops(5).op(group="7", desc="x", state="scheduled").dump(cfg)
    ev = evidence(docs)
    from hangdoc.analyzer.model import Frame, StackSample, ThreadStack

    frames = (Frame("save_checkpoint", "/job/train.py", 9), Frame("main", "/job/train.py", 20))
    ev.ranked()[3].stack_samples.append(StackSample(0, None, (ThreadStack(frames, is_main=True),)))
    result = matched(ev)
    missing = next(p for p in result.problems if p.kind is Kind.MISSING)
    assert missing.blamed == (3,) and missing.root


def test_records_without_fr_files_are_still_matched() -> None:
    ev = evidence({})
    for rank in range(2):
        proc = add_process(ev, rank)
        proc.collectives = [CollectiveRecord("0", 1, "all_reduce", OpState.SCHEDULED, record_id=0)]
    assert _kinds(matched(ev)) == [(Kind.STALLED, "0", 1, ())]


def test_a_groups_position_is_its_last_collective_even_after_sends() -> None:
    """scan_rank keys its last-record pass by group name alone; where the group's last
    record is a send/recv, the position is the group's last collective before it."""
    from hangdoc.analyzer.parsers.flight_recorder import Reducer, document_to_parsed
    from hangdoc.analyzer.views.fr_matching import scan_rank

    rank = Rank().ops(3, group="1", desc="pp").send(1, src=0, group="1").recv(1, dst=0, group="1")
    doc = rank.dump(pg_config({"1": ("pp", [0, 1])}))
    records = document_to_parsed(doc, 0, "r0", Reducer()).processes[0].collectives
    position = scan_rank(0, records).groups["1"]
    assert (position.last.op, position.last.seq_id, position.last.is_p2p) == (
        "all_reduce",
        3,
        False,
    )
    only_p2p = Rank().send(1, src=0, group="2").dump(pg_config({"2": ("pp", [0, 1])}))
    p2p_records = document_to_parsed(only_p2p, 0, "r0", Reducer()).processes[0].collectives
    assert "2" not in scan_rank(0, p2p_records).groups
