"""What ``hangdoc watch`` does with a confirmed stall: collect, analyze, report, page.

One folder per stall, ``OUT/hang-N``, holding the dump, ``report.html``,
``findings.json``, ``summary.md`` (hangdoc/pipeline.py, the path ``demo`` takes too) and
``hang.json``: when the job went quiet, when the stall was confirmed, when the report was
written, which ranks had ended and how, and what ``--on-hang`` did. The folder is written
while the job still hangs; the report files appear atomically, so a person (or the
``--on-hang`` command) never opens a half-written one.

A stall that the analysis calls *not hung* (the ranks moved between the collector's
samples: slow, not stuck) leaves no report: its folder is removed and watch looks again
after another quiet period. Collection errors and bugs are said in one line; the
watching goes on.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangdoc.collectors.collect import CollectOptions
from hangdoc.collectors.watch.stall import Outcome, Say, Stall
from hangdoc.common.atomic import write_json_atomic
from hangdoc.errors import HangdocError
from hangdoc.watch.onhang import run_on_hang

HANG_NAME = "hang.json"
HANG_FORMAT = "hangdoc.watch/1"


@dataclass(frozen=True)
class CollectSettings:
    """How a stalled node is collected (``hangdoc collect``'s options)."""

    samples: int = 2
    interval_s: float = 3.0
    step_timeout_s: float = 20.0
    nonblocking: bool = False
    native: bool = False
    redact: bool = True


class Reporter:
    """Turns a stall into ``OUT/hang-N``; see the module doc."""

    def __init__(
        self,
        out: Path,
        say: Say,
        on_hang: Sequence[str] = (),
        on_hang_timeout_s: float = 300.0,
        redact: bool = True,
    ) -> None:
        self.out = out
        self.say = say
        self.on_hang = tuple(on_hang)
        self.on_hang_timeout_s = on_hang_timeout_s
        self.redact = redact
        self.reported: list[Path] = []

    def report(self, summary: dict[str, Any], collect: Callable[[Path], Path]) -> Outcome:
        """``collect(folder)`` writes the dump into the folder and returns it; then the
        analysis, the reports, hang.json and --on-hang. Never raises."""
        folder = self._new_folder()
        try:
            return self._report(folder, summary, collect)
        except HangdocError as exc:
            self.say(f"could not report the stall: {exc}")
        except Exception as exc:  # a bug must not end the watching, nor print a traceback
            where = ""
            if exc.__traceback__ is not None:
                frame = exc.__traceback__
                while frame.tb_next is not None:
                    frame = frame.tb_next
                where = f" at {Path(frame.tb_frame.f_code.co_filename).name}:{frame.tb_lineno}"
            self.say(
                f"internal error while reporting (a bug in hangdoc, please report it): "
                f"{type(exc).__name__}: {exc}{where}"
            )
        if not any(folder.iterdir()):
            folder.rmdir()
        return Outcome.RECHECK

    def _new_folder(self) -> Path:
        self.out.mkdir(parents=True, exist_ok=True)
        number = 1
        while (self.out / f"hang-{number}").exists():
            number += 1
        folder = self.out / f"hang-{number}"
        folder.mkdir()
        return folder

    def _report(
        self, folder: Path, summary: dict[str, Any], collect: Callable[[Path], Path]
    ) -> Outcome:
        from hangdoc.analyzer.model import Verdict
        from hangdoc.pipeline import write_reports

        self.say(f"stall confirmed; collecting and analyzing into {folder}")
        dump = collect(folder)
        collected_at = time.time()
        reports = write_reports([dump], folder, redact=self.redact)
        diagnosis = reports.diagnosis
        primary = diagnosis.primary
        if diagnosis.verdict is Verdict.NOT_HUNG:
            title = primary.title if primary is not None else "the ranks moved"
            self.say(f"not hung after all ({title}); no report, watching on")
            shutil.rmtree(folder, ignore_errors=True)
            return Outcome.RECHECK
        culprits = ",".join(str(r) for r in primary.culprit_ranks) if primary else ""
        doc: dict[str, Any] = {
            "format": HANG_FORMAT,
            **summary,
            "collected_at": round(collected_at, 3),
            "reported_at": round(time.time(), 3),
            "verdict": diagnosis.verdict.value,
            "category": primary.category.value if primary else None,
            "rule": primary.rule if primary else None,
            "culprit_ranks": list(primary.culprit_ranks) if primary else [],
            "title": primary.title if primary else None,
            "paths": {k: str(v) for k, v in reports.paths().items()},
        }
        self.reported.append(folder)
        self.say(
            f"HANG REPORTED ({diagnosis.verdict.value}): "
            + (primary.title if primary else "no cause named")
            + "".join(f"\n  {name:<9}{path}" for name, path in reports.paths().items())
        )
        if reports.error is not None:
            self.say(f"warning: {reports.error}")
        if self.on_hang:
            values = {
                "dir": str(folder), "verdict": diagnosis.verdict.value,
                "category": doc["category"] or "unknown", "culprits": culprits,
                "title": doc["title"] or "", **{k: str(v) for k, v in reports.paths().items()},
            }  # fmt: skip
            result = run_on_hang(self.on_hang, values, folder, self.on_hang_timeout_s)
            self.say(f"--on-hang {' '.join(result.argv)}: {result.text()} (output in {result.log})")
            doc["on_hang"] = {
                "argv": list(result.argv), "status": result.status,
                "duration_s": round(result.duration_s, 3), "error": result.error,
                "log": str(result.log),
            }  # fmt: skip
        # Last: its presence says the folder is complete, --on-hang's outcome included.
        write_json_atomic(folder / HANG_NAME, doc)
        return Outcome.REPORTED


class LocalHandler:
    """The stall handler of a watch on one node: collect its ranks, then report."""

    def __init__(self, reporter: Reporter, settings: CollectSettings) -> None:
        self.reporter = reporter
        self.settings = settings
        self.reported = False

    def stalled(self, stall: Stall) -> Outcome:
        from hangdoc.pipeline import collect_dump

        for note in stall.notes:
            self.reporter.say(f"note: {note}")
        # A rank that ended says its last words in its output files: collected with the
        # survivors' dump (as `collect --log` would), since its /proc is gone.
        outputs = tuple(Path(p) for e in stall.exited for p in e.outputs)
        s = self.settings
        options = CollectOptions(
            pids=stall.pids, samples=s.samples, interval_s=s.interval_s,
            step_timeout_s=s.step_timeout_s, nonblocking=s.nonblocking, native=s.native,
            redact=s.redact, extra_paths=outputs,
        )  # fmt: skip
        outcome = self.reporter.report(
            stall.summary(), lambda folder: collect_dump(options, folder)
        )
        self.reported = outcome is Outcome.REPORTED
        return outcome

    def collecting(self) -> bool:
        return False  # the collection runs inside stalled(); its footprint is re-read after

    def resumed(self, reasons: list[str]) -> None:
        if self.reported:
            self.reported = False
            self.reporter.say(
                f"the job moves again ({reasons[0]}); a new stall will get a new report"
            )
