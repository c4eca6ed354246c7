"""The ``write`` fixture: hand-made input files in the test's tmp dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.parsers.helpers import Writer


@pytest.fixture
def write(tmp_path: Path) -> Writer:
    return Writer(tmp_path)
