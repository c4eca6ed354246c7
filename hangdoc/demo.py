"""``hangdoc demo``: the whole loop on a real hung job, in one command.

A 4-rank gloo job on CPU hangs for real (the last rank's checkpoint write never
returns while the others wait in all_gather); hangdoc collects it, kills it, and
explains it. Without torch or py-spy rights, a dump recorded from the same scenario
(shipped in the package) is analyzed instead.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

from rich.console import Console

from hangdoc.errors import HangdocError, OutputPathError

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
    from hangdoc.api import diagnose
    from hangdoc.outputs import plan_outputs, write_all

    target = _fresh_dir(out)
    why_not = None if not recorded else "--recorded was given"
    if why_not is None:
        why_not = live_demo_possible()
    if why_not is None:
        dump = _collect_live(target, ranks, console)
    else:
        console.print(f"[yellow]analyzing the recorded demo dump: {why_not}[/]")
        dump = target / "dump"
        shutil.copytree(RECORDED, dump)
    html, json_out, md = target / "report.html", target / "findings.json", target / "summary.md"
    # The same checked, atomic writes as `hangdoc analyze` (the folder is fresh: no --force).
    plan = plan_outputs(
        [("html", "--html", html), ("json", "--json", json_out), ("md", "--md", md)],
        force=False,
    )
    diagnosis = diagnose([dump])
    result = write_all(plan, diagnosis, inputs=[dump])
    render_terminal(diagnosis, console)
    console.print(f"\ndump:     {dump}\nreport:   {html}\nfindings: {json_out}\nmarkdown: {md}")
    if result.error is not None:
        raise result.error
    return target


def _collect_live(target: Path, ranks: int, console: Console) -> Path:
    from hangdoc.scenarios.capture import capture

    dump = target / "dump"
    console.print(
        f"starting a {ranks}-rank gloo job: rank {ranks - 1} saves a checkpoint that never "
        "finishes, the others wait in all_gather; collecting it once every rank is blocked…"
    )
    try:
        pids = capture(SCENARIO, ranks, dump, interval_s=2.0)
    except (TimeoutError, RuntimeError) as exc:
        raise HangdocError(f"the demo job did not start: {exc}") from exc
    console.print(f"collected pids {', '.join(map(str, pids))}; the job was killed. Analyzing…")
    return dump
