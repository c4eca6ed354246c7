"""The stage torch's own check sites show: the place a c10d message prints
(``NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:272, unhandled system
error``) looked up in the table ``scripts/catalog/torch_stages.py`` generates from torch's
release tags (``data/stages/torch.json``).

torch prints ``__FILE__:__LINE__`` of the check that failed, so the line is a check (a
``C10D_NCCL_CHECK``, a ``TORCH_CHECK``, a log call…) in the release that printed it. The
table holds only the releases a mirror here has tags of (1.0–1.9, where c10d lived in
``torch/lib/c10d``; it moved to ``torch/csrc/distributed/c10d`` after them), so a place is
looked up only where its printed path is ``…torch/lib/c10d/<file>``: a later release's
line, or a bare file name that could be any release's, says nothing. A line shows a stage
only where every held release with a check there has it in a function of that one stage.
"""

from __future__ import annotations

import functools
import posixpath
import re
from pathlib import Path

from hangdoc.analyzer.parsers.catalog.stages import StageTable, table
from hangdoc.analyzer.payloads.nccl import SourceStage

TABLE_FILE = Path(__file__).resolve().parent / "data" / "stages" / "torch.json"

# The printed path of a c10d file of the releases the table holds (the build's absolute
# path, "/pytorch/torch/lib/c10d/…", or the relative "../torch/lib/c10d/…").
_HELD_PLACE = re.compile(r"(?:^|/)torch/lib/c10d/(?P<file>[\w.]+\.(?:cpp|hpp|h)):(?P<line>\d+)$")


@functools.cache
def _table() -> StageTable:
    return table(TABLE_FILE)


def site_stage(place: str | None) -> SourceStage | None:
    """The stage of the function that holds a printed c10d place, in every held release
    with a check at that line; None where the path is not one of the held releases', the
    line holds no check in them, or they disagree."""
    if not place:
        return None
    # A header included by a relative path prints it as __FILE__ with its "..": torch 1.x
    # includes c10d's headers as "../c10d/NCCLUtils.hpp", so a check in NCCLUtils.hpp
    # prints ".../torch/lib/c10d/../c10d/NCCLUtils.hpp:82": the same file.
    m = _HELD_PLACE.search(posixpath.normpath(place.strip().replace("\\", "/")))
    if m is None:
        return None
    site = _table().resolve(f"{m.group('file')}:{m.group('line')}")
    if site is None:
        return None
    stages = {stage for _, stage, _ in site.entries}
    if len(stages) != 1:
        return None  # releases disagree, or some hold a helper both stages call there
    return stages.pop()
