"""The watch loop: follow a job's ranks with cheap signals, confirm a stall, hand it over.

Every ``poll_s`` the loop reads each rank's /proc signals (signals.py), and on their own
cadences the GPUs and the flight recorders (probes.py); every ``rescan_s`` it looks for
ranks that started or ended (a launcher's new workers, ``--all``'s new ranks). Anything
that moved resets the clock. When nothing moved for ``stall_after_s``:

1. three nonblocking stack samples of every rank across ``confirm_s``, the cheap signals
   polled in between (they end the check if they move); a rank with fewer than two read
   samples whose dumps failed only as reads race a running process gets more, up to
   ``MAX_SHOTS`` (a failure that says nothing of the rank cannot confirm that it stopped);
2. a thread that counts (stacks.py) at another place in two samples in a row is a job
   that works without output: not stuck. A blocked process does not change while
   py-spy reads it, so a nonblocking read of it is exact; only running ones can tear;
3. the stall goes to the handler: on one node it collects, analyzes and reports
   (hangdoc/watch/report.py); on a node of a Slurm job it tells the watcher on the
   login node, which collects the whole job.

A reported stall is not reported again until something moves (a job that resumes and
hangs again gets a new report); a stall the analysis calls "not hung" is checked again
after another ``stall_after_s`` of quiet. The loop ends when the job does: every rank
and every ``--pid`` root gone (``--all``: no rank for ``end_grace_s``). It never signals
the job; a SIGTERM to the watcher only stops the watching (``stop``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hangdoc.collectors import procfs, pyspy
from hangdoc.collectors.discovery import DiscoveredRank, scan_for_watch
from hangdoc.collectors.watch import signals, stacks
from hangdoc.collectors.watch.probes import FlightRecorderProbe, GpuProbe
from hangdoc.collectors.watch.stall import (
    Exited,
    Outcome,
    Say,
    Stall,
    StallHandler,
    Stop,
    rank_label,
)
from hangdoc.errors import CollectionError

CLOCK_TICKS = 100  # USER_HZ: /proc reports CPU time in 1/100 s on every Linux
# Stack samples across the confirmation window: a loop that spends most of its time in one
# hot function is caught elsewhere by one of them more often than by two.
CONFIRM_SHOTS = 3
MAX_SHOTS = 2 * CONFIRM_SHOTS  # while a rank's dumps only raced it (stacks.RACES)


@dataclass(frozen=True)
class Scope:
    """Which processes: ``pids`` (ranks or launchers), and/or every rank (``all``); on a
    shared node only those whose environment has every ``match_env`` value."""

    pids: tuple[int, ...] = ()
    all: bool = False
    match_env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class LoopOptions:
    scope: Scope
    stall_after_s: float = 120.0
    poll_s: float | None = None  # default: stall_after_s / 10, within [0.5, 5]
    confirm_s: float | None = None  # default: stall_after_s / 6, within [1, 5]
    rescan_s: float = 5.0
    start_timeout_s: float | None = None  # --all: no rank by then is an error
    end_grace_s: float = 10.0  # --all: no rank for this long is the end of the job
    step_timeout_s: float = 20.0
    gpu_every_s: float = 15.0  # nvidia-smi's cadence (NVML is read at every poll)
    fr_every_s: float | None = None  # default: stall_after_s / 3, at least 10

    @property
    def poll(self) -> float:
        return self.poll_s or min(5.0, max(0.5, self.stall_after_s / 10))

    @property
    def confirm(self) -> float:
        return self.confirm_s or min(5.0, max(1.0, self.stall_after_s / 6))


@dataclass
class _Rank:
    found: DiscoveredRank
    follow: dict[int, str]
    last: signals.Reading
    quiet_ticks: int = 0  # CPU used since the last movement (recorded, not counted)

    @property
    def pid(self) -> int:
        return self.found.target.pid

    @property
    def key(self) -> tuple[int, int | None]:
        return (self.pid, self.found.start_ticks)

    def label(self) -> str:
        return rank_label(self.found.target.rank, self.pid)

    def outputs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for fd, p in sorted(self.follow.items()) if fd in (1, 2)))


@dataclass
class WatchResult:
    reported: int
    why_ended: str
    exited: list[Exited] = field(default_factory=list)


class Watcher:
    """One watch of one node; see the module doc."""

    def __init__(self, opts: LoopOptions, handler: StallHandler, say: Say, stop: Stop) -> None:
        self.opts = opts
        self.handler = handler
        self.say = say
        self.stop = stop
        self.exe = pyspy.find_pyspy()
        self.ranks: dict[tuple[int, int | None], _Rank] = {}
        self.exited: list[Exited] = []
        self.roots_alive = bool(opts.scope.pids)
        self.began = time.monotonic()
        self.last_move = self.began
        self.last_rank_seen: float | None = None
        self.rescanned = -float("inf")
        self.handed = False  # a stall went to the handler and nothing moved since
        self.suppressed = False  # it was reported: no new check until something moves
        self.reported = 0
        self.gpu = GpuProbe(opts.gpu_every_s)
        self.fr = FlightRecorderProbe(opts.fr_every_s or max(10.0, opts.stall_after_s / 3))

    # --- the loop ----------------------------------------------------------------------

    def run(self) -> WatchResult:
        self._rescan(time.monotonic())
        if not self.ranks and self.opts.scope.pids and not self.roots_alive:
            raise CollectionError(
                "none of the processes exists: " + ", ".join(str(p) for p in self.opts.scope.pids),
                help_text="Check the pids with `ps -p PID`; a launcher's pid (torchrun, "
                "srun, a shell script) stands for the ranks it starts.",
            )
        self._intro()
        while not self.stop.is_set():
            now = time.monotonic()
            if not self.ranks or now - self.rescanned >= self.opts.rescan_s:
                self._rescan(now)
            ended = self._ended(now)
            if ended is not None:
                return WatchResult(self.reported, ended, self.exited)
            reasons = self._poll(now)
            if reasons and self.handed and self.handler.collecting():
                reasons = []  # the job-wide collection's own footprint, not progress
            if reasons:
                self._moved(now, reasons)
            elif self._due(now):
                self._check(now)
                continue  # the check took time: look again at once
            self.stop.wait(self.opts.poll)
        return WatchResult(self.reported, "told to stop", self.exited)

    def _intro(self) -> None:
        scope = self.opts.scope
        what = []
        if scope.pids:
            what.append("pid " + ",".join(str(p) for p in scope.pids))
        if scope.all:
            what.append("every rank process on this node")
        ranks = ", ".join(r.label() for r in self._live()) or "none yet"
        self.say(
            f"watching {' and '.join(what)} (ranks now: {ranks}); a stall is checked after "
            f"{self.opts.stall_after_s:g} s without progress"
        )

    # --- ranks that come and go ----------------------------------------------------------

    def _rescan(self, now: float) -> None:
        self.rescanned = now
        scope = self.opts.scope
        scan = scan_for_watch(scope.pids, scan_all=scope.all)
        self.roots_alive = bool(scan.live_roots)
        found = [d for d in scan.ranks if all(d.target.env.get(k) == v for k, v in scope.match_env)]
        current = {(d.target.pid, d.start_ticks) for d in found}
        for key in [k for k in self.ranks if k not in current]:
            dropped = self.ranks[key]
            if signals.read(dropped.pid, dropped.found.start_ticks, {}).alive:
                del self.ranks[key]  # a program that went on to launch ranks: those count
                self.say(f"{dropped.label()} launched ranks: watching those instead")
        moved: list[str] = []
        for d in found:
            key = (d.target.pid, d.start_ticks)
            known = self.ranks.get(key)
            if known is not None:
                known.follow = signals.written_files(d.target.pid) or known.follow
                continue
            follow = signals.written_files(d.target.pid)
            rank = _Rank(d, follow, signals.read(d.target.pid, d.start_ticks, follow))
            if not rank.last.alive:
                continue
            self.ranks[key] = rank
            moved.append(f"{rank.label()} started")
            self.say(f"{rank.label()} is watched" + (f" ({d.how_found})" if d.how_found else ""))
        if self.ranks:
            self.last_rank_seen = now
        if moved:
            self._moved(now, moved)

    def _live(self) -> list[_Rank]:
        return sorted(self.ranks.values(), key=_rank_order)

    def _ended(self, now: float) -> str | None:
        if self.ranks:
            return None
        if self.opts.scope.pids:
            self.roots_alive = any(procfs.is_alive(p) for p in self.opts.scope.pids)
            if not self.roots_alive and not self.opts.scope.all:
                return "the job ended: " + self._gone_text()
        if self.last_rank_seen is None:
            limit = self.opts.start_timeout_s
            if limit is not None and now - self.began >= limit and not self.roots_alive:
                raise CollectionError(
                    f"no rank process appeared within {limit:g} s",
                    help_text="Start watch on a node of the job (as root or the job's user), "
                    "or name the job's launcher or ranks with --pid.",
                )
            return None
        grace_over = now - self.last_rank_seen >= self.opts.end_grace_s
        if self.opts.scope.all and grace_over and not self.roots_alive:
            return "the job ended: " + self._gone_text()
        return None

    def _gone_text(self) -> str:
        if not self.exited:
            return "its processes exited"
        shown = "; ".join(f"{e.label()} {e.how}" for e in self.exited[-8:])
        return f"every rank exited ({shown})"

    # --- signals -----------------------------------------------------------------------

    def _poll(self, now: float) -> list[str]:
        reasons: list[str] = []
        for key, rank in list(self.ranks.items()):
            reading = signals.read(rank.pid, rank.found.start_ticks, rank.follow)
            if not reading.alive:
                # An ending rank restarts the clock (the survivors get stall_after to show
                # whether they go on without it) but is not the job moving again.
                self.last_move = now
                self._gone(key, rank, reading)
                continue
            movement = signals.compare(rank.last, reading)
            rank.last = reading
            rank.quiet_ticks += movement.cpu_ticks
            reasons.extend(f"{rank.label()}: {why}" for why in movement.reasons)
            if fr := self.fr.poll(now, rank.found.target):
                reasons.append(f"{rank.label()}: {fr}")
        if self.ranks:
            reasons.extend(self.gpu.poll(now, {r.pid for r in self.ranks.values()}))
        return reasons

    def _gone(self, key: tuple[int, int | None], rank: _Rank, reading: signals.Reading) -> None:
        del self.ranks[key]
        how = signals.describe_exit(reading.exit_code) if reading.state else "exited"
        gone = Exited(rank.found.target.rank, rank.pid, time.time(), how, rank.outputs())
        self.exited.append(gone)
        self.say(f"{gone.label()} {how}")

    def _moved(self, now: float, reasons: list[str]) -> None:
        self.last_move = now
        for rank in self.ranks.values():
            rank.quiet_ticks = 0
        self.suppressed = False
        if self.handed:
            self.handed = False
            self.handler.resumed(reasons)

    def _due(self, now: float) -> bool:
        quiet = now - self.last_move
        return bool(self.ranks) and not self.suppressed and quiet >= self.opts.stall_after_s

    # --- confirmation ----------------------------------------------------------------------

    def _check(self, now: float) -> None:
        detected_at = time.time()
        quiet_since = detected_at - (now - self.last_move)
        self.say(
            f"no progress for {now - self.last_move:.0f} s on {len(self.ranks)} rank(s); "
            "confirming with stack samples (py-spy --nonblocking, no rank paused)"
        )
        second = self._shots()
        readable = {pid: shot for pid, shot in second.items() if not shot.error}
        reads = {pid: 1 for pid in readable}
        taken = 1
        while taken < CONFIRM_SHOTS or (taken < MAX_SHOTS and _unsettled(second, reads)):
            if self._wait(self.opts.confirm / (CONFIRM_SHOTS - 1)):
                return
            second = self._shots()
            taken += 1
            # each rank's new shot against its last readable one: a dump that failed in
            # between is no evidence that nothing moved
            moved = _first_change(readable, second, self.ranks)
            if moved is not None:
                self.say(f"not stuck: {moved} (working without output)")
                self._moved(time.monotonic(), [moved])
                return
            for pid, shot in second.items():
                if not shot.error:
                    readable[pid] = shot
                    reads[pid] = reads.get(pid, 0) + 1
        notes = [f"stacks of {pid} not read: {s.error}" for pid, s in second.items() if s.error]
        notes.extend(self._busy_notes(time.monotonic() - self.last_move))
        stall = Stall(
            quiet_since=quiet_since,
            detected_at=detected_at,
            confirmed_at=time.time(),
            ranks=tuple(r.found for r in self._live()),
            exited=tuple(self.exited),
            notes=tuple(notes),
        )
        outcome = self.handler.stalled(stall)
        self._rebaseline()  # the collection itself reads from the ranks (the store, the FR)
        self.handed = True
        if outcome is Outcome.REPORTED:
            self.reported += 1
            self.suppressed = True
        else:  # look again after another quiet period (the clock restarts, quietly)
            self.last_move = time.monotonic()

    def _rebaseline(self) -> None:
        """Take the ranks' readings afresh, so that what the collection did to them (a
        request to the job's store moves rank 0's I/O counters) is not progress."""
        for rank in self.ranks.values():
            reading = signals.read(rank.pid, rank.found.start_ticks, rank.follow)
            if reading.alive:
                rank.last = reading

    def _shots(self) -> dict[int, stacks.StackShot]:
        timeout = min(self.opts.step_timeout_s, 10.0)
        return {r.pid: stacks.take(r.pid, self.exe, timeout) for r in self._live()}

    def _wait(self, seconds: float) -> bool:
        """Wait ``seconds`` polling the cheap signals; True (and the clock reset) if they moved."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self.stop.wait(min(self.opts.poll, left)):
                return True
            now = time.monotonic()
            reasons = self._poll(now)
            if reasons:
                self.say(f"not stuck: {reasons[0]}")
                self._moved(now, reasons)
                return True
        return False

    def _busy_notes(self, quiet_s: float) -> list[str]:
        notes = []
        for rank in self._live():
            share = rank.quiet_ticks / CLOCK_TICKS / max(quiet_s, 1e-6)
            if share >= 0.2:
                notes.append(
                    f"{rank.label()} used {share:.0%} of a core while nothing moved "
                    "(a thread spinning: a busy-wait, a GIL holder, a CUDA/NCCL wait)"
                )
        return notes


def _unsettled(latest: dict[int, stacks.StackShot], reads: dict[int, int]) -> bool:
    """Whether a rank has not been read twice yet only because its dumps raced it."""
    return any(
        reads.get(pid, 0) < 2 and (shot.raced or not shot.error) for pid, shot in latest.items()
    )


def _first_change(
    before: dict[int, stacks.StackShot],
    after: dict[int, stacks.StackShot],
    ranks: dict[tuple[int, int | None], _Rank],
) -> str | None:
    labels = {r.pid: r.label() for r in ranks.values()}
    for pid, shot in before.items():
        later = after.get(pid)
        if later is None:
            continue
        change = stacks.change(shot, later)
        if change is not None:
            return f"{labels.get(pid, f'pid {pid}')}: {change}"
    return None


def _rank_order(rank: _Rank) -> tuple[bool, int, int]:
    number = rank.found.target.rank
    return (number is None, number or 0, rank.pid)
