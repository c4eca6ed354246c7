"""Which rank a file belongs to, from its name, when its content does not say.

One set of rules for every reader (stacks, logs, flight recorder dumps), tried in order:

1. torchrun's worker folders, ``attempt_N/<local rank>/stderr.log``: a *local* rank;
2. the word rank in the file's name: ``rank3.txt``, ``rank_3.log``, ``RANK7.TXT``;
3. an ``r3`` token in it: ``dump-r5-sample1.txt``;
4. a folder named ``rank3`` (the file's, or the one above it: ``rank3/fr/dump.pkl``),
   its whole name: a folder that only mentions a rank (``case-rank0-only/``) says nothing;
5. a trailing number, only where the writer of the file puts the rank there
   (``Trailing``): torch's flight recorder names a dump ``<prefix><rank>``; a file of
   one process may be ``stacks-3.txt``; a file of many never says its rank that way.

Conservative on purpose: a wrong rank is worse than an unknown one (it puts a stack on
the wrong rank in every finding). A trailing number after a word that counts something
else (node, attempt, gpu, worker...) is not a rank, nor is one with a leading zero, a
timestamp, or a sample index (``pyspy.0.json``).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import PurePath, PurePosixPath


class Trailing(enum.Enum):
    """Whether a trailing number in a file's name is its rank: what its writer does."""

    NEVER = "never"  # a file that may hold several processes
    ONE_PROCESS = "one_process"  # a file of one process: stacks-3.txt, stderr_3.log
    APPENDED = "appended"  # torch's flight recorder: <TORCH_FR_DUMP_TEMP_FILE><rank>


@dataclass(frozen=True, slots=True)
class NamedRank:
    """What a file's name says: a global rank, or torchrun's local rank, and how."""

    rank: int | None = None
    local_rank: int | None = None
    how: str = ""


NOTHING = NamedRank()

_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,4}$")
_ATTEMPT_DIR = re.compile(r"(?:^|/)attempt_\d+/(\d+)/(?:stderr\.log|stdout\.log|error\.json)$")
_RANK_WORD = re.compile(r"(?:^|[^A-Za-z])rank[_.-]?(\d{1,6})(?![0-9])", re.IGNORECASE)
_RANK_DIR = re.compile(r"rank[_.-]?(\d{1,6})", re.IGNORECASE)  # the folder's whole name
_R_TOKEN = re.compile(r"(?:^|[_.-])r(\d{1,6})(?:$|[_.-])")
_TRAILING = re.compile(r"(?:^|[^0-9])[-_](0|[1-9]\d{0,5})$")
_APPENDED = re.compile(r"(\d{1,6})$")
# A trailing number after these words counts something else than ranks.
_NOT_RANK_WORDS = re.compile(
    r"(?:node|host|worker|pod|attempt|gpu|dev|device|local|sample|part|step|epoch|iter|try|"
    r"v|ver|version|job|run|pid|tid|thread)[-_]\d+$",
    re.IGNORECASE,
)


def _stem(name: str) -> str:
    """The name without up to three extensions (``rank3.log.gz`` → ``rank3``)."""
    for _ in range(3):
        m = _EXTENSION.search(name)
        if m is None or m.start() == 0:
            break
        name = name[: m.start()]
    return name


def rank_from_name(path: PurePath | str, trailing: Trailing = Trailing.NEVER) -> NamedRank:
    """The rank a file's name (or its folders') clearly names, and how it was found."""
    posix = PurePosixPath(str(path).replace("\\", "/"))
    if m := _ATTEMPT_DIR.search(posix.as_posix()):
        return NamedRank(local_rank=int(m.group(1)), how="torchrun's attempt_N/<local rank>/")
    stem = _stem(posix.name)
    if m := _RANK_WORD.search(stem):
        return NamedRank(int(m.group(1)), how=f"'rank{m.group(1)}' in its name")
    if m := _R_TOKEN.search(stem):
        return NamedRank(int(m.group(1)), how=f"'r{m.group(1)}' in its name")
    for folder in (posix.parent, posix.parent.parent):
        if m := _RANK_DIR.fullmatch(folder.name):
            return NamedRank(int(m.group(1)), how=f"its folder {folder.name}/")
    if trailing is Trailing.APPENDED and (m := _APPENDED.search(stem)):
        return NamedRank(int(m.group(1)), how=f"the number its name ends with ({posix.name!r})")
    if (
        trailing is Trailing.ONE_PROCESS
        and (m := _TRAILING.search(stem))
        and not _NOT_RANK_WORDS.search(stem)
    ):
        return NamedRank(int(m.group(1)), how=f"the trailing number of its name {posix.name!r}")
    return NOTHING
