"""death_of settles most events by their kind alone (``_DEATH_KINDS``, a fast path at
16,384 ranks): every kind a branch of it can turn into a death must be in that set, or the
branch is never reached (the host-memory climb of batch k was, when the two met)."""

from __future__ import annotations

import inspect
import re

from hangdoc.analyzer.model import EventKind
from hangdoc.analyzer.views import deaths


def test_every_kind_death_of_reads_is_let_through() -> None:
    source = inspect.getsource(deaths.death_of)
    read = {EventKind[name] for name in re.findall(r"EventKind\.([A-Z_]+)", source)}
    assert read, "death_of names no event kind"
    assert read <= deaths._DEATH_KINDS, sorted(k.name for k in read - deaths._DEATH_KINDS)
