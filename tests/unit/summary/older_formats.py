"""A node summary written back as an older format wrote it, for the tests that the older
formats still load: as /6 (``as_format_6``), every row's record written, equal ones too;
as /5 (and, from it, the formats before), each rank's records in its own record, one
object each, and each log window's numbers as strings in the window (``n``), not lengths
(``nl``) in the node's ``window_numbers``."""

from __future__ import annotations

from typing import Any

from hangdoc.analyzer.summaries.codec import DecodeContext, FrameTable, decode_frames, encoder
from hangdoc.analyzer.summaries.columns import TABLES, decode_table, encode_table


class _SameFrames(FrameTable):
    """A frame table that numbers frames as the summary's own table does."""

    def __init__(self, rows: list[Any]) -> None:
        super().__init__()
        for frame in decode_frames(rows):
            self.add(frame)


def as_format_6(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` (a /7 one, as JSON) in /6's form, in place; returned: each table's
    rows written whole, equal records too (no ``d``, ``u``)."""
    ctx = DecodeContext(frames=decode_frames(summary["frames"]), display="@")
    frames = _SameFrames(summary["frames"])
    for name, cls in TABLES.items():
        per_rank = decode_table(cls, summary["tables"][name], ctx)
        summary["tables"][name] = encode_table(cls, per_rank, frames, share=False)
    summary["format"] = "hangdoc.summary/6"
    return summary


def as_format_5(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` (a /6 one, as JSON) in /5's form, in place; returned."""
    ctx = DecodeContext(frames=decode_frames(summary["frames"]), display="@")
    frames = _SameFrames(summary["frames"])
    tables = summary.pop("tables")
    for name, cls in TABLES.items():
        per_rank = decode_table(cls, tables[name], ctx)
        for rank, records in zip(summary["ranks"], per_rank, strict=True):
            rank[name] = [encoder(cls)(r, frames) for r in records]
    numbers, at = summary.pop("window_numbers"), 0
    for rank in summary["ranks"]:
        window = rank.get("log_window")
        if window is None:
            continue
        texts = []
        for length in window.pop("nl"):
            texts.append(numbers[at : at + length])
            at += length
        window["n"] = texts
    assert at == len(numbers)
    summary["format"] = "hangdoc.summary/5"
    return summary
