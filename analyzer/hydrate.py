# moved: remove after the logs work lands
"""Moved to ``hangdoc.analyzer.loading.hydrate``; this shim keeps work in flight importing."""

from typing import Any

from hangdoc.analyzer.loading import hydrate as _moved
from hangdoc.analyzer.loading.hydrate import *  # noqa: F403  # moved: remove after the logs work lands


def __getattr__(name: str) -> Any:  # moved: remove after the logs work lands
    return getattr(_moved, name)
