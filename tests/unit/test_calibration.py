"""Calibrated confidence (analyzer/calibration.py): the probability of each (rule family,
strength of evidence), fitted on casebook answers; and where `hangdoc eval --calibrate`
writes it (hangdoc/calibrate.py): into the source tree, never into an installed package."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from hangdoc.analyzer import calibration
from hangdoc.analyzer.calibration import (
    CEILING,
    GRADED,
    MIN_ANSWERS,
    Answer,
    Ranked,
    family_of,
    fit,
    read_table,
    table_doc,
    write_table,
)
from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.calibrate import target_for
from hangdoc.errors import OutputPathError

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "fixtures" / "logs" / "recorded"


def _answers(rule: str, strength: Strength, right: int, wrong: int) -> list[Answer]:
    return [Answer(rule, strength, True)] * right + [Answer(rule, strength, False)] * wrong


def test_families_are_ranges_of_rule_ids() -> None:
    assert family_of("HD001").name == "skeleton"
    assert family_of("HD015").name == "flight_recorder"
    assert family_of("HD061").name == "torch_logs"
    assert family_of("HD109").name == "rank_and_node"
    assert family_of("HD206").name == "nccl"
    assert family_of("HD351").name == "gpu"
    assert family_of("HD999").name == "all" and family_of("XYZ").name == "all"


def test_a_family_with_enough_answers_has_its_own_map_and_a_small_one_pools() -> None:
    # GIVEN NCCL answers right 9 in 10 at SIGNAL and always at STATED, and a few GPU
    # answers at SIGNAL, all wrong
    answers = _answers("HD206", Strength.SIGNAL, 27, 3) + _answers("HD203", Strength.STATED, 30, 0)
    answers += _answers("HD300", Strength.SIGNAL, 0, 3)
    assert MIN_ANSWERS <= 30
    table = fit(answers)
    # THEN NCCL has a map of its own near what it measured, and GPU uses its parent's
    # (the logs), which its three misses pull down only a little
    assert "nccl" in table.maps and "gpu" not in table.maps
    assert abs(table.probability("HD206", Strength.SIGNAL) - 0.9) < 0.05
    assert table.owner("HD300").name == "logs"  # type: ignore[union-attr]
    assert 0.6 < table.probability("HD300", Strength.SIGNAL) < 0.9
    # AND a family without answers falls back to the root, which exists always
    assert table.owner("HD011").name == "all"  # type: ignore[union-attr]


def test_each_map_never_decreases_with_the_strength() -> None:
    # GIVEN stated answers that were right less often than hints
    answers = _answers("HD030", Strength.HINT, 30, 0) + _answers("HD030", Strength.STATED, 20, 10)
    table = fit(answers)
    for values in table.maps.values():
        levels = [values[s] for s in GRADED]
        assert levels == sorted(levels)
        assert max(levels) <= CEILING


def test_few_answers_move_a_cell_little_and_none_leave_it_at_the_parent() -> None:
    table = fit(_answers("HD030", Strength.SIGNAL, 1, 0))
    # one right answer at SIGNAL: pulled up from the stated 0.6, but not to 1
    assert Strength.SIGNAL.stated < table.probability("HD030", Strength.SIGNAL) < 0.8
    assert table.probability("HD030", Strength.NONE) == 0.0


def test_a_stronger_finding_never_shows_less_whatever_its_family() -> None:
    # GIVEN torch-log STATED answers right 60 % and NCCL SIGNAL answers all right
    answers = _answers("HD030", Strength.STATED, 18, 12) + _answers("HD201", Strength.SIGNAL, 30, 0)
    table = fit(answers)
    # THEN the fit pools them: the stronger evidence never shows a lower probability
    assert table.probability("HD030", Strength.STATED) >= table.probability(
        "HD201", Strength.SIGNAL
    )


def test_a_casebook_order_of_equal_strengths_is_kept_across_families() -> None:
    # GIVEN torch-log SIGNAL answers right 60 % and NCCL SIGNAL answers all right, and a
    # diagnosis where the torch-log finding came first (equal strengths: by rule id)
    answers = _answers("HD030", Strength.SIGNAL, 18, 12) + _answers("HD201", Strength.SIGNAL, 30, 0)
    order = Ranked(("HD030", Strength.SIGNAL), ("HD201", Strength.SIGNAL))
    free, held = fit(answers), fit(answers, [order])
    assert free.probability("HD030", Strength.SIGNAL) < free.probability("HD201", Strength.SIGNAL)
    # THEN the fit pools them: the finding ranked first never shows less
    assert held.probability("HD030", Strength.SIGNAL) >= held.probability("HD201", Strength.SIGNAL)
    for values in held.maps.values():
        assert [values[s] for s in GRADED] == sorted(values[s] for s in GRADED)


def test_table_round_trips_and_a_damaged_one_changes_nothing(tmp_path: Path) -> None:
    answers = _answers("HD030", Strength.SIGNAL, 25, 5)
    table = fit(answers)
    path = tmp_path / "calibration.json"
    write_table(path, table_doc(table, {"train": answers, "test": []}, table, "a test"))
    assert read_table(path) == table
    doc = json.loads(path.read_text())
    row = next(r for r in doc["measured"] if r["family"] == "torch_logs")
    assert row["strength"] == "signal" and row["train"] == [30, 25] and row["test"] == [0, 0]
    # a finding takes its cell's probability; an abstention stays 0
    finding = Finding("HD030", Category.RANK_DEAD, Severity.ERROR, "t", "e", "f",
                      strength=Strength.SIGNAL)  # fmt: skip
    assert calibration.calibrated(finding, table).confidence == table.probability(
        "HD030", Strength.SIGNAL
    )
    none = Finding("HD000", Category.UNKNOWN, Severity.INFO, "t", "e", "f", strength=Strength.NONE)
    assert calibration.calibrated(none, table).confidence == 0.0
    path.write_text("{not json")
    assert read_table(path) is None


def _tree(root: Path) -> Path:
    """A source tree: pyproject.toml, hangdoc/analyzer/calibration.json, a casebook of two
    cases."""
    (root / "hangdoc" / "analyzer").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "hangdoc"\n')
    (root / "hangdoc" / "analyzer" / "calibration.json").write_text("{}\n")
    book = root / "fixtures" / "cases"
    for name, log, category in (
        ("crash", "rank_crash.log", "rank_dead_or_crashed"),
        ("wrong", "sigkill.log", "cuda_oom"),
    ):
        folder = book / name
        folder.mkdir(parents=True)
        shutil.copy(RECORDED / log, folder / "console.log")
        (folder / "case.toml").write_text(
            f'source = "https://example.org/{name}"\nproject = "demo"\nsummary = "a log"\n'
            f'category = "{category}"\nconfidence = "likely"\n\n[[artifacts]]\n'
            'file = "console.log"\nwhere = "recorded"\n'
        )
    return book


def test_the_table_goes_into_the_tree_that_holds_the_casebook(tmp_path: Path) -> None:
    book = _tree(tmp_path / "clone")
    assert (
        target_for(book, None)
        == (tmp_path / "clone" / "hangdoc" / "analyzer" / "calibration.json").resolve()
    )
    explicit = tmp_path / "elsewhere.json"
    assert target_for(book, explicit) == explicit
    lone = tmp_path / "lone"
    lone.mkdir()
    with pytest.raises(OutputPathError, match="no hangdoc source tree"):
        target_for(lone, None)


def test_an_installed_package_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = _tree(tmp_path / "clone")
    # site-packages, wherever the interpreter keeps it
    site = Path(sysconfig.get_path("purelib")) / "hangdoc" / "analyzer" / "calibration.json"
    with pytest.raises(OutputPathError, match="installed hangdoc"):
        target_for(book, site)
    # a copy of hangdoc that is not a source tree (no pyproject.toml beside hangdoc/)
    installed = tmp_path / "install" / "hangdoc"
    (installed / "analyzer").mkdir(parents=True)
    monkeypatch.setattr(calibration, "TABLE", installed / "analyzer" / "calibration.json")
    with pytest.raises(OutputPathError, match="installed hangdoc"):
        target_for(book, installed / "analyzer" / "calibration.json")
    # the clone's own table stays writable
    assert target_for(book, None).parent.name == "analyzer"


def test_eval_calibrate_writes_the_clone_and_leaves_the_package_alone(tmp_path: Path) -> None:
    from hangdoc.cli import main

    book = _tree(tmp_path / "clone")
    shipped = calibration.TABLE.read_bytes()
    # WHEN the casebook of a clone is calibrated
    assert main(["eval", str(book), "--calibrate", "--floor", "0", "--exact-floor", "0"]) == 0
    # THEN the clone's table is the fit, and the package's own table is unchanged
    doc = json.loads((tmp_path / "clone" / "hangdoc" / "analyzer" / "calibration.json").read_text())
    assert "map" in doc["families"]["all"] and doc["measured"]
    assert calibration.TABLE.read_bytes() == shipped
    # AND --calibration-out writes there instead; without --calibrate it is a usage error
    out = tmp_path / "out.json"
    assert (
        main(
            [
                "eval",
                str(book),
                "--calibrate",
                "--calibration-out",
                str(out),
                "--floor",
                "0",
                "--exact-floor",
                "0",
            ]
        )
        == 0
    )
    assert read_table(out) is not None
    assert main(["eval", str(book), "--calibration-out", str(out)]) == 2


def test_confidence_doc_is_fresh() -> None:
    # docs/confidence.md's tables are generated from the strengths, the reasons, the
    # families and the shipped table: a refit without refreshing them fails here.
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "confidence_doc.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
