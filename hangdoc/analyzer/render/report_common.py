"""Small pieces shared by the report's section builders: rank-set interning, frames, times.

Every builder turns model objects into plain JSON-able values (str, int, float, bool,
None, lists, dicts with str keys), so that golden tests can compare the data behind the
report without parsing HTML, and the HTML and Markdown renderers never see the model.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from typing import Any

from hangdoc.analyzer.model import Category, Frame
from hangdoc.analyzer.ranges import format_ranks
from hangdoc.analyzer.views.activity import is_user_frame

# JSON-able values: Any because a recursive JSON type makes every consumer cast.
JsonDict = dict[str, Any]

CATEGORY_LABELS: dict[Category, str] = {
    Category.RANK_DIVERGENCE: "ranks diverged: some in a collective, others not",
    Category.COLLECTIVE_TYPE_MISMATCH: "ranks are in different collectives",
    Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH: "collective size or dtype mismatch",
    Category.RANK_DEAD: "a rank died or crashed",
    Category.CUDA_OOM: "CUDA out of memory",
    Category.NCCL_NETWORK: "NCCL network or transport error",
    Category.NCCL_INIT: "NCCL init or rendezvous hang",
    Category.DATALOADER: "DataLoader deadlock or worker hang",
    Category.UNEVEN_DATA: "uneven data across ranks (drop_last)",
    Category.CHECKPOINT_SAVE: "checkpoint save hang",
    Category.EVAL_SOME_RANKS: "evaluation on some ranks only",
    Category.IO_STALL: "I/O or filesystem stall",
    Category.GPU_HARDWARE: "GPU hardware or driver problem",
    Category.PYTHON_DEADLOCK: "Python deadlock (GIL or lock)",
    Category.P2P_DEADLOCK: "point-to-point / pipeline deadlock",
    Category.NOT_A_HANG: "not a hang: slow or benign",
    Category.UNKNOWN: "unknown cause",
}


class RankSets:
    """Interns rank sets so that page elements can name theirs by index.

    The page's rank filter needs every set in full (``0-2,4-4095``), while the text
    shown is shortened past 12 runs; one table of full sets, referenced by ``rset``,
    keeps each set once however many elements share it.
    """

    def __init__(self) -> None:
        self._index: dict[tuple[int, ...], int] = {}
        self.items: list[str] = []

    def fields(self, ranks: Iterable[int]) -> JsonDict:
        """``{"ranks": display text, "count": n, "rset": index}`` for one set."""
        values = tuple(sorted(set(ranks)))
        index = self._index.get(values)
        if index is None:
            index = len(self.items)
            self._index[values] = index
            self.items.append(format_ranks(values, max_parts=len(values) + 1))
        return {"ranks": format_ranks(values), "count": len(values), "rset": index}


def frame_json(frame: Frame) -> JsonDict:
    """One frame as the page shows it; ``user`` marks the job's own code for highlighting."""
    return {
        "function": frame.function,
        "file": frame.file,
        "line": frame.line,
        "label": frame.label(),
        "user": is_user_frame(frame),
    }


def format_time(seconds: float | None) -> str | None:
    """POSIX seconds as UTC ISO text: fixed zone, so the same input renders the same."""
    if seconds is None:
        return None
    moment = _dt.datetime.fromtimestamp(seconds, tz=_dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def format_mib(value: float) -> str:
    return f"{value / 1024:.1f} GiB" if value >= 1024 else f"{value:.0f} MiB"


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters with an ellipsis; keeps one-line cells one line."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
