"""Tolerant JSON reading for the JSON formats (py-spy, hangdoc's own dump files).

Input JSON is untrusted: a key may be missing or of another type, a file may hold
several documents (dumps appended with ``>>``), or end mid-write because a collector
was killed. These helpers read what is there and say what was not, so a parser can
keep the complete part of a truncated file and still report the truncation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

JsonObject = Mapping[str, object]


@dataclass(slots=True)
class Documents:
    """The JSON values found in a text, and why reading stopped early (if it did)."""

    values: list[object] = field(default_factory=list)
    error: str | None = None


_DECODER = json.JSONDecoder()
# json's C decoder recurses once per nesting level and raises RecursionError (not a
# JSONDecodeError) near the interpreter's recursion limit.
NESTING_LIMIT_TEXT = "the interpreter's recursion limit (about 1,000 levels)"


def is_truncation(exc: json.JSONDecodeError, text: str) -> bool:
    """Whether the text stopped early (a cut file) rather than being malformed."""
    return exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip())


def _position(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line} column {column}"


def _salvage_list(text: str, start: int) -> tuple[list[object], int]:
    """Decode the complete leading elements of a list cut short; returns them and the
    position where decoding stopped."""
    items: list[object] = []
    pos = start + 1  # after "["
    end = len(text)
    while True:
        while pos < end and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= end or text[pos] == "]":
            return items, pos
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            return items, pos
        items.append(value)


def decode_documents(text: str, *, salvage: bool = True) -> Documents:
    """Decode every JSON document in ``text`` (whitespace-separated).

    A document cut short that is a list keeps its complete leading elements (as one
    more value) when ``salvage`` is set; the returned ``error`` names where the text
    stopped making sense.
    """
    docs = Documents()
    pos = 0
    end = len(text)
    while True:
        while pos < end and text[pos] in " \t\r\n\ufeff":
            pos += 1
        if pos >= end:
            break
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except RecursionError:  # hostile input: thousands of nested brackets
            docs.error = f"invalid JSON at {_position(text, pos)}: nested deeper than " + (
                NESTING_LIMIT_TEXT
            )
            break
        except json.JSONDecodeError as exc:
            what = "truncated JSON" if is_truncation(exc, text) else "invalid JSON"
            if salvage and text[pos] == "[":
                items, stop = _salvage_list(text, pos)
                if items:
                    docs.values.append(items)
                    docs.error = (
                        f"{what} at {_position(text, max(exc.pos, stop))}: kept the "
                        f"{len(items)} complete entries before it"
                    )
                    break
            docs.error = f"{what} at {_position(text, exc.pos)}: {exc.msg}"
            break
        docs.values.append(value)
    return docs


def get_int(obj: JsonObject, key: str) -> int | None:
    value = obj.get(key)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def get_float(obj: JsonObject, key: str) -> float | None:
    value = obj.get(key)
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    return None


def get_str(obj: JsonObject, key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) else None


def get_bool(obj: JsonObject, key: str) -> bool | None:
    value = obj.get(key)
    return value if isinstance(value, bool) else None


def get_list(obj: JsonObject, key: str) -> list[object]:
    value = obj.get(key)
    return value if isinstance(value, list) else []


def get_dict(obj: JsonObject, key: str) -> dict[str, object]:
    return as_dict(obj.get(key)) or {}


def as_dict(value: object) -> dict[str, object] | None:
    """The value as a JSON object, or None. Not copied: JSON object keys are always
    strings, and loading 16k ranks must not copy every frame dict."""
    if isinstance(value, dict):
        return cast(dict[str, object], value)
    return None
