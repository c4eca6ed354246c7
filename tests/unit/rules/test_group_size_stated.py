"""A group larger than the job: the ranks' own init lines state the world size they
create the group with (parsers/logs/phases.py), and HD207 compares it with the ranks the
launcher started (WORLD_SIZE in each rank's environment, all of them collected).

The recorded dump is fixtures/dumps/world-size-nodes (live-2026-11-28c): four ranks
started with WORLD_SIZE=4 each print "Initializing process group: rank r of 8" and wait
in init_process_group for four members that were never launched.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.logs.phases import match_phase
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.vocabulary import Phase

DUMP = Path(__file__).resolve().parents[3] / "fixtures" / "dumps" / "world-size-nodes"

SAID = (
    ("Initializing process group: rank 3 of 8 (tcp://10.0.0.1:29500)", 3, 8),
    ("initializing distributed, rank 5 of 16", 5, 16),
    ("Initialising the process group for rank 0 of 2", 0, 2),
    # the forms read before, with their world sizes (Lightning, Ray Train)
    ("Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/8", 1, 8),
    ("Setting up process group for: env:// [rank=0, world_size=5]", 0, 5),
)


@pytest.mark.parametrize(("text", "rank", "world"), SAID)
def test_an_init_line_states_the_rank_and_the_world_size(text: str, rank: int, world: int) -> None:
    hit = match_phase(text)
    assert hit is not None and hit.rank == rank
    assert isinstance(hit.payload, PhaseMarker)
    assert (hit.payload.phase, hit.payload.world_size) == (Phase.INIT, world)


@pytest.mark.parametrize(
    "text", ["rank 0 of 8 finished its shard", "loaded batch 3 of 8", "Initializing model: 3 of 8"]
)
def test_a_count_without_an_init_is_no_world_size(text: str) -> None:
    hit = match_phase(text)
    assert hit is None or not isinstance(hit.payload, PhaseMarker) or not hit.payload.world_size


def test_a_group_of_eight_that_the_launcher_started_four_of_is_a_finding() -> None:
    # GIVEN every rank in init_process_group, WORLD_SIZE=4, each saying "rank r of 8"
    primary = analyze(load_paths([DUMP])).findings[0]
    # THEN the stuck group creation says why: four members were never launched
    assert (primary.rule, primary.category) == ("HD207", Category.NCCL_INIT)
    assert primary.culprit_ranks == ()
    assert "for a group of 8, but the job started 4 ranks" in primary.title
    assert "ranks 4-7 never started" in primary.explanation
    assert any(ref.line == 1 and "rank 0 of 8" in ref.detail for ref in primary.evidence)


def _with_lines(tmp_path: Path, world: int) -> Path:
    dump = tmp_path / "dump"
    shutil.copytree(DUMP, dump)
    for out in dump.glob("rank*/logs/stdout.*"):
        out.write_text(out.read_text().replace(" of 8 ", f" of {world} "))
    return dump


def test_a_group_of_the_job_s_own_size_says_nothing_more(tmp_path: Path) -> None:
    # GIVEN the same stacks, but the ranks say "rank r of 4": the group is the job's size
    primary = analyze(load_paths([_with_lines(tmp_path, 4)])).findings[0]
    assert primary.rule == "HD207"
    assert "for a group of" not in primary.title
    assert "never started" not in primary.explanation
