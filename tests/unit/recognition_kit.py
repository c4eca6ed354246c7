"""What the recognition tests of each first-sight batch share: the paste manglings every
reading is checked under, and the primary answer of one pasted file (each batch's test
module reads its own family's formats; the checks are the same)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hangdoc.analyzer.model import Category
from hangdoc.api import diagnose
from hangdoc.paste_mangling import cut_first_line, indent, quote

Mangle = Callable[[str], str]
MANGLINGS: tuple[tuple[str, Mangle], ...] = (
    ("as is", lambda text: text),
    ("indented", indent),
    ("quoted", quote),
    ("first line cut", cut_first_line),
)


def answer(tmp_path: Path, text: str) -> tuple[Category, str, tuple[int, ...]]:
    """The primary finding's category, rule and culprits for ``text`` pasted as one file."""
    path = tmp_path / "console.txt"
    path.write_text(text, encoding="utf-8")
    primary = diagnose([path]).primary
    assert primary is not None
    return primary.category, primary.rule, primary.culprit_ranks
