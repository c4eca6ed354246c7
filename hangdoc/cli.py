"""The ``hangdoc`` command: thin wrappers that parse options, call one library function each,
and print. Errors meant for the user are one line plus a remedy, never a traceback.

Heavy modules (pandas, jinja2, torch) are imported inside the commands so that
``hangdoc --help`` stays instant and never imports torch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from hangdoc import __version__
from hangdoc.errors import HangdocError, UsageError

if TYPE_CHECKING:
    from hangdoc.analyzer.diagnosis import Diagnosis

app = typer.Typer(
    name="hangdoc",
    help="Post-mortem analyzer for hung distributed PyTorch jobs: which rank is where, and why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        console.print(f"hangdoc {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """hangdoc collect (on the stuck node) → hangdoc analyze (anywhere)."""


@app.command()
def collect(
    pid: Annotated[
        list[str] | None,
        typer.Option(
            "--pid",
            "-p",
            help="Rank pid (repeatable or comma list); a torchrun "
            "agent's pid expands to its workers.",
        ),
    ] = None,
    all_ranks: Annotated[
        bool, typer.Option("--all", help="Every process on this node with RANK/LOCAL_RANK.")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Dump directory (default hangdoc-<host>-<UTC>)."),
    ] = None,
    samples: Annotated[int, typer.Option(min=1, max=100, help="Samples per rank.")] = 2,
    interval: Annotated[float, typer.Option(min=0.0, help="Seconds between samples.")] = 3.0,
    native: Annotated[bool, typer.Option(help="Include native (C/C++) frames.")] = False,
    subprocesses: Annotated[
        bool, typer.Option(help="Also dump subprocesses (dataloader workers).")
    ] = True,
    nonblocking: Annotated[
        bool, typer.Option(help="Do not pause the ranks while reading stacks (less exact).")
    ] = False,
    archive: Annotated[bool, typer.Option(help="Also write DIR.tar.gz.")] = False,
    timeout: Annotated[
        float, typer.Option(min=1.0, help="Time limit of each step, in seconds.")
    ] = 20.0,
    log: Annotated[
        list[Path] | None, typer.Option("--log", help="Extra log file to include (repeatable).")
    ] = None,
    no_redact: Annotated[
        bool, typer.Option("--no-redact", help="Keep secrets in the dump (loud; avoid).")
    ] = False,
    slurm_job: Annotated[
        str | None,
        typer.Option(
            "--slurm-job",
            help="Collect every node of this running Slurm job "
            "(srun --overlap in its allocation), into --out.",
        ),
    ] = None,
    transfer: Annotated[
        str,
        typer.Option(
            help="With --slurm-job: auto (shared if the nodes see --out, else "
            "stream), shared, stream (dumps come back through srun), summary "
            "(only node summaries come back)."
        ),
    ] = "auto",
    node_timeout: Annotated[
        float, typer.Option(min=5.0, help="With --slurm-job: seconds a node may take.")
    ] = 300.0,
    remote_hangdoc: Annotated[
        str | None,
        typer.Option(
            help="With --slurm-job: the hangdoc command on the nodes (default: "
            "this Python's `-m hangdoc`)."
        ),
    ] = None,
) -> None:
    """Collect stacks and process state of a stuck job's ranks: this node's, or every node's."""
    from rich.progress import Progress

    from hangdoc.collectors.collect import CollectOptions, run_collect
    from hangdoc.collectors.discovery import parse_pid_args

    if no_redact:
        err_console.print(
            "[bold red]--no-redact: secrets in the environment and logs will be written "
            "into the dump as they are. Do not attach it to a public ticket.[/]"
        )
    if slurm_job is not None:
        from hangdoc.jobcli import run_job_collect

        raise typer.Exit(
            run_job_collect(
                job_id=slurm_job,
                out=out,
                transfer=transfer,
                node_timeout=node_timeout,
                remote_hangdoc=remote_hangdoc,
                samples=samples,
                interval=interval,
                timeout=timeout,
                native=native,
                subprocesses=subprocesses,
                nonblocking=nonblocking,
                redact=not no_redact,
                console=console,
            )
        )
    pids = tuple(parse_pid_args(pid or []))
    if not pids and not all_ranks:
        raise UsageError("say which processes to collect", help_text="Use --pid PID or --all.")
    options = CollectOptions(
        pids=pids,
        all=all_ranks,
        out=out,
        samples=samples,
        interval_s=interval,
        native=native,
        subprocesses=subprocesses,
        nonblocking=nonblocking,
        step_timeout_s=timeout,
        archive=archive,
        redact=not no_redact,
        extra_paths=tuple(log or ()),
    )
    with Progress(console=err_console, transient=True) as progress:
        sink = _ProgressSink(progress)
        from hangdoc.jobcli import write_summary  # the node summary, read first by analyze

        result = run_collect(options, sink, write_summary)
    manifest = result.manifest
    ranks = [r["rank"] for r in manifest["ranks"]]
    failed = [s for s in manifest["steps"] if s["status"] != "ok"]
    console.print(
        f"collected {len(ranks)} process(es) × {len(manifest['samples'])} sample(s) into "
        f"[bold]{result.out_dir}[/]"
        + (f" and {result.archive_path}" if result.archive_path else "")
    )
    if failed:
        err_console.print(
            f"[yellow]{len(failed)} step(s) failed or were skipped; see manifest.json[/]"
        )
    console.print(f"next: hangdoc analyze {result.out_dir} --html report.html")


class _ProgressSink:
    """Adapts rich's Progress to the collectors' ProgressSink protocol."""

    def __init__(self, progress: object) -> None:
        from rich.progress import Progress, TaskID

        assert isinstance(progress, Progress)
        self._progress = progress
        self._task: TaskID | None = None

    def start(self, total: int, description: str) -> None:
        self._task = self._progress.add_task(description, total=total)

    def advance(self, description: str) -> None:
        if self._task is not None:
            self._progress.update(self._task, advance=1, description=description)

    def warn(self, message: str) -> None:
        self._progress.console.print(f"[yellow]warning:[/] {message}")


@app.command()
def analyze(
    paths: Annotated[
        list[Path], typer.Argument(help="Dump dirs, .tar.gz archives, or loose files.")
    ],
    html: Annotated[Path | None, typer.Option("--html", help="Write the HTML report here.")] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write findings JSON (hangdoc.findings/1).")
    ] = None,
    md: Annotated[Path | None, typer.Option("--md", help="Write a Markdown summary.")] = None,
    archive: Annotated[
        Path | None,
        typer.Option(
            "--archive",
            help="Write a .tar.gz with the (redacted) inputs and the "
            "report, to attach to a ticket; analyze reads it back.",
        ),
    ] = None,
    no_redact: Annotated[
        bool,
        typer.Option(
            "--no-redact", help="Keep secrets in the reports and the archived inputs (loud; avoid)."
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No terminal summary.")] = False,
    no_summaries: Annotated[
        bool,
        typer.Option(
            "--no-summaries",
            help="Read every raw file, even where a node summary (summary.json) would do.",
        ),
    ] = False,
) -> None:
    """Explain why the job hung: terminal summary, and HTML/JSON/Markdown on request."""
    if archive is not None and archive.exists():
        raise UsageError(f"{archive} already exists", help_text="hangdoc never overwrites it.")
    if no_redact:
        err_console.print(
            "[bold red]--no-redact: secrets in the inputs are shown in the reports and "
            "archived as they are. Do not attach them to a public ticket.[/]"
        )
    diagnosis = run_analysis(paths, redact=not no_redact, summaries=not no_summaries)
    write_outputs(diagnosis, html=html, json_out=json_out, md=md)
    if archive is not None:
        from hangdoc.analyzer.ticket import write_ticket_archive

        write_ticket_archive(archive, paths, diagnosis, redact=not no_redact)
    if not quiet:
        from hangdoc.analyzer.render.terminal import render_terminal

        render_terminal(diagnosis, console)
    outputs = (("HTML report", html), ("findings JSON", json_out), ("Markdown", md),
               ("ticket archive", archive))  # fmt: skip
    for label, path in outputs:
        if path is not None:
            console.print(f"{label}: {path}")


def run_analysis(paths: list[Path], *, redact: bool = True, summaries: bool = True) -> Diagnosis:
    from hangdoc.analyzer.engine import analyze as run_rules
    from hangdoc.analyzer.loader import load_paths

    evidence = load_paths(paths, redact=redact, summaries=summaries)
    return run_rules(evidence)


def write_outputs(
    diagnosis: Diagnosis, *, html: Path | None, json_out: Path | None, md: Path | None
) -> None:
    if json_out is not None:
        from hangdoc.analyzer.redaction import NO_REDACT_NOTE

        doc = diagnosis.to_json()
        doc["redacted"] = NO_REDACT_NOTE not in diagnosis.evidence.notes  # an added key
        json_out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    if html is not None:
        from hangdoc.analyzer.render.html import write_html

        write_html(diagnosis, html)
    if md is not None:
        from hangdoc.analyzer.render.markdown import render_markdown

        md.write_text(render_markdown(diagnosis), encoding="utf-8")


@app.command()
def explain(rule: Annotated[str, typer.Argument(help="Rule id (HD001) or name.")]) -> None:
    """Print a rule's documentation: what it means, why it hangs, how to confirm and fix."""
    from rich.markdown import Markdown

    from hangdoc.rules import get_rule

    found = get_rule(rule)
    if found is None:
        raise UsageError(f"no rule {rule!r}", help_text="List them with: hangdoc rules")
    console.print(Markdown(f"# {found.id} {found.name}\n\n" + found.doc_text()))


@app.command(name="rules")
def list_rules() -> None:
    """List every rule with its id, categories and summary."""
    from rich.table import Table

    from hangdoc.rules import all_rules

    table = Table("id", "name", "categories", "summary")
    for rule in all_rules():
        table.add_row(rule.id, rule.name, ", ".join(c.value for c in rule.categories), rule.summary)
    console.print(table)


@app.command()
def demo(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Where the dump and the report go.")
    ] = Path("hangdoc-demo"),
    ranks: Annotated[int, typer.Option(min=2, max=8, help="Ranks of the live job.")] = 4,
    recorded: Annotated[
        bool, typer.Option(help="Analyze the built-in recorded dump instead of a live job.")
    ] = False,
) -> None:
    """Hang a real 4-rank gloo job (one rank stuck saving a checkpoint), collect it, explain it.

    Without torch (or without ptrace rights) the built-in recorded dump is analyzed.
    """
    from hangdoc.demo import run_demo

    run_demo(out, ranks=ranks, recorded=recorded, console=console)


def _register_node_collect() -> None:
    """The launcher's per-node entry point (hangdoc/jobcli.py), hidden from --help."""
    from hangdoc.jobcli import node_collect

    app.command(name="node-collect", hidden=True)(node_collect)


_register_node_collect()


def main(argv: list[str] | None = None) -> int:
    try:
        app(args=argv, standalone_mode=False)
    except HangdocError as exc:
        err_console.print(f"[bold red]hangdoc: {exc}[/]")
        if exc.help_text:
            err_console.print(exc.help_text)
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        err_console.print("aborted")
        return 130
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # click usage errors arrive here in non-standalone mode.
        import click

        if isinstance(exc, click.ClickException):
            exc.show(file=sys.stderr)
            return exc.exit_code
        raise
    return 0
