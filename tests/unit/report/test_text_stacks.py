"""Stacks read from text are shown as what they are (analyzer/model.py: live samples and
text): labelled "read from text" with their kind and where they start, never as a sample,
in the terminal, the report data (HTML), the Markdown summary and the DataFrames."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

import hangdoc
from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import (
    Evidence,
    Frame,
    ProcessEvidence,
    StackSample,
    StackTextKind,
    TextStack,
    ThreadStack,
)
from hangdoc.analyzer.render.markdown import render_markdown
from hangdoc.analyzer.render.report_data import build_report_data
from hangdoc.analyzer.render.terminal import render_terminal

DUMP = Path(__file__).resolve().parents[3] / "fixtures" / "dumps" / "thread-died"
_C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def _terminal(diagnosis: Diagnosis) -> str:
    console = Console(record=True, width=200, color_system=None)
    render_terminal(diagnosis, console)
    return console.export_text()


def _mixed_job() -> Diagnosis:
    """Rank 0 sampled live in a barrier; rank 1 known only from a pasted py-spy dump."""
    barrier = (Frame("barrier", _C10D, 4000), Frame("train", "/job/train.py", 9))
    live = ThreadStack(frames=barrier, os_thread_id=100, name="MainThread", is_main=True)
    saving = (Frame("save", "/job/ckpt.py", 5), Frame("train", "/job/train.py", 12))
    pasted = ThreadStack(frames=saving, os_thread_id=101, name="MainThread", is_main=True)
    text = TextStack(0, (pasted,), (StackTextKind.PYSPY,), "/tickets/rank1.txt", 3)
    return analyze(
        Evidence(
            processes=[
                ProcessEvidence(
                    rank=0, pid=100, stack_samples=[StackSample(0, 1.0, (live,), source="p0")]
                ),
                ProcessEvidence(rank=1, pid=101, text_stacks=[text]),
            ]
        )
    )


def test_a_rank_known_from_text_is_labelled_everywhere() -> None:
    diagnosis = _mixed_job()
    label = "read from text: pyspy, rank1.txt:3"
    out = _terminal(diagnosis)
    [rank1_line] = [line for line in out.splitlines() if line.startswith("rank 1:")]
    assert f"[{label}]" in rank1_line
    [rank0_line] = [line for line in out.splitlines() if line.startswith("rank 0:")]
    assert "read from text" not in rank0_line
    data = build_report_data(diagnosis)
    by_ranks = {c["ranks"]: c for c in data["stack_classes"]["classes"]}
    assert by_ranks["1"]["read_from_text"] == label and by_ranks["0"]["read_from_text"] is None
    rows = {r["ranks"]: r for r in data["ranks"]["rows"]}
    assert rows["1"]["read_from_text"] == "read from text: pyspy, /tickets/rank1.txt:3"
    assert rows["0"]["read_from_text"] is None
    assert f"({label})" in render_markdown(diagnosis)


def test_a_dead_thread_beside_live_samples_is_shown_with_its_exception() -> None:
    diagnosis = analyze(load_paths([DUMP]))
    data = build_report_data(diagnosis)
    # every rank is live: no class or row is labelled as text
    assert all(c["read_from_text"] is None for c in data["stack_classes"]["classes"])
    rows = [r for r in data["ranks"]["rows"] if r["example_rank"] == 3]
    [row] = rows
    assert row["read_from_text"] is None
    [died] = [t for t in row["example_threads"] if t["name"] == "shard-prefetcher"]
    assert died["exception"].startswith("FileNotFoundError") and not died["main"]
    assert died["read_from_text"].startswith("read from text: traceback, faulthandler, ")
    assert died["read_from_text"].endswith("stderr.rank3.err:2")
    sampled = [t for t in row["example_threads"] if t["read_from_text"] is None]
    assert sampled and all(t["exception"] is None for t in sampled)


def test_dataframes_tell_text_rows_from_samples() -> None:
    stacks = hangdoc.stacks_frame(analyze(load_paths([DUMP])))
    text = stacks[stacks["sample"].isna()]
    live = stacks[stacks["sample"].notna()]
    assert not text.empty and not live.empty
    assert text["text_stack"].notna().all() and live["text_stack"].isna().all()
    assert set(text["text_kinds"]) <= {"faulthandler", "traceback, faulthandler"}
    raised = text[text["exception"].notna()]
    assert set(raised["thread_name"]) == {"shard-prefetcher"} and set(raised["rank"]) == {3}
    assert live["exception"].isna().all() and live["time"].notna().all()
    ranks = hangdoc.ranks_frame(analyze(load_paths([DUMP])))
    assert list(ranks["stack_samples"]) == [2, 2, 2, 2] and (ranks["text_stacks"] == 1).all()
