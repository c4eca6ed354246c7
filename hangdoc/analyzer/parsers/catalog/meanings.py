"""What people say a catalog row means: ``meanings.toml``, read and applied to rows.

A *family* names rows by where they come from (project, level, source file, function)
and what their template says (a regular expression over it); a ``[[row]]`` entry names
one row by id. The first family that fits a row gives its meaning; a row entry wins over
families. ``[values]`` names the values that slots carry, from the slot's expression in
the source (``comm->rank`` → ``rank``), for every row; a family may add its own.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.analyzer.vocabulary import EventKind

CATEGORIES = frozenset(
    {
        "rank_divergence_collective_vs_noncollective",
        "collective_type_mismatch",
        "collective_size_or_dtype_mismatch",
        "rank_dead_or_crashed",
        "cuda_oom",
        "nccl_network_or_transport_error",
        "nccl_init_or_bootstrap_hang",
        "dataloader_deadlock_or_worker_hang",
        "uneven_data_drop_last",
        "checkpoint_save_hang",
        "eval_loop_only_some_ranks",
        "io_or_filesystem_stall",
        "gpu_hardware_or_driver",
        "python_deadlock_gil_or_lock",
        "p2p_pipeline_deadlock",
        "not_a_hang_slow_or_benign",
        "unknown",
    }
)
STRENGTHS = ("decisive", "strong", "moderate", "weak", "none")
VALUE_TYPES = frozenset({"int", "float", "str"})


@dataclass(frozen=True, slots=True)
class RowMeaning:
    """A row's meaning. ``kind`` is an EventKind value, or None for rows that say nothing
    about a hang (``strength == "none"``); ``proposed_kind`` a finer kind the vocabulary
    does not have yet."""

    family: str
    kind: str | None
    category: str | None
    strength: str
    note: str = ""
    proposed_kind: str | None = None
    values: tuple[tuple[re.Pattern[str], str], ...] = ()
    # Value-dependent meanings: (a pattern over the matched text, the meaning then).
    refine: tuple[tuple[re.Pattern[str], RowMeaning], ...] = ()
    component: bool = False  # a part of other messages: any other row on the line wins
    # Payload fields every line of the row carries whatever its slots say, by field name
    # (``problem = "duplicate_gpu"``): what people know of the message, typed by the kind.
    fields: tuple[tuple[str, str | int | bool], ...] = ()

    def for_text(self, text: str) -> RowMeaning:
        """The meaning of one matched line: the first refinement whose pattern occurs."""
        for pattern, meaning in self.refine:
            if pattern.search(text):
                return meaning
        return self


@dataclass(slots=True)
class _Family:
    name: str
    meaning: RowMeaning
    projects: tuple[str, ...]
    levels: re.Pattern[str] | None  # the globs, as one expression
    files: re.Pattern[str] | None
    functions: re.Pattern[str] | None
    template: re.Pattern[str] | None
    generic: bool


def _globs(raw: object) -> re.Pattern[str] | None:
    globs = _tuple(raw)
    if not globs:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs))


@dataclass(slots=True)
class Meanings:
    families: list[_Family] = field(default_factory=list)
    rows: dict[str, RowMeaning] = field(default_factory=dict)
    values: tuple[tuple[re.Pattern[str], str], ...] = ()
    value_types: dict[str, str] = field(default_factory=dict)

    def meaning_of(
        self, project: str, level: str, files: list[tuple[str, str]], template: str, row_id: str
    ) -> tuple[RowMeaning | None, str]:
        """(meaning, how it was given) of one row: ``row`` (an entry for it), ``message``
        (a family that reads its template), ``area`` (a family of its source files or
        level only), ``generic`` (a catch-all), or ``""`` (none)."""
        row = self.rows.get(row_id)
        if row is not None:
            return row, "row"
        for family in self.families:
            if family.projects and project not in family.projects:
                continue
            if family.levels is not None and not family.levels.match(level):
                continue
            if family.files is not None and not any(family.files.match(f) for f, _ in files):
                continue
            if family.functions is not None and not any(
                family.functions.match(fn) for _, fn in files
            ):
                continue
            if family.template is not None and not family.template.search(template):
                continue
            if family.generic:
                return family.meaning, "generic"
            return family.meaning, "message" if family.template is not None else "area"
        return None, ""

    def value_name(self, meaning: RowMeaning | None, slot_name: str) -> str | None:
        """The named value a slot carries (``rank``, ``peer``, ``timeout_ms`` …)."""
        for pattern, name in (*(meaning.values if meaning else ()), *self.values):
            if pattern.search(slot_name):
                return name or None
        return None


class MeaningsError(ValueError):
    """meanings.toml says something the vocabulary does not know."""


def _tuple(raw: object) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list):
        return tuple(str(x) for x in raw)
    raise MeaningsError(f"expected a string or a list, got {raw!r}")


def _meaning(name: str, raw: dict[str, object], kinds: set[str]) -> RowMeaning:
    strength = str(raw.get("strength", "none"))
    if strength not in STRENGTHS:
        raise MeaningsError(f"{name}: strength {strength!r} is not one of {STRENGTHS}")
    kind = raw.get("kind")
    if kind is not None and str(kind) not in kinds:
        raise MeaningsError(f"{name}: kind {kind!r} is no EventKind")
    category = raw.get("category")
    if category is not None and str(category) not in CATEGORIES:
        raise MeaningsError(f"{name}: category {category!r} is not in DESIGN's vocabulary")
    if strength != "none" and (kind is None or category is None):
        raise MeaningsError(f"{name}: a meaning with strength {strength} needs kind and category")
    values_raw = raw.get("values", {})
    if not isinstance(values_raw, dict):
        raise MeaningsError(f"{name}: values must be a table")
    values = tuple((re.compile(str(k)), str(v)) for k, v in values_raw.items())
    fields_raw = raw.get("fields", {})
    if not isinstance(fields_raw, dict) or not all(
        isinstance(v, (str, int, bool)) for v in fields_raw.values()
    ):
        raise MeaningsError(f"{name}: fields must be a table of strings, numbers or booleans")
    if fields_raw and kind is None:
        raise MeaningsError(f"{name}: fields need a kind (they are that kind's payload's)")
    proposed = raw.get("proposed_kind")
    refine: list[tuple[re.Pattern[str], RowMeaning]] = []
    entries = raw.get("refine", [])
    if not isinstance(entries, list):
        raise MeaningsError(f"{name}: refine must be a list")
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or "text" not in entry:
            raise MeaningsError(f"{name}: refine entries need a text pattern")
        merged = {
            k: v for k, v in raw.items() if k in {"kind", "category", "note", "proposed_kind"}
        }
        if "kind" not in entry or entry["kind"] == raw.get("kind"):
            merged["fields"] = raw.get("fields", {})
        merged.update({k: v for k, v in entry.items() if k != "text"})
        if merged.get("strength") == "none" and "kind" not in entry:
            merged.pop("category", None)
        refine.append((re.compile(str(entry["text"])), _meaning(f"{name}#{index}", merged, kinds)))
    return RowMeaning(
        family=name,
        kind=str(kind) if kind is not None else None,
        category=str(category) if category is not None else None,
        strength=strength,
        note=str(raw.get("note", "")),
        proposed_kind=str(proposed) if proposed is not None else None,
        values=values,
        refine=tuple(refine),
        component=bool(raw.get("component", False)),
        fields=tuple((str(k), v) for k, v in fields_raw.items()),
    )


def load_meanings(path: Path) -> Meanings:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    kinds = {k.value for k in EventKind}
    out = Meanings()
    values = data.get("values", {})
    out.values = tuple((re.compile(str(k)), str(v)) for k, v in values.items())
    types = data.get("value_types", {})
    for name, kind in types.items():
        if kind not in VALUE_TYPES:
            raise MeaningsError(f"value_types.{name}: {kind!r} is not one of {sorted(VALUE_TYPES)}")
        out.value_types[str(name)] = str(kind)
    for index, raw in enumerate(data.get("family", [])):
        name = str(raw.get("name", f"family {index}"))
        template = raw.get("template")
        out.families.append(
            _Family(
                name=name,
                meaning=_meaning(name, raw, kinds),
                projects=_tuple(raw.get("project")),
                levels=_globs(raw.get("level")),
                files=_globs(raw.get("file")),
                functions=_globs(raw.get("function")),
                template=re.compile(str(template)) if template else None,
                generic=bool(raw.get("generic", False)),
            )
        )
    for raw in data.get("row", []):
        row_id = str(raw["id"])
        out.rows[row_id] = _meaning(row_id, raw, kinds)
    return out
