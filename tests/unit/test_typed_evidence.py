"""The evidence is typed: rules and views decide on the fields parsers filled, never by
searching the words of an event or a finding again, and the model holds no string pairs
looked up by name.

The first test walks the source of rules/ and analyzer/views/ (an AST, not a grep): a
regex search or match, a substring test, a comparison with a string, a startswith or a
word tokenisation applied to the human-readable text of something (``.text``,
``.summary``, ``.message``, ``.title``, ``.explanation``, ``.detail``, ``.exc_type``,
``.last_error``…) fails it, unless ALLOWED below names it with its reason.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import typing
from pathlib import Path

import hangdoc.analyzer.model as model
import hangdoc.analyzer.payloads as payloads

ROOT = Path(__file__).resolve().parents[2]
DECIDERS = (ROOT / "rules", ROOT / "analyzer" / "views")
# Attributes that hold words for people: an event's line, a finding's or death's summary,
# an error's message and type, a detail.
TEXT = frozenset(
    {"text", "summary", "message", "title", "explanation", "detail", "exc_type", "last_error",
     "error", "why", "where", "label", "what"}
)  # fmt: skip
_REGEX = frozenset({"search", "match", "fullmatch", "findall", "finditer", "split", "sub"})
_STR = frozenset({"startswith", "endswith", "find", "rfind", "index", "rindex", "count"})
_WORDS = frozenset({"tokens", "meaning_of", "storage_error", "_words", "sub"})

# The recognisers of the job's own lines (LogLine: what the job printed, in its own
# words): no parser format describes them, their words are the signal.
_JOB_WORDS = (
    "the job's own line, read with the vocabulary of the job's frame names (views/meaning.py):"
    " its words are the signal, no library format describes them"
)
_COMPARE = "ranks' own lines compared with each other (templates, numbers), not recognised"
ALLOWED: dict[tuple[str, str], str] = {
    ("analyzer/views/last_words.py", "tokens(line.text)"): _JOB_WORDS,
    ("analyzer/views/last_words.py", "_LETTER.search(line.text)"): (
        _JOB_WORDS + "; whether the line has a word at all (what tokens() finds), asked "
        "before tokenizing it"
    ),
    ("analyzer/views/last_words.py", "meaning_of(_beside_losses(line.text), strong_only=True)"): (
        _JOB_WORDS + "; the names of the losses it reports left out"
    ),
    ("analyzer/views/last_words.py", "_SETTING.match(line.text)"): (
        "a configuration dump among the job's own lines (mmengine config, HF "
        "TrainingArguments): a setting's name is not an activity"
    ),
    ("analyzer/views/counters.py", "_LOSS.search(line.text)"): (
        _JOB_WORDS + "; a line that reports a loss is a training step's, not a count of "
        "single-rank work (last_words.py's _TRAINING)"
    ),
    ("analyzer/views/meaning.py", "tokens(last.text)"): _JOB_WORDS,
    ("analyzer/views/log_compare.py", "_words(line.text)"): _COMPARE,  # _starts_an_action
    ("analyzer/views/log_compare.py", "_words(r.lines[j].text)"): (
        _COMPARE + "; whether a line every rank prints has a word at all (a rule of dashes "
        "says nothing of where the ranks are)"
    ),
    ("analyzer/views/log_compare.py", "_NUMBER.findall(lines[index].text)"): _COMPARE,
    ("analyzer/views/log_compare.py", "_NUMBER.findall(line.text)"): _COMPARE,  # same_progress
    ("analyzer/views/log_compare.py", 'line.text.rstrip().endswith(("...", "…"))'): (_COMPARE),
    ("analyzer/views/log_compare.py", 'tokens(_NUMBER.sub("#", line.text))'): (
        _COMPARE + "; the ranks' last lines, numbers masked, word for word (last_line_values)"
    ),
    ("analyzer/views/log_compare.py", '_NUMBER.sub("#", line.text)'): _COMPARE,
}


def _text_attribute(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in TEXT for n in ast.walk(node))


def _is_words(node: ast.AST) -> bool:
    """A string constant, or a literal collection of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_is_words(e) for e in node.elts)
    return False


def _decides_on_text(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in _REGEX and any(_text_attribute(a) for a in node.args):
                return True
            if func.attr in _STR and _text_attribute(func.value):
                return True
        if isinstance(func, ast.Name) and func.id in _WORDS:
            return any(_text_attribute(a) for a in node.args)
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        return any(_text_attribute(s) for s in sides) and any(_is_words(s) for s in sides)
    return False


def text_decisions(source: str) -> list[tuple[int, str]]:
    """(line, expression) of every decision on text in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if _decides_on_text(node):
            found.append((getattr(node, "lineno", 0), ast.get_source_segment(source, node) or ""))
    return found


def test_no_rule_or_view_decides_by_searching_text() -> None:
    found: list[str] = []
    used: set[tuple[str, str]] = set()
    for folder in DECIDERS:
        for path in sorted(folder.glob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            for line, expression in text_decisions(path.read_text(encoding="utf-8")):
                if (name, expression) in ALLOWED:
                    used.add((name, expression))
                else:
                    found.append(f"{name}:{line}: {expression}")
    assert not found, "decided on words, not on a parser's typed field:\n" + "\n".join(found)
    assert used == set(ALLOWED), f"allowed but gone (remove them): {set(ALLOWED) - used}"


def test_the_check_catches_the_searches_it_is_for() -> None:
    # the forms this refactor removed, each caught
    for bad in (
        'x = "SIGKILL" in first.summary',
        'x = "KeyboardInterrupt" in event.text',
        'x = "watchdog" in p.event.text.lower()',
        'x = "terminate called" not in p.event.text',
        "x = HARDWARE.search(p.event.text)",
        'x = p.event.payload.message.startswith("NCCL")',
        'x = finding.title == "rank 3 died"',
    ):
        assert text_decisions(bad), bad
    # reading a typed field, or showing the words, is not deciding on them
    for fine in ("x = death.signal == SignalName.SIGKILL", "t = f'{p.event.text[:90]}'"):
        assert not text_decisions(fine), fine


def _string_pairs(cls: type) -> list[str]:
    """The fields of ``cls`` that hold strings by a string name."""
    hints = typing.get_type_hints(cls)
    pairs = (tuple[tuple[str, str], ...], dict[str, str])
    return [f"{cls.__name__}.{f.name}" for f in dataclasses.fields(cls) if hints[f.name] in pairs]


# Strings by name that really are strings by name: a frame's local variables (name → the
# value py-spy printed) and a process's environment (variable → value).
_NAMED_STRINGS = frozenset({"Frame.locals", "ProcessEvidence.env"})


def _dataclasses(module: object) -> list[type]:
    return [
        obj
        for _, obj in inspect.getmembers(module, inspect.isclass)
        if dataclasses.is_dataclass(obj) and obj.__module__ == getattr(module, "__name__", "")
    ]


def test_the_model_and_payloads_hold_no_string_pairs_but_frame_locals() -> None:
    modules: list[object] = [model]
    for info in pkgutil.iter_modules(payloads.__path__):
        modules.append(importlib.import_module(f"{payloads.__name__}.{info.name}"))
    found = {
        name for module in modules for cls in _dataclasses(module) for name in _string_pairs(cls)
    }
    assert found == _NAMED_STRINGS
    assert "fields" not in {f.name for f in dataclasses.fields(model.LogEvent)}
