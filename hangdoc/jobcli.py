"""The CLI side of whole-job collection: ``collect --slurm-job`` and the hidden
``node-collect`` that the launcher runs on every node.

Kept out of cli.py so that the main command module stays a list of thin commands; like
cli.py it may import everything (the node summary is analyzer code, the node collector
is collectors code, and only the CLI joins them). Heavy modules are imported inside the
functions, so ``hangdoc --help`` stays instant.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from hangdoc.collectors.jobformat import TransferMode
from hangdoc.errors import CollectionError, UsageError
from hangdoc.pipeline import write_summary

err_console = Console(stderr=True)
# Per-node lines are printed for jobs up to this many nodes; bigger ones get a line per
# node that ends (and every failure), not every step.
VERBOSE_NODES = 32


_TRANSFERS: dict[str, TransferMode] = {m: m for m in ("auto", "shared", "stream", "summary")}


def _transfer(value: str) -> TransferMode:
    mode = _TRANSFERS.get(value)
    if mode is None:
        raise UsageError(f"--transfer {value!r}: use auto, shared, stream or summary")
    return mode


class _JobPrinter:
    """Per-node progress on stderr: one line per change of state (and progress for small
    jobs), so a stuck node shows where it stopped."""

    def __init__(self, console: Console, nodes: int) -> None:
        self.console = console
        self.verbose = nodes <= VERBOSE_NODES
        self.nodes = nodes
        self.ended = 0
        self.began = time.monotonic()

    def node(self, host: str, state: str, detail: str) -> None:
        t = f"{time.monotonic() - self.began:6.1f}s"
        if state in ("ok", "partial", "failed", "timeout"):
            self.ended += 1
            colour = {"ok": "green", "partial": "yellow"}.get(state, "red")
            self.console.print(
                f"{t} [{colour}]{host}: {state}[/] — {detail}  ({self.ended}/{self.nodes})",
                markup=True, highlight=False,
            )  # fmt: skip
        elif self.verbose:
            self.console.print(f"{t} {host}: {state} {detail}", markup=False, highlight=False)

    def warn(self, message: str) -> None:
        self.console.print(f"[yellow]warning:[/] {message}", highlight=False)


def run_job_collect(
    *,
    job_id: str,
    out: Path | None,
    transfer: str,
    node_timeout: float,
    remote_hangdoc: str | None,
    samples: int,
    interval: float,
    timeout: float,
    native: bool,
    subprocesses: bool,
    nonblocking: bool,
    redact: bool,
    console: Console,
) -> int:
    """``hangdoc collect --slurm-job``: every node, one directory; the exit status."""
    from hangdoc.collectors.launchers.engine import JobCollectOptions, collect_job
    from hangdoc.collectors.launchers.slurm import SlurmLauncher

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    safe_id = re.sub(r"[^0-9A-Za-z_+-]", "_", job_id)
    remote = tuple(shlex.split(remote_hangdoc)) if remote_hangdoc else None
    options = JobCollectOptions(
        out=out or Path.cwd() / f"hangdoc-job{safe_id}-{stamp}",
        transfer=_transfer(transfer),
        node_timeout_s=node_timeout,
        samples=samples,
        interval_s=interval,
        step_timeout_s=timeout,
        native=native,
        subprocesses=subprocesses,
        nonblocking=nonblocking,
        redact=redact,
        **({"remote_hangdoc": remote} if remote else {}),
    )
    launcher = SlurmLauncher()
    target = launcher.resolve(job_id)
    err_console.print(
        f"collecting Slurm job {target.job_id} ({target.name or 'unnamed'}) on "
        f"{len(target.hosts)} node(s): {', '.join(target.hosts[:8])}"
        + (" …" if len(target.hosts) > 8 else ""),
        highlight=False,
    )
    printer = _JobPrinter(err_console, len(target.hosts))
    result = collect_job(launcher, job_id, options, printer, target)
    nodes = result.manifest["nodes"]
    good = [n for n in nodes if n["status"] in ("ok", "partial")]
    ranks = sum(len(n["ranks"]) for n in good)
    console.print(
        f"collected {len(good)}/{len(nodes)} node(s), {ranks} rank(s), into "
        f"[bold]{result.out_dir}[/] in {result.duration_s:.1f} s"
    )
    for node in nodes:
        if node["status"] not in ("ok", "partial"):
            err_console.print(f"[red]{node['host']}: {node['status']}[/] — {node['reason']}")
    if not good:
        raise CollectionError(
            f"no node of job {target.job_id} could be collected (see {result.out_dir}/job.json)",
            help_text="Check that hangdoc is installed at the same path on the compute nodes "
            "(or pass --remote-hangdoc), and that you may run steps in the job "
            "(srun --jobid JOBID --overlap hostname).",
        )
    console.print(f"next: hangdoc analyze {result.out_dir} --html report.html")
    return 0 if len(good) == len(nodes) else 3


def node_collect(
    out_parent: Annotated[Path, typer.Option("--out-parent")],
    probe: Annotated[str, typer.Option("--probe")],
    transfer: Annotated[str, typer.Option("--transfer")] = "auto",
    samples: Annotated[int, typer.Option(min=1, max=100)] = 2,
    interval: Annotated[float, typer.Option(min=0.0)] = 3.0,
    timeout: Annotated[float, typer.Option(min=1.0)] = 20.0,
    job_id: Annotated[str | None, typer.Option("--job-id")] = None,
    match_env: Annotated[list[str] | None, typer.Option("--match-env")] = None,
    node_name: Annotated[str | None, typer.Option("--node-name")] = None,
    node_name_env: Annotated[str | None, typer.Option("--node-name-env")] = None,
    native: Annotated[bool, typer.Option("--native")] = False,
    subprocesses: Annotated[bool, typer.Option(" /--no-subprocesses")] = True,
    nonblocking: Annotated[bool, typer.Option("--nonblocking")] = False,
    no_redact: Annotated[bool, typer.Option("--no-redact")] = False,
) -> None:
    """(Run by the launcher on every node of a job; not for people.)"""
    from hangdoc.collectors.collect import CollectOptions
    from hangdoc.collectors.launchers.node import NodeOptions, run_node

    pairs = []
    for item in match_env or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--match-env {item!r}: use KEY=VALUE")
        pairs.append((key, value))
    name = node_name or (os.environ.get(node_name_env) if node_name_env else None)
    collect = CollectOptions(
        all=True,
        samples=samples,
        interval_s=interval,
        native=native,
        subprocesses=subprocesses,
        nonblocking=nonblocking,
        step_timeout_s=timeout,
        redact=not no_redact,
        match_env=tuple(pairs),
    )
    options = NodeOptions(
        out_parent=out_parent,
        probe=probe,
        transfer=_transfer(transfer),
        collect=collect,
    )
    # --job-id is not used here: it names the job in ps(1) output on the node.
    code = run_node(options, write_summary, sys.stdout, name=name or socket.gethostname())
    raise typer.Exit(code)
