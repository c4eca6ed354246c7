"""hangdoc agrees with torch's own analyzer (fr_trace) where fr_trace is right, and finds
what it misses. Both run here, on the recorded real dumps (FR pickles).

gloo writes a dummy pg_config, on which fr_trace stops with a KeyError; the dumps get
the pg_config ProcessGroupNCCL would have written (as samples/fr_mismatch_patched does).
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.views.fr_matching import Kind, MatchResult
from hangdoc.common.safe_unpickle import safe_load
from tests.unit.fr.frdata import matched

FR = Path(__file__).resolve().parents[3] / "fixtures" / "fr"
Problem = tuple[str, int, str, frozenset[int]]
_KINDS = {
    "COLLECTIVE_TYPE_MISMATCH": "type_mismatch",
    "SIZE_OR_SYNTAX_MISMATCH": "size_mismatch",
    "COLLECTIVE_DTYPE_MISMATCH": "dtype_mismatch",
}


def _patched(src: Path, dst: Path, world: int) -> Path:
    docs: dict[str, Any] = {f.name: safe_load(f.open("rb")) for f in sorted(src.iterdir())}
    members: dict[str, tuple[str, set[int]]] = {"0": ("default_pg", set(range(world)))}
    for name, doc in docs.items():
        rank = int(name.rsplit("_", 1)[1])
        for entry in doc["entries"]:
            group, desc = entry["process_group"]
            members.setdefault(group, (desc, set()))[1].add(rank)
    config = {g: {"name": g, "desc": d, "ranks": str(sorted(r))} for g, (d, r) in members.items()}
    dst.mkdir(parents=True)
    for name, doc in docs.items():
        doc["pg_config"] = config
        (dst / name).write_bytes(pickle.dumps(doc))
    return dst


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def run_fr_trace(directory: Path) -> tuple[set[Problem], str]:
    """fr_trace's problems (from its database) and the report it prints."""
    pytest.importorskip("torch")
    from torch.distributed.flight_recorder.components.builder import build_db
    from torch.distributed.flight_recorder.components.config_manager import JobConfig
    from torch.distributed.flight_recorder.components.loader import read_dir

    capture = _Capture()
    logger = logging.getLogger("Flight Recorder")
    logger.addHandler(capture)
    try:
        args = JobConfig().parse_args([str(directory), "--allow-incomplete-ranks"])
        details, version = read_dir(args)
        db: Any = build_db(details, args, version)
    finally:
        logger.removeHandler(capture)
    found: set[Problem] = set()
    for c in db.collectives:
        # a collective with missing ranks but no other error keeps pass_check=True
        if c.missing_ranks:
            found.add((c.group_id, c.collective_seq_id, "missing", frozenset(c.missing_ranks)))
        by_kind: dict[str, set[int]] = {}
        for rank, other in (c.mismatch_collectives or {}).items():
            kind = _KINDS[other.type_of_mismatch.state.name]
            by_kind.setdefault(kind, set()).add(rank)
        for kind, ranks in by_kind.items():
            found.add((c.group_id, c.collective_seq_id, kind, frozenset(ranks)))
    return found, "\n".join(capture.lines)


def hangdoc_problems(directory: Path, world: int) -> tuple[set[Problem], MatchResult]:
    ev = load_paths([directory])
    for proc in ev.processes:
        proc.world_size = world
    result = matched(ev)
    found = {(p.group, p.seq or 0, p.kind.value, frozenset(p.blamed)) for p in result.problems}
    return found, result


@pytest.fixture
def both(tmp_path: Path) -> Iterator[Any]:
    def run(case: str, world: int = 4) -> tuple[set[Problem], str, set[Problem], MatchResult]:
        src = FR / case / "pickle" if (FR / case / "pickle").is_dir() else FR / case
        patched = _patched(src, tmp_path / case.replace("/", "_"), world)
        theirs, text = run_fr_trace(patched)
        ours, result = hangdoc_problems(patched, world)
        return theirs, text, ours, result

    yield run


@pytest.mark.parametrize("case", ["mismatched_op", "skipped_collective"])
def test_same_answer_as_fr_trace(both: Any, case: str) -> None:
    theirs, _, ours, _ = both(case)
    assert theirs == ours
    assert len(ours) == 1


def test_same_answer_on_torch_sample_with_a_missing_rank(both: Any) -> None:
    theirs, text, ours, _ = both("torch_samples/fr_mismatch", world=2)
    assert theirs == ours == {("0", 6, "missing", frozenset({1}))}
    assert "missing ranks: {1}" in text


def test_size_mismatch_culprit_by_majority_not_by_file_order(both: Any) -> None:
    theirs, _, ours, result = both("mismatched_size")
    # both see the size mismatch at default_pg #8 ...
    (size_theirs,) = [p for p in theirs if p[2] == "size_mismatch"]
    (size_ours,) = [p for p in ours if p[2] == "size_mismatch"]
    assert size_theirs[:3] == size_ours[:3] == ("0", 8, "size_mismatch")
    # ... fr_trace compares with the first file it read (rank 1's) and blames the other
    # three; hangdoc takes the majority and blames rank 1, which planted it
    assert size_theirs[3] == {0, 2, 3} and size_ours[3] == {1}
    # the missing rank 1 at #9 is reported after it, as its consequence
    missing = [p for p in result.problems if p.kind is Kind.MISSING]
    assert [(p.seq, p.blamed, p.root) for p in missing] == [(9, (1,), False)]


def test_hangdoc_reports_the_type_mismatch_fr_trace_hides(both: Any) -> None:
    theirs, text, ours, _ = both("missing_and_mismatch")
    expected = {("0", 8, "missing", frozenset({3})), ("0", 8, "type_mismatch", frozenset({2}))}
    assert ours == expected
    # fr_trace's database has both, but its report shows only the missing rank
    assert theirs == expected
    assert "missing ranks: {3}" in text
    assert "COLLECTIVE_TYPE_MISMATCH" not in text
