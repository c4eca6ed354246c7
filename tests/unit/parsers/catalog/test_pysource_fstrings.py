"""Python f-strings' self-documenting fields: ``f"…{exitcode=}"`` prints ``exitcode=-9``
(the expression's text, ``=``, then its repr; with a format spec, its format). Python's own
parser writes the ``exitcode=`` into the string's literal part (``ast.JoinedStr``:
``Constant("… exitcode=")``, then ``FormattedValue(exitcode, conversion="r")``), so
``scripts/catalog/pysource.py`` keeps it as literal text before the slot; SGLang writes its
memory and context messages so (python/sglang/srt/model_executor/model_runner.py 0.5.3:
``f"… Current value: {self.server_args.mem_fraction_static=}"``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from hangdoc.analyzer.parsers.catalog import default_matcher
from hangdoc.analyzer.parsers.catalog.template import Slot, regex_source

SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"


def _parts(expr: str) -> list[object] | None:
    sys.path.insert(0, str(SCRIPTS))
    try:
        from catalog.pysource import message_parts
    finally:
        sys.path.remove(str(SCRIPTS))
    node = ast.parse(expr, mode="eval").body
    return message_parts(node)  # type: ignore[no-any-return]


def test_a_self_documenting_field_is_its_name_and_equals_then_the_value() -> None:
    assert _parts('f"Scheduler died with {exitcode=}"') == [
        "Scheduler died with exitcode=",
        Slot("exitcode"),
    ]
    # blanks around "=" print as written; a spec types the value
    assert _parts('f"{free_gb = :.2f} GB"') == ["free_gb = ", Slot("free_gb", "float"), " GB"]
    assert _parts('f"Context: {self.device=} {self.tp_rank=}"') == [
        "Context: self.device=",
        Slot("self.device"),
        " self.tp_rank=",
        Slot("self.tp_rank"),
    ]


def test_the_printed_line_matches_the_rows_pattern() -> None:
    import re

    parts = _parts('f"Scheduler died with {exitcode=}"')
    assert parts is not None
    pattern = re.compile(regex_source(tuple(parts)))  # type: ignore[arg-type]
    m = pattern.search("[2025-05-01 10:00:00] Scheduler died with exitcode=-9")
    assert m is not None and m.group(1) == "-9"


def test_sglangs_memory_message_is_matched_with_its_value() -> None:
    line = (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: self.server_args.mem_fraction_static=0.88"
    )
    match = default_matcher().match(line)
    assert match is not None and match.row.project == "sglang"
    assert "mem_fraction_static=" in match.row.template
    assert match.captures[-1] == "0.88"
