"""Golden-file support for the report tests: ``--update-golden`` rewrites the files.

The goldens hold the structured data behind the report (``build_report_data``), not
HTML: a change of wording in a template does not churn them, a change of what the
report says does, and the diff is reviewed like code. ``HANGDOC_UPDATE_GOLDEN=1`` does
the same when this conftest is not loaded early enough for its option to be known
(pytest registers options of nested conftests only for the paths given on the command
line: ``pytest tests/unit/report --update-golden`` works, plain ``pytest --update-golden``
needs the option in a root conftest).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    # Another conftest may already register it (a suite-wide golden option): share it.
    with contextlib.suppress(ValueError):
        parser.addoption(
            "--update-golden",
            action="store_true",
            default=False,
            help="rewrite golden files from the current output instead of comparing",
        )


def _updating(config: pytest.Config) -> bool:
    if os.environ.get("HANGDOC_UPDATE_GOLDEN") == "1":
        return True
    try:
        return bool(config.getoption("--update-golden"))
    except ValueError:
        return False


def dump_golden(data: object) -> str:
    """The one serialisation of goldens: sorted, indented, ASCII, newline-terminated."""
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, object], None]:
    """``golden(name, data)``: compare ``data`` with ``golden/<name>.json`` (or rewrite it)."""

    def check(name: str, data: object) -> None:
        path = GOLDEN_DIR / f"{name}.json"
        text = dump_golden(data)
        if _updating(request.config):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        if not path.exists():
            pytest.fail(f"{path} is missing: run pytest tests/unit/report --update-golden")
        expected = json.loads(path.read_text(encoding="utf-8"))
        # Compare parsed data so the assertion diff points at the changed key.
        assert json.loads(text) == expected, f"report data differs from {path.name}"

    return check
