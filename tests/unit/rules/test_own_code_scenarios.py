"""Jobs that name things their own way (fixtures/dumps/own-*, recorded by fixtures/record.py
from hangdoc/scenarios/own_code.py): diagnosed from stacks alone, logs alone, and both.

Each dump holds every rank's py-spy stacks, /proc facts and stdout. "Stacks alone" drops
the logs; "logs alone" keeps only the ranks' stdout files, as loose files a user attaches
to a ticket (named by rank). Where one source cannot show the cause, the expectation is
what it does show (fixtures/record.py: OWN_SCENARIOS).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


def _record_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record", FIXTURES / "record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OWN: dict[str, dict[str, object]] = _record_module().OWN_SCENARIOS


def _stacks_only(dump: Path, into: Path) -> Path:
    shutil.copytree(dump, into, ignore=shutil.ignore_patterns("logs"))
    return into


def _logs_only(dump: Path, into: Path) -> list[Path]:
    into.mkdir()
    files = []
    for log in sorted(dump.glob("rank*/logs/stdout*")):
        target = into / f"{log.parent.parent.name}.log"  # rank3.log, as a ticket has it
        shutil.copyfile(log, target)
        files.append(target)
    return files


def _primary(paths: list[Path]) -> tuple[str, str, list[int]]:
    diagnosis = analyze(load_paths(paths))
    primary = diagnosis.primary
    assert primary is not None
    return diagnosis.verdict.value, primary.category.value, list(primary.culprit_ranks)


@pytest.mark.parametrize("name", sorted(OWN))
def test_both(name: str) -> None:
    verdict, category, culprits = _primary([FIXTURES / "dumps" / name])
    assert (verdict, category, culprits) == ("hang", OWN[name]["category"], [3])


@pytest.mark.parametrize("name", sorted(OWN))
def test_stacks_alone(name: str, tmp_path: Path) -> None:
    dump = _stacks_only(FIXTURES / "dumps" / name, tmp_path / name)
    verdict, category, culprits = _primary([dump])
    assert (verdict, category, culprits) == ("hang", OWN[name]["stacks"], [3])


@pytest.mark.parametrize("name", sorted(OWN))
def test_logs_alone(name: str, tmp_path: Path) -> None:
    files = _logs_only(FIXTURES / "dumps" / name, tmp_path / "ticket")
    assert len(files) == 4
    _verdict, category, culprits = _primary(files)
    assert category == OWN[name]["logs"]
    if category != "unknown":
        assert culprits == [3]
