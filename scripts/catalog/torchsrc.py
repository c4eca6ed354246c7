"""torch.distributed: its Python of each release, the C++ headers it ships, c10d's sources
(read file by file), and c10d's literals in the release binaries."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from catalog import cppstream, pysource
from catalog.sources import Site

from hangdoc.analyzer.parsers.catalog.template import Part, Slot

_PATH_MARK = re.compile(
    r"/pytorch/(?:pytorch/)?(torch|c10|aten|caffe2|third_party)/\S+\.(?:cpp|cu|h|hpp|cuh|cc)$"
)


# Schema strings of registered ops, template names, asserts: literals that are no message.
_NOT_MESSAGE = re.compile(
    r"INTERNAL ASSERT FAILED|\) -> |__torch__|constexpr|\[with T = |Tensor\(a!\)|^\w+\(Tensor"
)


_MESSAGE_LIKE = re.compile(r"^[\s\[(]*[A-Za-z][^\x00]*\s[^\x00]*$")


def c10d_literals(lines: list[str]) -> list[str]:
    """The message-like literals of c10d's compilation units in a torch library's strings.

    The linker keeps each unit's literals together and most units hold their own path
    (``__FILE__`` of a check): the strings between two path markers of c10d files, with no
    other file's marker between them, are c10d's."""
    marks = [
        (i, "distributed/c10d/" in m.group(0))
        for i, s in enumerate(lines)
        if (m := _PATH_MARK.search(s))
        # another file's header inlined into a c10d unit does not end the unit
        and ("distributed/c10d/" in m.group(0) or not m.group(0).endswith((".h", ".hpp", ".cuh")))
    ]
    keep: list[str] = []
    for (start, c10d_a), (end, c10d_b) in itertools.pairwise(marks):
        if not (c10d_a and c10d_b):
            continue
        for text in lines[start + 1 : end]:
            text = text.strip()
            if len(text) < 16 or text.startswith("_Z") or not _MESSAGE_LIKE.match(text):
                continue
            if sum(c.isalpha() for c in text) < len(text) * 0.6 or _NOT_MESSAGE.search(text):
                continue
            keep.append(text)
    return list(dict.fromkeys(keep))


def torch_python(specs: list[tuple[str, Path]]) -> tuple[list[str], list[Site]]:
    versions = [v for v, _ in specs]
    sites: list[Site] = []
    for version, root in specs:
        for under in ("torch/distributed", "torch/utils/data"):
            if (root / under).is_dir():
                sites.extend(pysource.extract_tree(root, under, "torch", version))
    return versions, sites


def torch_cpp(specs: list[tuple[str, Path]], cpp_dir: Path | None, cpp_version: str) -> list[Site]:
    sites: list[Site] = []
    for version, root in specs:
        inc = root / "torch" / "include" / "torch" / "csrc" / "distributed" / "c10d"
        for path in sorted(inc.rglob("*.h*")) if inc.is_dir() else []:
            rel = "torch/csrc/distributed/c10d/" + path.relative_to(inc).as_posix()
            sites.extend(
                cppstream.sites_of(path.read_text("utf-8", "replace"), "torch", rel, version)
            )
    if cpp_dir is not None:
        for path in sorted(cpp_dir.rglob("*")):
            if path.suffix not in {".cpp", ".hpp", ".h", ".cu", ".cc"}:
                continue
            rel = path.relative_to(cpp_dir).as_posix()
            sites.extend(
                cppstream.sites_of(path.read_text("utf-8", "replace"), "torch", rel, cpp_version)
            )
    return sites


_COMMIT = re.compile(r"(?:commit|at) ([0-9a-f]{40})")


def provenance(folder: Path) -> dict[str, str]:
    """path -> the commit its first lines name (excerpts read file by file say where
    from: "… at commit <sha> (read through the code index)")."""
    out: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            head = path.read_text("utf-8", "replace")[:400]
            m = _COMMIT.search(head)
            out[path.relative_to(folder).as_posix()] = m.group(1) if m else "checkout"
    return out


def literal_sites(specs: list[str], known: list[Site]) -> list[Site]:
    """Rows from the c10d literals of the torch binaries, for the C++ messages whose
    sources were not read; a literal already inside a source row is left out."""
    texts = [p for site in known for p in site.parts if isinstance(p, str) and len(p) >= 16]
    joined = "\n".join(texts)
    # A fmt format a source row holds with its fields made slots ("The client socket has
    # failed to connect to {} {}." of recordError): the binary's literal is that format.
    formats = {_literal_text(site.parts) for site in known}
    sites: list[Site] = []
    for spec in specs:
        version, file = spec.split("=", 1)
        with open(file, encoding="utf-8", errors="replace") as handle:
            lines = [line.rstrip("\n") for line in handle]
        for text in c10d_literals(lines):
            if text in joined:
                continue
            if "{}" in text:
                parts: tuple[Part, ...] = tuple(cppstream.fmt_parts(text, []))
                if _literal_text(parts) in formats:
                    continue
            else:
                parts = (text,) if text.endswith((".", "!")) else (text, Slot("value"))
            sites.append(Site("torch", "literal", parts, Path(file).name, "", 0, version))
    return sites


def _literal_text(parts: tuple[Part, ...] | list[Part]) -> tuple[str, ...]:
    """A template's literal pieces, blanks at their edges aside: what a format and a row
    made of it share whatever the slots are called."""
    return tuple(p.strip() for p in parts if isinstance(p, str) and p.strip())
