"""The reducer's shortcuts (interning, sibling-group copies, the fast constructor) must
give exactly the records that building each entry from scratch gives."""

from __future__ import annotations

import dataclasses

import pytest

from hangdoc.analyzer.model import CollectiveRecord, Frame, OpState
from hangdoc.analyzer.parsers.flight_recorder import Reducer, document_to_parsed
from hangdoc.analyzer.parsers.fr_record_build import (
    FIELD_NAMES,
    record_from_fields,
    with_group,
)
from tests.unit.fr.frdata import load_synth

Job = load_synth().Job

FIELDS = (
    "5", 7001, "all_gather", OpState.SCHEDULED, ((4096,),), ((32768,),), ("BFloat16",), False, None,
    12, 1795289481000000000, "rank3", "tp", 0, ("BFloat16",), "nccl",
    (Frame(function="f", file="a.py", line=3),),
)  # fmt: skip


def test_fast_constructor_builds_what_the_dataclass_builds() -> None:
    assert tuple(f.name for f in dataclasses.fields(CollectiveRecord)) == FIELD_NAMES
    fast, slow = record_from_fields(*FIELDS), CollectiveRecord(*FIELDS)
    assert fast == slow and hash(fast) == hash(slow)
    assert type(fast) is CollectiveRecord
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.group = "6"  # type: ignore[misc]


def test_with_group_changes_the_group_only() -> None:
    template = CollectiveRecord(*FIELDS)
    copy = with_group(template, "9")
    assert copy == dataclasses.replace(template, group="9")


def _each_alone(job: Job, rank: int) -> list[CollectiveRecord]:
    """The records of one rank from a reducer that has seen nothing else."""
    return document_to_parsed(job.dump(rank), rank, f"r{rank}", Reducer()).processes[0].collectives


def test_a_shared_reducer_gives_the_records_a_fresh_one_gives() -> None:
    """32 ranks in tp groups of 8: after the first group, every tp op is a sibling copy."""
    job = Job(ranks=32, entries=120)
    shared = Reducer()
    siblings_before = 0
    for rank in range(job.ranks):
        got = document_to_parsed(job.dump(rank), rank, f"r{rank}", shared).processes[0]
        assert got.collectives == _each_alone(job, rank), rank
        if rank == 8:
            siblings_before = len(shared.siblings)
    # tp groups 2-4 (~90 tp ops each) were copied from group 1's records; the few new
    # templates are the planted size mismatch and ops older than rank 0's buffer start
    assert siblings_before > 90
    assert len(shared.siblings) - siblings_before < 10


def test_interned_history_is_shared_across_the_ranks_of_a_group() -> None:
    job = Job(ranks=16, entries=120)
    reducer = Reducer()
    first, second = (
        document_to_parsed(job.dump(r), r, f"r{r}", reducer).processes[0].collectives
        for r in (0, 1)
    )
    tp_first = {(r.group, r.seq_id): r for r in first if r.group_desc == "tp" and not r.source}
    shared = [r for r in second if tp_first.get((r.group, r.seq_id)) is r]
    assert len(shared) > len(tp_first) // 2
