"""What the extractors produce, and version ranges over a list of releases."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.analyzer.parsers.catalog.template import Part, normalise


@dataclass(slots=True)
class Site:
    """One place in one program's source that prints a message."""

    project: str
    level: str  # WARN, INFO, raise:RuntimeError, logger.warning, TORCH_CHECK, …
    parts: tuple[Part, ...]
    file: str
    function: str
    line: int
    version: str
    literal: bool = True  # False: the format is not a literal (counted, not held)


@dataclass(slots=True)
class Row:
    """Sites with the same project, level and template, over versions."""

    project: str
    level: str
    parts: tuple[Part, ...]
    where: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    # (file, function) -> version -> line


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


class BlobReader:
    """Reads blobs through one ``git cat-file --batch`` process."""

    def __init__(self, repo: Path) -> None:
        self._proc = subprocess.Popen(
            ["git", "--git-dir", str(repo), "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def read(self, sha: str) -> str:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(sha.encode() + b"\n")
        self._proc.stdin.flush()
        header = self._proc.stdout.readline().split()
        size = int(header[2])
        data = self._proc.stdout.read(size + 1)[:size]
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait()


def tree(repo: Path, tag: str, under: str, suffixes: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(path, blob sha) of the files under a folder at a tag."""
    for line in git(repo, "ls-tree", "-r", tag, "--", under).splitlines():
        meta, path = line.split("\t", 1)
        _, kind, sha = meta.split()
        if kind == "blob" and path.endswith(suffixes):
            yield path, sha


def ranges(versions: list[str], present: set[str]) -> str:
    """'2.18.1–2.21.5, 2.23.4' over the ordered releases ``versions``."""
    out: list[str] = []
    run: list[str] = []
    for version in versions:
        if version in present:
            run.append(version)
        elif run:
            out.append(run[0] if len(run) == 1 else f"{run[0]}–{run[-1]}")
            run = []
    if run:
        out.append(run[0] if len(run) == 1 else f"{run[0]}–{run[-1]}")
    return ", ".join(out)


def group(sites: list[Site]) -> dict[tuple[str, str, tuple[Part, ...]], Row]:
    rows: dict[tuple[str, str, tuple[Part, ...]], Row] = {}
    for site in sites:
        if not site.literal:
            continue
        parts = normalise(site.parts)
        if not parts:
            continue
        key = (site.project, site.level, parts)
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(site.project, site.level, parts)
        row.where.setdefault((site.file, site.function), {})[site.version] = site.line
    return rows
