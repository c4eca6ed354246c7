"""Checkpoint files in a directory listing, as pasted from a shell (``ls -l``).

A ticket about a save that never finished often shows the checkpoint directory: one
rank's file written with 0 bytes next to its siblings of full size, which says that rank's
write stopped or failed while the others' completed (CPM-1-Finetune #6:
``mp_rank_00_model_states.pt`` 0 bytes beside a 2.6 GB ``mp_rank_01_model_states.pt``).

One row of GNU coreutils' long format (``ls -l``, ls.c print_long_format): the file type
and permission bits (``-rw-r--r--``, an ACL's ``+`` or SELinux context's ``.`` after
them), the link count, owner and group, the size (bytes; ``-h`` prints ``2.5G``), the
modification time in the locale's format (``Jan  6 12:13``, ``1月   6 12:13``, a year
instead of the time for old files, or ``--time-style``'s ``2021-01-06 12:13[:SS.NNN
+ZZZZ]``), then the name. Only regular files whose name is a checkpoint's are read:
``torch.save``'s ``.pt``/``.pth``/``.bin``, safetensors, Lightning's ``.ckpt``, DCP's
``.distcp`` shards, and DeepSpeed's ``*_model_states.pt`` / ``*_optim_states.pt`` among
them.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.host import ListedFile
from hangdoc.analyzer.vocabulary import EventKind

_EXTENSIONS = (".pt", ".bin", ".safetensors", ".ckpt", ".distcp")  # ".pth" holds ".pt"
NEED = Need.words(_EXTENSIONS)
_WHEN = (
    r"(?:\S+\s+\d{1,2}|\d{1,2}\.?\s+\S+)\s+(?:\d{1,2}:\d{2}|\d{4})"  # locale: month day
    r"|\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?:\s+[+-]\d{4})?"  # ISO
)
_ROW = re.compile(
    r"^-[rwxXsStT-]{9}[.+@]?\s+\d+\s+\S+\s+\S+\s+(?P<size>\d+(?:[.,]\d+)?[KMGTPE]?)\s+"
    rf"(?:{_WHEN})\s+(?P<name>[^\s/][^/]*?)\s*$"
)
_CHECKPOINT_NAME = re.compile(r"\.(?:pth?|bin|safetensors|ckpt|distcp)$")
_NUMBER = re.compile(r"\d+")


def match_listed_file(text: str) -> Hit | None:
    """One ``ls -l`` row of a checkpoint file: its name, size and family."""
    if text[:1] != "-" or not NEED.admits(text):
        return None
    m = _ROW.match(text)
    if m is None or _CHECKPOINT_NAME.search(m.group("name")) is None:
        return None
    name, size = m.group("name"), m.group("size")
    listed = ListedFile(
        name=name,
        size=int(size) if size.isdigit() else (0 if size.strip("0.,") == "" else None),
        family=_NUMBER.sub("#", name),
    )
    return Hit(EventKind.FILE_LISTED, payload=listed, key=("listed", name))
