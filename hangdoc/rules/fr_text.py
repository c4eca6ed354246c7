"""Words and evidence pointers for the flight recorder rules (HD010-HD017).

Shared so that every FR finding names a group, an op and a rank's whereabouts the same
way, writes rank sets as ranges, and points at the FR entries (file, rank, record id)
that prove it. Also the *wavefront*: per process group, where each rank stopped, with
ranks that stopped at the same place folded into one row, so it stays a few lines long
at 16,384 ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.model import (
    Category,
    CollectiveRecord,
    EvidenceRef,
    Finding,
    Severity,
    Strength,
)
from hangdoc.analyzer.ranges import format_ranks, plural_ranks
from hangdoc.analyzer.views.activity_table import TABLE, Activity, phrase
from hangdoc.analyzer.views.fr_matching import GroupView, Kind, MatchResult, Problem, RankFR
from hangdoc.rules.base import RuleContext
from hangdoc.rules.causes import cause_of
from hangdoc.rules.strength import Shift, shifted

MAX_REFS = 6
MAX_WAVEFRONT_ROWS = 8
_STATE_WORDS = {
    "completed": "done",
    "scheduled": "in flight",
    "started": "running",
    "timed_out": "timed out/errored",
    "unknown": "state unknown",
}


def group_text(view: GroupView | None, name: str) -> str:
    desc = view.desc if view is not None else None
    if desc and desc not in ("undefined", name):
        return f"{desc} (group {name})"
    return f"group {name}"


def shape_text(sizes: tuple[tuple[int, ...], ...]) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, s)) + "]" for s in sizes) + "]"


def op_text(rec: CollectiveRecord, *, detail: bool = True) -> str:
    """``all_gather [[4]]→[[4, 4]] Float``: enough to see a size or dtype difference."""
    if not detail:
        return rec.op
    parts = [rec.op]
    if rec.input_sizes or rec.output_sizes:
        text = shape_text(rec.input_sizes)
        if rec.output_sizes and rec.output_sizes != rec.input_sizes:
            text += "→" + shape_text(rec.output_sizes)
        parts.append(text)
    dtypes = sorted(set(rec.dtypes) | set(rec.output_dtypes))
    if dtypes:
        parts.append("/".join(dtypes))
    return " ".join(parts)


def entry_ref(
    result: MatchResult, ctx: RuleContext, rank: int, rec: CollectiveRecord
) -> EvidenceRef:
    """Pointer to one FR entry of one rank."""
    fr = result.ranks.get(rank)
    source = (fr.source if fr else "") or rec.source or _primary_source(ctx, rank)
    where = f"record {rec.record_id}: " if rec.record_id is not None else ""
    seq = f"p2p #{rec.p2p_seq_id}" if rec.is_p2p else f"#{rec.seq_id}"
    detail = (
        f"rank {rank}: {where}{op_text(rec)} {seq} on "
        f"{group_text(result.groups.get(rec.group), rec.group)} "
        f"({_STATE_WORDS.get(rec.state, rec.state)})"
    )
    return EvidenceRef(source=source, detail=detail, rank=rank)


def _primary_source(ctx: RuleContext, rank: int) -> str:
    proc = ctx.evidence.ranked().get(rank)
    return proc.primary_source() if proc is not None else ""


def problem_refs(result: MatchResult, ctx: RuleContext, problem: Problem) -> list[EvidenceRef]:
    """The entries that prove a problem: each variant's first ranks, the blamed ranks."""
    refs: list[EvidenceRef] = []
    seen: set[int] = set()
    for ranks, rec in problem.variants:
        for rank in ranks[:2]:
            refs.append(entry_ref(result, ctx, rank, _own_record(result, rank, problem, rec)))
            seen.add(rank)
    if not problem.variants and problem.record is not None:
        for rank in problem.waiting[:2]:
            refs.append(entry_ref(result, ctx, rank, _own_record(result, rank, problem, None)))
            seen.add(rank)
    for rank in problem.blamed:
        if rank in seen or len(refs) >= MAX_REFS:
            continue
        fr = result.ranks.get(rank)
        if fr is not None and fr.stuck is not None:
            refs.append(entry_ref(result, ctx, rank, fr.stuck))
        elif fr is not None and problem.group in fr.groups:
            refs.append(entry_ref(result, ctx, rank, fr.groups[problem.group].last))
        else:
            refs.append(
                EvidenceRef(
                    _primary_source(ctx, rank),
                    f"rank {rank}: {whereabouts(result, ctx, rank)}",
                    rank,
                )
            )
    hidden = [r for r in problem.blamed if r not in seen][MAX_REFS:]
    if hidden:
        refs.append(EvidenceRef("", f"ranks {format_ranks(hidden)}: likewise ({len(hidden)} more)"))
    return refs


def _own_record(
    result: MatchResult, rank: int, problem: Problem, fallback: CollectiveRecord | None
) -> CollectiveRecord:
    """This rank's own entry at the problem's sequence number (its record id, its file)."""
    default = fallback or problem.record
    assert default is not None
    fr = result.ranks.get(rank)
    if fr is None or problem.kind is Kind.P2P:
        return default
    pos = fr.groups.get(problem.group)
    if pos is not None:
        for rec in (*pos.pending, pos.last):
            if rec.seq_id == problem.seq:
                return rec
    return default


def whereabouts(result: MatchResult, ctx: RuleContext, rank: int) -> str:
    """Where a blamed rank is instead: its stacks, else its FR, else that it left nothing."""
    activity = ctx.activities.get(rank)
    proc = ctx.evidence.ranked().get(rank)
    if proc is not None and proc.exited:
        return "its process exited"
    if activity is not None and activity.main is not None:
        return activity.description()
    fr = result.ranks.get(rank)
    if fr is not None and fr.stuck is not None:
        rec = fr.stuck
        seq = f"p2p #{rec.p2p_seq_id}" if rec.is_p2p else f"#{rec.seq_id}"
        return f"waiting in {rec.op} {seq} on {group_text(result.groups.get(rec.group), rec.group)}"
    if fr is not None:
        last = max(
            (p.last for p in fr.groups.values()), key=lambda r: r.record_id or 0, default=None
        )
        tail = f" (its last: {last.op} #{last.seq_id}, done)" if last is not None else ""
        return f"{phrase(Activity.OUTSIDE_COLLECTIVES)} per its flight recorder" + tail
    if proc is None:
        return "no trace of it in the inputs (not collected, or its process is gone)"
    return "no flight recorder dump and no stacks"


@dataclass(frozen=True, slots=True)
class Blame:
    category: Category
    doing: str
    fix: str | None
    known: bool  # stacks or process state say what the blamed ranks do


def blame(result: MatchResult, ctx: RuleContext, ranks: tuple[int, ...]) -> Blame:
    """Category for ranks that did not come: the most specific their evidence supports."""
    procs = ctx.evidence.ranked()
    if ranks and all(r in procs and procs[r].exited for r in ranks):
        return Blame(Category.RANK_DEAD, "exited", None, True)
    for rank in ranks:
        activity = ctx.activities.get(rank)
        if activity is None or activity.main is None:
            continue
        if activity.in_collective:
            call = activity.waiting_call
            op = call.op if call is not None else "a collective"
            doing = f"is in {op}, which its flight recorder does not show"
            return Blame(Category.COLLECTIVE_TYPE_MISMATCH, doing, None, True)
        cause = cause_of(activity, ctx.waits)
        return Blame(cause.category, cause.doing, cause.fix, True)
    outside = TABLE[Activity.OUTSIDE_COLLECTIVES]
    return Blame(outside.category, f"is {outside.phrase}", None, False)


def wavefront(result: MatchResult, group: str, *, limit: int = MAX_WAVEFRONT_ROWS) -> list[str]:
    """Rows of ``ranks  #seq op  state`` for one group, ranks behind first."""
    view = result.groups.get(group)
    if view is None:
        return []
    rows: dict[tuple[int, str, str], list[int]] = {}
    for rank in view.members:
        fr = result.ranks.get(rank)
        key = _position(fr, group)
        rows.setdefault(key, []).append(rank)
    lines = []
    ordered = sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[1][0]))
    width = min(28, max(len(plural_ranks(r)) for r in rows.values()))
    for (seq, op, state), ranks in ordered[:limit]:
        where = f"#{seq} {op}" if seq >= 0 else op
        lines.append(f"  {plural_ranks(ranks):<{width}}  {where}  {state}".rstrip())
    if len(ordered) > limit:
        rest = [r for _, ranks in ordered[limit:] for r in ranks]
        lines.append(f"  … {len(ordered) - limit} more positions ({plural_ranks(rest)})")
    return [f"Where each rank stopped on {group_text(view, group)}:", *lines]


def _position(fr: RankFR | None, group: str) -> tuple[int, str, str]:
    if fr is None:
        return (-2, "no flight recorder dump", "")
    pos = fr.groups.get(group)
    if pos is None:
        return (-1, "nothing recorded on this group", "")
    rec = pos.pending[0] if pos.pending else pos.last
    return (rec.seq_id, op_text(rec), _STATE_WORDS.get(rec.state, rec.state))


def where_text(problem: Problem, result: MatchResult) -> str:
    """``all_reduce #8 on default_pg (group 0)``."""
    return f"{problem.op} {seq_text(problem, result)}"


def seq_text(problem: Problem, result: MatchResult) -> str:
    """``#8 on default_pg (group 0)`` (``p2p #3 on …`` for point-to-point)."""
    view = result.groups.get(problem.group)
    prefix = "p2p " if problem.kind is Kind.P2P else ""
    seq = f"{prefix}#{problem.seq} on " if problem.seq is not None else "on "
    return seq + group_text(view, problem.group)


def its(ranks: tuple[int, ...] | list[int], one: str, many: str) -> str:
    """Agreement with a rank set: ``its(r, "it is", "they are")``."""
    return one if len(ranks) == 1 else many


def consequence_text(problem: Problem, result: MatchResult) -> str:
    """' — a consequence of: size_mismatch at all_reduce #8 on default_pg (group 0)'."""
    from hangdoc.analyzer.views.fr_matching import roots_of

    roots = roots_of(problem)
    if not roots:
        return ""
    named = "; ".join(f"{r.kind.value.replace('_', ' ')} at {where_text(r, result)}" for r in roots)
    return f"This follows from another problem: {named}."


def issued_at(problem: Problem) -> str:
    """Where each side issued the op, when the dump carries call stacks (FR pickles)."""
    from hangdoc.analyzer.views.activity import is_user_frame

    variants = problem.variants or ([(problem.waiting, problem.record)] if problem.record else [])
    parts: list[str] = []
    for ranks, rec in variants:
        frame = next((f for f in rec.frames if is_user_frame(f)), None)
        if frame is not None:
            parts.append(f"{plural_ranks(ranks)} at {frame.label()}")
    return f" Issued by {'; '.join(parts)}." if parts else ""


def expected_on_collected_host(ctx: RuleContext, rank: int) -> str | None:
    """The host a missing rank should run on, when that host was collected."""
    for proc in ctx.evidence.processes:
        if proc.rank is None or proc.local_rank is None or not proc.local_world_size:
            continue
        base = proc.rank - proc.local_rank
        if base <= rank < base + proc.local_world_size:
            return proc.host or "its node"
    return None


def mismatch_finding(
    rule_id: str,
    category: Category,
    problem: Problem,
    result: MatchResult,
    ctx: RuleContext,
    fix: str,
    strength: Strength,
) -> Finding:
    """A finding for ranks that recorded different things at one sequence number."""
    view = result.groups.get(problem.group)
    where = f"#{problem.seq} on {group_text(view, problem.group)}"
    sides = "; ".join(f"{plural_ranks(r)} issued {op_text(rec)}" for r, rec in problem.variants)
    if not problem.waiting:  # everybody agrees, and breaks the size rule
        rec = problem.record
        assert rec is not None
        members = len(view.members) if view else "?"
        title = f"{op_text(rec)} {where} has sizes that do not fit {members} ranks"
        explanation = (
            f"{plural_ranks(problem.blamed).capitalize()} issued {op_text(rec)} as collective "
            f"{where}. With {members} members, all_gather must "
            "output the input times the group size, and reduce_scatter the reverse; these "
            "sizes cannot be matched by any peer."
        )
    else:
        odd = [(r, rec) for r, rec in problem.variants[1:]]
        odd_text = "; ".join(f"{plural_ranks(r)} issued {op_text(rec)}" for r, rec in odd)
        expected = problem.variants[0][1]
        title = (
            f"{odd_text} where {plural_ranks(problem.variants[0][0])} issued "
            f"{op_text(expected)} ({where})"
        )
        explanation = (
            f"The collectives numbered {where} differ between ranks: {sides}. Collectives of "
            "one process group are matched by the order each rank issues them, so the "
            "ranks wait for partners that will never come (or exchange the wrong data)."
        )
        if problem.tie:
            explanation += (
                " No side has a majority, so which one is wrong is a guess: "
                "compare both call sites."
            )
        else:
            explanation += (
                f" The majority ({len(problem.waiting)} of "
                f"{len(problem.waiting) + len(problem.blamed)} ranks that issued it) "
                "is taken as intended."
            )
    explanation += issued_at(problem)
    return problem_finding(
        rule_id,
        problem,
        result,
        ctx,
        category=category,
        severity=Severity.CRITICAL,
        title=title,
        explanation=explanation,
        fix=fix,
        strength=shifted(strength, Shift.TIE) if problem.tie else strength,
    )


def problem_finding(
    rule_id: str,
    problem: Problem,
    result: MatchResult,
    ctx: RuleContext,
    *,
    category: Category,
    severity: Severity,
    title: str,
    explanation: str,
    fix: str,
    strength: Strength,
) -> Finding:
    """A finding about one matching problem: its wavefront appended, its entries as evidence."""
    lines = wavefront(result, problem.group)
    if lines:
        explanation += "\n" + "\n".join(lines)
    return Finding(
        rule=rule_id,
        category=category,
        severity=severity,
        title=title,
        explanation=explanation,
        fix=fix,
        culprit_ranks=problem.blamed,
        waiting_ranks=problem.waiting,
        evidence=tuple(problem_refs(result, ctx, problem)),
        strength=strength,
    )


def root_category(problem: Problem, result: MatchResult, ctx: RuleContext) -> Category:
    """The category a problem stands for; a consequence takes its root's."""
    kind = problem.kind
    if kind is Kind.TYPE:
        return Category.COLLECTIVE_TYPE_MISMATCH
    if kind in (Kind.SIZE, Kind.DTYPE):
        return Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH
    if kind is Kind.STALLED:
        return Category.UNKNOWN
    if kind is Kind.NO_DUMP:
        return Category.RANK_DEAD
    found = blame(result, ctx, problem.blamed)
    if kind is Kind.P2P and not found.known:
        return Category.P2P_DEADLOCK
    return found.category


def consequence_category(problem: Problem, result: MatchResult, ctx: RuleContext) -> Category:
    from hangdoc.analyzer.views.fr_matching import roots_of

    roots = roots_of(problem)
    return root_category(roots[0], result, ctx) if roots else Category.UNKNOWN


def doings(result: MatchResult, ctx: RuleContext, ranks: tuple[int, ...], limit: int = 4) -> str:
    """'rank 3: saving a checkpoint at save (train.py:9); ranks 5-6: …' grouped by text."""
    texts: dict[str, list[int]] = {}
    for rank in ranks:
        texts.setdefault(whereabouts(result, ctx, rank), []).append(rank)
    items = sorted(texts.items(), key=lambda kv: kv[1][0])
    parts = [f"{plural_ranks(r)}: {text}" for text, r in items[:limit]]
    if len(items) > limit:
        parts.append(f"{len(items) - limit} more situations")
    return "; ".join(parts)
