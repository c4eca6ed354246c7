"""hangdoc: which rank is where, and why the distributed PyTorch job is stuck.

The notebook API (``hangdoc.load``, ``hangdoc.diagnose``, ``hangdoc.ranks_frame``, …)
lives in ``hangdoc.api`` and is imported on first use (PEP 562 ``__getattr__``): the
CLI, the collectors and the in-job hook all import this package, and none of them
should pay for the analyzer or pandas. Type checkers see these names as ``Any`` here;
``from hangdoc.api import diagnose`` gives the typed functions.

This module is the package's face, at the top of the layers: nothing in hangdoc imports
it (the version is ``hangdoc.common.version``), so its import of ``hangdoc.api`` is an
ordinary one that the import contracts see.
"""

from __future__ import annotations

from typing import Any

from hangdoc.common.version import __version__

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
        from hangdoc import api  # on first use: `import hangdoc` stays cheap

        return getattr(api, name)
    raise AttributeError(f"module 'hangdoc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API_NAMES})
