"""Rewrite the imports between analyzer/, collectors/ and rules/ as relative imports.

The three folders are the subpackages ``hangdoc.analyzer``, ``hangdoc.collectors`` and
``hangdoc.rules`` through relative symlinks in hangdoc/ (docs/architecture.md, "The
package and its folders"). A tool that follows an import by path reads
``hangdoc.analyzer.model`` as ``hangdoc/analyzer/model.py`` and stops at the symlink, so
to it rules/ imports nothing. ``from ..analyzer.model import Evidence`` in rules/hd001_*.py
names the same module at run time (``hangdoc.rules`` + ``..``) and, by path, the real file
``rules/../analyzer/model.py``. Only imports of modules *inside* the three folders, made
*from* files inside them, are rewritten: an import of ``hangdoc.common``,
``hangdoc.errors`` or ``hangdoc.hook`` already names a real path, and a file of hangdoc/
cannot reach ../analyzer by a relative import.

Idempotent: a relative import is left as it is, so a second run changes nothing. The
import blocks are then sorted again with ruff (relative imports form their own block).

python scripts/relative_imports.py            # rewrite in place, then ruff --fix the files
python scripts/relative_imports.py --check    # exit 1 if an import would be rewritten
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("analyzer", "collectors", "rules")  # the symlinked subpackages of hangdoc


def package_of(path: Path) -> list[str]:
    """The package a file's relative imports start from: hangdoc.<folder>[.sub…]."""
    parts = ["hangdoc", *path.relative_to(ROOT).with_suffix("").parts]
    return parts[:-1]  # a module's package; for an __init__.py, its own package


def relative_name(package: list[str], target: str) -> str | None:
    """``target`` as seen from ``package`` (``..analyzer.model``), or None to keep it."""
    parts = target.split(".")
    if len(parts) < 2 or parts[0] != "hangdoc" or parts[1] not in FOLDERS:
        return None
    common = 0
    while common < min(len(package), len(parts)) and package[common] == parts[common]:
        common += 1
    level = len(package) - common + 1
    return "." * level + ".".join(parts[common:])


def rewrite(path: Path) -> str | None:
    """The file's text with its imports rewritten, or None when nothing changes."""
    return rewrite_text(path.read_text(encoding="utf-8"), package_of(path))


def rewrite_text(text: str, package: list[str]) -> str | None:
    """``text`` of a module of ``package`` with its imports rewritten, or None."""
    lines = text.splitlines(keepends=True)
    changed = False
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.ImportFrom) or node.level or node.module is None:
            continue
        relative = relative_name(package, node.module)
        if relative is None:
            continue
        index = node.lineno - 1
        line = lines[index]
        head = f"from {node.module} import"
        at = line.find(head, node.col_offset)
        if at != node.col_offset:  # an import written across lines after `from`: leave it
            continue
        lines[index] = line[:at] + f"from {relative} import" + line[at + len(head) :]
        changed = True
    return "".join(lines) if changed else None


def files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def main(argv: list[str]) -> int:
    pending = [(path, new) for path in files() if (new := rewrite(path)) is not None]
    if "--check" in argv:
        for path, _ in pending:
            print(f"{path.relative_to(ROOT)}: absolute imports of a symlinked folder")
        return 1 if pending else 0
    for path, new in pending:
        path.write_text(new, encoding="utf-8")
    if pending and "--no-ruff" not in argv:
        names = [str(path) for path, _ in pending]
        subprocess.run(["ruff", "check", "--fix", "--select", "I", "-q", *names], check=False)
        subprocess.run(["ruff", "format", "-q", *names], check=False)
    print(f"rewrote the imports of {len(pending)} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
