"""The terminal summary: rank sets from analyzer/ranges.py, and the stride legend once."""

from __future__ import annotations

from rich.console import Console

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.render.terminal import render_terminal
from tests.browser.scale_job import grid_job
from tests.report_builders import checkpoint_job


def _render(diagnosis: Diagnosis) -> str:
    console = Console(record=True, width=200, color_system=None)
    render_terminal(diagnosis, console)
    return console.export_text()


def test_strided_sets_print_compact_with_the_legend_once() -> None:
    out = _render(grid_job(256))
    # the dp group of rank 251 waiting: 3,11,…,243 is one stride
    assert "3-243:8" in out
    assert out.count("every 8th rank from 3 to 1019") == 1


def test_no_legend_without_strides() -> None:
    out = _render(checkpoint_job(16, saver=2))
    assert "culprit: 2" in out
    assert "every 8th rank" not in out
