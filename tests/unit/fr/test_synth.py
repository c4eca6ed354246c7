"""The benchmark's synthetic dumps are torch's exact pickle format, and the bulk reader
gives the same answer with and without worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.flight_recorder.bulk import read_flight_recorders
from hangdoc.analyzer.model import Evidence, Finding
from hangdoc.common.safe_unpickle import safe_load
from hangdoc.rules import all_rules
from tests.unit.fr.frdata import load_synth

REPO = Path(__file__).resolve().parents[3]
REAL_DUMPS = sorted((REPO / "fixtures" / "fr").glob("*/pickle/comm_lib_trace_rank_*"))


synth = load_synth()


@pytest.mark.parametrize("path", REAL_DUMPS, ids=lambda p: f"{p.parent.parent.name}-{p.name[-1]}")
def test_jit_pickler_reproduces_real_torch_dumps_byte_for_byte(path: Path) -> None:
    with path.open("rb") as handle:
        doc = safe_load(handle)
    assert synth.jit_dumps(doc) == path.read_bytes()


def _findings(directory: Path, jobs: int, world: int) -> list[Finding]:
    files = sorted((p, p.name) for p in directory.iterdir())
    ev = Evidence()
    for parsed in read_flight_recorders(files, jobs=jobs):
        assert parsed.error is None
        for proc in parsed.processes:
            proc.world_size = world
            ev.processes.append(proc)
        for group in parsed.process_groups:
            ev.process_groups.setdefault(group.name, group)
    rules = tuple(r for r in all_rules() if "HD010" <= r.id <= "HD029")
    return analyze(ev, rules=rules).findings


def test_planted_problems_are_the_three_roots_with_and_without_workers(tmp_path: Path) -> None:
    job = synth.Job(ranks=64, entries=300)
    job.write(tmp_path)
    expected = job.expected()
    serial = _findings(tmp_path, 1, 64)
    assert {(f.rule, f.culprit_ranks) for f in serial[:3]} == {
        ("HD010", expected["skip"]),
        ("HD012", expected["size"]),
        ("HD011", expected["type"]),
    }
    assert serial[3].rule == "HD017" and len(serial) == 4  # the other groups: one summary
    parallel = _findings(tmp_path, 2, 64)
    assert [(f.rule, f.culprit_ranks, f.title) for f in parallel] == [
        (f.rule, f.culprit_ranks, f.title) for f in serial
    ]
