"""The ranks' own logs part ways: one stops on an unfinished action, or prints other counts

## What it means
The ranks of a job run the same code, so their logs follow the same lines. hangdoc
compares each rank's log with the others', line template by line template (numbers
masked, templates mined with drain3), and reports where they part:
a rank whose last line starts an action that nothing after it finishes ("saving shard
3 …" with no "saved", "running validation …") while the others went on; a line every rank
prints with a number that differs on some ranks, read by the words next to the number: an
amount of data ("1248 batches" against "1250": uneven data), a size ("bins: 9" against
"bins: 10"), or progress ("reached step 97" against "step 100": the ranks went different
ways), or the value of a field whose own key says none of these ("oom=1" against
"oom=0": something the rank met that the others did not, where they may part); a
progress counter that stopped behind the others' ("step 97" while they print
"step 100"). Lines of one console are each rank's by their prefix, or by the rank their
own words name (`Rank 3, world_size 8: …`, `[rank: 3] …`). A line only some ranks print, after which
they print a line every rank prints (rank 0 logs its validation metrics, then every rank
says it saves), is work they did and came back from: named only where their stacks set
them apart; and a save or an evaluation a rank reports done is not what the others wait
for.

## Why it hangs
A rank stuck in an action the others do not take (a checkpoint write, an evaluation on
rank 0 only) is not in the collective they wait in. Different batch counts mean some
ranks leave the epoch early and wait for collectives the others never issue; a different
size or count in a tensor that is all-gathered or all-reduced makes the collective
mismatch, and NCCL or gloo then hangs or fails.

## Evidence used
The head and tail of every rank's log (stdout/stderr files in a dump, loose rank logs,
consoles with `[rankN]:` prefixes), compared with each other; the lines are cited.
No stacks are needed: with stacks, HD001 and the other stack rules say the same more
surely, and the word the log uses for the action strengthens their finding.

## How to confirm
Read the cited lines: the culprit's last line, and the same line on a rank that went on.
For counts, print `len(dataloader)` (or the tensor's shape before the collective) on every
rank. Take py-spy stacks of the culprit (`hangdoc collect`) to see where it is blocked.

## How to fix
For an unfinished action, make it finish or keep it out of the window in which the others
wait in a collective (save and evaluate on every rank, or barrier after a rank-0-only
step). For different counts, give every rank the same number of batches
(`DistributedSampler(drop_last=True)`, `Join`) or pad the tensor to the same size
(`torch.bincount(..., minlength=N)`, gather the sizes first with `all_gather_object`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.analyzer.views.activity import live_activities
from hangdoc.analyzer.views.activity_table import TABLE, phrase
from hangdoc.analyzer.views.log_compare import Divergence, DivergenceKind
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.strength import Shift, shifted

_UNEVEN_FIX = (
    "Give every rank the same number of batches: DistributedSampler(drop_last=True) or "
    "a dataset length divisible by the world size, or wrap the loop in "
    "torch.distributed.algorithms.Join; print len(dataloader) on every rank to confirm."
)
_SIZE_FIX = (
    "Make the tensor the same size on every rank before the collective: pad it, pass "
    "minlength= to bincount/histc, or exchange the sizes first (all_gather_object) and "
    "use all_gather with per-rank sizes."
)
_UNFINISHED_FIX = (
    "The culprit's last line starts an action nothing finishes: find why it does not end "
    "(its stack: hangdoc collect), and keep single-rank work out of the window in which "
    "the other ranks wait in a collective (run it on every rank, or barrier after it)."
)


class LogsDiverge(Rule):
    __doc__ = __doc__
    id = "HD060"
    name = "logs-diverge"
    summary = "the ranks' own logs part ways (an unfinished action, counts that differ)"
    categories = (
        Category.CHECKPOINT_SAVE,
        Category.EVAL_SOME_RANKS,
        Category.DATALOADER,
        Category.UNEVEN_DATA,
        Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH,
        Category.RANK_DIVERGENCE,
    )
    severity = Severity.ERROR
    requires = frozenset({Need.LOG_LINES})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        # Count lines the log vocabulary knows ("1250 batches", tqdm totals) are HD040's;
        # the templates catch the counts it does not know, and join them with the stacks.
        counted = any(
            e.kind == EventKind.DATA_COUNT for p in ctx.evidence.processes for e in p.log_events
        )
        for divergence in ctx.log_comparison.divergences:
            agree = divergence.kind != DivergenceKind.BEHIND and _stacks_agree(ctx, divergence)
            if divergence.kind == DivergenceKind.COUNTER and counted and not agree:
                continue  # HD040 says the same; joined with the stacks it says more
            if divergence.rejoined and not agree:
                # The ranks printed the others' line after it: back on their path, by the
                # log's order (which a paste of stdout then stderr does not keep); only
                # their stacks, set apart, say they parted there.
                continue
            finding = self._finding(divergence)
            if (
                agree
                and finding.category is Category.RANK_DIVERGENCE
                and _in_other_collective(ctx, divergence)
            ):
                # The log says where the ranks part but names no cause, and the stacks say
                # more: the odd ranks wait in another collective (HD002's reading). The
                # stacks agree on who; the finding stays below theirs.
                finding = replace(
                    finding,
                    strength=shifted(finding.strength, Shift.STACKS_AGREE),
                    explanation=finding.explanation
                    + " The stacks agree: these ranks wait in another collective than the "
                    "others.",
                )
            elif agree:
                # Two independent sources name the same ranks: the stacks say where they
                # stand apart, the logs say why. The log's cause is the root one.
                finding = replace(
                    finding,
                    severity=Severity.CRITICAL,
                    strength=shifted(finding.strength, Shift.STACKS_AGREE),
                    explanation=finding.explanation
                    + " The stacks agree: these ranks are blocked elsewhere than the others.",
                )
            yield finding

    def _finding(self, d: Divergence) -> Finding:
        culprits, others = plural_ranks(d.ranks), plural_ranks(d.others)
        first = d.lines[0].line.text
        severity = self.severity
        category = TABLE[d.meaning].category if d.meaning else Category.RANK_DIVERGENCE
        unnamed = (
            "did something else" if d.kind == DivergenceKind.UNFINISHED else "took another path"
        )
        doing = phrase(d.meaning) if d.meaning else unnamed
        if d.kind == DivergenceKind.UNFINISHED:
            title = f"{culprits} stopped on {first[:80]!r} ({doing}) while {others} went on"
            why = (
                f"The last line of {culprits} starts an action that no later line finishes, "
                f"and {others} printed something else after it. "
            )
            fix = _UNFINISHED_FIX
            strength = Strength.SIGNAL if d.meaning else Strength.HINT
        elif d.kind == DivergenceKind.ONLY_SOME:
            title = f"only {culprits} printed {first[:80]!r} ({doing}); {others} never did"
            why = (
                f"Near the end of their logs {culprits} printed a line {others} never print: "
                "where the ranks' paths parted. "
            )
            fix = _UNFINISHED_FIX
            strength = Strength.HINT if d.meaning else Strength.ABSENCE
            if d.meaning is None:
                severity = Severity.WARNING  # where they parted, not yet why
        elif d.kind == DivergenceKind.COUNTER:
            category, fix, strength = Category.UNEVEN_DATA, _UNEVEN_FIX, Strength.SIGNAL
            title = f"{culprits} printed other counts than {others} on the same line"
            why = (
                "Every rank prints this line, and its counts differ on some ranks: they "
                "have different amounts of data, so some leave the loop early. "
            )
        elif d.kind == DivergenceKind.PROGRESS:
            category, fix, strength = Category.RANK_DIVERGENCE, _UNFINISHED_FIX, Strength.HINT
            severity = Severity.WARNING  # where the ranks part, not yet why
            title = f"{culprits} printed other progress than {others} on the same line"
            why = (
                "Every rank prints this line, and the count of steps in it differs on some "
                "ranks: they did not go the same way. "
            )
        elif d.kind == DivergenceKind.FIELD:
            category, fix, strength = Category.RANK_DIVERGENCE, _UNFINISHED_FIX, Strength.HINT
            severity = Severity.WARNING  # where the ranks part, not yet why
            title = f"{culprits} printed another value than {others} in a field of the same line"
            why = (
                "Every rank prints this line, and a field in it whose key names neither an "
                "amount of data, a size nor progress differs on some ranks: they met "
                "something the others did not (an error they counted, a retry) and may "
                "have gone another way there. "
            )
        elif d.kind == DivergenceKind.SIZE:
            category, fix = Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH, _SIZE_FIX
            strength = Strength.SIGNAL
            title = f"{culprits} printed other sizes than {others} on the same line"
            why = (
                "Every rank prints this line, and the size in it differs on some ranks: a "
                "tensor of that size in a collective does not match across ranks. "
            )
            if d.empty:
                why += (
                    f"On {culprits} it is 0: a collective of 0 elements returns at once "
                    "without its peers (NCCL discards an empty collective, src/enqueue.cc; "
                    "gloo's allreduce returns when it has no elements), so "
                    f"{culprits} went on alone while {others} wait in that collective. "
                )
        else:
            category, fix, strength = Category.RANK_DIVERGENCE, _UNFINISHED_FIX, Strength.ABSENCE
            severity = Severity.WARNING  # where the culprit is, not yet why
            title = f"the progress of {culprits} stopped behind that of {others}"
            why = f"The progress line every rank repeats stopped earlier on {culprits}. "
        explanation = why + f"Template: {d.template!r}; {d.detail}."
        evidence = tuple(
            EvidenceRef(
                source=c.line.source,
                detail=f"rank {c.rank}: {c.line.text[:300]}",
                rank=c.rank,
                line=c.line.line or None,
            )
            for c in d.lines
        )
        return Finding(
            rule=self.id,
            category=category,
            severity=severity,
            title=title,
            explanation=explanation,
            fix=fix,
            culprit_ranks=d.ranks,
            waiting_ranks=d.others,
            evidence=evidence,
            strength=strength,
        )


def _stacks_agree(ctx: RuleContext, d: Divergence) -> bool:
    """The stacks set the same ranks apart: they are outside any collective, or in
    another collective than every other rank, while the other ranks wait in one."""
    live = {a.rank: a for a in live_activities(ctx.activities)}
    odd = [live[r] for r in d.ranks if r in live]
    rest = [a for r, a in live.items() if r not in d.ranks]
    if not odd or len(odd) != len(d.ranks) or not rest:
        return False
    rest_calls = {a.waiting_call.family for a in rest if a.waiting_call is not None}
    if len(rest_calls) != 1 or any(a.waiting_call is None for a in rest):
        return False
    return all(a.waiting_call is None or a.waiting_call.family not in rest_calls for a in odd)


def _in_other_collective(ctx: RuleContext, d: Divergence) -> bool:
    """Every odd rank waits in a collective (another than the others': ``_stacks_agree``)."""
    live = {a.rank: a for a in live_activities(ctx.activities)}
    return all(r in live and live[r].waiting_call is not None for r in d.ranks)


RULE = LogsDiverge
