"""Pictures for the report, as data: a wavefront map, an icicle of stacks, event lanes.

Each picture is laid out here, in Python, as plain shapes (spans, boxes, marks with
coordinates and a class), and the templates only draw them as inline SVG. So the
pictures are deterministic, covered by the data tests like the rest of the report, and
cost the page nothing at load: no script computes a layout in the browser. Each comes
with its text equivalent (``lines``), which the page puts under the picture for screen
readers and readers of the Markdown summary.

Everything is bounded whatever the scale: ranks are binned into at most
``MAP_COLUMNS`` columns (a bin shows its worst rank, so a lone laggard never averages
away), the icicle has at most ``ICICLE_MAX_NODES`` boxes, the lanes at most
``LANE_ROWS`` rows of ``LANE_BINS`` marks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hangdoc.analyzer.model import Evidence, Frame
from hangdoc.analyzer.ranges import format_ranks, plural_ranks
from hangdoc.analyzer.render.report_common import JsonDict, RankSets, truncate
from hangdoc.analyzer.render.report_ranks import FAILURE_WORDS
from hangdoc.analyzer.views.activity import RankActivity, is_user_frame
from hangdoc.analyzer.views.fr_model import Sig, signature
from hangdoc.analyzer.views.fr_positions import Positions
from hangdoc.analyzer.views.stack_groups import StackNode, merge_stacks

MAP_COLUMNS = 256
MAP_MAX_ROWS = 16
MAP_NOTES_PER_ROW = 4
ICICLE_WIDTH = 1200
ICICLE_ROW = 34
ICICLE_MAX_DEPTH = 24
ICICLE_MAX_NODES = 400
ICICLE_MIN_SHARE = 0.012  # a lone rank's branch still gets about 14 px of 1,200
CHAR_PX = 7.0  # average width of a 12 px system-font character, for cutting labels
LANE_ROWS = 32
LANE_BINS = 300

# Cell codes of the wavefront map, worst first: a bin shows the worst of its ranks.
_OK, _MISMATCH, _SILENT = "ok", "mismatch", "silent"


# ---------------------------------------------------------------------------------------
# Wavefront map: rank × process group


@dataclass(slots=True)
class _Row:
    """One row of the map: one process group, or a family of disjoint groups (all "tp")."""

    label: str
    groups: list[str]
    members: set[int] = field(default_factory=set)
    cells: dict[int, tuple[str, int]] = field(default_factory=dict)  # rank → (code, lag)
    front: int = -1
    front_done: int = -1


def _group_key(name: str) -> tuple[int, int, str]:
    return (0, int(name), name) if name.isdigit() else (1, 0, name)


def _families(evidence: Evidence, positions: Positions) -> list[_Row]:
    """Groups with the same description and disjoint members share a row (tp, dp...)."""
    by_desc: dict[str, list[tuple[str, set[int]]]] = {}
    for name in sorted(positions.groups, key=_group_key):
        info = evidence.process_groups.get(name)
        members = set(info.ranks) if info and info.ranks else set(positions.groups[name])
        desc = (info.desc if info and info.desc else None) or f"group {name}"
        by_desc.setdefault(desc, []).append((name, members))
    rows: list[_Row] = []
    for desc, groups in by_desc.items():
        total = sum(len(m) for _, m in groups)
        union: set[int] = set().union(*(m for _, m in groups))
        if len(groups) > 1 and len(union) == total:
            label = f"{desc} ({len(groups)} groups)"
            rows.append(_Row(label, [n for n, _ in groups], union))
            continue
        for name, members in groups:
            own = f"group {name}"
            rows.append(_Row(own if desc == own else f"{desc} ({own})", [name], set(members)))
    return rows


def _fill(row: _Row, positions: Positions) -> None:
    """Each member's lag behind the row's front, or why it has none (silent, mismatch).

    A rank stands at the last collective it issued in the group (``GroupPos.last``);
    ranks at one sequence number that issued another collective than most of them
    (``signature``: op, sizes and dtypes of input and output) are a mismatch.
    """
    done = {
        (name, rank): positions.completed[rank].get(name, -1)
        for name in row.groups
        for rank in positions.groups[name]
    }
    for name in row.groups:
        for rank, pos in positions.groups[name].items():
            row.front = max(row.front, pos.last.seq_id)
            row.front_done = max(row.front_done, done[name, rank])
    for name in row.groups:
        ranks = positions.groups[name]
        majority: dict[int, Counter[Sig]] = {}
        for pos in ranks.values():
            majority.setdefault(pos.last.seq_id, Counter())[signature(pos.last)] += 1
        for rank, pos in ranks.items():
            if rank not in row.members:
                continue
            reached = pos.last.seq_id
            lag = max(row.front - reached, max(0, row.front_done - done[name, rank]))
            counts = majority[reached]
            odd = len(counts) > 1 and counts[signature(pos.last)] < max(counts.values())
            row.cells[rank] = (_MISMATCH, lag) if odd else ((_OK, 0) if lag == 0 else ("lag", lag))
    for rank in row.members - set(row.cells):
        row.cells[rank] = (_SILENT, 0)


def _severity(cell: tuple[str, int]) -> tuple[int, int]:
    code, lag = cell
    order = {_MISMATCH: 4, _SILENT: 3, "lag": 2, _OK: 0}
    return (order[code], lag)


def _lag_class(cell: tuple[str, int]) -> str:
    code, lag = cell
    if code != "lag":
        return code
    return "lag1" if lag == 1 else ("lag2" if lag <= 3 else "lag3")


def wavefront_map(
    evidence: Evidence, positions: Positions, culprits: Iterable[int], sets: RankSets
) -> JsonDict | None:
    """Where every rank stands in every group's sequence, one row per group family.

    A cell's lag is how many collectives the rank is behind the row's front, counting
    both issued and completed ones (a rank that never issued the last collective, and a
    group stuck before the others finished theirs, both show). ``None`` without records.
    """
    if not positions.groups:
        return None
    rows = _families(evidence, positions)
    for row in rows:
        _fill(row, positions)
    rows.sort(key=lambda r: (not _has_problem(r), _group_key(r.groups[0])))
    shown, cut = rows[:MAP_MAX_ROWS], rows[MAP_MAX_ROWS:]
    all_ranks = {r for row in rows for r in row.members} | set(evidence.ranked())
    world = max(max(all_ranks, default=0) + 1, evidence.expected_world_size() or 0)
    columns = min(world, MAP_COLUMNS)
    per_bin = -(-world // columns)
    columns = -(-world // per_bin)
    culprit_set = set(culprits)
    return {
        "world": world,
        "columns": columns,
        "ranks_per_column": per_bin,
        "rows": [_map_row(row, per_bin, columns) for row in shown],
        "more_rows": len(cut),
        "more_rows_text": ", ".join(r.label for r in cut[:10]) if cut else None,
        "culprit_columns": _runs(sorted({r // per_bin for r in culprit_set if r < world})),
        "culprit": sets.fields(culprit_set) if culprit_set else None,
        "lines": [line for row in shown for line in _row_lines(row)],
    }


def _has_problem(row: _Row) -> bool:
    return any(code != _OK for code, _ in row.cells.values())


def _map_row(row: _Row, per_bin: int, columns: int) -> JsonDict:
    """Cells binned into columns (each its worst rank), runs of one class merged into a span."""
    worst: dict[int, tuple[tuple[int, int], str, list[int]]] = {}
    for rank, cell in row.cells.items():
        col = rank // per_bin
        sev = _severity(cell)
        entry = worst.get(col)
        if entry is None or sev > entry[0]:
            worst[col] = (sev, _lag_class(cell), [rank])
        elif sev == entry[0]:
            entry[2].append(rank)
    spans: list[JsonDict] = []
    raw: list[tuple[list[int], set[int]]] = []  # per span: its worst ranks, their lags
    for col in range(columns):
        entry = worst.get(col)
        if entry is None:
            continue
        (_, lag), cls, ranks = entry
        last = spans[-1] if spans else None
        if last is not None and last["cls"] == cls and last["x"] + last["w"] == col:
            last["w"] += 1
            raw[-1][0].extend(ranks)
            raw[-1][1].add(lag)
        else:
            spans.append({"x": col, "w": 1, "cls": cls})
            raw.append((list(ranks), {lag}))
    for span, (ranks, lags) in zip(spans, raw, strict=True):
        what = {"ok": "at the front", "mismatch": "issued a different collective",
                "silent": "no record"}.get(span["cls"])  # fmt: skip
        if what is None:
            low, high = min(lags), max(lags)
            what = f"behind by {low}" + (f"–{high}" if high != low else "")
        span["title"] = f"{plural_ranks(ranks)}: {what}"
    return {
        "label": row.label,
        "groups": len(row.groups),
        "members": len(row.members),
        "front": row.front,
        "problem": _has_problem(row),
        "spans": spans,
        "summary": _row_summary(row),
    }


def _row_summary(row: _Row) -> str:
    codes = Counter(code for code, _ in row.cells.values())
    if codes[_OK] == len(row.cells):
        return f"all {len(row.cells)} ranks at #{row.front}"
    parts = [f"{codes[_OK]} at #{row.front}"]
    if codes["lag"]:
        parts.append(f"{codes['lag']} behind")
    if codes[_MISMATCH]:
        parts.append(f"{codes[_MISMATCH]} on another op")
    if codes[_SILENT]:
        parts.append(f"{codes[_SILENT]} silent")
    return ", ".join(parts)


def _row_lines(row: _Row) -> list[str]:
    """The row in words: who is behind, by how much; who issued another op; who is silent."""
    if not _has_problem(row):
        return [f"{row.label}: {_row_summary(row)}."]
    by: dict[tuple[str, int], list[int]] = {}
    for rank, (code, lag) in row.cells.items():
        if code != _OK:
            by.setdefault((code, lag), []).append(rank)
    notes: list[str] = []
    ordered = sorted(by.items(), key=lambda kv: (-_severity(kv[0])[0], -kv[0][1], min(kv[1])))
    for (code, lag), ranks in ordered[:MAP_NOTES_PER_ROW]:
        who = plural_ranks(ranks)
        if code == _MISMATCH:
            notes.append(f"{who} issued a different collective at the same position")
        elif code == _SILENT:
            notes.append(f"{who} left no record")
        else:
            notes.append(f"{who} behind by {lag}")
    if len(ordered) > MAP_NOTES_PER_ROW:
        notes.append(f"{len(ordered) - MAP_NOTES_PER_ROW} more positions")
    return [f"{row.label}: {'; '.join(notes)} (front #{row.front})."]


def _runs(values: list[int]) -> list[list[int]]:
    """Sorted columns as ``[start, width]`` runs: one mark per run of culprit columns."""
    out: list[list[int]] = []
    for v in values:
        if out and out[-1][0] + out[-1][1] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return out


# ---------------------------------------------------------------------------------------
# Icicle of merged stacks


@dataclass(slots=True)
class _Box:
    node: StackNode
    frames: list[StackNode]
    depth: int
    weight: float = 0.0
    children: list[_Box] = field(default_factory=list)


def _fold(node: StackNode, depth: int, budget: list[int]) -> _Box:
    """A chain of frames shared by the same ranks is one box: the tree forks only where
    ranks part, so the picture is as deep as the forks, not as the stacks."""
    chain = [node]
    while len(node.children) == 1:
        (child,) = node.children.values()
        if child.ranks != node.ranks:
            break
        chain.append(child)
        node = child
    box = _Box(node=chain[0], frames=chain, depth=depth)
    if depth + 1 < ICICLE_MAX_DEPTH:
        for child in node.sorted_children():
            if budget[0] <= 0:
                break
            budget[0] -= 1
            box.children.append(_fold(child, depth + 1, budget))
    return box


def _weigh(box: _Box, total: int) -> float:
    own = max(len(box.node.ranks) / total, ICICLE_MIN_SHARE)
    box.weight = max(own, sum(_weigh(c, total) for c in box.children))
    return box.weight


def icicle(
    evidence: Evidence,
    activities: Mapping[int, RankActivity],
    culprits: Iterable[int],
    sets: RankSets,
) -> JsonDict | None:
    """The merged main-thread stacks as an icicle: width = ranks through a frame.

    Boxes are at least ``ICICLE_MIN_SHARE`` of the width, so the branch of one rank in
    16,384 is as visible as the common trunk; their true counts are in the labels.
    """
    root = merge_stacks(evidence)
    if not root.ranks:
        return None
    total = len(root.ranks)
    budget = [ICICLE_MAX_NODES]
    tops = [_fold(child, 0, budget) for child in root.sorted_children()]
    weight = sum(_weigh(b, total) for b in tops) or 1.0
    scale = ICICLE_WIDTH / weight
    culprit_set = set(culprits)
    boxes: list[JsonDict] = []
    depth = 0
    x = 0.0
    for top in tops:
        depth = max(depth, _place(top, x, scale, culprit_set, activities, sets, boxes))
        x += top.weight * scale
    ended = [b for b in boxes if b["leaf"]]
    lines = [
        f"{b['count']} rank{'s' if b['count'] != 1 else ''} ({b['ranks']}) "
        f"end{'' if b['count'] != 1 else 's'} in "
        f"{b['innermost']}" + (f": {b['doing']}" if b["doing"] else "")
        for b in sorted(ended, key=lambda b: (-b["count"], b["x"]))[:8]
    ]
    return {
        "width": ICICLE_WIDTH,
        "row": ICICLE_ROW,
        "height": (depth + 1) * ICICLE_ROW,
        "boxes": boxes,
        "ranks": total,
        "cut": budget[0] <= 0,
        "lines": lines,
    }


def _place(
    box: _Box,
    x: float,
    scale: float,
    culprits: set[int],
    activities: Mapping[int, RankActivity],
    sets: RankSets,
    out: list[JsonDict],
) -> int:
    width = box.weight * scale
    head, first = box.frames[-1], box.frames[0]
    innermost = label = Frame(head.function, head.file, head.line).label()
    if len(box.frames) > 1:
        # The first frame of a box is where its ranks parted from the others: name it
        # before the innermost one, which is only where they ended up.
        gap = " → " if len(box.frames) == 2 else " → … → "
        label = Frame(first.function, first.file, first.line).label() + gap + head.function
    user = [f for f in box.frames if is_user_frame(Frame(f.function, f.file, f.line))]
    ranks = box.node.ranks
    doing = None
    if not box.children:
        activity = activities.get(min(ranks))
        doing = activity.description() if activity else None
    is_culprit = bool(culprits) and ranks <= culprits
    fields = sets.fields(ranks)
    chars = max(0, int((width - 8) / CHAR_PX))
    frames_text = " → ".join(
        Frame(f.function, f.file, f.line).label() for f in box.frames
    )  # outermost first, as read
    out.append(
        {
            **fields,
            "x": round(x, 1),
            "y": box.depth * ICICLE_ROW,
            "w": round(max(width - 1, 1.0), 1),
            "label": label,
            "innermost": innermost,
            "text": truncate(label, chars) if chars >= 3 else "",
            "sub": truncate(f"{fields['count']} · {fields['ranks']}", chars) if chars >= 6 else "",
            "title": truncate(f"{plural_ranks(ranks)} ({len(ranks)}): {frames_text}", 1500),
            "frames": len(box.frames),
            "cls": "culprit" if is_culprit else ("user" if user else "lib"),
            "leaf": not box.children,
            "doing": doing,
        }
    )
    depth = box.depth
    cx = x
    for child in box.children:
        depth = max(depth, _place(child, cx, scale, culprits, activities, sets, out))
        cx += child.weight * scale
    return depth


# ---------------------------------------------------------------------------------------
# Event lanes: per-rank timeline of log events


def event_lanes(evidence: Evidence, sets: RankSets) -> JsonDict | None:
    """Timed log events as marks on one lane per rank (or per bin of ranks), job on top.

    The first failure-like event is marked with a line across all lanes: where the
    trouble started, and on which rank, is what the reader looks for first.
    """
    events: list[tuple[float, int | None, str, bool]] = []
    for e in evidence.job_log_events:
        if e.time is not None:
            events.append((e.time, None, e.kind, _is_failure(e.kind)))
    for proc in evidence.processes:
        for e in proc.log_events:
            if e.time is not None:
                events.append((e.time, proc.rank, e.kind, _is_failure(e.kind)))
    if not events:
        return None
    events.sort(key=lambda t: (t[0], -1 if t[1] is None else t[1], t[2]))
    start, end = events[0][0], events[-1][0]
    span = max(end - start, 1e-3)
    ranks = sorted({r for _, r, _, _ in events if r is not None})
    per_lane = max(1, -(-len(ranks) // LANE_ROWS)) if ranks else 1
    lane_of = {r: 1 + i // per_lane for i, r in enumerate(ranks)}
    has_job = any(r is None for _, r, _, _ in events)
    lanes: list[JsonDict] = []
    if has_job:
        lanes.append({"label": "job", "ranks": None})
    count = -(-len(ranks) // per_lane) if ranks else 0
    for lane in range(count):
        members = ranks[lane * per_lane : (lane + 1) * per_lane]
        lanes.append({"label": _lane_label(members), "ranks": sets.fields(members)})
    marks: dict[tuple[int, int], list[int]] = {}  # (lane, bin) → [count, failures]
    for time, rank, _kind, failure in events:
        lane = 0 if rank is None else lane_of[rank] - (0 if has_job else 1)
        column = min(LANE_BINS - 1, int((time - start) / span * LANE_BINS))
        entry = marks.setdefault((lane, column), [0, 0])
        entry[0] += 1
        entry[1] += failure
    first = next((e for e in events if e[3]), None)
    first_json = None
    if first is not None:
        first_json = {
            "x": min(LANE_BINS - 1, int((first[0] - start) / span * LANE_BINS)),
            "offset_s": round(first[0] - start, 3),
            "kind": first[2],
            "rank": first[1],
        }
    kinds = Counter(kind for _, _, kind, _ in events)
    lines = [
        f"{len(events)} timed events on {len(ranks)} rank{'s' if len(ranks) != 1 else ''}"
        f" over {round(span, 1)} s"
        + (f", ranks {per_lane} to a lane" if per_lane > 1 else "")
        + "."
    ]
    if first is not None and first_json is not None:
        who = "the job" if first[1] is None else f"rank {first[1]}"
        lines.append(f"First failure: {first[2]} on {who} at +{first_json['offset_s']} s.")
    lines.append(
        "Events by kind: "
        + ", ".join(
            f"{k} ×{n}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
        )
        + "."
    )
    return {
        "bins": LANE_BINS,
        "span_s": round(span, 3),
        "lanes": lanes,
        "ranks_per_lane": per_lane,
        "marks": [
            {"lane": lane, "x": col, "n": n, "failure": bool(f)}
            for (lane, col), (n, f) in sorted(marks.items())
        ],
        "first_failure": first_json,
        "lines": lines,
    }


def _is_failure(kind: str) -> bool:
    lowered = kind.lower()
    return any(word in lowered for word in FAILURE_WORDS)


def _lane_label(members: list[int]) -> str:
    return f"rank {members[0]}" if len(members) == 1 else format_ranks(members)
