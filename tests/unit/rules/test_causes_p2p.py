"""HD105: point-to-point waits that form a cycle, or a chain to a rank that is elsewhere,
or a send and its recv blocked on each other with no byte moving; peers from --locals,
from the pipeline helpers' direction, or (bare send/recv) from the rank order; silence
on a moving pipeline. HD002 leaves send/recv alone: they are not collectives."""

from __future__ import annotations

import dataclasses

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import Category, IoCounters, ProcessEvidence, Verdict

from . import causes_stacks as C
from . import stacks as S


def _p2p(op: str, helper: str, line: int, **locals_: str) -> list[C.Frame]:
    return [
        C.f(op, S.C10D, 2753 if op == "send" else 2800, **locals_),
        C.f("_exception_logger.<locals>.wrapper", S.LOGGER, 83),
        C.f(helper, line=line),
        C.f("pipeline_step", line=440),
    ]


SEND_FWD = _p2p("send", "send_forward", 407)
SEND_BWD = _p2p("send", "send_backward", 415)
RECV_FWD = _p2p("recv", "recv_forward", 411)


def test_send_send_cycle_between_the_last_two_stages() -> None:
    # GIVEN the recorded p2p-deadlock shape: 0→1, 1→2, 2→3 forward sends, 3→2 backward
    ev = C.evidence(
        C.waiting(0, SEND_FWD), C.waiting(1, SEND_FWD), C.waiting(2, SEND_FWD),
        C.waiting(3, SEND_BWD),
    )  # fmt: skip
    diag = analyze(ev)
    primary = diag.findings[0]
    assert diag.verdict is Verdict.HANG
    assert primary.rule == "HD105"
    assert primary.category is Category.P2P_DEADLOCK
    assert primary.culprit_ranks == (2, 3)
    assert primary.waiting_ranks == (0, 1)
    assert "send/send cycle" in primary.title
    assert "rank 2: send to rank 3 (forward) at send_forward (train.py:407)" in primary.explanation
    assert "inferred" in primary.explanation  # peers came from names + rank order


def test_peers_from_locals_need_no_assumption() -> None:
    ev = C.evidence(
        C.waiting(0, _p2p("recv", "stage_loop", 10, src="1")),
        C.waiting(1, _p2p("recv", "stage_loop", 10, src="0")),
    )
    primary = analyze(ev).findings[0]
    assert primary.rule == "HD105"
    assert primary.culprit_ranks == (0, 1)
    assert "recv/recv cycle" in primary.title
    assert "inferred" not in primary.explanation


def test_chain_ending_at_a_rank_that_is_elsewhere() -> None:
    # Rank 1 waits to receive from rank 0, which is computing: rank 0 is the culprit.
    ev = C.evidence(
        C.rank(0, *(C.Sample([C.T(S.SLEEPING_USER, 1000)]) for _ in range(2)), world=2),
        C.waiting(1, _p2p("recv", "stage_loop", 10, src="0"), world=2),
    )
    finding = next(f for f in analyze(ev).findings if f.rule == "HD105")
    assert finding.culprit_ranks == (0,)
    assert "which is elsewhere" in finding.title


def test_every_rank_in_send_recv_without_peers_says_the_culprit_is_unknown() -> None:
    # two ranks of a job of four collected: the peers may be the two not collected
    plain = [C.f("send", S.C10D, 2753), C.f("stage_loop", line=10)]
    ev = C.evidence(*(C.waiting(r, plain, world=4) for r in range(2)))
    finding = next(f for f in analyze(ev).findings if f.rule == "HD105")
    assert finding.culprit_ranks == ()
    assert "peers are unknown" in finding.title


def test_every_rank_of_the_job_in_send_and_none_in_recv_is_a_cycle_of_sends() -> None:
    # Whichever rank each sends to, that rank waits in send too: no transfer can pair up
    # (live-2026-11-28d ring-exchange); the peers are still not shown, nor a culprit.
    plain = [C.f("send", S.C10D, 2753), C.f("stage_loop", line=10)]
    ev = C.evidence(*(C.waiting(r, plain, world=2) for r in range(2)))
    finding = next(f for f in analyze(ev).findings if f.rule == "HD105")
    assert finding.culprit_ranks == ()
    assert "none in recv" in finding.title and "peers are not shown" in finding.title


def _moving_bytes(proc: ProcessEvidence) -> ProcessEvidence:
    """The rank's socket traffic grows between its /proc samples (a transfer in flight)."""
    proc.proc_samples = [
        dataclasses.replace(p, io=IoCounters(rchar=i * 4096, wchar=i * 4096, syscr=i, syscw=i))
        for i, p in enumerate(proc.proc_samples)
    ]
    return proc


def test_matched_transfer_in_flight_is_not_a_deadlock() -> None:
    # GIVEN a send and the recv it feeds, bytes moving through both processes
    ev = C.evidence(
        _moving_bytes(C.waiting(0, _p2p("send", "stage_loop", 10, dst="1"), world=2)),
        _moving_bytes(C.waiting(1, _p2p("recv", "stage_loop", 10, src="0"), world=2)),
    )
    assert all(f.rule != "HD105" or not f.culprit_ranks for f in analyze(ev).findings)


def test_a_send_and_its_recv_blocked_with_no_byte_moving_are_the_culprit_pair() -> None:
    # GIVEN the same pair, but neither process read or wrote a byte between the samples
    # (gloo matches by tag: the receiver waits for the second tensor, the sender in the first)
    ev = C.evidence(
        C.waiting(0, _p2p("send", "stage_loop", 10, dst="1"), world=2),
        C.waiting(1, _p2p("recv", "stage_loop", 10, src="0"), world=2),
    )
    primary = analyze(ev).findings[0]
    assert (primary.rule, primary.category) == ("HD105", Category.P2P_DEADLOCK)
    assert primary.culprit_ranks == (0, 1)
    assert "neither transfer completes" in primary.title
    assert "tag" in primary.explanation


_BARE_SEND = [C.f("send", S.C10D, 2753), C.f("send_tensor_dict", line=50)]
_BARE_RECV = [C.f("recv", S.C10D, 2799), C.f("recv_for_loss", line=64)]


def test_bare_sends_into_a_last_stage_receiving_name_the_last_sender_and_the_receiver() -> None:
    # GIVEN the recorded p2p-tags shape: dist.send on stages 0-2, dist.recv on stage 3,
    # no helper naming a direction and no locals, nothing moved
    ev = C.evidence(*(C.waiting(r, _BARE_SEND) for r in range(3)), C.waiting(3, _BARE_RECV))
    diag = analyze(ev)
    primary = diag.findings[0]
    # THEN the rank order says data flows 0→3: rank 2's send and rank 3's recv are the pair
    assert (primary.rule, primary.category) == ("HD105", Category.P2P_DEADLOCK)
    assert primary.culprit_ranks == (2, 3)
    assert primary.waiting_ranks == (0, 1)
    assert "rank order alone" in primary.explanation
    # AND the ranks in send against a rank in recv are not read as two collectives
    assert all(f.rule != "HD002" for f in diag.findings)


def test_bare_ops_flowing_backward_take_the_other_neighbour() -> None:
    # Rank 0 receives, ranks 1-3 send: the data flows 3→0, rank 1 feeds rank 0.
    ev = C.evidence(C.waiting(0, _BARE_RECV), *(C.waiting(r, _BARE_SEND) for r in range(1, 4)))
    primary = analyze(ev).findings[0]
    assert primary.rule == "HD105"
    assert primary.culprit_ranks == (0, 1)
    assert primary.waiting_ranks == (2, 3)


def test_bare_ops_whose_boundaries_disagree_keep_their_peers_unknown() -> None:
    # send, recv, recv, send: a forward boundary (0|1) and a backward one (2|3)
    kinds = [_BARE_SEND, _BARE_RECV, _BARE_RECV, _BARE_SEND]
    ev = C.evidence(*(C.waiting(r, frames) for r, frames in enumerate(kinds)))
    finding = next(f for f in analyze(ev).findings if f.rule == "HD105")
    assert finding.culprit_ranks == ()
    assert "peers are unknown" in finding.title


def test_one_sample_of_a_bare_pipeline_names_no_pair() -> None:
    # A paste: one sample, no I/O read twice: the send and its recv may be in flight.
    ev = C.evidence(
        *(C.waiting(r, _BARE_SEND, samples=1) for r in range(3)),
        C.waiting(3, _BARE_RECV, samples=1),
    )
    findings = analyze(ev).findings
    assert all(f.rule != "HD105" or not f.culprit_ranks for f in findings)
    assert all(f.rule != "HD002" for f in findings)


def test_a_pipeline_that_moves_is_not_hung() -> None:
    # GIVEN stages caught in different transfers, but each moved between samples
    ranks = [
        C.rank(r, C.Sample([C.T(SEND_FWD, 1000 + r)]), C.Sample([C.T(RECV_FWD, 1000 + r)]))
        for r in range(4)
    ]
    diag = analyze(C.evidence(*ranks))
    assert diag.verdict is Verdict.NOT_HUNG
    assert all(f.rule != "HD105" for f in diag.findings)
