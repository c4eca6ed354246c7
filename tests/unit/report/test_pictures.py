"""The report's pictures as data: wavefront map, icicle of stacks, event lanes, and the
page's answer-first order with matched groups folded.

Asserted on ``build_report_data`` (the shapes the templates draw), not on SVG text: what
the picture shows is pinned here; tests/browser checks that the browser draws it.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.model import CollectiveRecord, LogEvent, OpState
from hangdoc.analyzer.render import report_pictures
from hangdoc.analyzer.render.html import render_html
from hangdoc.analyzer.render.report_data import build_report_data
from hangdoc.analyzer.vocabulary import EventKind
from tests.browser.scale_job import grid_job
from tests.report_builders import FAKE_RULES, T0, checkpoint_job


def _spans(row: dict[str, object]) -> list[tuple[int, int, str]]:
    return [(s["x"], s["w"], s["cls"]) for s in row["spans"]]  # type: ignore[attr-defined]


def test_wavefront_map_shows_the_odd_rank_in_its_family_row() -> None:
    # GIVEN 1,024 ranks in 128 tp groups and 8 dp groups, rank 1019 issued broadcast
    data = build_report_data(grid_job(1024))
    wave = data["pictures"]["wavefront"]
    # THEN the 137 groups are three rows: dp (odd one first), default_pg, tp
    assert [r["label"] for r in wave["rows"]] == ["dp (8 groups)", "default_pg (group 0)",
                                                  "tp (128 groups)"]  # fmt: skip
    dp = wave["rows"][0]
    assert dp["problem"] and dp["members"] == 1024
    # AND 4 ranks share a column; rank 1019's column (254) shows the mismatch
    assert wave["ranks_per_column"] == 4 and wave["columns"] == 256
    assert (254, 1, "mismatch") in _spans(dp)
    assert wave["culprit_columns"] == [[254, 1]]
    # AND the text equivalent names it with a compact rank set
    assert wave["lines"][0] == (
        "dp (8 groups): rank 1019 issued a different collective at the same position (front #118)."
    )


def test_a_bin_shows_its_worst_rank_so_one_laggard_stays_visible() -> None:
    # GIVEN 16,384 ranks, one of which is odd: 64 ranks to a column
    wave = build_report_data(grid_job(16384))["pictures"]["wavefront"]
    assert wave["ranks_per_column"] == 64
    dp = wave["rows"][0]
    # THEN its column is still the odd one's colour, and the spans stay few
    assert [s for s in dp["spans"] if s["cls"] == "mismatch"] == [
        {"x": 255, "w": 1, "cls": "mismatch", "title": "rank 16379: issued a different collective"}
    ]
    assert len(dp["spans"]) <= 3


def test_lag_counts_collectives_not_issued_and_not_completed() -> None:
    # GIVEN rank 5 completed seq 40 and stopped; the others completed 41 and wait in 42
    wave = build_report_data(checkpoint_job(16, saver=5))["pictures"]["wavefront"]
    (row,) = wave["rows"]
    assert (5, 1, "lag2") in _spans(row)
    assert wave["lines"] == ["default_pg (group 0): rank 5 behind by 2 (front #42)."]


def test_members_without_records_are_silent_cells() -> None:
    data = build_report_data(checkpoint_job(12, saver=5, missing=[9]))
    (row,) = data["pictures"]["wavefront"]["rows"]
    assert (9, 1, "silent") in _spans(row)
    assert "rank 9 left no record" in data["pictures"]["wavefront"]["lines"][0]


def test_same_op_and_input_with_another_output_is_a_mismatch() -> None:
    # GIVEN 4 ranks at all_gather #42, rank 2's with another output size (its world view
    # differs): the one "same collective?" signature (views/fr_model.signature) compares
    # op, sizes and dtypes of input and output, as the flight recorder matching does
    diagnosis = checkpoint_job(4, saver=-1)
    for proc in diagnosis.evidence.processes:
        out = ((4096,),) if proc.rank != 2 else ((2048,),)
        proc.collectives[-1] = CollectiveRecord(
            "0", 42, "all_gather", OpState.STARTED, input_sizes=((1024,),), output_sizes=out
        )
    wave = build_report_data(diagnosis)["pictures"]["wavefront"]
    # THEN the map marks rank 2 as having issued another collective
    (row,) = wave["rows"]
    assert (2, 1, "mismatch") in _spans(row)


def test_no_collectives_no_map() -> None:
    diagnosis = checkpoint_job(4)
    for proc in diagnosis.evidence.processes:
        proc.collectives = [CollectiveRecord("0", 1, "send", OpState.STARTED, is_p2p=True)]
    assert build_report_data(diagnosis)["pictures"]["wavefront"] is None


def test_icicle_widths_follow_rank_counts_and_the_culprit_branch_stands_out() -> None:
    data = build_report_data(checkpoint_job(64, saver=5), rules=FAKE_RULES)
    icicle = data["pictures"]["icicle"]
    trunk, waiting, saving = icicle["boxes"]
    assert trunk["count"] == 64 and trunk["y"] == 0 and trunk["frames"] == 2
    assert (waiting["count"], saving["count"]) == (63, 1)
    assert waiting["y"] == saving["y"] == icicle["row"]
    # a lone rank's branch is drawn wider than 1/64 of the width, and it is the culprit's
    assert saving["cls"] == "culprit" and waiting["cls"] == "user"
    assert saving["w"] >= report_pictures.ICICLE_MIN_SHARE * icicle["width"] - 1
    assert waiting["w"] > 50 * saving["w"] / 2
    assert saving["x"] >= waiting["x"] + waiting["w"]
    assert "rank 5 (1): save_checkpoint (train.py:30)" in saving["title"]
    assert icicle["lines"][1].startswith("1 rank (5) ends in write_record")


def test_icicle_is_bounded() -> None:
    # GIVEN 600 ranks each on its own path
    diagnosis = checkpoint_job(600)
    from hangdoc.analyzer.model import Frame, StackSample, ThreadStack

    for proc in diagnosis.evidence.processes:
        frames = (Frame(f"f{proc.rank}", "/job/t.py", 1), Frame("main", "/job/t.py", 1))
        proc.stack_samples = [StackSample(0, None, (ThreadStack(frames=frames, is_main=True),))]
    icicle = build_report_data(diagnosis)["pictures"]["icicle"]
    assert len(icicle["boxes"]) <= report_pictures.ICICLE_MAX_NODES + 1
    assert icicle["cut"]
    assert max(b["x"] + b["w"] for b in icicle["boxes"]) <= icicle["width"] + 1


def test_lanes_mark_the_first_failure_and_bin_ranks_past_the_lane_budget() -> None:
    data = build_report_data(checkpoint_job(8, saver=2), rules=FAKE_RULES)
    lanes = data["pictures"]["lanes"]
    assert [lane["label"] for lane in lanes["lanes"]][:3] == ["job", "rank 0", "rank 1"]
    assert lanes["first_failure"] == {"kind": "nccl_watchdog_timeout", "offset_s": 0.0,
                                      "rank": 0, "x": 0}  # fmt: skip
    assert lanes["lines"][1] == "First failure: nccl_watchdog_timeout on rank 0 at +0.0 s."
    big = build_report_data(grid_job(4096))["pictures"]["lanes"]
    assert len(big["lanes"]) == 1 + report_pictures.LANE_ROWS
    assert big["ranks_per_lane"] == 128
    assert len(big["marks"]) <= len(big["lanes"]) * report_pictures.LANE_BINS


def test_lanes_need_timed_events() -> None:
    diagnosis = checkpoint_job(4)
    diagnosis.evidence.job_log_events = []
    for proc in diagnosis.evidence.processes:
        proc.log_events = [LogEvent(EventKind.NCCL_WARN, "x", "a.log")]
    assert build_report_data(diagnosis)["pictures"]["lanes"] is None
    diagnosis.evidence.processes[0].log_events = [
        LogEvent(EventKind.NCCL_WARN, "x", "a.log", time=T0)
    ]
    assert build_report_data(diagnosis)["pictures"]["lanes"]["first_failure"]["rank"] == 0


def test_matched_groups_fold_into_one_line() -> None:
    data = build_report_data(grid_job(1024))
    assert data["groups"] == {"total": 137, "healthy": 136, "problem": 1,
                              "healthy_names": "0-131,133-136"}  # fmt: skip
    html = render_html(grid_job(1024))
    assert "136 groups fully matched" in html
    assert html.count('<table class="grid wave">') == 1


def test_page_puts_the_answer_first_then_pictures_then_detail() -> None:
    html = render_html(grid_job(1024))
    order = [html.index(f'id="{s}"') for s in
             ("verdict", "findings", "stacks", "wavefront", "timeline", "groups", "ranks",
              "inputs")]  # fmt: skip
    assert order == sorted(order)
    # every picture is inline SVG with a label and a text equivalent under it
    assert html.count('role="img"') == 3
    assert html.count('<ul class="pic-text">') == 3
    assert not re.search(r"<(img|image|use)\b", html)


def test_strided_sets_bring_the_legend_once() -> None:
    data = build_report_data(grid_job(1024))
    assert data["headline"]["waiting"]["ranks"] == "3-1011:8"
    assert data["legend"] is not None and "3-1019:8" in data["legend"]
    html = render_html(grid_job(1024))
    assert html.count('id="hd-legend"') == 1
    assert build_report_data(checkpoint_job(8))["legend"] is None
