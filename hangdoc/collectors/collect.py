"""``hangdoc collect``'s engine: discover the ranks, sample them, write a dump directory.

The flow, and why:

1. Discover the ranks first, so a typo in ``--pid`` fails before anything is written.
2. Write the manifest (``complete: false``) at once, then rewrite it after every rank:
   a collection killed half-way still leaves a readable dump of what it got.
3. Each sample visits the ranks back to back (/proc facts, then py-spy), so one sample
   is a near-simultaneous snapshot of the job; subprocesses (dataloader workers) are
   dumped after all ranks, so they do not stretch that snapshot. Samples start
   ``interval_s`` apart: progress between them separates "hung" from "slow".
4. The extra collectors (logs, flight recorder, GPU...) run once per rank at the end,
   exited ranks included: a dead rank's log is often the answer.

Nothing here signals, stops or kills a target; every step is bounded by a timeout and
recorded in the manifest with its outcome, failures included.
"""

from __future__ import annotations

import functools
import re
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hangdoc.collectors import extras, node_facts, procfs, pyspy
from hangdoc.collectors import flight_recorder as _flight_recorder  # noqa: F401  (registers)
from hangdoc.collectors import gpu as _gpu  # noqa: F401  (registers the GPU state step)
from hangdoc.collectors import logs as _logs  # noqa: F401  (registers the log copy step)
from hangdoc.collectors.bounded import StepTimeout, call_with_timeout
from hangdoc.collectors.discovery import DiscoveredRank, Discovery, discover
from hangdoc.collectors.dumpformat import (
    FORMAT,
    MANIFEST_NAME,
    PROCESS_FORMAT,
    PROCESS_NAME,
    Manifest,
    ProcessFile,
    ProcSampleRecord,
    RankRecord,
    StepRecord,
    StepStatus,
    pyspy_file_name,
    rank_dir_name,
)
from hangdoc.collectors.output import DumpWriter, redact_file
from hangdoc.common.archive import write_archive
from hangdoc.common.redact import allowlist_env, redact_argv, redact_json_bytes, redact_text
from hangdoc.common.version import __version__
from hangdoc.errors import CollectionError, HangdocError, UsageError

NO_REDACT_WARNING = (
    "collected with --no-redact: environment values, command lines, logs and stacks were "
    "written as they are, secrets included; do not attach this dump to a public ticket"
)
# Dataloader workers per rank dumped at each sample; more is rare and costs seconds.
MAX_SUBPROCESSES_PER_RANK = 16
# An extra collector must honour its timeout; past it plus this grace, we move on.
EXTRA_GRACE_S = 5.0
EXITED = "process exited"
SUBPROCESS_STEP = "pyspy-subprocess"


@dataclass(frozen=True)
class CollectOptions:
    pids: tuple[int, ...] = ()
    all: bool = False
    out: Path | None = None
    samples: int = 2
    interval_s: float = 3.0
    native: bool = False
    subprocesses: bool = True
    nonblocking: bool = False
    step_timeout_s: float = 20.0
    archive: bool = False
    redact: bool = True
    extra_paths: tuple[Path, ...] = ()
    # Whole-job collection (issue 8): only ranks whose environment has these values (a
    # node shared by several jobs: SLURM_JOB_ID=<the job>).
    match_env: tuple[tuple[str, str], ...] = ()


# Runs on the finished dump before it is archived (the CLI writes the node summary);
# returns None, or why it failed (recorded as a failed "summary" step, never raised).
Finalizer = Callable[[Path], str | None]


class ProgressSink(Protocol):
    """Where progress goes (a rich progress bar in the CLI, nothing in tests)."""

    def start(self, total: int, description: str) -> None: ...

    def advance(self, description: str) -> None: ...

    def warn(self, message: str) -> None: ...


@dataclass(frozen=True)
class CollectResult:
    out_dir: Path
    archive_path: Path | None
    manifest: Manifest


class _NoProgress:
    def start(self, total: int, description: str) -> None:
        pass

    def advance(self, description: str) -> None:
        pass

    def warn(self, message: str) -> None:
        pass


def default_out_dir(host: str, when: float) -> Path:
    """``hangdoc-<host>-<UTC YYYYmmddTHHMMSSZ>`` in the current directory."""
    safe_host = re.sub(r"[^A-Za-z0-9._-]", "_", host) or "host"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))
    return Path.cwd() / f"hangdoc-{safe_host}-{stamp}"


def run_collect(
    opts: CollectOptions, progress: ProgressSink | None = None, finalize: Finalizer | None = None
) -> CollectResult:
    """Collect a dump of the ranks that ``opts`` names; see the module docstring."""
    _validate(opts)
    started = time.time()
    began = time.monotonic()
    timed_out: str | None = None
    try:
        found = call_with_timeout(
            lambda: discover(opts.pids, scan_all=opts.all), opts.step_timeout_s
        )
    except StepTimeout:
        timed_out = (
            f"finding the ranks took longer than {opts.step_timeout_s:g}s (a process stuck "
            "in the kernel, state D, can block reads of its /proc files)"
        )
        if opts.all or not opts.pids:
            raise CollectionError(
                timed_out,
                help_text="Name the ranks with --pid to avoid scanning every process.",
            ) from None
        found = _as_given(opts.pids, timed_out)
    discover_s = time.monotonic() - began
    host = socket.gethostname()
    out_dir = _prepare_out_dir(opts.out or default_out_dir(host, started))
    session = _Session(opts, out_dir, progress or _NoProgress(), host, started)
    session.finalize = finalize
    session.step("discover", "timeout" if timed_out else "ok", reason=timed_out,
                 duration_s=discover_s)  # fmt: skip
    for note in found.notes:
        session.warn(note)
    return session.run(_matching(found.ranks, opts.match_env, session))


def _matching(
    found: list[DiscoveredRank], match_env: tuple[tuple[str, str], ...], session: _Session
) -> list[DiscoveredRank]:
    """The ranks whose environment has every ``match_env`` value; the rest is said."""
    if not match_env:
        return found
    kept = [d for d in found if all(d.target.env.get(k) == v for k, v in match_env)]
    if len(kept) < len(found):
        wanted = ", ".join(f"{k}={v}" for k, v in match_env)
        session.warn(
            f"{len(found) - len(kept)} rank process(es) on this node belong to another job "
            f"(not {wanted}); left out"
        )
    return kept


def _as_given(pids: tuple[int, ...], why: str) -> Discovery:
    """The pids named with --pid, unresolved, when discovery itself hung: each later
    step is bounded on its own, so a dump of what can be read beats no dump at all."""
    host = socket.gethostname()
    ranks = [
        DiscoveredRank(
            target=extras.RankTarget(
                pid=pid, rank=None, local_rank=None, world_size=None, host=host
            ),
            how_found="pid",
            local_world_size=None,
            group_rank=None,
            start_ticks=None,
            note="its environment could not be read in time",
        )
        for pid in pids
    ]
    return Discovery(ranks=ranks, notes=[f"{why}; collecting the pids as given, ranks unknown"])


def _validate(opts: CollectOptions) -> None:
    if opts.samples < 1:
        raise UsageError(f"--samples must be at least 1 (got {opts.samples})")
    if opts.interval_s < 0:
        raise UsageError(f"--interval must not be negative (got {opts.interval_s:g})")
    if opts.step_timeout_s <= 0:
        raise UsageError(f"--timeout must be positive (got {opts.step_timeout_s:g})")


def _prepare_out_dir(out: Path) -> Path:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CollectionError(
            f"output directory {out} already exists and is not empty",
            help_text="Choose another --out, or move the old dump away; hangdoc never "
            "writes into an existing dump.",
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CollectionError(f"cannot create {out}: {exc.strerror or exc}") from exc
    return out.resolve()


@dataclass
class _Rank:
    found: DiscoveredRank
    dir: Path
    process: ProcessFile
    exited: bool = False

    @property
    def pid(self) -> int:
        return self.found.target.pid

    @property
    def rank(self) -> int | None:
        return self.found.target.rank

    def label(self) -> str:
        return f"rank {self.rank} (pid {self.pid})" if self.rank is not None else f"pid {self.pid}"


class _Session:
    """One collection: the manifest being built and the dump directory it describes."""

    def __init__(
        self, opts: CollectOptions, out_dir: Path, sink: ProgressSink, host: str, started: float
    ) -> None:
        self.opts = opts
        self.out_dir = out_dir
        self.sink = sink
        self.host = host
        self.exe = pyspy.find_pyspy()
        self.dump = functools.partial(
            pyspy.dump_stacks,
            exe=self.exe,
            native=opts.native,
            nonblocking=opts.nonblocking,
            timeout_s=opts.step_timeout_s,
        )
        self.manifest = _new_manifest(opts, host, started, self.exe)
        self.writer = DumpWriter(out_dir)
        self.finalize: Finalizer | None = None
        if not opts.redact:
            self.warn(NO_REDACT_WARNING)

    # --- bookkeeping ---------------------------------------------------------------

    def step(
        self,
        step: str,
        status: StepStatus,
        rank: _Rank | None = None,
        sample: int | None = None,
        *,
        pid: int | None = None,
        reason: str | None = None,
        since: float | None = None,
        duration_s: float | None = None,
        file: str | None = None,
        exited: bool = False,
    ) -> None:
        """Record a step; ``since`` is the monotonic time it began (or give ``duration_s``);
        ``exited``: the step did not run, or stopped, because the process had exited."""
        if since is not None:
            duration_s = time.monotonic() - since
        record: StepRecord = {
            "step": step,
            "status": status,
            "rank": rank.rank if rank else None,
            "pid": pid if pid is not None else (rank.pid if rank else None),
            "sample": sample,
            "reason": redact_text(reason) if reason else None,
            "duration_s": round(duration_s, 4) if duration_s is not None else None,
            "exited": exited,
        }
        if file is not None:
            record["file"] = file
        self.manifest["steps"].append(record)

    def warn(self, message: str) -> None:
        message = redact_text(message)
        if message not in self.manifest["warnings"]:
            self.manifest["warnings"].append(message)
            self.sink.warn(message)

    def save_manifest(self) -> bool:
        """Rewrite the manifest; False (and a warning, once) when it could not be."""
        why = self.writer.json(self.out_dir / MANIFEST_NAME, self.manifest, essential=True)
        if why is not None:
            self.warn(f"{why}; the manifest on disk is the last one that fit")
        return why is None

    def save_process(self, rank: _Rank) -> None:
        why = self.writer.json(rank.dir / PROCESS_NAME, rank.process)
        if why is not None:
            self.step("write", "failed", rank, reason=why)

    def write_sample(self, rank: _Rank, index: int, data: bytes) -> None:
        """Write a py-spy sample; if it does not fit, the steps that claimed it failed."""
        name = pyspy_file_name(index)
        why = self.writer.bytes(rank.dir / name, data)
        if why is None:
            return
        rel = f"{rank.dir.name}/{name}"
        for record in self.manifest["steps"]:
            if record.get("file") == rel and record["status"] == "ok":
                record["status"] = "failed"
                record["reason"] = f"py-spy succeeded, but {why}"
                record["file"] = None

    def out_of_space(self, rank: _Rank | None, sample: int | None, *steps: str) -> bool:
        """Once the output is full, skip the steps that would write (and pause ranks)."""
        if self.writer.full is None:
            return False
        self.warn(f"{self.writer.full}: every step after it was skipped")
        for step in steps:
            self.step(step, "skipped", rank, sample, reason=self.writer.full)
        return True

    # --- the flow --------------------------------------------------------------------

    def run(self, found: list[DiscoveredRank]) -> CollectResult:
        self.writer.reserve()
        if not self.save_manifest():  # from here on, the folder is a (partial) dump
            self.writer.release()
            raise CollectionError(
                f"cannot write into {self.out_dir}: {self.manifest['warnings'][-1]}",
                help_text="Free space there, or choose another --out (a larger disk).",
            )
        ranks = self._open_ranks(found)
        self.save_manifest()
        n_extras = len(extras.EXTRA_COLLECTORS)
        total = self.opts.samples * len(ranks) + len(ranks) * n_extras + int(self.opts.archive)
        self.sink.start(total, f"collecting {len(ranks)} ranks on {self.host}")
        for index in range(self.opts.samples):
            began = time.monotonic()
            self._sample(ranks, index)
            wait = self.opts.interval_s - (time.monotonic() - began)
            if index + 1 < self.opts.samples and wait > 0 and not all(r.exited for r in ranks):
                time.sleep(wait)
        for rank in ranks:
            self._run_extras(rank)
        self.manifest["complete"] = self.writer.full is None
        self.manifest["finished_at"] = time.time()
        saved = self.save_manifest()
        self.writer.release()
        if not saved or self.writer.full is not None:
            raise CollectionError(
                f"the dump in {self.out_dir} is partial: {self.writer.full or 'see above'}",
                help_text="It can still be analyzed (its manifest says what is missing and "
                "why); for a complete one, free space or choose another --out.",
            )
        if self.finalize is not None:
            self._finalize(self.finalize)
        archive_path = self._archive() if self.opts.archive else None
        return CollectResult(self.out_dir, archive_path, self.manifest)

    def _open_ranks(self, found: list[DiscoveredRank]) -> list[_Rank]:
        """Give each rank its folder and process.json, with its static /proc facts."""
        claimed = Counter(d.target.rank for d in found if d.target.rank is not None)
        ranks: list[_Rank] = []
        for d in found:
            rank_number = d.target.rank
            if rank_number is not None and claimed[rank_number] > 1:
                rank_number = None  # two processes say "rank 3": keep both, by pid
                self.warn(
                    f"rank {d.target.rank} is claimed by several processes on this node "
                    f"(two jobs?); pid {d.target.pid} is stored under pid{d.target.pid}/"
                )
            dir_name = rank_dir_name(rank_number, d.target.pid)
            if (why := self.writer.mkdir(self.out_dir / dir_name)) is not None:
                self.warn(why)
            rank = _Rank(d, self.out_dir / dir_name, _new_process_file(d, self.opts.redact))
            self.manifest["ranks"].append(_rank_record(d, dir_name))
            if d.note:
                self.warn(f"{rank.label()}: rank unknown, {d.note}")
            self._read_static(rank)
            ranks.append(rank)
        return ranks

    def _read_static(self, rank: _Rank) -> None:
        began = time.monotonic()
        try:
            facts = call_with_timeout(
                lambda: procfs.read_static(rank.pid), self.opts.step_timeout_s
            )
        except StepTimeout:
            self.step("proc", "timeout", rank, reason=_proc_timeout(rank, self.opts))
            facts = None
        else:
            expected = rank.found.start_ticks
            if facts is None or (expected is not None and facts.start_ticks != expected):
                rank.exited = True
                self.step("proc", "skipped", rank, reason=EXITED, exited=True)
                self.warn(f"{rank.label()} exited before collection started")
                facts = None
        if facts is not None:
            p = rank.process
            p["cmdline"] = redact_argv(facts.cmdline) if self.opts.redact else facts.cmdline
            p["start_time"] = facts.start_time
            p["parent_pid"] = facts.parent_pid
            if not p["env"] and facts.environ:
                p["env"] = allowlist_env(facts.environ, redact=self.opts.redact)
            self.step("proc", "ok", rank, since=began)
        self.save_process(rank)

    def _sample(self, ranks: list[_Rank], index: int) -> None:
        self.manifest["samples"].append({"index": index, "time": time.time()})
        dumps: dict[int, bytes] = {}
        for rank in ranks:
            output = self._sample_rank(rank, index)
            if output is not None:
                dumps[rank.pid] = output
            self.save_process(rank)
            self.save_manifest()
            self.sink.advance(f"sample {index + 1}/{self.opts.samples}: {rank.label()}")
        if self.opts.subprocesses and dumps:
            self._sample_subprocesses(ranks, index, dumps)
            self.save_manifest()

    def _sample_rank(self, rank: _Rank, index: int) -> bytes | None:
        """/proc facts and py-spy stacks of one rank; the (redacted) py-spy output if any."""
        if rank.exited:
            self.step("proc", "skipped", rank, index, reason=EXITED, exited=True)
            self.step("pyspy", "skipped", rank, index, reason=EXITED, exited=True)
            return None
        if self.out_of_space(rank, index, "proc", "pyspy"):
            return None
        began = time.monotonic()
        nonblocking = self.opts.nonblocking
        redact = redact_text if self.opts.redact else None
        try:
            proc = call_with_timeout(
                lambda: node_facts.read_sample(
                    rank.pid, index, start_ticks=rank.found.start_ticks, redact=redact
                ),
                self.opts.step_timeout_s,
            )
        except StepTimeout:
            self.step("proc", "timeout", rank, index, reason=_proc_timeout(rank, self.opts))
        else:
            rank.process["samples"].append(proc)
            self.step("proc", "ok", rank, index, since=began)
            if not proc["alive"]:
                self._mark_exited(rank, index, proc.get("error") or EXITED)
                self.step("pyspy", "skipped", rank, index, reason=EXITED, exited=True)
                return None
            nonblocking = nonblocking or self._nonblocking_for_d_state(rank, proc)
        result = self.dump(rank.pid, subprocesses=self.opts.subprocesses, nonblocking=nonblocking)
        output = self._record_dump(rank, index, result, "pyspy", rank.pid)
        if output is not None:
            self.write_sample(rank, index, output)
        elif result.failure is pyspy.Failure.EXITED:
            self._mark_exited(rank, index, EXITED)
        return output

    def _record_dump(
        self, rank: _Rank, index: int, result: pyspy.PySpyResult, step: str, pid: int
    ) -> bytes | None:
        """Record one py-spy run as a step; its output, redacted if asked, on success."""
        if result.output is not None:
            file = f"{rank.dir.name}/{pyspy_file_name(index)}"
            self.step(step, "ok", rank, index, pid=pid, duration_s=result.duration_s, file=file)
            return redact_json_bytes(result.output) if self.opts.redact else result.output
        reason = result.reason or "py-spy failed"
        if result.failure is not pyspy.Failure.EXITED:
            reason += _kernel_state_hint(rank, index)
        if result.remedy:
            self.warn(f"{reason}; {result.remedy}")  # once per distinct cause, not per rank
            reason = f"{reason}; {result.remedy}"
        elif result.failure is pyspy.Failure.TIMEOUT:
            self.warn(f"{rank.label()}: {reason}")
        status = result.status
        if step == SUBPROCESS_STEP and result.failure is pyspy.Failure.NOT_PYTHON:
            status = "skipped"  # a helper binary under the rank: nothing to dump
        exited = result.failure is pyspy.Failure.EXITED
        self.step(step, status, rank, index, pid=pid, reason=reason,
                  duration_s=result.duration_s, exited=exited)  # fmt: skip
        return None

    def _sample_subprocesses(self, ranks: list[_Rank], index: int, dumps: dict[int, bytes]) -> None:
        """Add each rank's Python subprocesses (dataloader workers) to its sample file.

        py-spy's JSON mode ignores ``--subprocesses``, so each one is dumped on its own
        and merged into the rank's file; every thread record keeps its ``pid``.
        """
        try:
            table = call_with_timeout(procfs.process_table, self.opts.step_timeout_s)
        except StepTimeout:
            self.warn(f"listing processes took longer than {self.opts.step_timeout_s:g}s; "
                      "subprocesses (dataloader workers) not dumped in this sample")  # fmt: skip
            return
        targets = {r.pid for r in ranks}
        for rank in ranks:
            main = dumps.get(rank.pid)
            if main is None:
                continue
            exclude = targets | pyspy.dumped_pids(main)
            kids = procfs.python_descendants(table, rank.pid, exclude=exclude)
            if len(kids) > MAX_SUBPROCESSES_PER_RANK:
                self.warn(
                    f"{rank.label()} has {len(kids)} Python subprocesses; only the first "
                    f"{MAX_SUBPROCESSES_PER_RANK} are dumped"
                )
            extra: list[bytes] = []
            for pid in kids[:MAX_SUBPROCESSES_PER_RANK]:
                blocked = self.opts.nonblocking or node_facts.has_uninterruptible_thread(pid)
                result = self.dump(pid, subprocesses=False, nonblocking=blocked)
                output = self._record_dump(rank, index, result, SUBPROCESS_STEP, pid)
                if output is not None:
                    extra.append(output)
            if extra:
                merged = pyspy.merge_dumps(main, extra)
                self.write_sample(rank, index, merged)

    def _nonblocking_for_d_state(self, rank: _Rank, proc: ProcSampleRecord) -> bool:
        """A thread in D state never stops for ptrace, so a pausing py-spy would wait
        until its timeout and get nothing: read such a rank without pausing it."""
        if not node_facts.uninterruptible_in(proc):
            return False
        self.warn(
            f"{rank.label()} has a thread in uninterruptible sleep (D): its stacks are "
            "read without pausing it (--nonblocking)"
        )
        return True

    def _mark_exited(self, rank: _Rank, index: int, why: str) -> None:
        if not rank.exited:
            rank.exited = True
            self.warn(f"{rank.label()} exited before sample {index}: {why}")

    def _run_extras(self, rank: _Rank) -> None:
        """Every registered extra collector, once for this rank; none may stop the others."""
        ctx = extras.ExtraContext(
            target=rank.found.target,
            rank_dir=rank.dir,
            dump_dir=self.out_dir,
            timeout_s=self.opts.step_timeout_s,
            redact=self.opts.redact,
            extra_paths=self.opts.extra_paths,
        )
        for name, collector in list(extras.EXTRA_COLLECTORS):
            began = time.monotonic()
            if self.out_of_space(rank, None, name):
                continue
            try:
                records = call_with_timeout(
                    functools.partial(collector, ctx), self.opts.step_timeout_s + EXTRA_GRACE_S
                )
            except StepTimeout:
                why = f"did not return within {self.opts.step_timeout_s:g}s"
                self.step(name, "timeout", rank, reason=why, since=began)
            except Exception as exc:
                self.step(name, "failed", rank, reason=f"{type(exc).__name__}: {exc}", since=began)
            else:
                if isinstance(records, list):
                    self.manifest["steps"].extend(self._checked(records))
                else:
                    why = f"returned {type(records).__name__}, not a list of steps"
                    self.step(name, "failed", rank, reason=why, since=began)
            self.save_manifest()
            self.sink.advance(f"{name}: {rank.label()}")

    def _checked(self, records: list[StepRecord]) -> list[StepRecord]:
        """The last line of redaction: every file an extra collector wrote, and every
        reason it gave, passes through ``redact`` whatever the collector did itself."""
        if not self.opts.redact:
            return records
        for record in records:
            if isinstance(record, dict) and record.get("reason"):
                record["reason"] = redact_text(str(record["reason"]))
            file = record.get("file") if isinstance(record, dict) else None
            if record.get("status") == "ok" and isinstance(file, str) and file:
                path = self.out_dir / file
                if path.resolve().is_relative_to(self.out_dir.resolve()):
                    redact_file(path)
        return records

    def _finalize(self, finalize: Finalizer) -> None:
        """Run the finalizer (the node summary) on the complete dump; never raises."""
        began = time.monotonic()
        try:
            why = finalize(self.out_dir)
        except Exception as exc:  # a summary bug must not cost the dump
            why = f"{type(exc).__name__}: {exc}"
        self.step("summary", "ok" if why is None else "failed", reason=why, since=began)
        if why is not None:
            self.warn(f"could not write the node summary: {why}")
        self.save_manifest()

    def _archive(self) -> Path | None:
        """Pack the finished dump; the archive holds the manifest as it was before this step."""
        began = time.monotonic()
        path: Path | None = None
        try:
            path = write_archive(self.out_dir)
        except (HangdocError, OSError) as exc:
            self.step("archive", "failed", reason=str(exc), since=began)
            self.warn(f"could not write the archive: {exc}")
        else:
            self.step("archive", "ok", since=began, file=str(path))
        self.save_manifest()
        self.sink.advance("archive")
        return path


def _new_manifest(opts: CollectOptions, host: str, started: float, exe: Path | None) -> Manifest:
    return {
        "format": FORMAT,
        "hangdoc_version": __version__,
        "host": host,
        "started_at": started,
        "finished_at": None,
        "complete": False,
        "options": {
            "samples": opts.samples,
            "interval_s": opts.interval_s,
            "native": opts.native,
            "subprocesses": opts.subprocesses,
            "nonblocking": opts.nonblocking,
            "pids_requested": list(opts.pids),
            "all": opts.all,
            "step_timeout_s": opts.step_timeout_s,
        },
        "samples": [],
        "ranks": [],
        "steps": [],
        "py_spy": {
            "path": str(exe) if exe else None,
            "version": pyspy.pyspy_version(exe) if exe else None,
        },
        "warnings": [],
    }


def _new_process_file(d: DiscoveredRank, redact: bool) -> ProcessFile:
    t = d.target
    return {
        "format": PROCESS_FORMAT,
        "pid": t.pid,
        "rank": t.rank,
        "local_rank": t.local_rank,
        "world_size": t.world_size,
        "local_world_size": d.local_world_size,
        "group_rank": d.group_rank,
        "host": t.host,
        "cmdline": [],
        "start_time": None,
        "parent_pid": None,
        "env": allowlist_env(t.env, redact=redact),
        "samples": [],
    }


def _rank_record(d: DiscoveredRank, dir_name: str) -> RankRecord:
    t = d.target
    return {
        "rank": t.rank,
        "pid": t.pid,
        "local_rank": t.local_rank,
        "world_size": t.world_size,
        "local_world_size": d.local_world_size,
        "group_rank": d.group_rank,
        "dir": dir_name,
        "how_found": d.how_found,
    }


def _kernel_state_hint(rank: _Rank, index: int) -> str:
    """Why py-spy may have failed, from the kernel's view of the rank in this sample."""
    samples = rank.process["samples"]
    last = samples[-1] if samples and samples[-1]["index"] == index else None
    if last is None or last["state"] != "D":
        return ""
    where = f" in {last['wchan']}" if last["wchan"] else ""
    return (
        f" (the process is in state D, uninterruptible{where}: stuck in the kernel, "
        "where py-spy cannot read it; its /proc facts are in process.json)"
    )


def _proc_timeout(rank: _Rank, opts: CollectOptions) -> str:
    return (
        f"reading /proc/{rank.pid} took longer than {opts.step_timeout_s:g}s "
        "(the process may be stuck in the kernel, state D)"
    )
