# moved: remove after the logs work lands
"""Moved to ``hangdoc.analyzer.flight_recorder.bulk``; this shim keeps work in flight importing."""

from typing import Any

from hangdoc.analyzer.flight_recorder import bulk as _moved
from hangdoc.analyzer.flight_recorder.bulk import *  # noqa: F403  # moved: remove after the logs work lands


def __getattr__(name: str) -> Any:  # moved: remove after the logs work lands
    return getattr(_moved, name)
