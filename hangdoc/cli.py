"""The ``hangdoc`` command: thin wrappers that parse options, call one library function each,
and print. Errors meant for the user are one line plus a remedy, never a traceback.

Heavy modules (pandas, jinja2, torch) are imported inside the commands so that
``hangdoc --help`` stays instant and never imports torch.

Exit statuses are the ``ExitStatus`` of hangdoc/errors.py (the README lists them): a usage
error is 2 whether click or a command finds it, and ``analyze`` ends with 0 only when the
diagnosis names a cause.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from hangdoc.cli_exits import FLAG, run_app
from hangdoc.common.version import __version__
from hangdoc.errors import ExitStatus, UsageError

if TYPE_CHECKING:
    from hangdoc.analyzer.diagnosis import Diagnosis

app = typer.Typer(
    name="hangdoc",
    help="Post-mortem analyzer for hung distributed PyTorch jobs: which rank is where, and why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
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
        typer.Option(
            "--version",
            "-V",
            callback=_version,
            is_eager=True,
            help="Print the version.",
            metavar=FLAG,
        ),
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
            metavar="PID",
        ),
    ] = None,
    all_ranks: Annotated[
        bool,
        typer.Option(
            "--all", help="Every process on this node with RANK/LOCAL_RANK.", metavar=FLAG
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Dump directory (default hangdoc-HOST-UTC).", metavar="DIR"
        ),
    ] = None,
    samples: Annotated[
        int, typer.Option(min=1, max=100, help="Samples per rank.", metavar="N")
    ] = 2,
    interval: Annotated[
        float, typer.Option(min=0.0, help="Seconds between samples.", metavar="SECONDS")
    ] = 3.0,
    native: Annotated[
        bool, typer.Option(help="Include native (C/C++) frames.", metavar=FLAG)
    ] = False,
    subprocesses: Annotated[
        bool, typer.Option(help="Also dump subprocesses (dataloader workers).", metavar=FLAG)
    ] = True,
    nonblocking: Annotated[
        bool,
        typer.Option(
            help="Do not pause the ranks while reading stacks (less exact).", metavar=FLAG
        ),
    ] = False,
    archive: Annotated[bool, typer.Option(help="Also write DIR.tar.gz.", metavar=FLAG)] = False,
    timeout: Annotated[
        float,
        typer.Option(min=1.0, help="Time limit of each step, in seconds.", metavar="SECONDS"),
    ] = 20.0,
    log: Annotated[
        list[Path] | None,
        typer.Option("--log", help="Extra log file to include (repeatable).", metavar="FILE"),
    ] = None,
    no_redact: Annotated[
        bool,
        typer.Option("--no-redact", help="Keep secrets in the dump (loud; avoid).", metavar=FLAG),
    ] = False,
    slurm_job: Annotated[
        str | None,
        typer.Option(
            "--slurm-job",
            help="Collect every node of this running Slurm job "
            "(srun --overlap in its allocation), into --out.",
            metavar="JOBID",
        ),
    ] = None,
    transfer: Annotated[
        str,
        typer.Option(
            help="With --slurm-job: auto (shared if the nodes see --out, else "
            "stream), shared, stream (dumps come back through srun), summary "
            "(only node summaries come back).",
            metavar="MODE",
        ),
    ] = "auto",
    node_timeout: Annotated[
        float,
        typer.Option(min=5.0, help="With --slurm-job: seconds a node may take.", metavar="SECONDS"),
    ] = 300.0,
    remote_hangdoc: Annotated[
        str | None,
        typer.Option(
            help="With --slurm-job: the hangdoc command on the nodes (default: "
            "this Python's `-m hangdoc`).",
            metavar="COMMAND",
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
        from hangdoc.pipeline import write_summary  # the node summary, read first by analyze

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
        list[Path],
        typer.Argument(
            help="Dump dirs, .tar.gz archives, or loose files; - reads a paste from stdin.",
            metavar="PATH",
            show_default=False,
        ),
    ],
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Write the HTML report here (- for stdout).", metavar="FILE"),
    ] = None,
    json_out: Annotated[
        Path | None,
        typer.Option(
            "--json", help="Write findings JSON (hangdoc.findings/1; - for stdout).", metavar="FILE"
        ),
    ] = None,
    md: Annotated[
        Path | None,
        typer.Option("--md", help="Write a Markdown summary (- for stdout).", metavar="FILE"),
    ] = None,
    archive: Annotated[
        Path | None,
        typer.Option(
            "--archive",
            help="Write a .tar.gz with the (redacted) inputs and the "
            "report, to attach to a ticket; analyze reads it back.",
            metavar="FILE",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", "-f", help="Replace output files that already exist.", metavar=FLAG
        ),
    ] = False,
    no_redact: Annotated[
        bool,
        typer.Option(
            "--no-redact",
            help="Keep secrets in the reports and the archived inputs (loud; avoid).",
            metavar=FLAG,
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No terminal summary.", metavar=FLAG)
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Also list the rules that lacked evidence.", metavar=FLAG
        ),
    ] = False,
    no_summaries: Annotated[
        bool,
        typer.Option(
            "--no-summaries",
            help="Read every raw file, even where a node summary (summary.json) would do.",
            metavar=FLAG,
        ),
    ] = False,
) -> None:
    """Explain why the job hung: terminal summary, and HTML/JSON/Markdown on request.

    Exit status: 0 a cause was found, 1 inconclusive (nothing usable included), 2 bad
    usage or an output path it cannot write, 4 an output could not be written.
    """
    from hangdoc.cli_streams import progress, stdin_paste
    from hangdoc.outputs import STDOUT, plan_outputs, write_all

    stdin_count = sum(1 for p in paths if str(p) == STDOUT)
    if stdin_count > 1:
        raise UsageError("- (stdin) can be given once")
    # Every output is checked before any work: a long analysis never ends in "cannot write".
    plan = plan_outputs(
        [("html", "--html", html), ("json", "--json", json_out), ("md", "--md", md),
         ("archive", "--archive", archive)],
        force=force,
        inputs=paths,
    )  # fmt: skip
    if no_redact:
        err_console.print(
            "[bold red]--no-redact: secrets in the inputs are shown in the reports and "
            "archived as they are. Do not attach them to a public ticket.[/]"
        )
    # With a report on stdout, everything for people goes to stderr.
    out = err_console if plan.to_stdout else console
    with contextlib.ExitStack() as stack:
        if stdin_count:
            pasted = stack.enter_context(stdin_paste(err_console))
            paths = [pasted if str(p) == STDOUT else p for p in paths]
        with progress(err_console, enabled=not quiet):
            diagnosis = run_analysis(paths, redact=not no_redact, summaries=not no_summaries)
            # The evidence lives until the process ends and holds no cycles to free
            # (loading and the rules ran without the collector); once the collector is
            # back it would walk all of it again, in the reports and at exit (0.2 s of
            # a 52 MB paste). Frozen, it walks only what the reports allocate.
            gc.freeze()
            result = write_all(plan, diagnosis, inputs=paths, redact=not no_redact)
    if not quiet:
        from hangdoc.analyzer.render.terminal import render_terminal

        render_terminal(diagnosis, out, verbose=verbose)
        for written in result.written:
            if written.path is not None:
                replaced = " (replaced the old one)" if written.replaces else ""
                out.print(
                    f"{written.label}: {written.path}{replaced}", highlight=False, soft_wrap=True
                )
    if result.error is not None:
        raise result.error
    raise typer.Exit(analysis_status(diagnosis))


def analysis_status(diagnosis: Diagnosis) -> int:
    """0 when the diagnosis names a cause (a hang, or not hung), 1 when inconclusive."""
    from hangdoc.analyzer.model import Verdict

    if diagnosis.verdict is Verdict.INCONCLUSIVE:
        return ExitStatus.INCONCLUSIVE
    return ExitStatus.OK


def run_analysis(paths: list[Path], *, redact: bool = True, summaries: bool = True) -> Diagnosis:
    """Load and diagnose (hangdoc.api.diagnose): one library call, as the demo uses it."""
    from hangdoc.api import diagnose

    return diagnose(paths, redact=redact, summaries=summaries)


@app.command()
def explain(
    rule: Annotated[str, typer.Argument(help="Rule id (HD001) or name.", metavar="RULE")],
) -> None:
    """Print a rule's documentation: what it means, why it hangs, how to confirm and fix."""
    from rich.markdown import Markdown

    from hangdoc.rules import get_rule

    found = get_rule(rule)
    if found is None:
        raise UsageError(f"no rule {rule!r}", help_text="List them with: hangdoc rules")
    console.print(Markdown(f"# {found.id} {found.name}\n\n" + found.doc_text()))


class RulesFormat(StrEnum):
    TABLE = "table"
    PLAIN = "plain"
    JSON = "json"


@app.command(name="rules")
def list_rules(
    fmt: Annotated[
        RulesFormat | None,
        typer.Option(
            "--format",
            help="table (default on a terminal), plain (one tab-separated line per rule, "
            "the default in a pipe) or json.",
            metavar="FORMAT",
            case_sensitive=False,
        ),
    ] = None,
) -> None:
    """List every rule with its id, categories and summary."""
    from hangdoc.rules import all_rules

    chosen = fmt or (RulesFormat.TABLE if console.is_terminal else RulesFormat.PLAIN)
    rows = [
        (rule.id, rule.name, [c.value for c in rule.categories], rule.summary)
        for rule in all_rules()
    ]
    if chosen is RulesFormat.JSON:
        doc = [{"id": i, "name": n, "categories": c, "summary": s} for i, n, c, s in rows]
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif chosen is RulesFormat.PLAIN:
        # Never wrapped or cut: `hangdoc rules | grep lock` must find the whole summary.
        sys.stdout.writelines(
            f"{i}\t{n}\t{','.join(c)}\t{' '.join(s.split())}\n" for i, n, c, s in rows
        )
    else:
        from rich.table import Table

        table = Table("id", "name", "categories", "summary")
        for rule_id, name, cats, summary in rows:
            table.add_row(rule_id, name, ", ".join(cats), summary)
        console.print(table)


@app.command()
def demo(
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Where the dump and the report go.", metavar="DIR"),
    ] = Path("hangdoc-demo"),
    ranks: Annotated[
        int, typer.Option(min=2, max=8, help="Ranks of the live job.", metavar="N")
    ] = 4,
    recorded: Annotated[
        bool,
        typer.Option(
            help="Analyze the built-in recorded dump instead of a live job.", metavar=FLAG
        ),
    ] = False,
) -> None:
    """Hang a real 4-rank gloo job (one rank stuck saving a checkpoint), collect it, explain it.

    Without torch (or without ptrace rights) the built-in recorded dump is analyzed.
    """
    from hangdoc.demo import run_demo

    run_demo(out, ranks=ranks, recorded=recorded, console=console)


@app.command(name="eval")
def evaluate_casebook(
    cases: Annotated[
        Path,
        typer.Argument(help="The casebook folder (fixtures/cases in a clone).", metavar="DIR"),
    ] = Path("fixtures/cases"),
    write: Annotated[
        Path | None,
        typer.Option(
            "--write", help="Write the accuracy tables here (docs/accuracy.md).", metavar="FILE"
        ),
    ] = None,
    split: Annotated[
        str,
        typer.Option(
            help="The split whose accuracy is printed last: train, test, all.", metavar="SPLIT"
        ),
    ] = "train",
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="First fit the confidence calibration to the casebook and write it into "
            "the source tree that holds DIR (its hangdoc/analyzer/calibration.json); the scores "
            "then follow it.",
        ),
    ] = False,
    calibration_out: Annotated[
        Path | None,
        typer.Option(
            "--calibration-out",
            help="With --calibrate: write the fitted table here instead.",
            metavar="FILE",
        ),
    ] = None,
    floor: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Fail (status 1) below this train share, category right.",
            metavar="SHARE",
        ),
    ] = None,
    exact_floor: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Fail (status 1) below this train share, cause named in label, exact.",
            metavar="SHARE",
        ),
    ] = None,
) -> None:
    """Score hangdoc on a casebook of real reports: accuracy per split, per category,
    culprits, calibration of the stated confidence (fixtures/cases/README.md)."""
    from hangdoc.calibrate import target_for
    from hangdoc.casebook_eval import TRAIN_EXACT_FLOOR, TRAIN_FLOOR
    from hangdoc.casebook_report import run_eval

    if split not in ("train", "test", "all"):
        raise UsageError(f"--split {split!r}", help_text="Choose train, test or all.")
    if not cases.is_dir():
        raise UsageError(f"{cases}: not a folder", help_text="Pass the casebook folder.")
    if calibration_out is not None and not calibrate:
        raise UsageError("--calibration-out without --calibrate", help_text="Add --calibrate.")
    # Where the table goes is settled (and refused, for an installed package) first.
    target = target_for(cases, calibration_out) if calibrate else None
    summary, status = run_eval(
        cases,
        write,
        split,
        TRAIN_FLOOR if floor is None else floor,
        calibrate_to=target,
        exact_floor=TRAIN_EXACT_FLOOR if exact_floor is None else exact_floor,
    )
    sys.stdout.write(summary + "\n")  # Markdown rows: never wrapped
    if status:
        raise typer.Exit(status)


def _register_node_collect() -> None:
    """The launcher's per-node entry point (hangdoc/jobcli.py), hidden from --help."""
    from hangdoc.jobcli import node_collect

    app.command(name="node-collect", hidden=True)(node_collect)


_register_node_collect()


def _register_watch() -> None:
    """``hangdoc watch`` (hangdoc/watch/cli.py) and its hidden per-node side."""
    from hangdoc.watch.cli import node_watch, watch

    app.command(name="watch")(watch)
    app.command(name="node-watch", hidden=True)(node_watch)


_register_watch()


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status (hangdoc/errors.py ``ExitStatus``). A usage error,
    click's or hangdoc's, is one line and the usage, never a traceback."""
    return run_app(app, argv, err_console)
