"""``hangdoc analyze --archive``: one .tar.gz to attach to a ticket, that analyze reads back.

Layout::

    hangdoc-ticket.json      # marks the archive; lists what is inside
    report.html  findings.json  summary.md
    inputs/<n>-<name>/...    # every input as given: dumps, archives, loose files

Inputs are copied with their text redacted (``collectors.redact``): a dump written by
``hangdoc collect`` is redacted already, but loose files from a ticket are not. Files
that are not text (flight recorder pickles) are copied as they are. When ``analyze``
meets a folder with the marker it reads ``inputs/`` only, so the report and JSON inside
are never mistaken for evidence.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hangdoc import __version__
from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.collectors.archive import write_archive
from hangdoc.collectors.redact import redact_text

MARKER = "hangdoc-ticket.json"
INPUTS = "inputs"
# Text files larger than this are copied as their tail (the end of a log holds the hang).
MAX_TEXT_COPY = 64 * 1024 * 1024


def _looks_text(head: bytes) -> bool:
    if not head:
        return True
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False  # UTF-16: keep as is rather than mangle
    return b"\0" not in head[:8192]


def _copy_redacted(src: Path, dest: Path, redact: bool) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with src.open("rb") as handle:
        head = handle.read(8192)
    if not redact or not _looks_text(head):
        shutil.copyfile(src, dest)
        return
    size = src.stat().st_size
    with src.open("rb") as handle:
        if size > MAX_TEXT_COPY:
            handle.seek(size - MAX_TEXT_COPY)
        data = handle.read(MAX_TEXT_COPY)
    text = data.decode("utf-8", errors="surrogateescape")
    dest.write_bytes(redact_text(text).encode("utf-8", errors="surrogateescape"))


def _copy_input(src: Path, dest: Path, redact: bool) -> None:
    if src.is_dir():
        for root, dirs, files in os.walk(src, followlinks=False):
            dirs.sort()
            rel = Path(root).relative_to(src)
            for name in sorted(files):
                path = Path(root) / name
                if path.is_symlink() or not path.is_file():
                    continue
                _copy_redacted(path, dest / rel / name, redact)
    elif src.is_file():
        _copy_redacted(src, dest, redact)


def write_ticket_archive(
    dest: Path,
    inputs: Sequence[Path],
    diagnosis: Diagnosis,
    *,
    redact: bool = True,
) -> Path:
    """Write the archive at ``dest`` (never overwriting) and return its path."""
    from hangdoc.analyzer.render.html import write_html
    from hangdoc.analyzer.render.markdown import render_markdown

    with tempfile.TemporaryDirectory(prefix="hangdoc-ticket-") as tmp:
        stage = Path(tmp) / dest.name.removesuffix(".tar.gz").removesuffix(".tgz")
        stage.mkdir()
        names = []
        for index, src in enumerate(inputs):
            name = f"{index}-{src.resolve().name or 'input'}"
            _copy_input(src, stage / INPUTS / name, redact)
            names.append(name)
        write_html(diagnosis, stage / "report.html")
        (stage / "findings.json").write_text(
            json.dumps(diagnosis.to_json(), indent=2) + "\n", encoding="utf-8"
        )
        (stage / "summary.md").write_text(render_markdown(diagnosis), encoding="utf-8")
        (stage / MARKER).write_text(
            json.dumps(
                {
                    "format": "hangdoc.ticket/1",
                    "hangdoc_version": __version__,
                    "inputs": names,
                    "redacted": redact,
                    "verdict": diagnosis.verdict.value,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        return write_archive(stage, dest)
