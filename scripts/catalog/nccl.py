"""NCCL's WARN and INFO messages, every release tag of a git mirror of NVIDIA/nccl."""

from __future__ import annotations

import re
from pathlib import Path

from catalog import csource
from catalog.sources import BlobReader, Site, git, tree

_SUFFIXES = (".cc", ".cu", ".h", ".hpp", ".c", ".cpp", ".cuh")
_TAG = re.compile(r"^v(2\.\d+\.\d+)-\d+$")


def release_tags(repo: Path, first: tuple[int, int] = (2, 3)) -> list[tuple[str, str]]:
    """(version, tag), oldest first; the last build of each version (v2.18.3-1)."""
    found: dict[str, str] = {}
    for tag in git(repo, "tag").split():
        m = _TAG.match(tag)
        if m is None:
            continue
        version = m.group(1)
        major, minor, _ = (int(x) for x in version.split("."))
        if (major, minor) < first:
            continue
        if version not in found or tag > found[version]:
            found[version] = tag
    return sorted(found.items(), key=lambda kv: tuple(int(x) for x in kv[0].split(".")))


def sites_of(code: str, path: str, version: str) -> list[Site]:
    clean = csource.blank_comments(code)
    spans: list[tuple[int, int, str]] | None = None
    sites: list[Site] = []
    for call in csource.find_calls(clean, ("WARN", "INFO", "TRACE")):
        if path.endswith("debug.h") and "__VA_ARGS__" in " ".join(call.args):
            continue
        fmt_at = 0 if call.name == "WARN" else 1
        if len(call.args) <= fmt_at:
            continue
        if spans is None:
            spans = csource.function_spans(clean)
        function = csource.enclosing(spans, call.offset)
        lit = csource.literal(call.args[fmt_at])
        level = call.name
        if call.name == "INFO":
            level = "INFO"
        if lit is None:
            sites.append(Site("nccl", level, (), path, function, call.line, version, False))
            continue
        parts = tuple(csource.printf_parts(lit, call.args[fmt_at + 1 :]))
        sites.append(Site("nccl", level, parts, path, function, call.line, version))
    return sites


def extract(repo: Path, first: tuple[int, int] = (2, 3)) -> tuple[list[str], list[Site]]:
    """Every WARN/INFO/TRACE call in ``src/`` at every release from ``first`` on."""
    tags = release_tags(repo, first)
    reader = BlobReader(repo)
    cache: dict[tuple[str, str], list[Site]] = {}
    sites: list[Site] = []
    try:
        for version, tag in tags:
            for path, sha in tree(repo, tag, "src", _SUFFIXES):
                key = (sha, path)
                if key not in cache:
                    code = reader.read(sha)
                    cache[key] = (
                        sites_of(code, path, "") if ("WARN" in code or "INFO" in code) else []
                    )
                for site in cache[key]:
                    sites.append(
                        Site(
                            site.project,
                            site.level,
                            site.parts,
                            site.file,
                            site.function,
                            site.line,
                            version,
                            site.literal,
                        )
                    )
    finally:
        reader.close()
    return [v for v, _ in tags], sites
