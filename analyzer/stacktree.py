# moved: remove after the logs work lands
"""Moved to ``hangdoc.analyzer.render.stacktree``; this shim keeps work in flight importing."""

from typing import Any

from hangdoc.analyzer.render import stacktree as _moved
from hangdoc.analyzer.render.stacktree import *  # noqa: F403  # moved: remove after the logs work lands


def __getattr__(name: str) -> Any:  # moved: remove after the logs work lands
    return getattr(_moved, name)
