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

A trainer may also say it outright: torch's Join ("Rank 3 exhausted all inputs."),
AllenNLP ("Worker 0 completed its entire epoch (training)." with nothing from the other
workers), fairseq's all_gather_list finding the workers out of sync ("… one worker to
finish an epoch while other workers are still iterating over their portions of the
data"), a per-step join check built on a monitored barrier (wenet's "Detected uneven
workload distribution: …", CosyVoice's "model.join() exit failed, some ranks may have
exited early: Rank 1 … received errors while waiting for send/recv from rank 0").

## Evidence used
The trainers' exhaustion and join messages (phase markers `data_exhausted`, monitored
barrier errors printed inside a join message; the rank out of data is the one rank 0's
own report of the barrier names, "Rank 2 failed to pass monitoredBarrier", where the text
holds it: the others only hear from rank 0, the barrier's coordinator); progress-bar
events of training and evaluation loops (the largest total each rank showed for a bar
label) and per-rank count lines (`data_count` events), attributed to ranks by their
prefixes (`[rankN]:`, `[defaultN]:`, srun `N: `) or by the line (`rank N: …`). Counts
compared are only those of the same label or the same word, on at least two ranks; the
smaller group of ranks is named as the odd one.

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

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.progress import DataCount, Exhausted, PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import MonitoredBarrier, Reporter
from hangdoc.analyzer.ranges import verb
from hangdoc.analyzer.views.activity_table import Activity, phases_beginning
from hangdoc.analyzer.views.timeline import Placed, Timeline
from hangdoc.analyzer.vocabulary import EventKind, Phase
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import Shift, shifted

# Progress of the epoch loop: training and evaluation bars and markers.
_LOOP_PHASES = phases_beginning(Activity.TRAIN_LOOP, Activity.EVAL)


def _marker(p: Placed) -> PhaseMarker:
    found = p.event.payload_as(PhaseMarker)
    return found if found is not None else PhaseMarker()


def _join(p: Placed) -> MonitoredBarrier | None:
    """A monitored barrier that a trainer's per-step join check failed."""
    barrier = p.event.payload_as(MonitoredBarrier)
    return barrier if barrier is not None and barrier.join else None


class UnevenDataCounts(Rule):
    __doc__ = __doc__
    id = "HD040"
    name = "uneven-data-counts"
    summary = "ranks logged different epoch lengths or batch counts"
    categories = (Category.UNEVEN_DATA,)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        said = self._said(ctx)
        if said is not None:
            yield said
            return
        tl = ctx.timeline
        series: dict[str, dict[int, tuple[float, Placed]]] = {}
        for p in tl.of(EventKind.PHASE):
            marker = _marker(p)
            if p.rank is None or marker.phase not in _LOOP_PHASES:
                continue
            total = marker.progress.total if marker.progress is not None else None
            if total is None or total <= 1:
                continue
            per_rank = series.setdefault(f"bar '{marker.label}'", {})
            if p.rank not in per_rank or per_rank[p.rank][0] < total:
                per_rank[p.rank] = (total, p)
        for p in tl.of(EventKind.DATA_COUNT):
            count = p.event.payload_as(DataCount)
            if p.rank is None or count is None or count.value is None:
                continue
            series.setdefault(str(count.what), {})[p.rank] = (float(count.value), p)
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
            strength=shifted(Strength.SIGNAL, Shift.TIE) if tie else Strength.SIGNAL,
        )

    def _said(self, ctx: RuleContext) -> Finding | None:
        """A trainer's own message that a rank ran out of data (or that its join check
        failed): the uneven data named outright, and the rank it names."""
        tl = ctx.timeline
        markers = [p for p in tl.of(EventKind.PHASE) if _marker(p).phase == Phase.DATA_EXHAUSTED]
        joins = [p for p in tl.of(EventKind.MONITORED_BARRIER) if _join(p) is not None]
        if not markers and not joins:
            return None
        named = sorted({p.rank for p in markers if p.rank is not None})
        seen = set(ctx.evidence.seen_ranks())
        if named and len(seen) > 1 and seen <= set(named):
            return None  # every rank said it: an epoch that ended evenly
        if markers and not joins and not _last_phase(tl, markers[-1]):
            return None  # training went on after it: not where the job stopped
        reports = _rank0_reports(tl) if joins and not named else []
        by_rank0 = sorted({r for p in reports for r in _barrier_ranks(p)})
        culprits = (
            named or by_rank0 or sorted({r for p in joins if (j := _join(p)) for r in j.ranks})
        )
        heard = {p.rank for p in joins if p.rank is not None} | ({0} if by_rank0 else set())
        waiting = sorted(heard - set(culprits))
        said = {_marker(p).exhausted for p in markers}
        if Exhausted.JOIN in said:
            strength, how = (
                Strength.STATED,
                "torch's Join reported that a rank exhausted its inputs",
            )
        elif joins or Exhausted.UNEVEN_WORKLOAD in said:
            strength, how = (
                Strength.SIGNAL,
                "the trainer's per-step join check (a monitored barrier) failed: a rank had "
                "left the training loop, out of data, while the others went on",
            )
        elif Exhausted.OUT_OF_SYNC in said:
            strength, how = (
                Strength.HINT,
                "fairseq's all_gather_list found the workers out of sync, which it says "
                "happens when one worker finishes its epoch while the others still iterate "
                "over their data (or when one runs out of memory, which no line here shows)",
            )
        else:
            strength, how = (
                Strength.HINT,
                "a rank reported that it finished its epoch, and the job stopped there: the "
                "other ranks still had batches and wait in a training step's collective",
            )
        who = ranks_text(culprits) if culprits else "a rank"
        refs = list(markers[:3]) + list(reports[:2]) + list(joins[:3])
        quote = refs[0].event.text.strip()[:90]
        return Finding(
            rule=self.id,
            category=Category.UNEVEN_DATA,
            severity=self.severity,
            title=f"{who} ran out of data before the other ranks: {quote!r}",
            explanation=(
                f"The ranks did not have the same number of batches: {how}. "
                "A rank that leaves the loop early issues the next collective of the program "
                "(a barrier, the epoch-end all-reduce) while the others wait in a step's "
                "gradient all-reduce, and both wait until the timeout."
                + (
                    " The join check names the rank it did not hear from; with more than two "
                    "ranks that rank may instead have reported another one: read its log."
                    if joins and not named and not by_rank0
                    else ""
                )
            ),
            fix=(
                "Give every rank the same number of steps: DistributedSampler(..., "
                "drop_last=True), steps per epoch computed identically on every rank, or "
                "DDP's uneven-input handling (torch.distributed.algorithms.Join)."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(waiting),
            evidence=tuple(limited_refs(refs, limit=6)),
            strength=strength,
        )


def _barrier_ranks(p: Placed) -> tuple[int, ...]:
    barrier = p.event.payload_as(MonitoredBarrier)
    return barrier.ranks if barrier is not None else ()


def _rank0_reports(tl: Timeline) -> list[Placed]:
    """Rank 0's own reports of a monitored barrier, which name the ranks that did not
    arrive ("[Rank 0]: Rank 2 failed to pass monitoredBarrier in 30000 ms",
    ProcessGroupGloo's monitoredBarrier). In a join check the other ranks only hear from
    rank 0 ("received errors while waiting for send/recv from rank 0"): rank 0 is the
    barrier's coordinator, and the rank its report names is the one that left the loop.
    Without the report, the peers' rank 0 is named (its side failed)."""
    return [
        p
        for p in tl.of(EventKind.MONITORED_BARRIER)
        if (b := p.event.payload_as(MonitoredBarrier)) is not None
        and b.reporter != Reporter.PEER
        and b.ranks
    ]


def _last_phase(tl: Timeline, marker: Placed) -> bool:
    """No training or evaluation progress of the same owner after the marker."""
    later = [
        p
        for p in tl.of(EventKind.PHASE)
        if p.index > marker.index and p.rank == marker.rank and _marker(p).phase in _LOOP_PHASES
    ]
    return not later


def _show(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


RULE = UnevenDataCounts
