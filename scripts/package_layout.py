"""Put the code of analyzer/, collectors/ and rules/ inside hangdoc/, and leave the three
top-level names as symlinks to it (docs/architecture.md, "The package and its folders").

Today the code lives in the top-level folders and hangdoc/analyzer -> ../analyzer (and
the two others) make them subpackages. A tool that follows ``hangdoc.analyzer.model`` by
path stops at that symlink. Reversed, every import names a real file under hangdoc/, and
``analyzer/``, ``collectors/``, ``rules/`` still open at the top of the repository.

Idempotent: a folder already moved is left alone. Run it from a clean work tree; it
moves with ``git mv``, so history follows the files, then points ruff's exclusion at the
top-level symlinks (ruff would lint each file twice through them).

python scripts/package_layout.py            # move, link, update pyproject.toml
python scripts/package_layout.py --check    # exit 1 while a folder is still at the top
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("analyzer", "collectors", "rules")
OLD_EXCLUDE = 'extend-exclude = ["hangdoc/analyzer", "hangdoc/collectors", "hangdoc/rules"]'
NEW_EXCLUDE = 'extend-exclude = ["./analyzer", "./collectors", "./rules"]'


def pending() -> list[str]:
    """The folders whose code is still at the top (their hangdoc/ entry is a symlink)."""
    return [name for name in FOLDERS if (ROOT / "hangdoc" / name).is_symlink()]


def _git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def move(name: str) -> None:
    """hangdoc/<name> (a symlink) removed, <name>/ moved there, <name> -> hangdoc/<name>."""
    _git("rm", "-q", "--cached", f"hangdoc/{name}")
    (ROOT / "hangdoc" / name).unlink()
    _git("mv", name, f"hangdoc/{name}")
    (ROOT / name).symlink_to(Path("hangdoc") / name, target_is_directory=True)
    _git("add", name)


def main(argv: list[str]) -> int:
    todo = pending()
    if "--check" in argv:
        for name in todo:
            print(f"{name}/ holds the code; hangdoc/{name} is a symlink to it")
        return 1 if todo else 0
    for name in todo:
        move(name)
    pyproject = ROOT / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    if OLD_EXCLUDE in text:
        pyproject.write_text(text.replace(OLD_EXCLUDE, NEW_EXCLUDE), encoding="utf-8")
        _git("add", "pyproject.toml")
    print(f"moved {len(todo)} folder(s) into hangdoc/: {', '.join(todo) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
