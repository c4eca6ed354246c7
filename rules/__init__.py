"""The rule registry: one module per rule (``hdNNN_slug.py``), listed in ``_MODULES``.

Ids are never reused; a retired rule keeps its module as a stub. The registry
validates ids and doc sections when it is first built.
"""

from __future__ import annotations

import functools
import importlib

from hangdoc.rules.base import Rule, validate_rule

_MODULES: tuple[str, ...] = (
    "hd000_no_cause",
    "hd001_rank_outside_collective",
    "hd002_collective_type_mismatch",
    "hd003_missing_rank",
    "hd004_progress",
    "hd005_all_in_same_collective",
)


@functools.cache
def all_rules() -> tuple[type[Rule], ...]:
    found: list[type[Rule]] = []
    seen: set[str] = set()
    for name in _MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        rule_cls: type[Rule] = module.RULE
        validate_rule(rule_cls)
        if rule_cls.id in seen:
            raise ValueError(f"duplicate rule id {rule_cls.id}")
        seen.add(rule_cls.id)
        found.append(rule_cls)
    return tuple(sorted(found, key=lambda r: r.id))


def get_rule(rule_id: str) -> type[Rule] | None:
    wanted = rule_id.strip().upper()
    for rule in all_rules():
        if rule.id == wanted or rule.name == rule_id.strip().lower():
            return rule
    return None
