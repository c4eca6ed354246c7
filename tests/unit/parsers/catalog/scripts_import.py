"""The catalog's generator modules (scripts/catalog/*.py) as the tests import them: the
scripts folder on the path only while one is imported."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"


def catalog_script(name: str) -> ModuleType:
    """``scripts/catalog/<name>.py``, imported as ``catalog.<name>``."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        return importlib.import_module(f"catalog.{name}")
    finally:
        sys.path.remove(str(SCRIPTS))
