# moved: remove after the logs work lands
"""Moved to ``hangdoc.analyzer.render.ticket``; this shim keeps work in flight importing."""

from typing import Any

from hangdoc.analyzer.render import ticket as _moved
from hangdoc.analyzer.render.ticket import *  # noqa: F403  # moved: remove after the logs work lands


def __getattr__(name: str) -> Any:  # moved: remove after the logs work lands
    return getattr(_moved, name)
