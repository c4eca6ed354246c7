"""``hangdoc demo``: the whole loop on a real hung job, in one command.

A 4-rank gloo job on CPU hangs for real (the last rank's checkpoint write never
returns while the others wait in all_gather); hangdoc collects and explains it while it
hangs (hangdoc/pipeline.py, the path ``hangdoc watch`` takes too), then kills it. Without
torch or py-spy rights, a dump recorded from the same scenario (shipped in the package)
is analyzed instead.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from hangdoc.errors import HangdocError, OutputPathError

if TYPE_CHECKING:
    from hangdoc.pipeline import Reports

RECORDED = Path(__file__).with_name("demo_data") / "checkpoint"
SCENARIO = "checkpoint"


def _fresh_dir(base: Path) -> Path:
    """``base``, or ``base-2``, ``base-3``... whichever does not exist yet (or is an empty
    folder): a second demo never overwrites the first one's reports."""
    candidate, n = base, 1
    try:
        while candidate.exists() and (not candidate.is_dir() or any(candidate.iterdir())):
            n += 1
            candidate = base.with_name(f"{base.name}-{n}")
        candidate.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(
            f"--out {base}: cannot create {candidate} ({(exc.strerror or str(exc)).lower()})",
            help_text="Choose a folder you can write to, e.g. --out /tmp/hangdoc-demo.",
        ) from exc
    return candidate


def live_demo_possible() -> str | None:
    """None when a live demo can run here, else why not."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed (pip install 'hangdoc[torch]')"
    if shutil.which("py-spy") is None and not (Path(sys.executable).parent / "py-spy").exists():
        return "py-spy is not installed"
    if os.geteuid() != 0:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope")
        if scope.exists() and scope.read_text().strip() not in ("0", ""):
            return "py-spy needs root or kernel.yama.ptrace_scope=0 to read another process"
    return None


def run_demo(out: Path, *, ranks: int, recorded: bool, console: Console) -> Path:
    """Collect (or copy the recorded dump), analyze, write the three reports into a fresh
    folder under ``out``, and print the summary; the folder is returned."""
    from hangdoc.analyzer.render.terminal import render_terminal
    from hangdoc.pipeline import DUMP_NAME, write_reports

    target = _fresh_dir(out)
    why_not = None if not recorded else "--recorded was given"
    if why_not is None:
        why_not = live_demo_possible()
    if why_not is None:
        reports = _live(target, ranks, console)
    else:
        console.print(f"[yellow]analyzing the recorded demo dump: {why_not}[/]")
        shutil.copytree(RECORDED, target / DUMP_NAME)
        reports = write_reports([target / DUMP_NAME], target)
    render_terminal(reports.diagnosis, console)
    console.print(
        f"\ndump:     {reports.dump}\nreport:   {reports.html}\nfindings: {reports.json}\n"
        f"markdown: {reports.md}"
    )
    if reports.error is not None:
        raise reports.error
    return target


def _live(target: Path, ranks: int, console: Console) -> Reports:
    """Hang the scenario, collect and analyze it while it hangs (the pipeline ``hangdoc
    watch`` uses too), then kill it."""
    from hangdoc.collectors.collect import CollectOptions
    from hangdoc.pipeline import collect_and_report
    from hangdoc.scenarios.launch import launch

    console.print(
        f"starting a {ranks}-rank gloo job: rank {ranks - 1} saves a checkpoint that never "
        "finishes, the others wait in all_gather; collecting it once every rank is blocked…"
    )
    with (
        tempfile.TemporaryDirectory(prefix=f"hangdoc-{SCENARIO}-") as workdir,
        launch(SCENARIO, ranks, Path(workdir)) as job,
    ):
        try:
            job.wait_ready(timeout=180.0)
        except (TimeoutError, RuntimeError) as exc:
            raise HangdocError(f"the demo job did not start: {exc}") from exc
        pids = tuple(p.pid for p in job.procs if p.poll() is None)
        reports = collect_and_report(CollectOptions(pids=pids, interval_s=2.0), target)
    console.print(f"collected pids {', '.join(map(str, pids))}; the job was killed.")
    return reports
