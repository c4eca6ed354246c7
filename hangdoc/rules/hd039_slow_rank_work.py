"""A timeout that followed long single-rank work: slow, not hung

## What it means
The other ranks timed out early in the job (in one of its first collectives) while one
rank was still busy with work that only it does and that takes a long time:
tokenizing or mapping a dataset, loading checkpoint shards, building an index. Its
progress bar was still advancing when the others gave up. Nothing was stuck; the work
took longer than the collective timeout. When the lines show only the work's start (its
marker, or a bar printed before the timeouts whose elapsed time is far short of the
timeout, nothing of it after them, and no timeout line glued after it on its line as
tqdm leaves a live bar), they do not time it against the timeout: the
finding is then that the ranks parted (one began single-rank work, the others waited in
a collective), category `rank_divergence_collective_vs_noncollective`
(fixtures/cases/README.md: slow work is shown advancing).

## Why it hangs
The waiting ranks sit in a barrier or broadcast (often `main_process_first`, or the
first all-reduce) until the busy rank joins; when the busy rank takes longer than the
process-group timeout (10 minutes for NCCL since torch ≈2.2, 30 for gloo), the
watchdog declares a hang and tears the job down.

## Evidence used
Progress bars and phase markers (datasets `Map`/`Running tokenizer on dataset`,
`Loading checkpoint shards`, preprocessing messages; FORMATS.md §7) that are the last
thing a rank printed and are not finished (a bar without a description right after such a
message is that work's loop: `caching latents...` then `tqdm(images)`), on a rank that did
not itself time out;
collective or store timeouts at an early sequence number on the other ranks, or later
ones whose `Timeout(ms)` the bar's elapsed time covers (the rank did that work for the
whole time the others waited); and no crash, network error or mismatch that would
explain the timeout otherwise. Where no framework's bar or marker is shown, a counter of
the job's own (consecutive lines of one shape, a number growing from line to line, such as
`finish 885000, taken 20619.9 seconds`; views/counters.py) that goes on after the first
timeout line of its file, its time taken (where it prints one) at least the timeout, shows
the work advancing too. A bar that names no rank is the main process's where the waiting
ranks' tracebacks show them held at a "rank 0 first" gate (views/gates.py: the gate waits
for rank 0's work). The store-based barrier of `init_process_group` ("Waiting in store
based barrier to initialize process group for rank: R, key: K (world_size=N,
worker_count=M, timeout=T)", torch/distributed/distributed_c10d.py `_store_based_barrier`)
waiting while a progress bar of the ranks not yet counted advanced is the same: its wait
lines glued after the bar's live state (tqdm ends no state with a newline), the bar with a
rate and an elapsed time at least the barrier's own timeout `T` (views/barrier_work.py).
A barrier missing a rank with no bar shown advancing stays set-up (HD201).

## How to confirm
The busy rank's progress bar shows its rate and remaining time: compare the time it
needs with the timeout (`Timeout(ms)` in the watchdog line). Re-run with a longer
timeout and watch the bar finish.

## How to fix
Raise the timeout for this phase (`init_process_group(timeout=timedelta(hours=2))`,
`--ddp_timeout` in HF Trainer, `InitProcessGroupKwargs(timeout=…)` in Accelerate), or
move the work out of the distributed job: preprocess and cache the dataset offline, use
more `num_proc`, load shards in parallel on every rank.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, EvidenceRef, Finding, Severity, Strength
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import StoreTimeout, Work
from hangdoc.analyzer.views.activity_table import Activity, phases_beginning
from hangdoc.analyzer.views.barrier_work import barrier_waits_on_work
from hangdoc.analyzer.views.counters import Counter, counters_past
from hangdoc.analyzer.views.deaths import first_deaths
from hangdoc.analyzer.views.gates import MAIN_RANK, gate_waits
from hangdoc.analyzer.views.timeline import Placed, Timeline
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import ranks_text

# Long work one rank does alone (preprocessing, loading), as its phase markers say.
_BUSY = phases_beginning(Activity.PREPROCESS, Activity.CHECKPOINT_LOAD)
_EARLY_SEQ = 10


def _marker(p: Placed) -> PhaseMarker:
    found = p.event.payload_as(PhaseMarker)
    return found if found is not None else PhaseMarker()


def _unlabelled_bar(marker: PhaseMarker) -> bool:
    """A tqdm meter printed without a description (``tqdm(items)``): parsers/logs/phases.py
    calls it training for want of a label."""
    return marker.progress is not None and not marker.described


def busy_owners(tl: Timeline, timed_out: set[int]) -> dict[int | None, tuple[Placed, str]]:
    """Last phase event per owner, for owners whose last phase is unfinished busy work,
    with the work's name. An unlabelled bar right after a phase marker of the same owner is
    that phase's loop: trainers log what they start and iterate ``tqdm(items)`` without a
    description (kohya-ss/sd-scripts: ``logger.info("caching latents...")`` then ``for … in
    tqdm(image_infos)``)."""
    last: dict[int | None, Placed] = {}
    named: dict[int | None, Placed] = {}
    for p in tl.of(EventKind.PHASE):
        if not _unlabelled_bar(_marker(p)):
            named[p.rank] = p
        last[p.rank] = p
    busy: dict[int | None, tuple[Placed, str]] = {}
    for owner, p in last.items():
        marker = _marker(p)
        phase, label = marker.phase, marker.label
        under = named.get(owner)
        if _unlabelled_bar(marker) and under is not None and _marker(under).marker:
            phase, label = _marker(under).phase, _marker(under).label
        if owner in timed_out or phase not in _BUSY:
            continue
        bar = marker.progress
        if bar is not None and bar.n is not None and bar.total is not None and bar.n >= bar.total:
            continue  # finished
        busy[owner] = (p, label or "its work")
    return busy


def _timeout_ms(p: Placed) -> int | None:
    """The timeout a collective's or a store's timeout line names."""
    payload = p.event.payload
    return payload.timeout_ms if isinstance(payload, (Work, StoreTimeout)) else None


def _bar_covers_timeout(busy: dict[int | None, tuple[Placed, str]], timeouts: list[Placed]) -> bool:
    """Past the first collectives, a busy bar counts only when it had run for (nearly) the
    whole collective timeout: tqdm's ``[elapsed<remaining, rate]`` against the watchdog's
    ``Timeout(ms)=`` (ms-swift 4340: ``Packing … [30:00<62:46:32`` and
    ``Timeout(ms)=1800000``; xtuner 390: tokenizing past the 30-minute default). The rank
    did that work for the entire time the others waited."""
    limits = [ms for p in timeouts if (ms := _timeout_ms(p)) is not None]
    if not limits:
        return False
    elapsed = [
        bar.elapsed_s
        for p, _ in busy.values()
        if (bar := _marker(p).progress) is not None and bar.elapsed_s is not None
    ]
    return bool(elapsed) and max(elapsed) * 1000 >= 0.9 * min(limits)


def _glued_to_timeouts(tl: Timeline, meters: list[Placed]) -> bool:
    """A bar glued to the line after it (``Progress.glued``: tqdm ends no state of a bar
    with a newline) was live when that line was printed; when the next event of its text
    is a timeout, the bar was printed at the timeout lines, whether or not the line glued
    to it reads as one (a watchdog line a wrap or a shipper's stamp cut in two)."""
    glued: dict[str, list[Placed]] = {}
    for p in meters:
        meter = _marker(p).progress
        if meter is not None and meter.glued:
            glued.setdefault(p.event.source, []).append(p)
    if not glued:
        return False
    following: dict[int, Placed] = {}  # a glued bar's index: the first event after it
    for p in tl.events:
        line = p.event.line or 0
        for bar in glued.get(p.event.source, ()):
            if p is bar or line < (bar.event.line or 0):
                continue
            best = following.get(bar.index)
            if best is None or line < (best.event.line or 0):
                following[bar.index] = p
    timeout_kinds = (EventKind.COLLECTIVE_TIMEOUT, EventKind.STORE_TIMEOUT)
    return any(p.event.kind in timeout_kinds for p in following.values())


def _shown_advancing(
    tl: Timeline, busy: dict[int | None, tuple[Placed, str]], timeouts: list[Placed]
) -> bool:
    """The busy work is shown advancing when the others timed out (fixtures/cases/README.md):
    a bar or counter whose elapsed time covers the timeout (``_bar_covers_timeout``), one
    printed on or after the line of the first timeout in the same text (times across
    texts are not known to agree), one glued to the timeout lines that follow it
    (``_glued_to_timeouts``), or one whose elapsed time it does not print. A marker
    alone, or a bar seconds into the work and nothing after it, shows the work only
    starting."""
    meters = [p for p, _ in busy.values() if _marker(p).progress is not None]
    if not meters:
        return False
    if _bar_covers_timeout(busy, timeouts):
        return True
    # where each text's first timeout is: a bar on or after it was printed at the timeout
    first_line: dict[str, int] = {}
    for p in timeouts:
        line = p.event.line or 0
        first_line[p.event.source] = min(line, first_line.get(p.event.source, line))
    return any(
        (p.event.source in first_line and (p.event.line or 0) >= first_line[p.event.source])
        or (bar := _marker(p).progress) is None
        or bar.elapsed_s is None
        for p in meters
    ) or _glued_to_timeouts(tl, meters)


def _blocking_evidence(tl: Timeline) -> bool:
    if any(d.certain for d in first_deaths(tl)):
        return True
    causes = (
        EventKind.NCCL_TRANSPORT_ERROR,
        EventKind.COLLECTIVE_MISMATCH,
        EventKind.FR_MISMATCH,
        EventKind.FR_MISSING_RANKS,
        EventKind.MONITORED_BARRIER,
        EventKind.GPU_XID,
        EventKind.RAS_DEAD,
        EventKind.NCCL_CONFIG_ERROR,
        EventKind.NCCL_RESOURCE_ERROR,
    )
    return bool(tl.of(*causes))


class SlowRankWork(Rule):
    __doc__ = __doc__
    id = "HD039"
    name = "slow-rank-work-before-timeout"
    summary = "a timeout caused by long single-rank work (preprocessing, loading), not a hang"
    categories = (Category.NOT_A_HANG, Category.RANK_DIVERGENCE)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        timeouts = tl.of(EventKind.COLLECTIVE_TIMEOUT, EventKind.STORE_TIMEOUT)
        if not timeouts:
            return
        if (waits := barrier_waits_on_work(tl)) and not _blocking_evidence(tl):
            yield self._barrier_on_work(waits)
            return
        seqs = [w.seq for p in timeouts if (w := p.event.payload_as(Work)) and w.seq is not None]
        timed_out = {p.rank for p in timeouts if p.rank is not None}
        busy = busy_owners(tl, timed_out)
        if not busy:
            if not _blocking_evidence(tl):
                yield from self._counted(ctx, timeouts, timed_out)
            return
        if _blocking_evidence(tl):
            return
        if seqs and min(seqs) > _EARLY_SEQ and not _bar_covers_timeout(busy, timeouts):
            return
        culprits = sorted(r for r in busy if r is not None)
        if not culprits and gate_waits(tl):
            # A bar no rank is named on, while ranks waited at a rank-0-first gate: the
            # gated work is the main process's (views/gates.py).
            culprits = [MAIN_RANK]
        bar, label = next(iter(busy.values()))
        marker = _marker(bar)
        meter = marker.progress
        if not _shown_advancing(tl, busy, timeouts):
            # Only the work's start is shown, no bar or counter advancing: the ranks
            # parted, but the artifacts do not time the work against the timeout
            # (fixtures/cases/README.md: slow work is shown advancing, else divergence).
            yield self._parted(culprits, label, bar, timeouts, timed_out)
            return
        if meter is not None and meter.meter:
            progress = f" ({meter.meter} after {meter.elapsed})"
        elif meter is not None:
            progress = f" ({meter.pct}%, its counts cut off)"  # a meter cut after its bar
        else:
            progress = ""
        who = (
            ranks_text(culprits)
            if culprits
            else "the process printing the progress bar (usually rank 0)"
        )
        timeout_ms = next((v for p in timeouts if (v := _timeout_ms(p)) is not None), None)
        limit = (
            f"{timeout_ms / 60000:.0f} min"
            if timeout_ms and timeout_ms >= 60000
            else (f"{timeout_ms / 1000:.0f} s" if timeout_ms else "the collective timeout")
        )
        yield Finding(
            rule=self.id,
            category=Category.NOT_A_HANG,
            severity=Severity.ERROR,
            title=f"not a hang: {who} was still in '{label}'{progress} when "
            f"{ranks_text(timed_out) if timed_out else 'the others'} timed out",
            explanation=(
                f"{who} was busy with '{label}'{progress}, single-rank work that was still "
                f"progressing, while the other ranks waited in an early collective and hit "
                f"the timeout ({limit}). Nothing was deadlocked: the work needed more time "
                "than the timeout allows."
            ),
            fix=(
                "Raise the process-group timeout for this phase (init_process_group("
                "timeout=timedelta(hours=2)), HF --ddp_timeout, Accelerate "
                "InitProcessGroupKwargs) or do the work offline and cache it (preprocess the "
                "dataset once, more num_proc, load shards on every rank in parallel)."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(sorted(timed_out)),
            evidence=(bar.ref(), *(p.ref() for p in timeouts[:3])),
            strength=Strength.SIGNAL,  # work still progressing when the others timed out
            says_not_hung=True,
        )

    def _barrier_on_work(self, waits: list[Placed]) -> Finding:
        """init_process_group's store-based barrier waited, its wait lines glued after a
        live progress bar of the ranks not yet counted, advancing past the barrier's own
        timeout (views/barrier_work.py): their work before set-up was slow, not stuck."""
        first = waits[0].event.payload_as(StoreTimeout)
        assert first is not None
        meter, elapsed = first.meter or "?", first.meter_elapsed_s or 0
        limit = (first.barrier_timeout_ms or 0) // 1000
        waiting = sorted({p.rank for p in waits if p.rank is not None})
        who = ranks_text(waiting) if waiting else "a rank"
        counted = (
            f" ({first.joined} of {first.expected} ranks counted)"
            if first.joined is not None and first.expected
            else ""
        )
        return Finding(
            rule=self.id,
            category=Category.NOT_A_HANG,
            severity=Severity.ERROR,
            title=f"not a hang: {who} waited in init_process_group's store barrier{counted} "
            f"while the others' work was still advancing ({meter} after "
            f"{elapsed // 60}:{elapsed % 60:02d}, past the barrier's {limit // 60}-minute "
            "timeout)",
            explanation=(
                f"{who} logged its wait in the store-based barrier of init_process_group"
                f"{counted} glued after another process's live progress bar ({meter}, "
                f"{elapsed // 60}:{elapsed % 60:02d} elapsed, with a rate: tqdm ends no state "
                "of a bar with a newline, so the wait was logged as the bar stood). The ranks "
                "not counted had not called init_process_group yet: they were doing work of "
                f"their own, still advancing after longer than the barrier waits ({limit} s). "
                "Nothing was stuck: the work before the process group's set-up took longer "
                "than its timeout."
            ),
            fix=(
                "Raise the process-group timeout (init_process_group(timeout=timedelta("
                "hours=2)), or the framework's setting for it), or do the per-rank work "
                "(preparing or caching the dataset) before the job, or after "
                "init_process_group on every rank with a longer timeout."
            ),
            waiting_ranks=tuple(waiting),
            evidence=tuple(p.ref() for p in waits[:3]),
            # the work shown advancing at the wait, the barrier's own timeout in its line
            strength=Strength.SIGNAL,
            says_not_hung=True,
        )

    def _counted(
        self, ctx: RuleContext, timeouts: list[Placed], timed_out: set[int]
    ) -> Iterable[Finding]:
        """No framework's bar or marker, but a counter of the job's own work
        (views/counters.py) that goes on after the first timeout line of its file, its
        clock (where it prints one) at least the timeout: the work was advancing when the
        others gave up (fixtures/cases/README.md: slow work is shown advancing)."""
        first: dict[str, int] = {}
        for p in timeouts:
            if p.event.line:
                first[p.event.source] = min(p.event.line, first.get(p.event.source, p.event.line))
        limits = [ms for p in timeouts if (ms := _timeout_ms(p)) is not None]
        for counter in counters_past(ctx.evidence, first):
            clock = counter.after_elapsed_s or counter.elapsed_s
            if limits and clock is not None and clock * 1000 < 0.9 * min(limits):
                continue  # its work had not yet run as long as the others waited
            yield self._counter_finding(counter, timeouts, timed_out, limits)
            return

    def _counter_finding(
        self,
        counter: Counter,
        timeouts: list[Placed],
        timed_out: set[int],
        limits: list[int],
    ) -> Finding:
        last, after = counter.lines[-1], counter.after
        assert after is not None
        who = (
            f"rank {counter.rank}"
            if counter.rank is not None
            else "the process printing the counter"
        )
        waited = ranks_text(sorted(timed_out)) if timed_out else "the others"
        limit = f"{min(limits) / 1000:.0f} s" if limits else "the collective timeout"
        clock = counter.after_elapsed_s or counter.elapsed_s
        ran = f", {clock:.0f} s into the work," if clock is not None else ""
        return Finding(
            rule=self.id,
            category=Category.NOT_A_HANG,
            severity=Severity.ERROR,
            title=f"not a hang: {who} was still counting its work ('{last.text.strip()[:60]}') "
            f"when {waited} timed out",
            explanation=(
                f"{who} printed a count of its own work that grew line after line "
                f"({len(counter.lines)} lines up to '{last.text.strip()[:80]}') and went on "
                f"after the timeout line ('{after.text.strip()[:80]}'){ran} while {waited} "
                f"waited in a collective past the timeout ({limit}). Nothing was stuck: the "
                "work took longer than the timeout allows."
            ),
            fix=(
                "Raise the process-group timeout for this phase (init_process_group("
                "timeout=timedelta(hours=2)), HF --ddp_timeout, Accelerate "
                "InitProcessGroupKwargs), or make the work shorter or do it ahead of the job "
                "(skip a resume's data fast-forward with a sampler that starts at the saved "
                "position)."
            ),
            culprit_ranks=(counter.rank,) if counter.rank is not None else (),
            waiting_ranks=tuple(sorted(timed_out)),
            evidence=(
                EvidenceRef(last.source, last.text.strip()[:300], counter.rank, last.line),
                EvidenceRef(after.source, after.text.strip()[:300], counter.rank, after.line),
                *(p.ref() for p in timeouts[:2]),
            ),
            strength=Strength.SIGNAL,  # its work still advancing after the timeout line
            says_not_hung=True,
        )

    def _parted(
        self,
        culprits: list[int],
        label: str,
        began: Placed,
        timeouts: list[Placed],
        timed_out: set[int],
    ) -> Finding:
        who = ranks_text(culprits) if culprits else "a process (rank unknown)"
        waited = ranks_text(sorted(timed_out)) if timed_out else "the others"
        return Finding(
            rule=self.id,
            category=Category.RANK_DIVERGENCE,
            severity=Severity.ERROR,
            title=f"{who} began '{label}' alone while {waited} waited in a collective "
            "and timed out",
            explanation=(
                f"{who} started '{label}', work that only it does, and printed nothing "
                f"after it, while {waited} waited in an early collective until the "
                "timeout. The ranks parted: the others were in a collective this one had "
                "not reached. Nothing here shows the work still advancing when they timed "
                "out (no progress bar or counter), so whether it was slow or stuck is not "
                "shown."
            ),
            fix=(
                "Do the single-rank work before the collectives or on every rank (cache "
                "it offline), and check that the work finishes: time it alone; if it is "
                "only slow, raise the process-group timeout for this phase."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(sorted(timed_out)),
            evidence=(began.ref(), *(p.ref() for p in timeouts[:3])),
            strength=Strength.SIGNAL,  # the ranks parted, as the lines show
        )


RULE = SlowRankWork
