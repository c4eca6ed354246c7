"""Where ``hangdoc analyze`` puts its reports: checked before the analysis, written after.

A 20-minute analysis of a 16k-rank job must never end in "cannot write report.html":
every output path is checked first (its folder exists and is writable, it is not a
directory, it does not overwrite a file unless ``--force``), and one line naming the
path ends the command with status 2 before any work. After the analysis every
requested output is written even when another one fails, each through a temporary
file renamed into place, so nobody opens a half-written report. ``-`` sends an output
to stdout, so that ``hangdoc analyze dump --json - | jq`` works.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from hangdoc.common.atomic import write_text_atomic
from hangdoc.errors import OutputPathError, OutputWriteError

if TYPE_CHECKING:
    from hangdoc.analyzer.diagnosis import Diagnosis

STDOUT = "-"
Kind = Literal["html", "json", "md", "archive"]
_LABELS: dict[Kind, str] = {
    "html": "HTML report",
    "json": "findings JSON",
    "md": "Markdown",
    "archive": "ticket archive",
}


@dataclass(frozen=True, slots=True)
class Output:
    """One requested output: ``path`` None means stdout."""

    kind: Kind
    option: str
    path: Path | None
    replaces: bool = False  # an existing file that --force lets us replace
    special: bool = False  # an existing fifo or device (/dev/stdout): written in place

    @property
    def label(self) -> str:
        return _LABELS[self.kind]

    @property
    def where(self) -> str:
        return "stdout" if self.path is None else str(self.path)


@dataclass(frozen=True, slots=True)
class OutputPlan:
    """The outputs of one analyze run, all checked."""

    outputs: tuple[Output, ...]

    @property
    def to_stdout(self) -> bool:
        """True when stdout carries a report: the terminal summary must then stay off it."""
        return any(o.path is None for o in self.outputs)


def plan_outputs(
    requested: Sequence[tuple[Kind, str, Path | None]],
    *,
    force: bool,
    inputs: Sequence[Path] = (),
) -> OutputPlan:
    """Check every requested output before any work; OutputPathError names the first bad one.

    ``requested`` holds (kind, option, path) with path None when not asked for.
    """
    outputs: list[Output] = []
    seen: dict[str, str] = {}
    input_paths = {_real(p) for p in inputs if str(p) != STDOUT}
    for kind, option, path in requested:
        if path is None:
            continue
        out = _check(kind, option, path, force=force)
        key = STDOUT if out.path is None else _real(out.path)
        if key in seen:
            what = "stdout" if key == STDOUT else str(path)
            raise OutputPathError(
                f"{seen[key]} and {option} both write to {what}",
                help_text="Give each output its own destination; at most one may be '-'.",
            )
        if out.replaces and any(key == i or key.startswith(i + os.sep) for i in input_paths):
            # --force replaces outputs, never evidence: an existing file that is an input,
            # or lies in an input folder, stays as it is.
            raise OutputPathError(
                f"{option} {path}: is one of the inputs; --force never replaces an input",
                help_text="Choose another name.",
            )
        seen[key] = option
        outputs.append(out)
    return OutputPlan(tuple(outputs))


def _real(path: Path) -> str:
    return os.path.realpath(path)


def _check(kind: Kind, option: str, path: Path, *, force: bool) -> Output:
    if str(path) == STDOUT:
        if kind == "archive":
            raise OutputPathError(
                f"{option} -: a .tar.gz archive cannot go to stdout",
                help_text="Give a file name, e.g. --archive hang.tar.gz.",
            )
        return Output(kind, option, None)
    replaces = special = False
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputPathError(f"{option} {path}: {exc.strerror or exc}") from exc
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputPathError(
                f"{option} {path}: is a directory",
                help_text=f"Give a file name inside it, e.g. {option} {path / _example(kind)}.",
            )
        if stat.S_ISREG(st.st_mode):
            if not force:
                raise OutputPathError(
                    f"{option} {path}: already exists",
                    help_text="Pass --force to replace it, or choose another name.",
                )
            replaces = True
        else:
            special = True  # /dev/stdout, a fifo: written in place, never replaced
    folder = path.absolute().parent
    if not folder.is_dir():
        why = "does not exist" if not folder.exists() else "is not a folder"
        raise OutputPathError(
            f"{option} {path}: the folder {folder} {why}",
            help_text=f"Create it first (mkdir -p {folder}) or choose another place.",
        )
    if special:
        if not os.access(path, os.W_OK):
            raise OutputPathError(f"{option} {path}: not writable")
    else:
        _probe(option, path, folder)
    return Output(kind, option, path, replaces=replaces, special=special)


def _example(kind: Kind) -> str:
    return {"html": "report.html", "json": "findings.json", "md": "summary.md"}.get(
        kind, "hang.tar.gz"
    )


def _probe(option: str, path: Path, folder: Path) -> None:
    """Create and remove a file in ``folder``: the only check that root's bypass of
    permission bits, read-only mounts and full quotas cannot fool."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".hangdoc-probe-"):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise OutputPathError(
            f"{option} {path}: cannot write in {folder} ({reason.lower()})",
            help_text="Choose a folder you can write to.",
        ) from exc


def render(kind: Kind, diagnosis: Diagnosis) -> str:
    """The text of a text output (html, json, md)."""
    if kind == "json":
        doc = diagnosis.to_json()
        doc["redacted"] = diagnosis.evidence.redacted  # an added key
        return json.dumps(doc, indent=2) + "\n"
    if kind == "html":
        from hangdoc.analyzer.render.html import render_html

        return render_html(diagnosis)
    if kind == "md":
        from hangdoc.analyzer.render.markdown import render_markdown

        return render_markdown(diagnosis)
    raise ValueError(f"{kind} is not a text output")


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What ``write_all`` wrote, and the error naming what it could not (None if all)."""

    written: tuple[Output, ...]
    error: OutputWriteError | None


def write_all(
    plan: OutputPlan, diagnosis: Diagnosis, *, inputs: Sequence[Path], redact: bool = True
) -> WriteResult:
    """Write every planned output, in order.

    A failing output (disk full, a renderer bug) does not stop the others: they are all
    attempted, and the result's error names each one that failed. The caller still
    shows the diagnosis, then ends with that error's status.
    """
    written: list[Output] = []
    failures: list[str] = []
    for out in plan.outputs:
        try:
            if out.kind == "archive":
                assert out.path is not None  # checked by plan_outputs
                _write_archive(out.path, inputs, diagnosis, redact=redact)
            else:
                _write_text(out, render(out.kind, diagnosis))
        except BrokenPipeError:
            raise  # stdout's reader left: main() ends quietly
        except Exception as exc:  # one output's failure must not lose the others
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            failures.append(f"{out.option} {out.where}: {type(exc).__name__}: {reason}")
            continue
        written.append(out)
    error = None
    if failures:
        error = OutputWriteError(
            "could not write " + "; ".join(failures),
            help_text=(
                "The other outputs were written. Free some space or choose another place, "
                "and run the analysis again."
            ),
        )
    return WriteResult(tuple(written), error)


def _write_text(out: Output, text: str) -> None:
    if out.path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    if out.special:
        with out.path.open("w", encoding="utf-8") as handle:
            handle.write(text)
        return
    write_text_atomic(out.path.absolute(), text)


def _write_archive(dest: Path, inputs: Sequence[Path], diagnosis: Diagnosis, redact: bool) -> None:
    """The ticket archive, built under a temporary folder beside ``dest`` and renamed
    over it (so --force replaces an old archive only once the new one is whole)."""
    from hangdoc.analyzer.render.html import render_html
    from hangdoc.analyzer.render.markdown import render_markdown
    from hangdoc.analyzer.ticket import write_ticket_archive

    reports = {
        "report.html": render_html(diagnosis),
        # the findings as the analysis left them: the marker says whether they are redacted
        "findings.json": json.dumps(diagnosis.to_json(), indent=2) + "\n",
        "summary.md": render_markdown(diagnosis),
    }
    stage = Path(tempfile.mkdtemp(dir=dest.absolute().parent, prefix=".hangdoc-archive-"))
    try:
        built = write_ticket_archive(
            stage / dest.name, inputs, reports, verdict=diagnosis.verdict.value, redact=redact
        )
        os.replace(built, dest)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
