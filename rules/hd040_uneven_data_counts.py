"""Ranks logged different amounts of data: epoch lengths or batch counts disagree

## What it means
The logs give each rank's amount of data and the ranks disagree: tqdm bars of the same
loop end at different totals (`Epoch 3: 100%|…| 1250/1250` on some ranks, `1248/1248`
on others), or the script printed per-rank counts that differ (`rank 0: 1250 batches`,
`len(train_loader) = 1248`, `Number of batches: …`).

## Why it hangs
Every training step issues the same gradient collectives on every rank. A rank with
fewer batches leaves the loop first and issues the next collective of the program
(evaluation, a barrier, a save) while the others still wait in a step's all-reduce: a
hang that ends in a watchdog timeout. Equal counts are a precondition of DDP/FSDP
training without `join()`.

## Evidence used
Progress-bar events of training and evaluation loops (the largest total each rank showed
for a bar label) and per-rank count lines (`data_count` events), attributed to ranks by
their prefixes (`[rankN]:`, `[defaultN]:`, srun `N: `) or by the line (`rank N: …`).
Counts compared are only those of the same label or the same word, on at least two
ranks; the smaller group of ranks is named as the odd one.

## How to confirm
Print `len(dataloader)` and the steps per epoch on every rank at the start of an epoch;
take py-spy dumps of the hung ranks: the odd ranks are past the training loop while the
others are in a step's gradient all-reduce (HD106 reads that from the stacks).

## How to fix
`DistributedSampler(..., drop_last=True)` for training and evaluation; compute the steps
per epoch from the per-rank length identically everywhere; filter or bucket data before
splitting it between ranks, not after; or let DDP handle uneven inputs with
`torch.distributed.algorithms.Join`.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity
from hangdoc.analyzer.ranges import verb
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import F_PHASE, EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text

_LOOP_PHASES = frozenset({"train", "eval"})


def _number(text: str | None) -> float | None:
    """A tqdm total ("1250", "1.25k") or a count as a number."""
    if not text:
        return None
    scale = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}.get(text[-1], 1.0)
    try:
        return float(text.rstrip("kKMG")) * scale
    except ValueError:
        return None


class UnevenDataCounts(Rule):
    __doc__ = __doc__
    id = "HD040"
    name = "uneven-data-counts"
    summary = "ranks logged different epoch lengths or batch counts"
    categories = (Category.UNEVEN_DATA,)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        series: dict[str, dict[int, tuple[float, Placed]]] = {}
        for p in tl.of(EventKind.PHASE):
            if p.rank is None or p.get(F_PHASE) not in _LOOP_PHASES:
                continue
            total = _number(p.get("total"))
            if total is None or total <= 1:
                continue
            per_rank = series.setdefault(f"bar '{p.get('label')}'", {})
            if p.rank not in per_rank or per_rank[p.rank][0] < total:
                per_rank[p.rank] = (total, p)
        for p in tl.of(EventKind.DATA_COUNT):
            value = _number(p.get("value"))
            if p.rank is None or value is None:
                continue
            series.setdefault(str(p.get("what")), {})[p.rank] = (value, p)
        for label, per_rank in sorted(series.items()):
            finding = self._compare(label, per_rank)
            if finding is not None:
                yield finding
                return  # one finding: the first disagreeing series says it

    def _compare(self, label: str, per_rank: dict[int, tuple[float, Placed]]) -> Finding | None:
        if len(per_rank) < 2:
            return None
        groups: dict[float, list[int]] = {}
        for rank, (value, _p) in per_rank.items():
            groups.setdefault(value, []).append(rank)
        if len(groups) < 2:
            return None
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        major_value, major = ordered[0]
        culprits = sorted(r for _v, rs in ordered[1:] for r in rs)
        tie = len(ordered[1][1]) == len(major)
        shown = "; ".join(f"{_show(v)} on {ranks_text(sorted(rs))}" for v, rs in ordered)
        refs = [per_rank[r][1] for r in culprits[:4]] + [per_rank[r][1] for r in major[:2]]
        explanation = (
            f"The ranks logged different amounts of data for {label}: {shown}. Ranks that "
            "run a different number of steps issue different collectives: the ones that "
            "finish the loop first wait elsewhere while the others wait in a training "
            "step's gradient all-reduce."
        )
        if tie:
            explanation += " Both groups have the same size: which one is odd is a guess."
        return Finding(
            rule=self.id,
            category=Category.UNEVEN_DATA,
            severity=self.severity,
            title=(
                f"ranks have different amounts of data ({label}): {ranks_text(culprits)} "
                f"{verb(culprits, 'differs', 'differ')} from the {_show(major_value)} of "
                f"{ranks_text(sorted(major))}"
            ),
            explanation=explanation,
            fix=(
                "Give every rank the same number of steps: DistributedSampler(..., "
                "drop_last=True), steps per epoch computed identically on every rank, or "
                "DDP's uneven-input handling (torch.distributed.algorithms.Join)."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(sorted(major)),
            evidence=tuple(limited_refs(refs, limit=6)),
            confidence=0.45 if tie else 0.6,
        )


def _show(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


RULE = UnevenDataCounts
