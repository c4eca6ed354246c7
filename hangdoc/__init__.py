"""hangdoc: which rank is where, and why the distributed PyTorch job is stuck.

The notebook API (``hangdoc.load``, ``hangdoc.diagnose``, ``hangdoc.ranks_frame``, …)
lives in ``hangdoc.api`` and is imported on first use (PEP 562 ``__getattr__``): the
CLI, the collectors and the in-job hook all import this package, and none of them
should pay for the analyzer or pandas. Type checkers see these names as ``Any`` here;
``from hangdoc.api import diagnose`` gives the typed functions.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

API_NAMES = frozenset(
    {
        "collectives_frame",
        "diagnose",
        "findings_frame",
        "load",
        "log_events_frame",
        "ranks_frame",
        "stacks_frame",
    }
)
__all__ = ["__version__", *sorted(API_NAMES)]


def __getattr__(name: str) -> Any:
    if name in API_NAMES:
        # By name, not `from hangdoc import api`: the collectors import this package,
        # and an import the layer contracts (import-linter) can see would tie them to
        # the analyzer. Typed code imports from hangdoc.api directly.
        return getattr(importlib.import_module("hangdoc.api"), name)
    raise AttributeError(f"module 'hangdoc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API_NAMES})
