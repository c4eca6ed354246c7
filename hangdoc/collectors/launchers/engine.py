"""Collect every node of a job through its engine's launcher, into one directory.

``collect_job`` resolves the job's nodes (the Launcher), writes ``OUT/job.json`` at once
(``complete: false``) and a probe file, starts the launch commands with the node collector
(collectors/launchers/node.py) as their payload, and reads every node's framed lines
(stream.py) as they come: progress, warnings, archive chunks, and a final ``done``.

Each node has a deadline (``node_timeout_s`` from the start). A node that misses it, that
fails, or whose launch command exits without a ``done`` is kept in the manifest with the
reason (its last output lines, srun's error about it), and the others are kept whatever
happened. A node's dump lands in ``OUT/<host>``: written there by the node itself on a
shared file system, or unpacked from its streamed archive. The launch commands are
stopped when every node is accounted for or the last deadline passed; that ends the
collector step, never the job.
"""

from __future__ import annotations

import contextlib
import queue
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from hangdoc.collectors.jobformat import JOB_FORMAT, JOB_MANIFEST_NAME, JobManifest, TransferMode
from hangdoc.collectors.launchers.arrival import NodeState, ranks_text
from hangdoc.collectors.launchers.base import JobTarget, Launcher
from hangdoc.collectors.launchers.node import PROBE_NAME
from hangdoc.collectors.launchers.stream import (
    Frame,
    PlainLine,
    done_fields,
    iter_lines,
    parse_line,
    unescape,
)
from hangdoc.common.atomic import write_json_atomic
from hangdoc.common.version import __version__
from hangdoc.errors import CollectionError

INCOMING = ".incoming"


@dataclass(frozen=True)
class JobCollectOptions:
    out: Path
    transfer: TransferMode = "auto"
    node_timeout_s: float = 300.0
    remote_hangdoc: tuple[str, ...] = (sys.executable, "-m", "hangdoc")
    samples: int = 2
    interval_s: float = 3.0
    step_timeout_s: float = 20.0
    native: bool = False
    subprocesses: bool = True
    nonblocking: bool = False
    redact: bool = True


class JobProgress(Protocol):
    """Where per-node progress goes (the CLI prints it; tests collect it)."""

    def node(self, host: str, state: str, detail: str) -> None: ...

    def warn(self, message: str) -> None: ...


class _Quiet:
    def node(self, host: str, state: str, detail: str) -> None:
        pass

    def warn(self, message: str) -> None:
        pass


@dataclass(frozen=True)
class JobResult:
    out_dir: Path
    manifest: JobManifest
    duration_s: float


def node_argv(opts: JobCollectOptions, out: Path, token: str, target: JobTarget,
              launcher: Launcher) -> list[str]:  # fmt: skip
    """The node collector's command line, as every node runs it."""
    argv = [
        *opts.remote_hangdoc, "node-collect",
        "--out-parent", str(out), "--probe", token, "--transfer", opts.transfer,
        "--samples", str(opts.samples), "--interval", f"{opts.interval_s:g}",
        "--timeout", f"{opts.step_timeout_s:g}", "--job-id", target.job_id,
    ]  # fmt: skip
    for key, value in launcher.env_match(target):
        argv += ["--match-env", f"{key}={value}"]
    if launcher.node_name_env:
        argv += ["--node-name-env", launcher.node_name_env]
    argv += ["--native"] if opts.native else []
    argv += ["--no-subprocesses"] if not opts.subprocesses else []
    argv += ["--nonblocking"] if opts.nonblocking else []
    argv += [] if opts.redact else ["--no-redact"]
    return argv


def _prepare(out: Path) -> Path:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CollectionError(
            f"output directory {out} already exists and is not empty",
            help_text="Choose another --out; hangdoc never writes into an existing collection.",
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CollectionError(f"cannot create {out}: {exc.strerror or exc}") from exc
    return out.resolve()


def collect_job(
    launcher: Launcher,
    job_id: str,
    opts: JobCollectOptions,
    progress: JobProgress | None = None,
    target: JobTarget | None = None,
) -> JobResult:
    """Collect every node of ``job_id`` (``target``: already resolved); see the module doc."""
    target = target or launcher.resolve(job_id)
    out = _prepare(opts.out)
    run = _Run(launcher, target, opts, out, progress or _Quiet())
    return run.go()


class _Run:
    def __init__(
        self, launcher: Launcher, target: JobTarget, opts: JobCollectOptions, out: Path,
        progress: JobProgress,
    ) -> None:  # fmt: skip
        self.launcher, self.target, self.opts, self.out = launcher, target, opts, out
        self.progress = progress
        self.token = secrets.token_hex(16)
        self.remote = node_argv(opts, out, self.token, target, launcher)
        self.commands = launcher.commands(target, self.remote)
        self.nodes: dict[str, NodeState] = {}
        for index, command in enumerate(self.commands):
            for host in command.hosts:
                self.nodes.setdefault(host, NodeState(host, index))
        self.by_task: dict[tuple[int, int], str] = {}
        self.events: queue.Queue[tuple[int, str, str | None]] = queue.Queue()
        self.procs: dict[int, subprocess.Popen[str]] = {}
        self.exited: set[int] = set()
        self.eofs: dict[int, int] = {}
        self.saved_at = 0.0
        self.started = time.time()
        self.manifest: JobManifest = {
            "format": JOB_FORMAT, "hangdoc_version": __version__,
            "launcher": launcher.name, "job_id": target.job_id, "job_name": target.name,
            "host": socket.gethostname(), "started_at": self.started, "finished_at": None,
            "complete": False, "command": list(self.commands[0].argv) if self.commands else [],
            "options": {"transfer": opts.transfer, "node_timeout_s": opts.node_timeout_s,
                        "samples": opts.samples, "interval_s": opts.interval_s,
                        "nodes": len(self.nodes)},
            "nodes": [], "warnings": [],
        }  # fmt: skip

    # --- the run ---------------------------------------------------------------------
    def go(self) -> JobResult:
        began = time.monotonic()
        (self.out / PROBE_NAME).write_text(self.token + "\n", encoding="utf-8")
        self._save()
        deadline = began + self.opts.node_timeout_s
        pending = list(range(len(self.commands)))
        try:
            while True:
                while pending and len(self.procs) - len(self.exited) < self.launcher.max_parallel:
                    self._start(pending.pop(0))
                self._drain(timeout=0.25)
                if time.monotonic() > deadline:
                    self._timeout_all()
                    break
                if all(n.finished for n in self.nodes.values()) or (
                    not pending and len(self.exited) == len(self.commands)
                ):
                    break
        finally:
            self._wind_down()
            self._finish()
        return JobResult(self.out, self.manifest, time.monotonic() - began)

    def _start(self, index: int) -> None:
        command = self.commands[index]
        try:
            proc = subprocess.Popen(
                list(command.argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1,
                start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            self.exited.add(index)
            for host in command.hosts:
                self._end(self.nodes[host], "failed", f"cannot start {command.argv[0]}: {exc}")
            return
        self.procs[index] = proc
        for host in command.hosts:
            self.nodes[host].status = "running"
            self.progress.node(host, "launched", " ".join(command.argv[:3]) + " …")
        assert proc.stdout is not None and proc.stderr is not None
        for name, stream in (("out", proc.stdout), ("err", proc.stderr)):
            threading.Thread(target=self._read, args=(index, name, stream), daemon=True).start()

    def _read(self, index: int, name: str, stream: IO[str]) -> None:
        for line in iter_lines(stream):
            self.events.put((index, name, line))
        self.events.put((index, name, None))

    def _wind_down(self) -> None:
        """Let launch commands whose nodes all reported exit on their own (srun tears its
        step down), stop the others, and read what they still had to say."""
        timed_out = any(n.status == "timeout" for n in self.nodes.values())
        grace = time.monotonic() + (0.0 if timed_out else 10.0)
        while len(self.exited) < len(self.procs) and time.monotonic() < grace:
            if any(not self.nodes[h].finished for i in self.procs if i not in self.exited
                   for h in self.commands[i].hosts):  # fmt: skip
                break
            self._drain(timeout=0.25)
        for index, proc in self.procs.items():
            if index not in self.exited:
                self.launcher.stop(proc)
        last = time.monotonic() + 5.0
        while len(self.exited) < len(self.procs) and time.monotonic() < last:
            self._drain(timeout=0.25)

    def _drain(self, timeout: float) -> None:
        """Handle the lines read so far, waiting up to ``timeout`` for the first one."""
        while True:
            try:
                index, name, line = self.events.get(timeout=timeout)
            except queue.Empty:
                return
            timeout = 0.0
            if line is None:
                self.eofs[index] = self.eofs.get(index, 0) + 1
                if self.eofs[index] == 2:  # stdout and stderr both closed
                    self._command_ended(index)
            elif name == "err":
                self._stderr(index, line)
            else:
                self._stdout(index, line)

    # --- lines -------------------------------------------------------------------------
    def _stdout(self, index: int, line: str) -> None:
        parsed = parse_line(line)
        if isinstance(parsed, PlainLine):
            node = self._node_of(index, parsed.task)
            if node is not None and parsed.text.strip():
                node.lines.append(parsed.text.strip())
            return
        node = self.nodes.get(parsed.host)
        if node is None:
            self._warn(f"output from {parsed.host}, which is not a node of the job; ignored")
            return
        if parsed.task is not None:
            self.by_task[(index, parsed.task)] = node.host
        self._frame(node, parsed)

    def _node_of(self, index: int, task: int | None) -> NodeState | None:
        if task is not None and (index, task) in self.by_task:
            return self.nodes[self.by_task[(index, task)]]
        hosts = self.commands[index].hosts
        return self.nodes[hosts[0]] if len(hosts) == 1 else None

    def _stderr(self, index: int, line: str) -> None:
        text = line.strip()
        if not text:
            return
        about = self.launcher.attribute(text)
        if about is not None and about[0] in self.nodes:
            self.nodes[about[0]].lines.append(about[1])
            return
        node = self._node_of(index, None)
        if node is not None:
            node.lines.append(text)
        else:
            self._warn(f"{self.commands[index].argv[0]}: {text}")

    def _frame(self, node: NodeState, frame: Frame) -> None:
        if node.finished:
            return
        kind, fields = frame.kind, frame.fields
        if kind == "hello":
            node.hello_at = time.time()
            with contextlib.suppress(ValueError):
                node.offset = round(float(fields[0]) - node.hello_at, 3)
            node.shared = fields[1] == "1"
            self.progress.node(node.host, "started", "shared file system" if node.shared
                               else "streaming its dump back")  # fmt: skip
        elif kind == "progress":
            self.progress.node(
                node.host, "progress", f"{fields[0]}/{fields[1]} {unescape(fields[2])}"
            )
        elif kind == "warn":
            self.progress.warn(f"{node.host}: {unescape(fields[0])}")
        elif kind == "data":
            node.chunk(self.out / INCOMING, fields[0], fields[1])
        elif kind == "end":
            node.archive_end(self.out / INCOMING, self.out, fields)
        elif kind == "done":
            self._done(node, frame)

    def _done(self, node: NodeState, frame: Frame) -> None:
        status, ranks, remote_dir, text = done_fields(frame)
        node.ranks, node.remote_dir = ranks, remote_dir
        if status not in ("ok", "partial"):
            self._end(node, "failed", text or "the node collector failed")
            return
        if node.shared:
            if not (self.out / node.host).is_dir():
                self._end(node, "failed", f"it wrote {remote_dir}, which is not here")
                return
        elif node.archive_error is not None or node.receiver is None:
            self._end(node, "failed", node.archive_error or "no archive arrived")
            return
        self._end(node, status, None if status == "ok" else text)

    # --- endings -------------------------------------------------------------------------
    def _end(self, node: NodeState, status: str, reason: str | None) -> None:
        node.status, node.reason, node.finished_at = status, reason, time.time()
        self.progress.node(node.host, status, reason or f"ranks {ranks_text(node.ranks)}")
        self._save(throttle=True)

    def _command_ended(self, index: int) -> None:
        if index in self.exited:
            return
        self.exited.add(index)
        proc = self.procs.get(index)
        code = proc.wait() if proc is not None else None
        for host in self.commands[index].hosts:
            node = self.nodes[host]
            if node.finished:
                continue
            said = "; ".join(list(node.lines)[-3:])
            why = said or f"{self.commands[index].argv[0]} exited with {code} before it finished"
            if node.hello_at is None and not said:
                why = f"never started ({self.commands[index].argv[0]} exited with {code})"
            self._end(node, "failed", why)

    def _timeout_all(self) -> None:
        for node in self.nodes.values():
            if not node.finished:
                last = node.lines[-1] if node.lines else None
                why = f"no result within {self.opts.node_timeout_s:g}s"
                why += "" if node.hello_at is not None else " (it never started)"
                self._end(node, "timeout", why + (f"; last said: {last}" if last else ""))

    def _warn(self, message: str) -> None:
        if message not in self.manifest["warnings"]:
            self.manifest["warnings"].append(message)
            self.progress.warn(message)

    def _save(self, throttle: bool = False) -> None:
        """Rewrite job.json (at most once a second while nodes report: 2,048 of them)."""
        now = time.monotonic()
        if throttle and now - self.saved_at < 1.0:
            return
        self.saved_at = now
        self.manifest["nodes"] = [
            n.record(self.out, self.started, self.opts.transfer)
            for n in sorted(self.nodes.values(), key=lambda n: n.host)
        ]
        try:
            write_json_atomic(self.out / JOB_MANIFEST_NAME, self.manifest)
        except OSError as exc:
            self._warn(f"cannot write {JOB_MANIFEST_NAME}: {exc}")

    def _finish(self) -> None:
        for node in self.nodes.values():
            node.close()
        shutil.rmtree(self.out / INCOMING, ignore_errors=True)
        with contextlib.suppress(OSError):
            (self.out / PROBE_NAME).unlink()
        self.manifest["finished_at"] = time.time()
        self.manifest["complete"] = True
        self._save()
