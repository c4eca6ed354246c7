"""HD105: point-to-point waits that form a cycle, or a chain to a rank that is elsewhere;
peers from --locals or from the pipeline helpers' direction; silence on a moving pipeline."""

from __future__ import annotations

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import Category, Verdict

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
    plain = [C.f("send", S.C10D, 2753), C.f("stage_loop", line=10)]
    ev = C.evidence(*(C.waiting(r, plain, world=2) for r in range(2)))
    finding = next(f for f in analyze(ev).findings if f.rule == "HD105")
    assert finding.culprit_ranks == ()
    assert "peers are unknown" in finding.title


def test_matched_transfer_is_not_a_deadlock() -> None:
    ev = C.evidence(
        C.waiting(0, _p2p("send", "stage_loop", 10, dst="1"), world=2),
        C.waiting(1, _p2p("recv", "stage_loop", 10, src="0"), world=2),
    )
    assert all(f.rule != "HD105" or not f.culprit_ranks for f in analyze(ev).findings)


def test_a_pipeline_that_moves_is_not_hung() -> None:
    # GIVEN stages caught in different transfers, but each moved between samples
    ranks = [
        C.rank(r, C.Sample([C.T(SEND_FWD, 1000 + r)]), C.Sample([C.T(RECV_FWD, 1000 + r)]))
        for r in range(4)
    ]
    diag = analyze(C.evidence(*ranks))
    assert diag.verdict is Verdict.NOT_HUNG
    assert all(f.rule != "HD105" for f in diag.findings)
