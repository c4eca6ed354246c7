# moved: remove after the logs work lands
"""Moved to ``hangdoc.analyzer.summaries.read``; this shim keeps work in flight importing."""

from typing import Any

from hangdoc.analyzer.summaries import read as _moved
from hangdoc.analyzer.summaries.read import *  # noqa: F403  # moved: remove after the logs work lands


def __getattr__(name: str) -> Any:  # moved: remove after the logs work lands
    return getattr(_moved, name)
