# moved: remove after the logs work lands
"""Moved to ``hangdoc.analyzer.flight_recorder.record_build``; a shim for work in flight."""

from typing import Any

from hangdoc.analyzer.flight_recorder import record_build as _moved
from hangdoc.analyzer.flight_recorder.record_build import *  # noqa: F403  # moved: remove after the logs work lands


def __getattr__(name: str) -> Any:  # moved: remove after the logs work lands
    return getattr(_moved, name)
