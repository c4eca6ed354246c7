"""``hangdoc watch --slurm-job ID``: watch every node of a Slurm job from a login node.

One watcher per node runs inside the job's allocation, as one extra step::

    srun --jobid ID --overlap --nodes=N --ntasks-per-node=1 ... --job-name=hangdoc-watch \\
         python -m hangdoc node-watch --stall-after S --match-env SLURM_JOB_ID=ID ...

(``--overlap`` shares the job's CPUs, as ``collect --slurm-job`` does). Each node watches
its own ranks with the cheap signals and confirms a stall with its own stack samples
(collectors/watch/), then says so on its stdout (collectors/watch/node.py). Here, the
first node that says ``stalled`` starts one job-wide collection, through the same engine
as ``collect --slurm-job`` (a second overlapping step), and one report of the whole job
(report.py). No further report until a node says ``moving``.

The watch ends when the watchers' step ends (every node's ranks are gone) or when Slurm
says the job is no longer running (asked every ``check_job_every_s``); stopping the
watchers' step (SIGTERM to srun) ends the watchers, never the job.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from hangdoc.collectors.launchers.engine import JobCollectOptions, collect_job
from hangdoc.collectors.launchers.slurm import SlurmLauncher
from hangdoc.collectors.launchers.stream import Frame, iter_lines, parse_line, unescape
from hangdoc.collectors.watch.stall import Outcome, Say, Stop
from hangdoc.errors import CollectionError
from hangdoc.watch.report import CollectSettings, Reporter


@dataclass(frozen=True)
class SlurmWatchOptions:
    stall_after_s: float
    settings: CollectSettings
    poll_s: float | None = None
    remote_hangdoc: tuple[str, ...] = (sys.executable, "-m", "hangdoc")
    check_job_every_s: float = 30.0
    node_timeout_s: float = 300.0


class _JobProgress:
    """The job-wide collection's per-node news, in watch.log (ends and failures only)."""

    def __init__(self, say: Say) -> None:
        self.say = say

    def node(self, host: str, state: str, detail: str) -> None:
        if state in ("ok", "partial", "failed", "timeout"):
            self.say(f"collect {host}: {state} ({detail})")

    def warn(self, message: str) -> None:
        self.say(f"collect: warning: {message}")


def node_watch_argv(opts: SlurmWatchOptions, job_id: str) -> list[str]:
    argv = [
        *opts.remote_hangdoc, "node-watch", "--stall-after", f"{opts.stall_after_s:g}",
        "--match-env", f"SLURM_JOB_ID={job_id}", "--node-name-env", "SLURMD_NODENAME",
        "--timeout", f"{opts.settings.step_timeout_s:g}", "--job-id", job_id,
    ]  # fmt: skip
    if opts.poll_s is not None:
        argv += ["--poll", f"{opts.poll_s:g}"]
    return argv


def watch_slurm(
    job_id: str, opts: SlurmWatchOptions, reporter: Reporter, say: Say, stop: Stop
) -> tuple[int, str]:
    """Watch the job until it ends (or ``stop``); (hangs reported, why the watch ended)."""
    collector = SlurmLauncher()
    target = collector.resolve(job_id)
    starter = SlurmLauncher(step_name="hangdoc-watch")
    (command,) = starter.commands(target, node_watch_argv(opts, target.job_id))
    say(
        f"watching Slurm job {target.job_id} ({target.name or 'unnamed'}) on "
        f"{len(target.hosts)} node(s): {', '.join(target.hosts[:8])}"
        + (" …" if len(target.hosts) > 8 else "")
        + f"; a stall is checked after {opts.stall_after_s:g} s without progress"
    )
    try:
        proc = subprocess.Popen(
            list(command.argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1,
            start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        raise CollectionError(f"cannot start {command.argv[0]}: {exc.strerror or exc}") from exc
    lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
    for name, stream in (("out", proc.stdout), ("err", proc.stderr)):
        assert stream is not None
        threading.Thread(target=_read, args=(name, stream, lines), daemon=True).start()
    run = _Coordinator(job_id, target.job_id, opts, reporter, say, collector)
    try:
        why = run.follow(proc, lines, stop)
    finally:
        starter.stop(proc)
    return run.reported, why


def _read(name: str, stream: IO[str], lines: queue.Queue[tuple[str, str | None]]) -> None:
    for line in iter_lines(stream):
        lines.put((name, line))
    lines.put((name, None))


class _Coordinator:
    def __init__(
        self, requested: str, job_id: str, opts: SlurmWatchOptions, reporter: Reporter,
        say: Say, launcher: SlurmLauncher,
    ) -> None:  # fmt: skip
        self.requested = requested
        self.job_id = job_id
        self.opts = opts
        self.reporter = reporter
        self.say = say
        self.launcher = launcher
        self.reported = 0
        self.in_report = False  # the current stall was reported; until a node moves

    def follow(
        self, proc: subprocess.Popen[str], lines: queue.Queue[tuple[str, str | None]], stop: Stop
    ) -> str:
        closed = 0
        next_check = time.monotonic() + self.opts.check_job_every_s
        while not stop.is_set():
            try:
                name, line = lines.get(timeout=1.0)
            except queue.Empty:
                name, line = "", ""
            if line is None:
                closed += 1
                if closed == 2:
                    code = proc.wait()
                    return self._job_state() or f"the watchers' step ended (srun exited {code})"
            elif line.strip():
                self._line(name, line)
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + self.opts.check_job_every_s
                ended = self._job_state()
                if ended is not None:
                    return ended
        return "told to stop"

    def _job_state(self) -> str | None:
        try:
            self.launcher.resolve(self.requested)
        except CollectionError as exc:
            return f"the job ended ({exc})"
        return None

    def _line(self, name: str, line: str) -> None:
        parsed = parse_line(line)
        if not isinstance(parsed, Frame) or parsed.kind != "watch":
            text = parsed.text if not isinstance(parsed, Frame) else line
            self.say(f"{'srun' if name == 'err' else 'node'}: {text.strip()}")
            return
        event, text = parsed.fields[0], unescape(parsed.fields[1])
        host = parsed.host
        if event == "stalled":
            self._stalled(host, text)
        elif event == "moving":
            if self.in_report:
                self.in_report = False
                self.say(f"{host}: the job moves again ({text}); a new stall gets a new report")
        else:
            self.say(f"{host}: {text}")

    def _stalled(self, host: str, text: str) -> None:
        if self.in_report:
            return
        try:
            summary: dict[str, Any] = json.loads(text)
        except ValueError:
            summary = {}
        summary = {**summary, "host": host, "job_id": self.job_id, "stalled_node": host}
        self.say(f"{host}: no progress for {self.opts.stall_after_s:g} s, stacks unchanged")
        outcome = self.reporter.report(summary, self._collect)
        if outcome is Outcome.REPORTED:
            self.reported += 1
            self.in_report = True

    def _collect(self, folder: Path) -> Path:
        from hangdoc.pipeline import DUMP_NAME

        s = self.opts.settings
        options = JobCollectOptions(
            out=folder / DUMP_NAME, node_timeout_s=self.opts.node_timeout_s,
            remote_hangdoc=self.opts.remote_hangdoc, samples=s.samples,
            interval_s=s.interval_s, step_timeout_s=s.step_timeout_s, native=s.native,
            nonblocking=s.nonblocking, redact=s.redact,
        )  # fmt: skip
        result = collect_job(self.launcher, self.requested, options, _JobProgress(self.say))
        good = [n for n in result.manifest["nodes"] if n["status"] in ("ok", "partial")]
        if not good:
            raise CollectionError(
                f"no node of job {self.job_id} could be collected (see {result.out_dir}/job.json)"
            )
        return result.out_dir
