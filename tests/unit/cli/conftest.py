"""Run the installed ``hangdoc`` console script, as a user does (not ``main([...])``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURE_DUMP = ROOT / "fixtures" / "dumps" / "checkpoint"
Run = Callable[..., subprocess.CompletedProcess[str]]


def console_script() -> Path:
    """The ``hangdoc`` executable pip installed beside this Python (the venv's bin/)."""
    script = Path(sys.executable).parent / ("hangdoc.exe" if os.name == "nt" else "hangdoc")
    assert script.exists(), f"{script} is missing: pip install -e '.[dev]'"
    return script


def run_hangdoc(
    *args: str, stdin: str | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    env.pop("HANGDOC_DEBUG", None)
    return subprocess.run(
        [str(console_script()), *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


@pytest.fixture
def hangdoc() -> Run:
    return run_hangdoc
