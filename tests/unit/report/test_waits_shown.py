"""What a blocked thread waits on (issue 21) is shown beside its kernel state in the
report's thread table, and in the HTML, on a recorded hang (fixtures/dumps/flock-stale)."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.render.html import render_html
from hangdoc.analyzer.render.report_data import build_report_data

DUMP = Path(__file__).resolve().parents[3] / "fixtures" / "dumps" / "flock-stale"


def test_the_culprits_main_thread_shows_the_lock_and_its_holder() -> None:
    diagnosis = analyze(load_paths([DUMP]))
    data = build_report_data(diagnosis)
    [row] = [r for r in data["ranks"]["rows"] if r["example_rank"] == 3]
    [main] = [t for t in row["example_threads"] if t["main"]]
    assert (
        main["waits"].startswith("flock on ") and "data-cache.lock, held by pid " in main["waits"]
    )
    assert "leftover-cache-builder" in main["waits"]
    html = render_html(diagnosis)
    assert "leftover-cache-builder)</code>" in html
