"""The ``hangdoc watch`` command, and the hidden ``node-watch`` a Slurm watch runs per node.

Thin: parse, build the options, run the loop (collectors/watch/loop.py) with the handler
that reports (report.py) or tells the login node (collectors/watch/node.py), and end with
the status that says whether a hang was reported (README, "Exit statuses").
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from hangdoc.cli_exits import FLAG
from hangdoc.errors import ExitStatus, OutputPathError, UsageError

STALL_AFTER_DEFAULT = 120.0


def watch(
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Folder for watch.log and one hang-N/ per report.", metavar="DIR"
        ),
    ],
    pid: Annotated[
        list[str] | None,
        typer.Option(
            "--pid",
            "-p",
            help="Rank or launcher pid (repeatable or comma list); a launcher (torchrun, "
            "srun, a script) stands for its ranks, also those that start later.",
            metavar="PID",
        ),
    ] = None,
    all_ranks: Annotated[
        bool,
        typer.Option("--all", help="Every rank process on this node, now and later.", metavar=FLAG),
    ] = False,
    slurm_job: Annotated[
        str | None,
        typer.Option(
            "--slurm-job",
            help="Watch every node of this running Slurm job from a login node "
            "(srun --overlap in its allocation); one job-wide report per stall.",
            metavar="JOBID",
        ),
    ] = None,
    stall_after: Annotated[
        float,
        typer.Option(
            min=5.0,
            help="Seconds without progress before a stall is checked (well inside the "
            "job's collective timeout).",
            metavar="SECONDS",
        ),
    ] = STALL_AFTER_DEFAULT,
    on_hang: Annotated[
        str | None,
        typer.Option(
            "--on-hang",
            help="Command to run after each report (split like a shell, never run by one); "
            "{dir} {html} {json} {md} {dump} {verdict} {category} {culprits} {title}.",
            metavar="CMD",
        ),
    ] = None,
    on_hang_timeout: Annotated[
        float, typer.Option(min=1.0, help="Seconds --on-hang may run.", metavar="SECONDS")
    ] = 300.0,
    poll: Annotated[
        float | None,
        typer.Option(
            min=0.2,
            help="Seconds between cheap readings (default stall-after/10, 0.5 to 5).",
            metavar="SECONDS",
        ),
    ] = None,
    samples: Annotated[
        int, typer.Option(min=1, max=100, help="Samples per rank in a report.", metavar="N")
    ] = 2,
    interval: Annotated[
        float, typer.Option(min=0.0, help="Seconds between those samples.", metavar="SECONDS")
    ] = 3.0,
    timeout: Annotated[
        float, typer.Option(min=1.0, help="Time limit of each collection step.", metavar="SECONDS")
    ] = 20.0,
    nonblocking: Annotated[
        bool,
        typer.Option(help="Never pause a rank, not even for the report's samples.", metavar=FLAG),
    ] = False,
    native: Annotated[
        bool, typer.Option(help="Include native frames in the report's stacks.", metavar=FLAG)
    ] = False,
    start_timeout: Annotated[
        float,
        typer.Option(
            min=1.0,
            help="With --all: give up when no rank appears within this many seconds.",
            metavar="SECONDS",
        ),
    ] = 600.0,
    no_redact: Annotated[
        bool,
        typer.Option("--no-redact", help="Keep secrets in the dumps (loud; avoid).", metavar=FLAG),
    ] = False,
    remote_hangdoc: Annotated[
        str | None,
        typer.Option(
            help="With --slurm-job: the hangdoc command on the nodes (default: this "
            "Python's `-m hangdoc`).",
            metavar="COMMAND",
        ),
    ] = None,
) -> None:
    """Watch a running job beside it, unmodified; write the report while it still hangs.

    Cheap readings while the job moves (CPU, I/O, output growth, GPU, flight recorder);
    after --stall-after seconds of nothing moving, stack samples confirm the stall, then
    everything `collect` collects is analyzed into OUT/hang-N/ (report.html,
    findings.json, summary.md, dump) and --on-hang runs. Ends by itself with the job.

    Exit status: 0 the job ended and no hang was reported, 5 the job ended after a hang
    was reported, 2 bad usage, 3 nothing to watch (no such process, no rank appeared,
    the Slurm job is not running), 130 interrupted.
    """
    from hangdoc.collectors.discovery import parse_pid_args
    from hangdoc.collectors.watch.loop import LoopOptions, Scope, Watcher
    from hangdoc.watch.console import WatchConsole
    from hangdoc.watch.onhang import parse_command
    from hangdoc.watch.report import CollectSettings, LocalHandler, Reporter

    pids = tuple(parse_pid_args(pid or []))
    chosen = sum([bool(pids), all_ranks, slurm_job is not None])
    if chosen == 0:
        raise UsageError(
            "say what to watch", help_text="Use --pid PID, --all, or --slurm-job JOBID."
        )
    if slurm_job is not None and chosen > 1:
        raise UsageError("--slurm-job watches the whole job: give it without --pid or --all")
    command = parse_command(on_hang) if on_hang is not None else ()
    _prepare(out)
    say = WatchConsole(out)
    settings = CollectSettings(
        samples=samples, interval_s=interval, step_timeout_s=timeout,
        nonblocking=nonblocking, native=native, redact=not no_redact,
    )  # fmt: skip
    reporter = Reporter(out, say, command, on_hang_timeout, redact=not no_redact)
    with _stop_on_sigterm() as stop:
        if slurm_job is not None:
            from hangdoc.watch.slurm import SlurmWatchOptions, watch_slurm

            slurm_options = SlurmWatchOptions(stall_after_s=stall_after, settings=settings,
                                              poll_s=poll)  # fmt: skip
            if remote_hangdoc:
                slurm_options = dataclasses.replace(
                    slurm_options, remote_hangdoc=tuple(shlex.split(remote_hangdoc))
                )
            reported, why = watch_slurm(slurm_job, slurm_options, reporter, say, stop)
        else:
            options = LoopOptions(
                scope=Scope(pids=pids, all=all_ranks), stall_after_s=stall_after, poll_s=poll,
                start_timeout_s=start_timeout if all_ranks else None,
                step_timeout_s=timeout,
            )  # fmt: skip
            result = Watcher(options, LocalHandler(reporter, settings), say, stop).run()
            reported, why = result.reported, result.why_ended
    say(f"watch ended: {why}; {reported} hang(s) reported" + _listing(reporter.reported))
    raise typer.Exit(ExitStatus.HANG_REPORTED if reported else ExitStatus.OK)


def _listing(folders: list[Path]) -> str:
    return "".join(f"\n  {folder}" for folder in folders)


def _prepare(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(
            f"--out {out}: cannot create it ({(exc.strerror or str(exc)).lower()})",
            help_text="Choose a folder you can write to (on a shared file system for "
            "--slurm-job, if you want the dumps there too).",
        ) from exc
    if not os.access(out, os.W_OK):
        raise OutputPathError(f"--out {out}: not writable")


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[threading.Event]:
    """SIGTERM (a sidecar's pod ending, `scancel` of the watch step, `kill`) stops the
    watching and lets watch say what it reported; the job is never touched."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def node_watch(
    stall_after: Annotated[float, typer.Option("--stall-after")] = STALL_AFTER_DEFAULT,
    poll: Annotated[float | None, typer.Option("--poll")] = None,
    match_env: Annotated[list[str] | None, typer.Option("--match-env")] = None,
    node_name: Annotated[str | None, typer.Option("--node-name")] = None,
    node_name_env: Annotated[str | None, typer.Option("--node-name-env")] = None,
    timeout: Annotated[float, typer.Option(min=1.0)] = 20.0,
    job_id: Annotated[str | None, typer.Option("--job-id")] = None,
) -> None:
    """(Run by `watch --slurm-job` on every node of the job; not for people.)"""
    from hangdoc.collectors.launchers.stream import Emitter
    from hangdoc.collectors.watch.loop import LoopOptions, Scope, Watcher
    from hangdoc.collectors.watch.node import NodeHandler

    pairs = []
    for item in match_env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--match-env {item!r}: use KEY=VALUE")
        pairs.append((key, value))
    name = node_name or (os.environ.get(node_name_env) if node_name_env else None)
    emitter = Emitter(sys.stdout, name or socket.gethostname())
    options = LoopOptions(
        scope=Scope(all=True, match_env=tuple(pairs)), stall_after_s=stall_after, poll_s=poll,
        step_timeout_s=timeout,
    )  # fmt: skip
    # --job-id also names the job in ps(1) output on the node.
    with _stop_on_sigterm() as stop:
        handler = NodeHandler(emitter, job_id, grace_s=2 * options.poll)
        result = Watcher(options, handler, handler.say, stop).run()
    emitter.watch("ended", result.why_ended)
