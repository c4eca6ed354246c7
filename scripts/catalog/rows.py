"""The data files: rows as JSON, their ids and keywords, the sites not held."""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

from catalog.sources import Row, Site, ranges

from hangdoc.analyzer.parsers.catalog.template import (
    display,
    keywords_of,
    literal_length,
    parts_to_json,
    safe_words,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "analyzer" / "parsers" / "catalog" / "data"
_PY_LEVELS = {"raise", "logger", "warnings", "rank_zero_warn", "rank_zero_info", "log_dist"}


MIN_LITERAL = 12  # letters/digits of literal text for a row to be matched at run time


# Words too common in ordinary training logs to be a row's keyword.
_STOP = {
    "the",
    "and",
    "for",
    "with",
    "from",
    "that",
    "this",
    "not",
    "was",
    "are",
    "but",
    "has",
    "have",
    "been",
    "will",
    "can",
    "when",
    "which",
    "than",
    "then",
    "into",
    "only",
    "should",
    "must",
    "may",
    "use",
    "using",
    "your",
    "you",
    "please",
    "set",
    "get",
    "all",
    "any",
    "rank",
    "error",
    "Error",
    "failed",
    "Failed",
    "loss",
    "step",
    "epoch",
    # throughput lines ("11932 tokens/s"); a serving stack's KV-cache rows count tokens
    "tokens",
    "token",
    "value",
    "true",
    "false",
    "None",
    "size",
    "time",
    "data",
    "model",
    "train",
    "training",
    "INFO",
    "WARN",
    "WARNING",
    "ERROR",
    "DEBUG",
    "NCCL",
    "torch",
    "Using",
    "does",
    "Could",
    "could",
    "Invalid",
    "invalid",
    "supported",
    "expected",
    "Expected",
    "got",
    "found",
    "device",
    "tensor",
    "Tensor",
    "type",
    "name",
    "number",
    "more",
    "other",
    "one",
    "two",
    "some",
}


def row_id(row: Row) -> str:
    digest = hashlib.sha1(f"{row.project}|{row.level}|{display(row.parts)}".encode()).hexdigest()
    return f"{row.project}.{digest[:10]}"


def choose_keyword(row: Row, df: Counter[str]) -> str | None:
    """The row's rarest literal word that prints as a word of its own: one glued to a
    slot ("layer_%s", "%sms") prints as a different word and would hide the row."""
    safe = set(safe_words(row.parts))
    words = [w for w in keywords_of(row.parts) if len(w) >= 4 and w not in _STOP]
    if not words:
        words = [w for w in keywords_of(row.parts) if len(w) >= 3]
    if not words:
        return None
    return min(words, key=lambda w: (w not in safe, df[w], -len(w), w))


def rows_json(
    rows: dict[tuple[str, str, tuple[object, ...]], Row],
    versions: list[str],
    strings: dict[str, Strings] | None = None,
) -> list[dict[str, object]]:
    df: Counter[str] = Counter()
    for row in rows.values():
        df.update(set(keywords_of(row.parts)))
    out: list[dict[str, object]] = []
    for row in rows.values():
        keyword = choose_keyword(row, df)
        sources = []
        present: set[str] = set()
        for (file, function), seen in sorted(row.where.items()):
            latest = max(seen, key=lambda v: versions.index(v) if v in versions else -1)
            sources.append(
                {
                    "file": file,
                    "function": function,
                    "line": seen[latest],
                    "versions": ranges(versions, set(seen)),
                }
            )
            present |= set(seen)
        entry: dict[str, object] = {
            "id": row_id(row),
            "level": row.level,
            "template": display(row.parts),
            "parts": parts_to_json(row.parts),
            "keyword": keyword,
            "matchable": bool(keyword) and literal_length(row.parts) >= MIN_LITERAL,
            "versions": ranges(versions, present),
            "sources": sources,
        }
        if strings is not None:
            longest = max((p for p in row.parts if isinstance(p, str)), key=len, default="")
            probe = longest.strip().split("\n")[0][:80]
            if row.level.split()[0].split(".")[0] in _PY_LEVELS:
                pass
            else:
                entry["in_binary"] = sorted(
                    v for v, s in strings.items() if probe and _in(probe, s)
                )
        out.append(entry)
    out.sort(key=lambda e: str(e["id"]))
    return out


def _in(probe: str, strings: Strings) -> bool:
    return probe in strings.exact or probe in strings.joined


class Strings:
    """A binary's literal strings: as a set, and joined (a literal the linker merged into
    the tail of a longer one is only found as a substring)."""

    def __init__(self, lines: list[str]) -> None:
        kept = lines
        self.exact = set(kept)
        self.joined = "\n".join(kept)


def unheld(sites: list[Site], versions: list[str]) -> list[dict[str, object]]:
    """Sites whose format is not a literal: counted in the coverage, never matched."""
    seen: dict[tuple[str, str, str, int], set[str]] = {}
    for site in sites:
        if not site.literal:
            seen.setdefault((site.level, site.file, site.function, site.line), set()).add(
                site.version
            )
    merged: dict[tuple[str, str, str], tuple[int, set[str]]] = {}
    for (level, file, function, line), present in seen.items():
        key = (level, file, function)
        old = merged.get(key)
        merged[key] = (line, present | (old[1] if old else set()))
    return [
        {
            "level": level,
            "file": file,
            "function": function,
            "line": line,
            "versions": ranges(versions, present),
        }
        for (level, file, function), (line, present) in sorted(merged.items())
    ]


def write(
    project: str,
    source: dict[str, object],
    rows: list[dict[str, object]],
    not_held: list[dict[str, object]] | None = None,
) -> None:
    """One row per line: compact to load, readable in a diff."""
    DATA.mkdir(parents=True, exist_ok=True)

    def dump(value: object) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    lines = [
        "{" + f'"project":{dump(project)},',
        f'"source":{dump(source)},',
        '"unheld":[',
        ",\n".join(dump(u) for u in (not_held or [])),
        '],"rows":[',
        ",\n".join(dump(r) for r in rows),
        "]}",
    ]
    (DATA / f"{project}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{project}: {len(rows)} rows", file=sys.stderr)
