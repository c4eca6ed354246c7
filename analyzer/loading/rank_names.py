"""Which rank a loose file belongs to, from its name, when its content does not say.

Conservative on purpose: a wrong rank is worse than an unknown one (it puts a stack on
the wrong rank in every finding). Accepted: ``rank3.txt``, ``rank_3.log``, ``r3.txt``,
a ``rank3/`` folder; a trailing ``-3``/``_3`` only when the file holds a single process
and the word before it does not count something else (node, attempt, gpu...).
"""

from __future__ import annotations

import re
from pathlib import Path

# File-name rank patterns, applied to the name without its extensions.
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,4}$")
_RANK_WORD = re.compile(r"(?:^|[^A-Za-z])rank[_-]?(\d{1,6})(?![0-9])", re.IGNORECASE)
_R_TOKEN = re.compile(r"(?:^|[_.-])r(\d{1,6})(?:$|[_.-])")
_RANK_DIR = re.compile(r"rank[_-]?(\d{1,6})$", re.IGNORECASE)
_TRAILING = re.compile(r"(?:^|[^0-9])[-_](0|[1-9]\d{0,5})$")
# A trailing number after these words counts something else than ranks.
_NOT_RANK_WORDS = re.compile(
    r"(?:node|host|worker|pod|attempt|gpu|dev|device|local|sample|part|step|epoch|iter|try|"
    r"v|ver|version|job|run|pid|tid|thread)[-_]\d+$",
    re.IGNORECASE,
)


def _stem(name: str) -> str:
    for _ in range(3):
        m = _EXTENSION.search(name)
        if m is None or m.start() == 0:
            break
        name = name[: m.start()]
    return name


def rank_from_name(path: Path, single_process: bool) -> tuple[int | None, str]:
    """The rank a file's name (or its folder's) clearly names, and how it was found."""
    stem = _stem(path.name)
    if m := _RANK_WORD.search(stem):
        return int(m.group(1)), f"'rank{m.group(1)}' in its name"
    if m := _R_TOKEN.search(stem):
        return int(m.group(1)), f"'r{m.group(1)}' in its name"
    if m := _RANK_DIR.match(path.parent.name):
        return int(m.group(1)), f"its folder {path.parent.name}/"
    if single_process and (m := _TRAILING.search(stem)) and not _NOT_RANK_WORDS.search(stem):
        return int(m.group(1)), f"the trailing number of its name {path.name!r}"
    return None, ""
