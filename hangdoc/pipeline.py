"""One path from a stuck job to a diagnosis on disk: collect, analyze, write the reports.

``hangdoc demo`` (a live job it hangs itself), ``hangdoc watch`` (a job it watches, on one
node or through Slurm) and the CLI's whole-job commands all end the same way: a folder
holding the dump and, beside it, ``report.html``, ``findings.json`` and ``summary.md``,
written with the same checked, atomic writes as ``hangdoc analyze`` (hangdoc/outputs.py).
Doing it in one place keeps the three from drifting apart (the node summary written
with the dump, the same file names, the same handling of an output that cannot be
written).

Like the CLI, this module joins the collectors and the analyzer, so it imports them
inside the functions: ``import hangdoc.pipeline`` stays cheap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hangdoc.analyzer.diagnosis import Diagnosis
    from hangdoc.collectors.collect import CollectOptions, ProgressSink
    from hangdoc.errors import OutputWriteError

DUMP_NAME = "dump"
REPORT_NAMES: dict[str, str] = {
    "html": "report.html",
    "json": "findings.json",
    "md": "summary.md",
}


@dataclass(frozen=True)
class Reports:
    """What one collect → analyze run left in ``folder``."""

    folder: Path
    dump: Path
    diagnosis: Diagnosis
    error: OutputWriteError | None  # an output that could not be written (the rest were)

    @property
    def html(self) -> Path:
        return self.folder / REPORT_NAMES["html"]

    @property
    def json(self) -> Path:
        return self.folder / REPORT_NAMES["json"]

    @property
    def md(self) -> Path:
        return self.folder / REPORT_NAMES["md"]

    def paths(self) -> dict[str, Path]:
        """Every file and folder a person (or an --on-hang command) may want, by name."""
        return {"dump": self.dump, "html": self.html, "json": self.json, "md": self.md}


def write_summary(dump_dir: Path) -> str | None:
    """The collectors' finalizer: the node summary, or why it could not be written."""
    from hangdoc.analyzer.summarize.write import write_node_summary

    try:
        write_node_summary(dump_dir)
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def write_reports(dumps: Sequence[Path], folder: Path, *, redact: bool = True) -> Reports:
    """Analyze ``dumps`` and write the three reports into ``folder`` (which must exist and
    hold none of them yet: nothing is overwritten). ``Reports.error`` names an output that
    could not be written; the others are written all the same."""
    from hangdoc.api import diagnose
    from hangdoc.outputs import plan_outputs, write_all

    plan = plan_outputs(
        [("html", "--html", folder / REPORT_NAMES["html"]),
         ("json", "--json", folder / REPORT_NAMES["json"]),
         ("md", "--md", folder / REPORT_NAMES["md"])],
        force=False,
        inputs=dumps,
    )  # fmt: skip
    diagnosis = diagnose(list(dumps), redact=redact)
    result = write_all(plan, diagnosis, inputs=dumps, redact=redact)
    return Reports(folder, dumps[0] if len(dumps) == 1 else folder, diagnosis, result.error)


def collect_dump(
    options: CollectOptions, folder: Path, progress: ProgressSink | None = None
) -> Path:
    """Collect the ranks ``options`` names into ``folder/dump``, with its node summary; the
    dump's path. CollectionError when nothing could be collected; a partial dump (a full
    disk, a manifest that stopped fitting) is returned: its manifest says what is missing."""
    from hangdoc.collectors.collect import run_collect
    from hangdoc.errors import CollectionError

    dump = folder / DUMP_NAME
    try:
        run_collect(dataclasses.replace(options, out=dump), progress, write_summary)
    except CollectionError:
        if not (dump / "manifest.json").is_file():
            raise
    return dump


def collect_and_report(
    options: CollectOptions, folder: Path, progress: ProgressSink | None = None
) -> Reports:
    """Collect into ``folder/dump``, then analyze it into the reports beside it."""
    dump = collect_dump(options, folder, progress)
    return write_reports([dump], folder, redact=options.redact)
