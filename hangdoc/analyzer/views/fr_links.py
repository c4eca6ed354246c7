"""Flight recorder matching, part 3: point-to-point pairing, and root versus consequence.

Each rank is "stuck at" its oldest unfinished op. A problem whose blamed ranks are all
stuck at another problem is a consequence of it; problems that lead to each other in a
circle are a deadlock. Pending sends and recvs are paired with the peer's own oldest
launch (ops on one stream run in order).
"""

from __future__ import annotations

from collections.abc import Mapping

from hangdoc.analyzer.model import CollectiveRecord
from hangdoc.analyzer.views.activity import RankActivity
from hangdoc.analyzer.views.fr_mismatch import numel
from hangdoc.analyzer.views.fr_model import Kind, Problem, RankFR


def _blocking_p2p(fr: RankFR) -> list[CollectiveRecord]:
    """A rank's oldest pending p2p launch: ops batched together share one p2p_seq_id."""
    if not fr.p2p_pending:
        return []
    first = fr.p2p_pending[0]
    return [
        o for o in fr.p2p_pending if o.group == first.group and o.p2p_seq_id == first.p2p_seq_id
    ]


def p2p_problems(per_rank: dict[int, RankFR]) -> list[Problem]:
    """Per rank, the first op of its oldest pending p2p launch that its peer cannot match.

    Ops on one stream run in order, so only the peer's own oldest launch can be the
    partner: a recv the peer queued behind its own blocked send does not help (that is
    how two "send first" ranks deadlock).
    """
    problems: list[Problem] = []
    blocking = {rank: _blocking_p2p(fr) for rank, fr in per_rank.items()}
    for rank, ops in blocking.items():
        for op in ops:
            peer = op.peer
            if peer is None:
                continue
            want = "recv" if op.op == "send" else "send"
            partner = next(
                (
                    o
                    for o in blocking.get(peer, [])
                    if o.op == want and o.peer == rank and o.group == op.group
                ),
                None,
            )
            if partner is None:
                problems.append(
                    Problem(Kind.P2P, op.group, op.p2p_seq_id, op.op, (rank,), (peer,), record=op)
                )
                break
            if _p2p_bytes(op) != _p2p_bytes(partner):
                variants: list[tuple[tuple[int, ...], CollectiveRecord]] = [
                    ((rank,), op),
                    ((peer,), partner),
                ]
                if op.op == "send":  # report each mismatched pair once, from the sender
                    problems.append(
                        Problem(
                            Kind.SIZE,
                            op.group,
                            op.p2p_seq_id,
                            op.op,
                            (rank,),
                            (peer,),
                            variants,
                            tie=True,
                            record=op,
                        )
                    )
                break
    return problems


def _p2p_bytes(rec: CollectiveRecord) -> int:
    sizes = rec.input_sizes if rec.op == "send" else rec.output_sizes or rec.input_sizes
    return sum(map(numel, sizes))


ProblemKey = tuple[str, int | None, int]  # group, seq, waiting rank for p2p (-1 otherwise)


def _key(group: str, seq: int | None, rank: int | None) -> ProblemKey:
    return (group, seq, -1 if rank is None else rank)


def link(
    problems: list[Problem], per_rank: dict[int, RankFR], activities: Mapping[int, RankActivity]
) -> None:
    """Consequence edges (a blamed rank is itself stuck at another problem) and cycles."""
    at: dict[ProblemKey, Problem] = {}
    for problem in problems:
        p2p = problem.record is not None and problem.record.is_p2p
        key = _key(problem.group, problem.seq, problem.waiting[0] if p2p else None)
        if key not in at or at[key].kind is Kind.STALLED:
            at[key] = problem
    for problem in problems:
        if problem.kind not in (Kind.MISSING, Kind.P2P):
            continue
        after: list[Problem] = []
        for rank in problem.blamed:
            target = _stuck_problem(rank, per_rank, activities, at)
            if target is None:
                after = []  # this blamed rank is stuck outside any problem: a root
                break
            if target is not problem and target not in after:
                after.append(target)
        problem.after = after
    for problem in problems:
        if problem.after and _reaches(problem, problem):
            problem.cycle = True


def _stuck_problem(
    rank: int,
    per_rank: dict[int, RankFR],
    activities: Mapping[int, RankActivity],
    at: dict[ProblemKey, Problem],
) -> Problem | None:
    fr = per_rank.get(rank)
    if fr is None or fr.stuck is None:
        return None
    activity = activities.get(rank)
    if activity is not None and activity.main is not None and not activity.in_collective:
        return None  # its stacks say it is doing something else: FR's pending op is stale
    rec = fr.stuck
    if rec.is_p2p:
        return at.get(_key(rec.group, rec.p2p_seq_id, rank))
    return at.get(_key(rec.group, rec.seq_id, None))


def _reaches(start: Problem, goal: Problem) -> bool:
    seen: set[int] = set()
    todo = list(start.after)
    while todo:
        node = todo.pop()
        if node is goal:
            return True
        if id(node) not in seen:
            seen.add(id(node))
            todo.extend(node.after)
    return False


def roots_of(problem: Problem) -> list[Problem]:
    """The root problems a consequence leads back to."""
    out: list[Problem] = []
    seen: set[int] = set()
    todo = list(problem.after)
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.root and node is not problem:
            out.append(node)
        else:
            todo.extend(node.after)
    return out
