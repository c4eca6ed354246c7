"""The activity table (analyzer/views/activity_table.py) is complete, and the only place
that words, categorises or advises on an activity.

The second half reads the source: the old split (four enums, three phrase tables) came
back one dict at a time, so the test looks for the shape of such a table anywhere else.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangdoc.analyzer.model import Category
from hangdoc.analyzer.views import activity_table
from hangdoc.analyzer.views.activity_table import (
    PHASES,
    TABLE,
    Activity,
    Kind,
    begun_by,
    phrase,
)
from hangdoc.analyzer.views.catalog import NAME_HINTS, SIGNATURES
from hangdoc.analyzer.vocabulary import Phase

ROOT = Path(__file__).resolve().parents[3]
_TABLE_FILE = Path(activity_table.__file__).resolve()
# The enums that named activities before the table, and the tables keyed by them.
_OLD_ENUMS = ("Tag", "Meaning")
_KEYS = {"Activity", "Phase", *_OLD_ENUMS}


@pytest.mark.parametrize("activity", list(Activity))
def test_every_activity_has_a_phrase_a_category_and_a_fix(activity: Activity) -> None:
    row = TABLE[activity]
    # A participle phrase that fits "rank 3 is …", "… at train.py:12" and "was …".
    assert row.phrase and row.phrase == row.phrase.strip()
    assert row.phrase[0].islower() and not row.phrase.startswith(("is ", "was "))
    assert isinstance(row.category, Category) and row.category is not Category.UNKNOWN
    assert row.fix.strip() and row.fix.rstrip().endswith((".", ")"))
    assert row.after_timeout_fix.strip()
    assert isinstance(row.kind, Kind)


def test_no_two_activities_share_a_phrase() -> None:
    phrases = [row.phrase for row in TABLE.values()]
    assert len(set(phrases)) == len(phrases)


def test_ways_of_waiting_name_no_cause() -> None:
    """A lock, the network or a collective call says how a thread waits, never why the
    others wait for it: the search for the culprit's cause goes on past them."""
    for activity, row in TABLE.items():
        if row.kind is not Kind.WORK:
            assert not row.names_cause, activity


def test_every_phase_marker_maps_onto_an_activity() -> None:
    for phase in Phase:
        if phase.value == "unknown":  # a value a newer hangdoc wrote: no meaning here
            continue
        mark = PHASES[phase]
        assert mark.begins is not None or mark.ends, phase
        assert begun_by(phase.value) is mark.begins
    assert begun_by("no such phase") is None
    assert begun_by(None) is None


def test_the_catalog_and_the_phases_name_table_activities() -> None:
    named = {s.activity for s in SIGNATURES} | {a for a, _ in NAME_HINTS}
    assert named <= set(TABLE)
    assert phrase(Activity.CHECKPOINT_SAVE) == "saving a checkpoint"


def _sources() -> Iterator[Path]:
    """Every Python file of the package, each once (hangdoc/analyzer and hangdoc/rules are
    symlinks to the top-level folders)."""
    for folder in ("analyzer", "rules", "collectors", "hangdoc"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if (ROOT / "hangdoc") in path.parents and path.resolve() != path:
                continue
            if folder == "hangdoc" and path.relative_to(ROOT / "hangdoc").parts[0] in (
                "analyzer",
                "rules",
                "collectors",
            ):
                continue
            yield path


def _key_enum(node: ast.expr | None) -> str | None:
    """``Activity.EVAL`` or ``Phase.EVAL.value`` → the enum's name."""
    if isinstance(node, ast.Attribute) and node.attr == "value":
        node = node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id if node.value.id in _KEYS else None
    return None


def _words_or_category(node: ast.AST) -> bool:
    """A phrase (a string of several words), an f-string or a category somewhere in it."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and " " in sub.value:
            return True
        if isinstance(sub, ast.JoinedStr):
            return True
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Name)
            and sub.value.id == "Category"
        ):
            return True
    return False


def _labels(text: str, phrase: str) -> bool:
    """The string says what a rank is doing in an activity's words ("saving a checkpoint",
    "is outside any collective per …"); the same words inside a sentence are prose."""
    return text.strip().removeprefix("is ").removeprefix("was ").startswith(phrase)


def _docstrings(tree: ast.Module) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _offences(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    docstrings = _docstrings(tree)
    phrases = [row.phrase for row in TABLE.values()]
    found: list[str] = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ClassDef) and node.name in _OLD_ENUMS:
            found.append(f"{where}: an enum of activities, {node.name}")
        if isinstance(node, ast.Dict):
            pairs = list(zip(node.keys, node.values, strict=True))
            keyed = [v for k, v in pairs if _key_enum(k) is not None]
            if keyed and any(_words_or_category(v) for v in keyed):
                found.append(f"{where}: a table of activity words or categories")
        if isinstance(node, ast.DictComp) and _key_enum(node.key) and _words_or_category(node):
            found.append(f"{where}: a table of activity words or categories")
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            said = [p for p in phrases if _labels(node.value, p)]
            if said:
                found.append(f"{where}: an activity's phrase written again: {said[0]!r}")
    return found


def test_no_other_module_words_an_activity() -> None:
    sources = [p for p in _sources() if p.resolve() != _TABLE_FILE]
    assert len(sources) > 100  # the walk found the package
    offences = [o for path in sources for o in _offences(path)]
    assert offences == []


def test_the_source_check_sees_an_old_style_table(tmp_path: Path) -> None:
    """The check above can fail: the tables this issue removed are what it finds."""
    old = tmp_path / "old.py"
    old.write_text(
        "import enum\n"
        "class Meaning(enum.StrEnum):\n    EVAL = 'eval'\n"
        "DOING = {Meaning.EVAL: 'is running evaluation'}\n"
        "CATEGORY_OF = {Meaning.EVAL: Category.EVAL_SOME_RANKS}\n"
        "_PHASE_CAUSE = {Phase.EVAL.value: (Category.EVAL_SOME_RANKS, 'was running it')}\n"
        "TEXT = 'is saving a checkpoint'\n"
    )
    flagged = {int(o.split(":")[1]) for o in _offences(old, tmp_path)}
    assert flagged == {2, 4, 5, 6, 7}  # every line but the import
