"""``hangdoc analyze --archive``: one .tar.gz to attach to a ticket, that analyze reads back.

Not a renderer: it copies the inputs the way the loader reads them (archives opened,
pickles read with the restricted unpickler, text decoded like the parsers do) and packs
them with the reports it is given, in the layout ``loading/ticket_format.py`` names.

Layout::

    hangdoc-ticket.json      # marks the archive; lists what is inside, and what was left out
    report.html  findings.json  summary.md
    inputs/<n>-<name>/...    # every input as given: dumps, archives, loose files

Inputs are copied redacted (``hangdoc/common/redact.py``): a dump written by ``hangdoc
collect`` is redacted already, but loose files from a ticket are not, and a ticket
archive is meant for public trackers. So every file is copied in a form whose every
byte went through redaction, or not at all:

* text (UTF-8, Latin-1, UTF-16): decoded, redacted (JSON by key and by shape: py-spy
  ``--locals`` values under a secret-looking name), written as UTF-8; past
  ``MAX_TEXT_COPY`` only its tail, where the hang is;
* archives and compressed files: extracted safely (``hangdoc/common/archive.py``) into a folder
  of the same name and copied file by file, the same way;
* flight recorder pickles: read with the restricted unpickler, their strings redacted,
  and pickled again (plain containers only, as before);
* anything else (an unknown binary, a pickle that names code): left out, and listed
  with the reason in the marker, which ``analyze`` reports when it reads the archive.

With ``redact=False`` (``--no-redact``) files are copied as they are and the marker
says so. When ``analyze`` meets a folder with the marker it reads ``inputs/`` only, so
the report and JSON inside are never mistaken for evidence.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.analyzer.loading.ticket_format import INPUTS, MARKER
from hangdoc.analyzer.parsers.base import decode_bytes
from hangdoc.common.archive import ArchiveError, archive_kind, extract_archive, write_archive
from hangdoc.common.redact import redact_json_bytes, redact_json_value, redact_text
from hangdoc.common.safe_unpickle import safe_loads
from hangdoc.common.text import HEAD_BYTES, looks_binary
from hangdoc.common.version import __version__

# Text files larger than this are copied as their tail (the end of a log holds the hang).
MAX_TEXT_COPY = 64 * 1024 * 1024
# A pickle is one document: past this it is left out rather than loaded whole.
MAX_PICKLE_COPY = 512 * 1024 * 1024


@dataclass
class _Copier:
    """Copies inputs into the stage, redacted; remembers what it had to leave out."""

    redact: bool
    stage: Path
    left_out: list[dict[str, str]] = field(default_factory=list)

    def copy(self, src: Path, dest: Path) -> None:
        if src.is_dir():
            for root, dirs, files in os.walk(src, followlinks=False):
                dirs.sort()
                rel = Path(root).relative_to(src)
                for name in sorted(files):
                    path = Path(root) / name
                    if path.is_symlink() or not path.is_file():
                        continue
                    self._file(path, dest / rel / name)
        elif src.is_file():
            self._file(src, dest)

    def _skip(self, dest: Path, why: str, member: str | None = None) -> None:
        path = dest.relative_to(self.stage).as_posix() + (f"!/{member}" if member else "")
        self.left_out.append({"path": path, "reason": why})

    def _file(self, src: Path, dest: Path) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not self.redact:
            shutil.copyfile(src, dest)
            return
        try:
            with src.open("rb") as handle:
                head = handle.read(HEAD_BYTES)
            if archive_kind(head) is not None:
                self._archive(src, dest)
            elif not looks_binary(head):
                dest.write_bytes(_redacted_text(src))
            elif head[:1] == b"\x80":
                self._pickle(src, dest)
            else:
                self._skip(dest, "binary file in no format whose secrets hangdoc can hide")
        except OSError as exc:
            self._skip(dest, f"could not be copied: {exc.strerror or exc}")

    def _archive(self, src: Path, dest: Path) -> None:
        """An archive is copied as the folder of its redacted contents."""
        try:
            with extract_archive(src, str(src)) as extracted:
                for member, why in extracted.refused:
                    self._skip(dest, why, member)
                self.copy(extracted.root, dest)
        except ArchiveError as exc:
            self._skip(dest, str(exc))

    def _pickle(self, src: Path, dest: Path) -> None:
        if src.stat().st_size > MAX_PICKLE_COPY:
            self._skip(dest, f"pickle larger than {MAX_PICKLE_COPY >> 20} MiB")
            return
        try:
            doc = safe_loads(src.read_bytes())
            data = pickle.dumps(redact_json_value(doc), protocol=4)
        except Exception as exc:  # refused (names code), truncated, nested too deep...
            self._skip(dest, f"pickle not copied: {type(exc).__name__}: {exc}")
            return
        dest.write_bytes(data)


def _redacted_text(src: Path) -> bytes:
    """The file (its tail past MAX_TEXT_COPY) decoded, redacted, as UTF-8."""
    size = src.stat().st_size
    with src.open("rb") as handle:
        bom = handle.read(2)
        if size > MAX_TEXT_COPY:
            handle.seek(size - MAX_TEXT_COPY)
            data = handle.read(MAX_TEXT_COPY)
            if bom in (b"\xff\xfe", b"\xfe\xff"):  # keep the byte order of the tail
                data = bom + data[(size - MAX_TEXT_COPY) % 2 :]
        else:
            handle.seek(0)
            data = handle.read()
    text = decode_bytes(data)
    if text.lstrip()[:1] in ("{", "["):
        return redact_json_bytes(text.encode("utf-8"))
    return redact_text(text).encode("utf-8")


def write_ticket_archive(
    dest: Path,
    inputs: Sequence[Path],
    reports: Mapping[str, str],
    *,
    verdict: str,
    redact: bool = True,
) -> Path:
    """Write the archive at ``dest`` (never overwriting) and return its path.

    ``reports`` are the rendered outputs to put beside the inputs, by file name
    (``report.html``, ``findings.json``, ``summary.md``); ``verdict`` goes into the marker.
    """
    with tempfile.TemporaryDirectory(prefix="hangdoc-ticket-") as tmp:
        stage = Path(tmp) / dest.name.removesuffix(".tar.gz").removesuffix(".tgz")
        stage.mkdir()
        names = []
        copier = _Copier(redact, stage)
        for index, src in enumerate(inputs):
            name = f"{index}-{src.resolve().name or 'input'}"
            copier.copy(src, stage / INPUTS / name)
            names.append(name)
        for file_name, text in reports.items():
            (stage / file_name).write_text(text, encoding="utf-8")
        (stage / MARKER).write_text(
            json.dumps(
                {
                    "format": "hangdoc.ticket/1",
                    "hangdoc_version": __version__,
                    "inputs": names,
                    "redacted": redact,
                    "left_out": copier.left_out,
                    "verdict": verdict,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        return write_archive(stage, dest)
