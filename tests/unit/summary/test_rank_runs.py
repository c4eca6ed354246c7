"""Node summaries /4: a process group's ranks as runs (summaries/rank_runs.py), read back
as the same ranks; a /3 summary, whose groups list their ranks, still loads."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_dump, load_paths
from hangdoc.analyzer.loading.redaction import redact_evidence
from hangdoc.analyzer.model import Evidence, ProcessGroupInfo
from hangdoc.analyzer.summaries.rank_runs import MAX_GROUP_RANKS, rank_runs, ranks_of_runs
from hangdoc.analyzer.summaries.read import read_manifest_head, read_summary
from hangdoc.analyzer.summarize.write import DUMP_TOKEN, build_node_summary, write_node_summary
from hangdoc.collectors.jobformat import SUMMARY_NAME

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
WITH_GROUPS = Path(FIXTURES / "dumps" / "checkpoint")


@pytest.mark.parametrize(
    "ranks",
    [
        tuple(range(16384)),  # the world
        tuple(range(5, 16384, 8)),  # a data-parallel group: one rank of each node
        tuple(range(8, 16)),  # a node's block
        (0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19),  # blocks of a stride
        (3, 3, 3, 3, 3, 3, 3, 3, 3),  # (a repeated rank: step 0)
        (9, 7, 5, 3, 1, 0, 2, 4, 6, 8),  # going down, then up
    ],
)
def test_runs_give_back_the_ranks_in_their_order(ranks: tuple[int, ...]) -> None:
    runs = rank_runs(ranks)
    assert runs is not None and 3 * len(runs) < len(ranks)
    assert ranks_of_runs(json.loads(json.dumps(runs))) == ranks


def test_ranks_that_are_no_runs_stay_a_list() -> None:
    rng = random.Random(3)
    assert rank_runs(tuple(rng.sample(range(10_000), 200))) is None
    assert rank_runs((0, 1, 2)) is None  # short lists as they are


@pytest.mark.parametrize(
    "damage",
    [{"a": 1}, [[0, 1]], [[0, "8", 1]], [[0, 0, 1]], [[0, 1.5, 1]], [[0, MAX_GROUP_RANKS + 1, 1]]],
)
def test_damaged_runs_raise_what_the_reader_catches(damage: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        ranks_of_runs(damage)


def _copy(tmp_path: Path) -> Path:
    dest = tmp_path / WITH_GROUPS.name
    shutil.copytree(WITH_GROUPS, dest)
    return dest


# The recorded dumps are of jobs of 4 ranks or less (no group long enough to be runs):
# the groups of a job of 64 ranks on 8 nodes, as torch numbers them, are added to one.
GROUPS = [
    ProcessGroupInfo("0", "default_pg", tuple(range(64))),
    ProcessGroupInfo("1", "dp", tuple(range(3, 64, 8))),
    ProcessGroupInfo("2", "tp", tuple(range(8, 16))),
    ProcessGroupInfo("3", "odd", (5, 1, 60, 2)),
]


def _summary_with_groups(dump: Path) -> Evidence:
    """write_node_summary's steps, with GROUPS in the dump's Evidence."""
    evidence = load_dump(dump, DUMP_TOKEN)
    redact_evidence(evidence)
    evidence.process_groups.update((g.name, g) for g in GROUPS)
    head = read_manifest_head(dump)
    summary = build_node_summary(
        evidence, dump_format=head.format, finished_at=head.finished_at, complete=head.complete
    )
    (dump / SUMMARY_NAME).write_text(json.dumps(summary))
    return evidence


def test_a_summary_reads_the_groups_the_raw_files_give(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    raw = _summary_with_groups(copy)
    written = json.loads((copy / SUMMARY_NAME).read_text())
    assert any("rank_runs" in g for g in written["process_groups"])
    contents, why = read_summary(copy, "X")
    assert why is None and contents is not None
    assert {g.name: g.ranks for g in contents.process_groups} == {
        name: g.ranks for name, g in raw.process_groups.items()
    }


def test_a_summary_of_the_previous_format_still_loads(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    _summary_with_groups(copy)
    path = copy / SUMMARY_NAME
    summary = json.loads(path.read_text())
    summary["format"] = "hangdoc.summary/3"  # its groups' ranks listed, as /3 wrote them
    for group in summary["process_groups"]:
        if "rank_runs" in group:
            group["ranks"] = list(ranks_of_runs(group.pop("rank_runs")))
    path.write_text(json.dumps(summary))
    fresh = _copy(tmp_path / "again")
    _summary_with_groups(fresh)
    old, why = read_summary(copy, "X")
    new, _ = read_summary(fresh, "X")
    assert why is None and old is not None and new is not None
    assert old.process_groups == new.process_groups
    assert [g.ranks for g in new.process_groups if g.name in "0123"] == [g.ranks for g in GROUPS]


def test_a_job_of_summaries_with_runs_is_analysed_as_its_raw_files(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    write_node_summary(copy)
    assert analyze(load_paths([copy])).findings[0].culprit_ranks == (3,)
