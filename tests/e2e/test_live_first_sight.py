"""Live hangs written for issue 21 and scored at first sight (fixtures/first_sight/
live-2026-11-28.json), run again for real: a login prompt read from a terminal nobody
sees; a shard download retried forever; a data producer process killed under its Queue;
early stopping decided on one rank's own validation loss; a metrics log waiting on a
thread blocked on a tracker's wedged service. Each gets its category and culprit."""

from __future__ import annotations

from pathlib import Path

import pytest

from .live import run_live

pytestmark = pytest.mark.e2e

CASES = [
    # scenario, category, rule, words the title must hold
    ("login-prompt", "rank_divergence_collective_vs_noncollective", "HD001", "terminal"),
    ("http-shards", "io_or_filesystem_stall", "HD001", "network I/O"),
    ("producer-killed", "dataloader_deadlock_or_worker_hang", "HD001", "dead child"),
    ("early-stop", "collective_type_mismatch", "HD002", "barrier"),
    ("tracker-wedged", "io_or_filesystem_stall", "HD001", "its thread"),
]


@pytest.mark.parametrize(("scenario", "category", "rule", "words"), CASES)
def test_a_live_hang_seen_at_first_sight_gets_its_cause_and_culprit(
    tmp_path: Path, scenario: str, category: str, rule: str, words: str
) -> None:
    doc = run_live(tmp_path, scenario).findings
    primary = doc["findings"][0]
    assert doc["verdict"] == "hang", doc["findings"]
    assert (primary["category"], primary["rule"]) == (category, rule), doc["findings"]
    assert primary["culprit_ranks"] == [3], primary
    assert words in primary["title"], primary
