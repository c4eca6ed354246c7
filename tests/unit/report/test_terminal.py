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


def test_rules_without_evidence_are_one_closing_line() -> None:
    diagnosis = checkpoint_job(16, saver=2)
    assert diagnosis.not_evaluated, "the builder's job lacks logs: some rules are skipped"
    out = _render(diagnosis)
    last = out.rstrip().splitlines()[-1]
    count = len(diagnosis.not_evaluated)
    noun = "rule" if count == 1 else "rules"
    assert last == f"{count} {noun} lacked the evidence they need; --verbose lists them"
    assert "not evaluated (" not in out


def test_verbose_lists_each_rule_by_reason() -> None:
    diagnosis = checkpoint_job(16, saver=2)
    console = Console(record=True, width=200, color_system=None)
    render_terminal(diagnosis, console, verbose=True)
    out = console.export_text()
    assert "lacked the evidence" not in out
    for skipped in diagnosis.not_evaluated:
        assert skipped.rule in out


def test_the_terminal_prints_plain_data() -> None:
    # GIVEN a checkpoint hang WHEN its terminal data is built THEN it is plain JSON, holds
    # the answer first, and printing it is what render_terminal prints
    import json

    from hangdoc.analyzer.render.terminal import print_terminal_data
    from hangdoc.analyzer.render.terminal_data import build_terminal_data

    diagnosis = checkpoint_job(16, saver=2)
    data = build_terminal_data(diagnosis)
    assert json.loads(json.dumps(data)) == data
    assert data["verdict"] == "hang" and data["primary"]["culprit"] == "2"
    assert data["classes"][0]["ranks"].startswith("ranks 0-1,3-15")
    console = Console(record=True, width=200, color_system=None)
    print_terminal_data(data, console)
    assert console.export_text() == _render(diagnosis)
