"""Report sections about where ranks are: the merged stack tree, stack classes, wavefront.

All three aggregate ranks instead of listing them, so the page stays readable and small
at 16,384 ranks: the tree and the classes grow with the number of *distinct* call
paths, and the wavefront with the number of distinct sequence positions per group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hangdoc.analyzer.model import CollectiveRecord, Evidence, Frame
from hangdoc.analyzer.render.report_common import JsonDict, RankSets, frame_json
from hangdoc.analyzer.views.activity import RankActivity
from hangdoc.analyzer.views.fr_positions import Positions
from hangdoc.analyzer.views.stack_groups import StackNode, equivalence_classes, merge_stacks

# Caps keep a pathological job (every rank on its own path) from producing a page
# nobody can read; what is cut is counted and named by rank range.
MAX_CHILDREN = 24
MAX_TREE_SEGMENTS = 300
MAX_FORK_DEPTH = 40
MAX_CLASSES = 40
MAX_WAVEFRONT_ROWS = 30


@dataclass(slots=True)
class _TreeBudget:
    activities: Mapping[int, RankActivity]
    segments: int = 0


def stack_tree(
    evidence: Evidence, activities: Mapping[int, RankActivity], sets: RankSets
) -> JsonDict | None:
    """The STAT tree of main threads with single-child chains folded into segments.

    A segment is a run of frames that the same ranks share; the tree forks only where
    ranks part, which is what a reader looks for. ``None`` when no rank has stacks.
    """
    root = merge_stacks(evidence)
    if not root.ranks:
        return None
    budget = _TreeBudget(activities=activities)
    children, omitted = _children(root, sets, budget, 0)
    return {**sets.fields(root.ranks), "children": children, "omitted": omitted}


def _children(
    node: StackNode, sets: RankSets, budget: _TreeBudget, depth: int
) -> tuple[list[JsonDict], JsonDict | None]:
    kids = node.sorted_children()
    shown: list[JsonDict] = []
    cut: set[int] = set()
    for index, child in enumerate(kids):
        if index >= MAX_CHILDREN or budget.segments >= MAX_TREE_SEGMENTS:
            cut.update(child.ranks)
            continue
        budget.segments += 1
        shown.append(_segment(child, sets, budget, depth))
    omitted = {**sets.fields(cut), "paths": len(kids) - len(shown)} if cut else None
    return shown, omitted


def _segment(start: StackNode, sets: RankSets, budget: _TreeBudget, depth: int) -> JsonDict:
    frames = [start]
    node = start
    while len(node.children) == 1:
        (child,) = node.children.values()
        if child.ranks != node.ranks:
            break
        frames.append(child)
        node = child
    below: set[int] = set()
    for child in node.children.values():
        below |= child.ranks
    ended = node.ranks - below
    if depth + 1 >= MAX_FORK_DEPTH:
        children: list[JsonDict] = []
        omitted = {**sets.fields(below), "paths": len(node.children)} if below else None
    else:
        children, omitted = _children(node, sets, budget, depth + 1)
    frame_data = [frame_json(Frame(n.function, n.file, n.line)) for n in frames]
    user = [f for f in frame_data if f["user"]]
    doing = None
    if not node.children:
        activity = budget.activities.get(min(node.ranks))
        doing = activity.description() if activity else None
    return {
        **sets.fields(start.ranks),
        "frames": frame_data,
        "head": frame_data[-1]["label"],
        "user_head": user[-1]["label"] if user else None,
        "doing": doing,
        "ended": sets.fields(ended) if ended and node.children else None,
        "children": children,
        "omitted": omitted,
    }


def stack_classes(
    evidence: Evidence, activities: Mapping[int, RankActivity], sets: RankSets
) -> JsonDict:
    """Distinct whole main-thread paths with their ranks, the biggest class first."""
    classes = equivalence_classes(evidence)
    items: list[JsonDict] = []
    for cls in classes[:MAX_CLASSES]:
        activity = activities.get(cls.ranks[0])
        items.append(
            {
                **sets.fields(cls.ranks),
                "doing": activity.description() if activity else "no Python stack",
                "frames": [frame_json(f) for f in reversed(cls.frames)],
                "read_from_text": cls.read_from_text,
            }
        )
    rest = [r for cls in classes[MAX_CLASSES:] for r in cls.ranks]
    omitted = {**sets.fields(rest), "classes": len(classes) - MAX_CLASSES} if rest else None
    return {"classes": items, "omitted": omitted, "total": len(classes)}


def wavefront(evidence: Evidence, positions: Positions, sets: RankSets) -> list[JsonDict]:
    """Per process group, a histogram of ranks by last completed collective.

    Ranks that stopped behind the others are the first rows; each row names the op the
    ranks are on next (their oldest unfinished one), so an op mismatch at the same
    sequence number shows as two rows with the same position and different ops.
    """
    groups: list[JsonDict] = []
    for name in sorted(positions.groups, key=_group_sort_key):
        ranks = {
            rank: (positions.completed[rank].get(name), pos.pending[0] if pos.pending else None)
            for rank, pos in sorted(positions.groups[name].items())
        }
        groups.append(_group(evidence, name, ranks, positions.p2p_records[name], sets))
    return groups


def _group_sort_key(name: str) -> tuple[int, int, str]:
    return (0, int(name), name) if name.isdigit() else (1, 0, name)


def _group(
    evidence: Evidence,
    name: str,
    ranks: dict[int, tuple[int | None, CollectiveRecord | None]],
    p2p_records: int,
    sets: RankSets,
) -> JsonDict:
    """``ranks``: each rank's highest completed sequence number and oldest unfinished op."""
    buckets: dict[tuple[int, int, str, str], list[int]] = {}
    for rank, (completed, pending) in ranks.items():
        # A pending op at or below the last completed one is stale ring-buffer noise.
        if pending is not None and completed is not None and pending.seq_id <= completed:
            pending = None
        key = (
            -1 if completed is None else completed,
            -1 if pending is None else pending.seq_id,
            "" if pending is None else pending.op,
            "" if pending is None else pending.state,
        )
        buckets.setdefault(key, []).append(rank)
    info = evidence.process_groups.get(name)
    members = set(info.ranks) if info and info.ranks else None
    silent = sorted(members - set(ranks)) if members is not None else []
    rows = _rows(buckets, sets)
    largest = max((row["count"] for row in rows), default=1)
    for row in rows:
        # A lone rank behind 16,383 others must still show as a visible sliver.
        row["bar"] = max(0.8, round(100.0 * row["count"] / largest, 1))
    done = [completed for completed, _ in ranks.values() if completed is not None]
    lowest = min(done) if done else None  # once: per rank it was quadratic at 16k ranks
    behind = [r for r, (completed, _) in ranks.items() if done and completed == lowest]
    return {
        "name": name,
        "desc": info.desc if info else None,
        "members": len(members) if members is not None else None,
        "reporting": sets.fields(ranks),
        "silent": sets.fields(silent) if silent else None,
        "min_completed": min(done) if done else None,
        "max_completed": max(done) if done else None,
        "behind": sets.fields(behind) if behind and min(done) != max(done) else None,
        "rows": rows,
        "p2p_records": p2p_records,
        # Every member reporting, all at one position with one op: fully matched, nothing
        # to read here, so the page folds such groups into one line.
        "healthy": len(rows) == 1 and not silent,
    }


def _rows(buckets: dict[tuple[int, int, str, str], list[int]], sets: RankSets) -> list[JsonDict]:
    if len(buckets) > MAX_WAVEFRONT_ROWS:
        return _binned_rows(buckets, sets)
    rows: list[JsonDict] = []
    for (completed, seq, op, state), members in sorted(buckets.items()):
        rows.append(
            {
                **sets.fields(members),
                "completed": None if completed < 0 else completed,
                "completed_to": None,
                "next_seq": None if seq < 0 else seq,
                "next_op": op or None,
                "next_state": state or None,
            }
        )
    return rows


def _binned_rows(
    buckets: dict[tuple[int, int, str, str], list[int]], sets: RankSets
) -> list[JsonDict]:
    """Too many distinct positions: equal-width bins of last completed seq, ops dropped."""
    by_seq: dict[int, list[int]] = {}
    for (completed, _seq, _op, _state), members in buckets.items():
        by_seq.setdefault(completed, []).extend(members)
    rows: list[JsonDict] = []
    never = by_seq.pop(-1, None)
    if never is not None:
        rows.append(_bin_row(never, None, None, sets))
    if not by_seq:
        return rows
    lo, hi = min(by_seq), max(by_seq)
    width = max(1, -(-(hi - lo + 1) // MAX_WAVEFRONT_ROWS))
    bins: dict[int, list[int]] = {}
    for completed, members in by_seq.items():
        bins.setdefault((completed - lo) // width, []).extend(members)
    for index in sorted(bins):
        first = lo + index * width
        last = min(hi, first + width - 1)
        rows.append(_bin_row(bins[index], first, last if last != first else None, sets))
    return rows


def _bin_row(members: list[int], first: int | None, last: int | None, sets: RankSets) -> JsonDict:
    return {
        **sets.fields(members),
        "completed": first,
        "completed_to": last,
        "next_seq": None,
        "next_op": None,
        "next_state": None,
    }
