"""Some ranks never reached the collective the others timed out in

## What it means
The watchdog timeout messages of the ranks that waited name the collective they were
stuck in: its sequence number (`SeqNum`, per process group) and, since torch ≈2.3,
the last collective each rank *enqueued* and *completed*. A rank whose last enqueued
sequence number is below the one the others are stuck at never issued that
collective: it is somewhere else — still computing, blocked in I/O or a dataloader,
in another branch of the code. So is a rank that a timeout elsewhere reached (its
heartbeat monitor's dump signal "from rank R") with nothing in flight — last enqueued ==
last completed — while the others still have work in flight from the one after: it never
entered the collective they wait in. Ranks that are known to be part of the job (they
printed other lines) but never reported a timeout in any process group, nor were
notified of one, while the others did are suspected the same way, more weakly: more
weakly still when nothing of them comes after the others' timeouts, and not at all when,
besides, the last line seen of them is the others' own last progress line at the same
counts (a paste cut just after one rank's timeout), and not at all while a timeout whose
rank the text lost (a first line cut in half takes its "[Rank N]") could be its own.

## Why it hangs
Every rank of a process group must issue the same collectives in the same order. The
ranks that entered collective N wait for the lagging rank to enter it too; if it never
does, they block until the timeout.

## Evidence used
`Watchdog caught collective operation timeout: WorkNCCL(SeqNum=…)`, `timed out in
blocking wait`, `Exception (either an error or timeout) detected by watchdog at work: N,
last enqueued NCCL work: M, last completed NCCL work: K`, `failure detected by watchdog
at work sequence id: N PG status: last enqueued work: M, last completed work: K`, dump
signals, and gloo's `Timed out waiting … for recv/send`, grouped by process group (`PG
GUID`, else the PG index). A rank that died first is left to HD030; ranks whose own
timeouts put them in different collectives at different SeqNums (another OpType, or
another size) are not behind but out of step, and left to HD041; so is a rank whose own
status shows work in flight at a SeqNum another rank has completed (it is in a collective
the others paired with another one; which, its status does not say): no finding. Lines
without a PG prefix (torch < 2.3) where one rank names several SeqNums come from several
process groups and are not compared; a rank whose last enqueued work reaches the stuck
SeqNum issued it and is no laggard; nor is a rank whose own timeout is in a rooted
collective (a broadcast, reduce, gather, scatter) one SeqNum below the others': it is
inside the collective they finished as its root or senders, not elsewhere. Without a
SeqNum of the group, the stuck work is the others' first uncompleted one (last completed
+ 1), and the finding is a signal, not a statement (views/silence.py, ``Behind``). A dump
signal "from this local rank" with nothing in flight in its printing group means that
rank's watchdog fired in another group: it is not behind in this one.

When the ranks' own logs print the same count of data (batches, samples) with other values
on some ranks (views/log_compare.py), that is why they parted: the finding is uneven data.

A silent rank's silence counts where the evidence covers it past the others' timeouts
(views/silence.py, ``Cover``): its live stacks or flight recorder dump, a line of its own
after a timeout of theirs (later in the same text, or by the times of other files beyond
the watchdog's poll and the hosts' skew), or the launcher's report of its end after it.
Without that, the text may simply end before the silent rank's own timeout (NCCL's
watchdogs fire within seconds of each other): such a silence alone names no cause (a
paste cut after one rank's timeout shows every other rank silent); with the rank's last
marker (saving, evaluating) or counts that differ it speaks, stepped down
(``SILENCE_NOT_COVERED``) where only the counts say why.
A silent rank not covered whose last line is the progress line ("epoch 3 step 120 …") the
ranks that timed out printed last, at the same counts, was last seen where they were:
it is named no culprit.

## How to confirm
Look at what the lagging rank printed last, and take its stack (py-spy dump) the next
time the job hangs. A flight recorder dump (`TORCH_FR_BUFFER_SIZE=2000`,
`TORCH_NCCL_DUMP_ON_TIMEOUT=1`) analysed with `torchfrtrace` names the missing ranks
of each collective.

## How to fix
Make every rank issue the same collectives in the same order: no collective inside
`if rank == 0`, no early `break`/`return`/`continue` that only some ranks take (uneven
data: `drop_last=True`, `join()` context), no exception swallowed on one rank. If the
lagging rank is merely slow, raise the process-group timeout.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.views.activity_table import (
    TABLE,
    Activity,
    begun_by,
    phases_beginning,
    phrase,
)
from hangdoc.analyzer.views.log_compare import Divergence, DivergenceKind
from hangdoc.analyzer.views.silence import Behind, SeqFrom, Silence
from hangdoc.analyzer.views.timeline import Placed, Timeline
from hangdoc.analyzer.views.watchdog import (
    DEFAULT_PG,
    WatchRecord,
    apart,
    paired_elsewhere,
    watch_records,
)
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import Shift, shifted

# What a lagging rank's last phase marker may say it was doing: work that explains the lag
# (a save, an evaluation), or long single-rank work that is not a hang (HD039's case).
_LAG_CAUSES = frozenset({Activity.CHECKPOINT_SAVE, Activity.EVAL})
_BUSY = phases_beginning(Activity.PREPROCESS, Activity.CHECKPOINT_LOAD)


def last_activity(tl: Timeline, ranks: list[int]) -> tuple[Category, str, Placed] | str | None:
    """What the culprits' phase markers say they were doing last: a (category, words,
    event) when it explains the lag, "busy" for preprocessing/loading (HD039's case),
    None when the markers say nothing."""
    wanted = set(ranks)
    last: Placed | None = None
    for p in tl.of(EventKind.PHASE):
        if p.rank in wanted or (p.rank is None and ranks == [0]):
            last = p
    marker = last.event.payload_as(PhaseMarker) if last is not None else None
    if last is None or marker is None or marker.phase is None:
        return None
    if marker.phase in _BUSY:
        return "busy"
    doing = begun_by(marker.phase)
    if doing is None or doing not in _LAG_CAUSES:
        return None
    return (TABLE[doing].category, f"was {phrase(doing)}", last)


class LaggingRank(Rule):
    __doc__ = __doc__
    id = "HD032"
    name = "lagging-rank"
    summary = "watchdog timeouts show ranks that never issued the stuck collective"
    categories = (
        Category.RANK_DIVERGENCE,
        Category.CHECKPOINT_SAVE,
        Category.EVAL_SOME_RANKS,
        Category.UNEVEN_DATA,
    )
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        groups = watch_records(tl)
        if not groups:
            return
        view = ctx.silence
        behind = {b.pg: b for b in view.behind}
        for pg, records in sorted(groups.items()):
            if apart(pg, records) is not None:
                continue  # stuck in different collectives, not behind: HD041
            finding: Finding | None = None
            if pg in behind:
                lag = behind[pg]
                waiting = [rec for r, rec in records.items() if r not in lag.ranks]
                if any(paired_elsewhere(records[r], waiting) for r in lag.ranks if r in records):
                    continue  # in a collective the others paired with another: not behind
                finding = self._behind(lag, records, view)
            elif pg in (DEFAULT_PG, "gloo") and not view.dead:
                finding = self._silent(pg, records, view)
            if finding is None:
                continue
            doing = last_activity(tl, list(finding.culprit_ranks))
            if doing == "busy":
                continue  # long single-rank work: HD039 (not a hang)
            if isinstance(doing, tuple):
                category, words, event = doing
                finding = replace(
                    finding,
                    category=category,
                    # Its last marker shows it elsewhere, whatever lies past the text's end.
                    strength=max(finding.strength, Strength.HINT),
                    title=f"{finding.title}; {ranks_text(finding.culprit_ranks)} {words}",
                    explanation=f"{finding.explanation} Its last log marker: "
                    f"{event.event.text[:160]}",
                    evidence=(*finding.evidence, event.ref()),
                )
            elif (counts := _counts_differ(ctx)) is not None:
                finding = _with_counts(finding, counts)
            elif pg not in behind and any(r not in view.covered for r in finding.culprit_ranks):
                # A silence nothing shows lasting past the others' timeouts, with nothing
                # that says where the rank was: what a paste cut after the first timeout
                # shows of every rank it holds no timeout of. No cause.
                continue
            yield finding

    def _behind(self, behind: Behind, records: dict[int, WatchRecord], view: Silence) -> Finding:
        seq = behind.seq
        what = f"{behind.op} #{seq}" if behind.op else f"collective #{seq}"
        where = (
            "the default process group"
            if behind.pg == DEFAULT_PG
            else (f"process group {behind.pg}")
        )
        culprits = list(behind.ranks)
        waiting = sorted(set(records) - set(culprits))
        refs = [p for r in culprits for p in records[r].events[:2]] + [
            p for r in waiting[:3] for p in records[r].events[:1]
        ]
        if behind.seq_from is SeqFrom.STATED:
            details = "; ".join(_lag_detail(records[r], seq) for r in culprits[:8])
            title = (
                f"{ranks_text(culprits)} never issued {what} on {where}; {ranks_text(waiting)} "
                f"wait in it"
            )
            explanation = (
                f"{ranks_text(waiting)} timed out in {what} on {where}, but the watchdog "
                f"status of {ranks_text(culprits)} shows they had not issued it ({details}). "
                "They were elsewhere while the others waited."
            )
            strength = Strength.STATED  # the watchdog's own status lines say so
        else:
            details = "; ".join(
                f"rank {r}: last enqueued {behind.last_enqueued[r]}" for r in culprits[:8]
            )
            title = (
                f"{ranks_text(culprits)} had nothing in flight when {ranks_text(waiting)} "
                f"timed out in work #{seq} on {where}: never entered it"
            )
            explanation = (
                f"The watchdog status of {ranks_text(waiting)} on {where} shows work in "
                f"flight from #{seq} on (their first uncompleted work), while the status "
                f"{ranks_text(culprits)} printed when the timeout reached them shows every "
                f"work they had enqueued completed ({details}): they never entered #{seq}, "
                "and the others waited for them." + _first_text(view, culprits)
            )
            # torch's numbers imply the sequence number rather than state it; as many
            # ranks on each side leave which side diverged a guess.
            tie = len(culprits) >= len(waiting)
            strength = shifted(Strength.SIGNAL, Shift.TIE) if tie else Strength.SIGNAL
        return Finding(
            rule=self.id,
            category=Category.RANK_DIVERGENCE,
            severity=Severity.ERROR,
            title=title,
            explanation=explanation,
            fix=_FIX,
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(waiting),
            evidence=tuple(limited_refs(refs, limit=8)),
            strength=strength,
        )

    def _silent(self, pg: str, records: dict[int, WatchRecord], view: Silence) -> Finding | None:
        timed_out = set(records)
        if not view.silence_sure:
            return None  # a timeout whose rank the text lost may be the silent rank's own
        # A silence the text does not cover past the timeouts, of a rank last seen at the
        # others' own point of progress, shows nothing: not behind, perhaps only cut off.
        silent = [r for r in view.quiet if r in view.covered or r not in view.abreast]
        if not silent or len(silent) > len(timed_out) or len(timed_out) < 1:
            return None
        uncovered = [r for r in silent if r not in view.covered]
        what = "a gloo collective" if pg == "gloo" else "a collective"
        seqs = Counter(r.seq for r in records.values() if r.seq is not None)
        if seqs:
            seq = max(seqs.items(), key=lambda kv: (kv[1], kv[0]))[0]
            ops = Counter(r.op for r in records.values() if r.op and r.seq == seq).most_common(1)
            what = f"{ops[0][0] if ops else 'collective'} #{seq}"
        refs = [p for r in sorted(timed_out)[:6] for p in records[r].events[:1]]
        return Finding(
            rule=self.id,
            category=Category.RANK_DIVERGENCE,
            severity=Severity.ERROR,
            title=(
                f"{ranks_text(timed_out)} timed out in {what}; {ranks_text(silent)} never did "
                f"({'perhaps' if uncovered else 'likely'} lagging)"
            ),
            explanation=(
                f"{ranks_text(timed_out)} reported a timeout in {what}, while "
                f"{ranks_text(silent)}, present in the same logs, reported none in any process "
                "group, was not notified of one and did not crash: a rank that has not entered "
                "a collective cannot time out in it, so they are the likely culprits. This is "
                "an inference from silence; confirm with their stacks or a flight recorder "
                "dump." + _cover_text(view, silent) + _first_text(view, silent)
            ),
            fix=_FIX,
            culprit_ranks=tuple(silent),
            waiting_ranks=tuple(sorted(timed_out)),
            evidence=tuple(limited_refs(refs, limit=6)),
            # An inference from silence; weaker where nothing shows the silence lasted
            # past the others' timeouts.
            strength=shifted(Strength.HINT, Shift.SILENCE_NOT_COVERED)
            if uncovered
            else Strength.HINT,
        )


def _lag_detail(rec: WatchRecord, seq: int) -> str:
    if rec.last_enqueued is not None and rec.last_enqueued < seq:
        return f"rank {rec.rank}: last enqueued {rec.last_enqueued}"
    return f"rank {rec.rank}: stuck at {rec.seq}"


def _cover_text(view: Silence, silent: list[int]) -> str:
    """What shows the silence lasted past the others' timeouts, or that nothing does."""
    uncovered = [r for r in silent if r not in view.covered]
    if uncovered:
        return (
            f" Nothing of {ranks_text(uncovered)} comes after the others' timeouts: "
            "their own timeout may lie past where the text ends."
        )
    covers = sorted({view.covered[r].value for r in silent})
    return f" What shows the silence lasted past the others' timeouts: {'; '.join(covers)}."


def _first_text(view: Silence, culprits: list[int]) -> str:
    """Who timed out first, on one clock, and who was only notified."""
    parts: list[str] = []
    if view.first is not None and view.first.rank is not None:
        text = view.first.event.text.strip()
        shown = text if len(text) <= 80 else text[:80] + "…"
        parts.append(f" Rank {view.first.rank} timed out first ({shown}).")
    notified = [r for r in view.notified_only if r not in culprits]
    if notified:
        parts.append(
            f" {ranks_text(notified).capitalize()} did not time out themselves: another "
            "rank's timeout reached them."
        )
    return "".join(parts)


def _counts_differ(ctx: RuleContext) -> Divergence | None:
    """The ranks' own logs print the same count of data (batches, samples) with other
    values on some ranks (views/log_compare.py, COUNTER): why the ranks parted."""
    found = [d for d in ctx.log_comparison.divergences if d.kind == DivergenceKind.COUNTER]
    return found[0] if found else None


def _with_counts(finding: Finding, counts: Divergence) -> Finding:
    """The ranks out of step, and their own counts of data differ: uneven data is why."""
    cited = counts.lines[0].line.text[:160] if counts.lines else counts.template
    return replace(
        finding,
        category=Category.UNEVEN_DATA,
        title=f"{finding.title}; the ranks' own data counts differ ({ranks_text(counts.ranks)} "
        f"against {ranks_text(counts.others)})",
        explanation=f"{finding.explanation} The ranks' own logs print the same count of data "
        f"with other values on {ranks_text(counts.ranks)} ({cited}): with different amounts "
        "of data, some ranks leave the loop early and the others wait in collectives they "
        "never issue.",
        fix=_UNEVEN_FIX,
        evidence=(
            *finding.evidence,
            *(
                EvidenceRef(c.line.source, c.line.text[:300], c.rank, c.line.line or None)
                for c in counts.lines[:2]
            ),
        ),
    )


_UNEVEN_FIX = (
    "Give every rank the same number of batches: DistributedSampler(drop_last=True) or a "
    "dataset length divisible by the world size, or wrap the loop in "
    "torch.distributed.algorithms.Join; print len(dataloader) on every rank to confirm."
)

_FIX = (
    "Find what the lagging ranks were doing (their last log lines, a py-spy dump next "
    "time) and make every rank issue the same collectives in the same order: no collective "
    "under a rank-dependent branch, no early exit from a loop on some ranks (uneven data: "
    "drop_last=True or the join() context manager). If they are only slow, raise the "
    "process-group timeout."
)

RULE = LaggingRank
