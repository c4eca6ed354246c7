"""The log comparison's number pattern, rewritten to start with its digit (a speed
change), finds what the three alternatives as first written found: the same spans on
random text of digits, "0x", colons, dots and letters, and on every recorded log line."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hangdoc.analyzer.model import LogLine
from hangdoc.analyzer.views import log_compare

ROOT = Path(__file__).resolve().parents[3]
_AS_WRITTEN = re.compile(r"0x[0-9a-fA-F]+|\d+(?::\d\d)+(?:\.\d+)?|\d+(?:\.\d+)?")


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


@settings(max_examples=1000, deadline=None)
@given(text=st.text(alphabet="0123456789xXaAfFgG:.,- #٣", max_size=40))
def test_the_number_pattern_finds_what_its_three_alternatives_found(text: str) -> None:
    assert _spans(log_compare._NUMBER, text) == _spans(_AS_WRITTEN, text)
    assert log_compare._NUMBER.sub("#", text) == _AS_WRITTEN.sub("#", text)


def test_recorded_lines_are_masked_as_before() -> None:
    count = 0
    for path in sorted((ROOT / "fixtures").rglob("*")):
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}:
            for line in path.read_text(errors="replace").splitlines():
                assert log_compare._NUMBER.sub("#", line) == _AS_WRITTEN.sub("#", line), line
                count += 1
    assert count > 1000


class _Exact(log_compare._Templates):
    """A template per masked text (no clustering): the masks themselves are compared."""

    def _cluster(self, masked: str) -> int:
        return len(self.ids)


def _masked_by_shape(texts: list[str]) -> list[str]:
    miner = _Exact()
    lines = [LogLine(text, "x.log", n) for n, text in enumerate(texts)]
    ids = log_compare.template_ids(lines, miner, {})
    return [miner.texts[i] for i in ids]


@settings(max_examples=500, deadline=None)
@given(
    texts=st.lists(
        st.text(alphabet="0123456789xXaAfFgG:.,- #٣\x00é", max_size=24), min_size=1, max_size=30
    )
)
def test_lines_masked_once_per_shape_mask_as_each_alone(texts: list[str]) -> None:
    # Lines of one shape (digits in the same places) reuse the first one's mask: each
    # must be what masking it alone gives, hex, colons, dots, NULs and non-ASCII included.
    texts = texts + [t[::-1] for t in texts] + [t.replace("1", "0") for t in texts]
    assert _masked_by_shape(texts) == [log_compare._NUMBER.sub("#", t) for t in texts]


def test_recorded_lines_masked_once_per_shape_mask_as_each_alone() -> None:
    texts = [
        line
        for path in sorted((ROOT / "fixtures").rglob("*"))
        if path.is_file() and path.suffix in {".log", ".txt", ".out", ".err"}
        for line in path.read_text(errors="replace").splitlines()
    ]
    assert _masked_by_shape(texts) == [log_compare._NUMBER.sub("#", t) for t in texts]
