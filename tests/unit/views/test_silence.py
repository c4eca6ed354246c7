"""Silence as evidence (analyzer/views/silence.py): hand-built evidence for each reading,
then the real pastes and recordings it was drawn from.

The hand-built events carry the typed payloads torch's lines are read into
(payloads/torch_pg.py); no line is parsed here."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Evidence, LogEvent, LogLine, ProcessEvidence, Strength
from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.analyzer.payloads.nccl import NcclInit
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import (
    CollectiveTimeout,
    DumpSignal,
    InGroup,
    Reporter,
    WatchdogStatus,
)
from hangdoc.analyzer.views.silence import (
    Cover,
    SeqFrom,
    SizeFrom,
    job_size,
    own_timeout,
    silence,
)
from hangdoc.analyzer.views.timeline import Timeline
from hangdoc.analyzer.vocabulary import Clock, EventKind
from hangdoc.paste_mangling import twice
from hangdoc.rules.hd049_unheard_rank import unheard_suspects
from hangdoc.rules.strength import Shift

ROOT = Path(__file__).resolve().parents[3]
CASES = ROOT / "fixtures" / "cases"
RECORDED = ROOT / "fixtures" / "logs" / "recorded"

_DEFAULT = InGroup(pg="0", pg_id=0, pg_desc="default_pg")


def _event(
    kind: EventKind, payload: EventPayload, line: int, when: float | None = None
) -> LogEvent:
    return LogEvent(
        kind, kind.value, "console.txt", line, when, payload, clock=Clock.LOCAL if when else None
    )


def _proc(rank: int, *events: LogEvent, world: int | None = None) -> ProcessEvidence:
    return ProcessEvidence(rank=rank, world_size=world, log_events=list(events))


def _timeout(rank: int, seq: int, when: float | None = None) -> ProcessEvidence:
    payload = CollectiveTimeout(pg="0", pg_id=0, pg_desc="default_pg", seq=seq, op="ALLREDUCE")
    return _proc(rank, _event(EventKind.COLLECTIVE_TIMEOUT, payload, rank + 1, when))


def _dump(rank: int, enq: int, done: int, *, peer: int | None) -> ProcessEvidence:
    """The heartbeat monitor's "Received a dump signal … from (this local rank| rank R) …
    Last enqueued NCCL work: enq, last completed NCCL work: done" of the default group."""
    payload = DumpSignal(
        pg="0",
        pg_id=0,
        pg_desc="default_pg",
        last_enqueued=enq,
        last_completed=done,
        reporter=Reporter.SELF if peer is None else Reporter.PEER,
        peer_rank=peer,
    )
    return _proc(rank, _event(EventKind.DUMP_SIGNAL, payload, 10 + rank))


def _view(evidence: Evidence):  # type: ignore[no-untyped-def]
    return silence(evidence, Timeline(evidence))


def test_a_dump_signal_from_this_rank_is_its_own_timeout_one_naming_another_a_notice() -> None:
    evidence = Evidence(processes=[_dump(0, 5, 4, peer=None), _dump(1, 4, 4, peer=0)])
    tl = Timeline(evidence)
    kinds = {p.rank: own_timeout(p) for p in tl.events}
    assert kinds == {0: True, 1: False}
    view = silence(evidence, tl)
    assert view.timed_out == (0,) and view.notified_only == (1,)
    assert [p.rank for p in view.voices[0].reported] == [1]  # rank 1 says rank 0 timed out


def test_a_notified_rank_with_nothing_in_flight_never_entered_the_collective() -> None:
    # Ranks 0 and 2 wait in work 5 (enqueued up to 6, completed 4); rank 1 was reached
    # by rank 0's signal with every work it enqueued completed: it never entered 5.
    evidence = Evidence(
        processes=[_dump(0, 6, 4, peer=None), _dump(1, 4, 4, peer=0), _dump(2, 6, 4, peer=0)]
    )
    view = _view(evidence)
    (behind,) = view.behind
    assert behind.seq == 5 and behind.seq_from is SeqFrom.INFERRED
    assert behind.ranks == (1,) and behind.waiting == (0, 2)
    assert behind.last_enqueued == {1: 4}


def test_every_rank_idle_in_the_printing_group_is_no_one_behind() -> None:
    # A dump signal from this local rank with nothing in flight in the default group:
    # the watchdog fired in another group (llamafactory #9496's shape, below).
    evidence = Evidence(processes=[_dump(4, 2, 2, peer=None), _dump(5, 2, 2, peer=None)])
    assert _view(evidence).behind == ()


def test_a_stated_sequence_number_wins_over_the_status() -> None:
    status = WatchdogStatus(pg="0", pg_id=0, seq=808, last_enqueued=811, last_completed=807)
    ahead = _proc(0, _event(EventKind.WATCHDOG_STATUS, status, 1))
    evidence = Evidence(processes=[ahead, _timeout(1, 808), _dump(2, 807, 807, peer=0)])
    (behind,) = _view(evidence).behind
    assert (behind.seq, behind.seq_from, behind.ranks) == (808, SeqFrom.STATED, (2,))


def test_job_size_from_world_size_and_nccl_agrees_and_a_larger_rank_voids_it() -> None:
    init = _event(EventKind.NCCL_INIT, NcclInit(rank=0, nranks=4), 1)
    evidence = Evidence(processes=[_proc(0, init, world=4)])
    job = job_size(evidence, Timeline(evidence))
    assert job.world == 4 and job.said_by == (SizeFrom.WORLD_SIZE, SizeFrom.NCCL_NRANKS)
    evidence = Evidence(processes=[_proc(0, init), _timeout(6, 3)])
    assert job_size(evidence, Timeline(evidence)).world is None  # a group's size, not the job's


def test_unheard_ranks_of_a_known_job_and_the_hint_for_one() -> None:
    procs = [_timeout(r, 3) for r in (0, 1, 2)]
    procs[0].world_size = 4
    view = _view(Evidence(processes=procs))
    assert view.unheard == (3,) and view.unheard_below == 4 and view.quiet == ()
    one = unheard_suspects(view)
    assert one is not None and one.ranks == (3,) and one.strength is Strength.HINT
    # Without the job's size the one gap below the highest is weaker; two gaps say nothing.
    gap = unheard_suspects(_view(Evidence(processes=[_timeout(r, 3) for r in (0, 1, 3)])))
    assert gap is not None and gap.ranks == (2,) and gap.weakened_by == (Shift.SIZE_NOT_STATED,)
    assert gap.strength is Strength.ABSENCE
    gaps = _view(Evidence(processes=[_timeout(r, 3) for r in (0, 3)]))
    assert gaps.unheard == (1, 2) and unheard_suspects(gaps) is None


def test_few_unheard_of_many_or_a_quiet_rank_beside_weaken_the_hint() -> None:
    # Two of ten unheard while eight timed out: either may be the one.
    procs = [_timeout(r, 3) for r in range(8)]
    procs[0].world_size = 10
    two = unheard_suspects(_view(Evidence(processes=procs)))
    assert two is not None and two.ranks == (8, 9) and two.weakened_by == (Shift.SEVERAL_SILENT,)
    # Three of twelve: more than one per four that timed out is a partial paste.
    procs[0].world_size = 12
    assert unheard_suspects(_view(Evidence(processes=procs))) is None
    # Rank 2 printed a line but no timeout, rank 3 nothing: two silent ranks.
    step = _event(EventKind.PHASE, PhaseMarker(), 3)
    quiet = [_timeout(0, 3), _timeout(1, 3), _proc(2, step)]
    quiet[0].world_size = 4
    view = _view(Evidence(processes=quiet))
    assert view.quiet == (2,) and view.unheard == (3,)
    found = unheard_suspects(view)
    assert found is not None and found.strength is Strength.ABSENCE


def test_a_rank_named_by_another_rank_is_heard_of() -> None:
    # Rank 1 only appears in rank 2's dump signal ("from rank 1"): it timed out; not unheard.
    procs = [_timeout(0, 5), _dump(2, 4, 4, peer=1), _timeout(3, 5)]
    view = _view(Evidence(processes=procs))
    assert view.unheard == () and view.voices[1].reported


def test_the_first_to_time_out_is_first_by_time_beyond_the_watchdogs_poll() -> None:
    early = _view(Evidence(processes=[_timeout(0, 3, 100.0), _timeout(1, 3, 160.0)]))
    assert early.first is not None and early.first.rank == 0
    together = _view(Evidence(processes=[_timeout(0, 3, 100.0), _timeout(1, 3, 101.0)]))
    assert together.first is None
    untimed = _view(Evidence(processes=[_timeout(0, 3), _timeout(1, 3)]))
    assert untimed.first is None  # line order in a paste is no clock


def test_recorded_gloo_job_rank_2_is_quiet_not_unheard() -> None:
    # fixtures/record.py 'missing_rank': rank 2 prints its first step, then sleeps.
    view = _view(load_paths([RECORDED / "missing_rank.log"]))
    assert view.timed_out == (0, 1) and view.quiet == (2,) and view.unheard == ()


def test_a_rank_that_timed_out_in_another_group_is_not_quiet() -> None:
    # ms-swift #2443: rank 3's status line is of PG 1, rank 2's timeout has no PG prefix.
    view = _view(
        load_paths([CASES / "msswift-2443-multinode-broadcast-before-training" / "console.txt"])
    )
    assert view.timed_out == (2, 3) and view.quiet == ()


def test_real_pastes() -> None:
    idle = _view(
        load_paths([CASES / "llamafactory-9496-multinode-first-step-dump-signal" / "console.txt"])
    )
    assert idle.timed_out == (4, 5) and idle.behind == ()
    gap = _view(load_paths([CASES / "gcd-6-train-step-broadcast-timeout-ranks123" / "console.txt"]))
    assert gap.timed_out == (1, 2) and gap.unheard == (0,) and gap.unheard_below == 3
    lag = _view(
        load_paths([CASES / "qwenvlft-17-mixed-dataset-allreduce-seq-mismatch" / "console.txt"])
    )
    (behind,) = lag.behind
    assert behind.seq_from is SeqFrom.STATED and behind.ranks == (0,)


def test_hd032_names_a_rank_with_nothing_in_flight_as_a_signal_and_a_tie_as_a_hint() -> None:
    # The same shape as above, through the engine: torch's numbers imply work 5 rather
    # than state it, so HD032 says it as a signal; as many ranks on each side, a hint.
    evidence = Evidence(
        processes=[_dump(0, 6, 4, peer=None), _dump(1, 4, 4, peer=0), _dump(2, 6, 4, peer=0)]
    )
    (lag,) = [f for f in analyze(evidence).findings if f.rule == "HD032"]
    assert lag.culprit_ranks == (1,) and lag.waiting_ranks == (0, 2)
    assert lag.strength is Strength.SIGNAL and "never entered it" in lag.title
    evidence = Evidence(
        processes=[
            _dump(0, 6, 4, peer=None),
            _dump(1, 4, 4, peer=0),
            _dump(2, 6, 4, peer=0),
            _dump(3, 4, 4, peer=0),
        ]
    )
    (tie,) = [f for f in analyze(evidence).findings if f.rule == "HD032"]
    assert tie.culprit_ranks == (1, 3) and tie.strength is Strength.HINT


def _steps(rank: int, *numbered: tuple[int, int]) -> ProcessEvidence:
    """A rank's own progress lines ("epoch 3 step N loss … rank R") at these line numbers
    of the shared console."""
    lines = [
        LogLine(f"epoch 3 step {step} loss 0.{40 + rank} rank {rank}", "console.txt", at)
        for at, step in numbered
    ]
    return ProcessEvidence(rank=rank, log_lines=lines)


def _with_timeout(proc: ProcessEvidence, line: int, when: float | None = None) -> ProcessEvidence:
    payload = CollectiveTimeout(pg="0", pg_id=0, pg_desc="default_pg", seq=7, op="ALLREDUCE")
    proc.log_events.append(_event(EventKind.COLLECTIVE_TIMEOUT, payload, line, when))
    return proc


def test_a_quiet_rank_is_covered_by_a_line_of_its_own_after_the_others_timeout() -> None:
    # One console: rank 0 prints step 120 (line 2) and times out (line 3); rank 1 printed
    # step 120 at line 1. Nothing of rank 1 after line 3: its silence is not covered, and
    # its last line puts it at the others' step.
    cut = _view(Evidence(processes=[_with_timeout(_steps(0, (2, 120)), 3), _steps(1, (1, 120))]))
    assert cut.quiet == (1,) and cut.covered == {} and cut.abreast == (1,)
    # Its step 119 is behind rank 0's last step: not abreast.
    behind = _view(Evidence(processes=[_with_timeout(_steps(0, (2, 120)), 3), _steps(1, (1, 119))]))
    assert behind.covered == {} and behind.abreast == ()
    # Lines of rank 1 after the timeout: the console went on, and rank 1 with it.
    later = _view(
        Evidence(
            processes=[
                _with_timeout(_steps(0, (2, 120)), 3),
                _steps(1, (1, 120), (4, 121), (5, 122)),
            ]
        )
    )
    assert later.covered == {1: Cover.LATER_LINE} and later.abreast == ()
    # One line only: a shared console may have placed a line printed before the timeout
    # after it (the ranks' records taken in turn); it covers nothing.
    one = _view(
        Evidence(processes=[_with_timeout(_steps(0, (2, 120)), 3), _steps(1, (1, 120), (4, 121))])
    )
    assert one.covered == {}


def test_in_another_file_only_a_time_beyond_the_poll_and_the_skew_covers() -> None:
    # Rank 1's own file (rank1.log) with a timed line 1 s or 30 s after rank 0's timeout.
    def view(delay: float):  # type: ignore[no-untyped-def]
        mark = LogEvent(
            EventKind.PHASE, "step", "rank1.log", 1, 100.0 + delay, PhaseMarker(), clock=Clock.LOCAL
        )
        rank0 = _with_timeout(ProcessEvidence(rank=0), 3, 100.0)
        return _view(Evidence(processes=[rank0, _proc(1, mark)]))

    assert view(1.0).quiet == (1,) and view(1.0).covered == {}
    assert view(30.0).covered == {1: Cover.LATER_LINE}


def test_a_cut_paste_and_a_whole_console() -> None:
    # cosyvoice #517: both ranks print batch 37700 in the same second, rank 0's watchdog
    # line, its traceback, and the excerpt ends: nothing of rank 1 after the timeout.
    cut = _view(load_paths([CASES / "cosyvoice-517-epoch-end-allreduce-timeout" / "console.txt"]))
    assert cut.timed_out == (0,) and cut.quiet == (1,)
    assert cut.covered == {} and cut.abreast == (1,)
    # fixtures/record.py 'missing_rank': the console runs to the launcher's report that it
    # ended rank 2 (SIGTERM) after the others' timeouts.
    whole = _view(load_paths([RECORDED / "missing_rank.log"]))
    assert whole.covered == {2: Cover.LAUNCHER}


def test_hd032_weighs_a_silence_by_what_covers_it() -> None:
    def hd032(path: Path):  # type: ignore[no-untyped-def]
        return [f for f in analyze(load_paths([path])).findings if f.rule == "HD032"]

    # The cut paste of a rank last seen at the others' batch: no culprit.
    assert hd032(CASES / "cosyvoice-517-epoch-end-allreduce-timeout" / "console.txt") == []
    # The whole console: a hint, as before.
    (whole,) = hd032(RECORDED / "missing_rank.log")
    assert whole.culprit_ranks == (2,) and whole.strength is Strength.HINT
    assert "launcher's report of its end" in whole.explanation
    # ms-swift #4340's excerpt: rank 6's traceback (inside the same broadcast), then rank
    # 7's timeout, and the paste continues past what was shown: a silence nothing shows
    # lasting, with nothing that says where rank 6 was, names no cause.
    cut = CASES / "msswift-4340-rank0-packing-broadcast-timeout" / "traceback_rank6_rank7.txt"
    assert hd032(cut) == []


def test_a_paste_given_twice_repeats_lines_and_covers_nothing(tmp_path: Path) -> None:
    # The second copy puts rank 1's lines after rank 0's timeout, word for word the ones
    # before it: nothing new of rank 1 came after.
    console = CASES / "cosyvoice-517-epoch-end-allreduce-timeout" / "console.txt"
    doubled = tmp_path / "console.txt"
    doubled.write_text(twice(console.read_text()))
    view = _view(load_paths([doubled]))
    assert view.quiet == (1,) and view.covered == {} and view.abreast == (1,)


def test_nccl_setup_lines_alone_do_not_make_a_rank_quiet() -> None:
    """NCCL's "… Init COMPLETE" is printed when the communicator comes up (init.cc), long
    before the collective the others time out in: it places the rank nowhere then. A line of
    the job's own after it does."""
    init = _event(EventKind.NCCL_INIT, NcclInit(rank=2, nranks=16), 1)
    evidence = Evidence(processes=[_proc(2, init), _timeout(4, 5653)])
    assert _view(evidence).quiet == ()
    step = _event(EventKind.PHASE, PhaseMarker(), 2)
    evidence = Evidence(processes=[_proc(2, init, step), _timeout(4, 5653)])
    assert _view(evidence).quiet == (2,)


def test_a_rank_heard_only_at_nccl_set_up_is_one_of_the_unheard() -> None:
    """An NCCL_DEBUG=INFO console prints every rank's "… Init COMPLETE" (init.cc) when its
    communicator comes up, then the watchdog's timeouts: a rank of which nothing else came
    is as silent as one of which nothing came at all (HD049 names it). A line of its own
    after its set-up makes it quiet instead, HD032's."""
    inits = [_event(EventKind.NCCL_INIT, NcclInit(rank=r, nranks=4), r + 1) for r in range(4)]
    procs = [_timeout(r, 7) for r in (0, 1, 3)]
    for proc in procs:
        proc.log_events.insert(0, inits[proc.rank or 0])
    evidence = Evidence(processes=[*procs, _proc(2, inits[2])])
    view = _view(evidence)
    assert view.unheard == () and view.quiet == () and view.setup_only == (2,)
    found = unheard_suspects(view)
    assert found is not None and found.ranks == (2,) and found.strength is Strength.HINT
    step = _event(EventKind.PHASE, PhaseMarker(), 9)
    evidence = Evidence(processes=[*procs, _proc(2, inits[2], step)])
    view = _view(evidence)
    assert view.setup_only == () and view.quiet == (2,)
    # A rank whose own timeout is there is not silent, set-up lines or not.
    evidence = Evidence(processes=[*procs, _timeout(2, 7)])
    assert _view(evidence).setup_only == ()


def test_hd049_names_the_rank_an_nccl_console_shows_only_coming_up(tmp_path: Path) -> None:
    """NCCL's init line (init.cc: "%s comm %p rank %d nranks %d cudaDev %d … Init
    COMPLETE") of every rank, then torch < 2.3's watchdog timeout ("[Rank N] Watchdog caught
    collective operation timeout: WorkNCCL(SeqNum=…)", ProcessGroupNCCL.cpp) of all but
    rank 3."""
    lines = [
        f"node1:10{r}:10{r} [{r}] NCCL INFO comm 0x55 rank {r} nranks 8 cudaDev {r} busId "
        f"{r}000 - Init COMPLETE"
        for r in range(8)
    ] + [
        f"[E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1201, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800561 "
        "milliseconds before timing out."
        for r in (0, 1, 2, 4, 5, 6, 7)
    ]
    console = tmp_path / "console.txt"
    console.write_text("\n".join(lines) + "\n")
    diagnosis = analyze(load_paths([console]))
    found = [f for f in diagnosis.findings if f.rule == "HD049"]
    assert found and found[0].culprit_ranks == (3,)
    assert "coming up" in found[0].explanation


def test_unnamed_groups_counters_far_apart_are_not_compared() -> None:
    """torch < 2.3 names no group on its timeout line: one rank's timeout at SeqNum 20,518
    and another's at 369,526 may be two groups' counters (or two runs'), as
    watchdog.apart reads them; a few apart they are one group's, and the rank at the
    earlier one stopped before the collective the other waits in."""

    def bare(rank: int, seq: int) -> ProcessEvidence:
        payload = CollectiveTimeout(seq=seq, op="ALLREDUCE")
        return _proc(rank, _event(EventKind.COLLECTIVE_TIMEOUT, payload, rank + 1))

    far = _view(Evidence(processes=[bare(4, 20518), bare(1, 369526)]))
    assert far.behind == ()
    near = _view(Evidence(processes=[bare(4, 369523), bare(1, 369526), bare(2, 369526)]))
    assert [b.ranks for b in near.behind] == [(4,)]


@pytest.mark.parametrize(("exit_code", "covered"), [("-6", False), ("-15", True), ("1", True)])
def test_an_abort_reported_by_the_launcher_covers_no_silence(
    tmp_path: Path, exit_code: str, covered: bool
) -> None:
    """torch's watchdog aborts the process whose collective timed out (SIGABRT, exit code
    -6): torchrun's report of such an end (elastic/multiprocessing/api.py "failed (exitcode:
    …) local_rank: …") says the rank may well have timed out too, its own line not in the
    text, so it shows no silence lasting. A SIGTERM or an error exit does."""
    log = tmp_path / "console.txt"
    log.write_text(
        "[rank1]: step 100 loss 0.5\n"
        "[rank0]: step 100 loss 0.5\n"
        "[rank0]: RuntimeError: NCCL communicator was aborted on rank 0.  Original reason for "
        "failure was: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum="
        "35582, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800070 milliseconds before "
        "timing out.\n"
        f"ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: {exit_code}) "
        "local_rank: 1 (pid: 886322) of binary: /usr/bin/python\n"
    )
    view = _view(load_paths([log]))
    assert view.quiet == (1,)
    assert (view.covered.get(1) is Cover.LAUNCHER) is covered
