"""The notebook API (hangdoc.api, re-exported lazily by ``hangdoc``) on recorded fixtures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import hangdoc
from hangdoc.analyzer.model import Category, Evidence, Verdict

ROOT = Path(__file__).resolve().parents[2]
DUMPS = ROOT / "fixtures" / "dumps"
FR_DUMP = ROOT / "fixtures" / "fr" / "mismatched_size" / "dump"
LOG = ROOT / "fixtures" / "logs" / "recorded" / "rank_crash.log"


def test_import_hangdoc_stays_cheap() -> None:
    # GIVEN a fresh interpreter WHEN `import hangdoc` THEN no analyzer, pandas or typer yet,
    # and the first use of an API name imports it
    code = (
        "import sys, hangdoc\n"
        "heavy = [m for m in ('pandas', 'hangdoc.analyzer', 'hangdoc.api', 'typer', 'torch')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert callable(hangdoc.diagnose) and 'hangdoc.api' in sys.modules\n"
        "assert 'pandas' not in sys.modules, 'pandas before a frame is built'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_lazy_names_are_the_apis_names() -> None:
    import hangdoc.api

    assert set(hangdoc.api.__all__) == hangdoc.API_NAMES


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = hangdoc.no_such_thing  # type: ignore[attr-defined]
    assert {"load", "diagnose", "ranks_frame"} <= set(dir(hangdoc))


def test_load_and_diagnose_accept_str_path_list_and_evidence() -> None:
    dump = DUMPS / "checkpoint"
    evidence = hangdoc.load(str(dump))
    assert isinstance(evidence, Evidence) and evidence.seen_ranks() == [0, 1, 2, 3]
    from_evidence = hangdoc.diagnose(evidence)
    from_paths = hangdoc.diagnose([dump])
    for diagnosis in (from_evidence, from_paths):
        assert diagnosis.verdict is Verdict.HANG
        assert diagnosis.primary_category is Category.CHECKPOINT_SAVE
        assert diagnosis.primary is not None and diagnosis.primary.culprit_ranks == (3,)


def test_load_never_raises_for_bad_inputs(tmp_path: Path) -> None:
    evidence = hangdoc.load([tmp_path / "nope"])
    assert evidence.inputs[0].error == "no such file or directory"
    diagnosis = hangdoc.diagnose(evidence)
    assert diagnosis.verdict is Verdict.INCONCLUSIVE
    assert diagnosis.primary_category is Category.UNKNOWN
    for frame in (
        hangdoc.ranks_frame(diagnosis),
        hangdoc.stacks_frame(diagnosis),
        hangdoc.collectives_frame(diagnosis),
        hangdoc.log_events_frame(diagnosis),
    ):
        assert frame.empty and len(frame.columns) > 3  # the columns are there, no rows


def test_ranks_frame_marks_the_culprit() -> None:
    frame = hangdoc.ranks_frame(hangdoc.diagnose(DUMPS / "checkpoint"))
    assert list(frame["rank"]) == [0, 1, 2, 3]
    assert frame["rank"].dtype == "Int64"
    culprit = frame[frame["culprit"]]
    assert list(culprit["rank"]) == [3]
    assert "checkpoint" in culprit["activity"].iloc[0]
    assert frame[frame["waiting"]]["in_collective"].all()


def test_ranks_frame_from_evidence_has_activities_but_no_culprit() -> None:
    frame = hangdoc.ranks_frame(hangdoc.load(DUMPS / "checkpoint"))
    assert frame["activity"].notna().all() and not frame["culprit"].any()


def test_stacks_frame_innermost_frames_and_workers() -> None:
    diagnosis = hangdoc.diagnose(DUMPS / "dataloader-worker")
    stacks = hangdoc.stacks_frame(diagnosis)
    top = stacks.query("is_main and depth == 0 and child_pid.isna()")
    assert set(top["rank"]) == {0, 1, 2, 3}
    assert stacks["child_pid"].notna().any()  # the DataLoader workers' stacks
    assert stacks.groupby(["rank", "sample"]).size().min() > 0


def test_collectives_frame_on_flight_recorder() -> None:
    frame = hangdoc.collectives_frame(hangdoc.diagnose(FR_DUMP))
    assert not frame.empty and set(frame["rank"]) == {0, 1, 2, 3}
    assert {"all_reduce"} <= set(frame["op"])
    last = frame.groupby("rank")["seq_id"].max()
    assert len(last) == 4
    assert frame["seq_id"].dtype == "Int64"


def test_log_events_frame_in_time_order() -> None:
    frame = hangdoc.log_events_frame(hangdoc.load(LOG))
    assert not frame.empty
    timed = frame["time"].dropna()
    assert timed.is_monotonic_increasing
    assert isinstance(frame["fields"].iloc[0], dict)


def test_findings_frame_primary_first() -> None:
    diagnosis = hangdoc.diagnose(DUMPS / "checkpoint")
    frame = hangdoc.findings_frame(diagnosis)
    assert isinstance(frame, pd.DataFrame)
    assert frame["primary"].tolist()[0] is True and frame["primary"].sum() == 1
    first = frame.iloc[0]
    assert first["rule"] == diagnosis.findings[0].rule
    assert first["category"] == "checkpoint_save_hang" and first["culprit_ranks"] == [3]
    assert first["strength"] == "corroborated"  # the stacks, and nothing moved


@pytest.mark.parametrize("name", sorted(p.name for p in DUMPS.iterdir() if p.is_dir()))
def test_every_recorded_dump_gives_consistent_frames(name: str) -> None:
    diagnosis = hangdoc.diagnose(DUMPS / name)
    ranks = hangdoc.ranks_frame(diagnosis)
    stacks = hangdoc.stacks_frame(diagnosis)
    assert set(ranks["rank"].dropna()) == set(diagnosis.seen_ranks)
    assert set(stacks["rank"].dropna()) <= set(ranks["rank"].dropna())
    assert len(hangdoc.findings_frame(diagnosis)) == len(diagnosis.findings)
