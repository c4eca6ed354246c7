"""The stage a failure's own source lines show: NCCL's WARN place and its return-code
chain (``transport/net.cc:853 -> 2``) looked up in the table that
``scripts/catalog/stages.py`` generates from every NCCL release (``data/stages/nccl.json``).

Each line NCCL prints with its place is a call (a WARN, a check of include/checks.h) at
that line of that file in the release that printed it, so the releases a log can come
from are those with such a call at every line it shows (and the version it prints, when
it prints one). A line shows a stage only where its function has the same stage in every
one of those releases; the chain's stage is that of its innermost line that shows one
(the function that failed; its callers only pass the code up, a collective's launch that
connects its channels on first use among them). Where the releases disagree on a line
before any line showed a stage, nothing is shown.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hangdoc.analyzer.payloads.nccl import SourceStage

TABLE_FILE = Path(__file__).resolve().parent / "data" / "stages" / "nccl.json"

_VERSION = re.compile(r"(\d+\.\d+\.\d+)")
_PLACE = re.compile(r"^(?P<path>.*?[\w.\-]+\.(?:cc|cu|h|hpp|c|cpp|cuh)):(?P<line>\d+)$")
_STAGE_OF = {"setup": SourceStage.SETUP, "data": SourceStage.DATA}


@dataclass(frozen=True, slots=True)
class Site:
    """One line of one file: the function and its stage, in each set of releases."""

    entries: tuple[tuple[str, SourceStage | None, frozenset[int]], ...]

    def releases(self) -> frozenset[int]:
        return frozenset().union(*(releases for _, _, releases in self.entries))


@dataclass(frozen=True, slots=True)
class StageTable:
    versions: tuple[str, ...]
    raw: dict[str, Any]  # file -> its functions and lines, as the data file holds them
    by_name: dict[str, str]  # a file's base name -> its path, where only one has it
    # A file's lines read on first use: most runs look up a few files, if any.
    _read: dict[str, dict[int, Site]] = field(default_factory=dict)

    def resolve(self, place: str) -> Site | None:
        """The table's line for a printed place (``transport/net.cc:853``, a build's
        absolute path, ``net.cc:853``), or None."""
        parsed = _source_place(place)
        if parsed is None:
            return None
        path, line = parsed
        if path not in self.raw and "/" not in path:
            path = self.by_name.get(path, path)
        lines = self._lines(path)
        return None if lines is None else lines.get(line)

    def _lines(self, file: str) -> dict[int, Site] | None:
        if file in self._read:
            return self._read[file]
        held = self.raw.get(file)
        if held is None:
            return None
        functions = [(name, _STAGE_OF.get(stage)) for name, stage in held["functions"]]
        lines = {
            int(line): Site(
                tuple(
                    (functions[i][0], functions[i][1], _runs(releases)) for i, releases in entries
                )
            )
            for line, entries in held["lines"].items()
        }
        self._read[file] = lines
        return lines


def _runs(text: str) -> frozenset[int]:
    out: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        out.update(range(int(first), int(last or first) + 1))
    return frozenset(out)


@functools.cache
def table(path: Path = TABLE_FILE) -> StageTable:
    """The generated table, read once."""
    data = json.loads(path.read_text(encoding="utf-8"))
    raw: dict[str, Any] = data["files"]
    names: dict[str, list[str]] = {}
    for file in raw:
        names.setdefault(file.rsplit("/", 1)[-1], []).append(file)
    by_name = {name: paths[0] for name, paths in names.items() if len(paths) == 1}
    return StageTable(tuple(data["versions"]), raw, by_name)


def _chain_releases(held: StageTable, sites: Sequence[Site], version: str | None) -> frozenset[int]:
    """The releases (indexes into the table's versions) a failure's lines can come from:
    those with a call at every line, and the printed version's, if any. Empty when none
    (a release the table does not hold, a patched build, a mix)."""
    releases = frozenset(range(len(held.versions)))
    if version:
        m = _VERSION.search(version)
        if m is None or m.group(1) not in held.versions:
            return frozenset()  # a release the table does not hold: its lines are not known
        releases = frozenset({held.versions.index(m.group(1))})
    for site in sites:
        releases &= site.releases()
    return releases


def chain_stage(places: Sequence[str | None], version: str | None = None) -> SourceStage | None:
    """The stage the lines of one failure show, innermost first (the WARN's place, then
    each "-> rc" line up the chain), given the NCCL version the log printed, if any."""
    held = table()
    sites = [site for place in places if place and (site := held.resolve(place)) is not None]
    if not sites:
        return None
    releases = _chain_releases(held, sites, version)
    if not releases:
        return None  # no release has calls at all these lines (a patched build, a mix)
    for site in sites:
        stages = {stage for _, stage, at in site.entries if at & releases}
        if stages == {None}:
            continue  # a helper both stages call (registration, socket I/O)
        if len(stages) == 1:
            return stages.pop()
        return None  # the releases disagree on this line's stage
    return None


def function_stage(file: str, function: str) -> SourceStage | None:
    """The stage the table gives an NCCL function (``graph/xml.h``, ``xmlGetAttrStr``) in
    every release that has it, or None: a file or function the table does not hold (it
    holds the files with a WARN or a check at a line), or a helper of both stages."""
    path = file.replace("\\", "/")
    if "src/" in path:
        path = path.rsplit("src/", 1)[1]
    held = table().raw.get(path)
    if held is None:
        return None
    stages = {stage for name, stage in held["functions"] if name == function}
    return _STAGE_OF.get(stages.pop()) if len(stages) == 1 else None


MULTICAST_FILE = TABLE_FILE.parent / "nccl_multicast.json"


@functools.cache
def _multicast(
    path: Path = MULTICAST_FILE,
) -> tuple[str, dict[int, tuple[tuple[str, frozenset[int]], ...]]]:
    """The generated table of transport/nvls.cc's multicast checks (scripts/catalog/
    nvls_multicast.py): its file, and line -> (call, releases), read once."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if data["versions"] != list(table().versions):
        raise ValueError(f"{path}: its versions are not the stage table's; regenerate it")
    lines = {
        int(line): tuple((call, _runs(releases)) for call, releases in entries)
        for line, entries in data["lines"].items()
    }
    return data["file"], lines


def multicast_call(places: Sequence[str | None], version: str | None = None) -> str | None:
    """The CUDA multicast call (``cuMulticastBindMem``…) that NCCL's NVLS transport checks
    at a failure's WARN place (``places[0]``, ``transport/nvls.cc:158``), in every release
    the failure's lines (its "-> rc" chain) and the printed version allow; None where the
    place is not such a check in all of them (another CUDA call there in some release,
    or no release known)."""
    if not places or not places[0]:
        return None
    m = _PLACE.match(places[0].strip())
    file, lines = _multicast()
    if m is None or not m.group("path").replace("\\", "/").endswith(file.rsplit("/", 1)[-1]):
        return None
    held = table()
    sites = [site for place in places if place and (site := held.resolve(place)) is not None]
    if not sites or held.resolve(places[0]) is None:
        return None
    releases = _chain_releases(held, sites, version)
    calls = {call for call, at in lines.get(int(m.group("line")), ()) if at & releases}
    covered = frozenset().union(*(at for _, at in lines.get(int(m.group("line")), ())))
    if not releases or not releases <= covered or len(calls) != 1:
        return None
    return calls.pop()


HOST_MEMORY_FILE = TABLE_FILE.parent / "nccl_host_memory.json"


@functools.cache
def _host_memory(
    path: Path = HOST_MEMORY_FILE,
) -> dict[str, tuple[dict[int, tuple[tuple[str, frozenset[int]], ...]], dict[int, frozenset[int]]]]:
    """The generated table of NCCL's CUDA checks that allocate or pin host memory
    (scripts/catalog/host_memory.py): file -> (line -> (call, releases), line -> the
    releases with any CUDA check there), read once."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if data["versions"] != list(table().versions):
        raise ValueError(f"{path}: its versions are not the stage table's; regenerate it")
    return {
        file: (
            {
                int(line): tuple((call, _runs(releases)) for call, releases in entries)
                for line, entries in held["host"].items()
            },
            {int(line): _runs(releases) for line, releases in held["checks"].items()},
        )
        for file, held in data["files"].items()
    }


def _source_place(place: str) -> tuple[str, int] | None:
    """A printed place as (its path under NCCL's src/, its line): a build's absolute path
    and a leading ``./`` taken off; None where it is no ``file:line``."""
    m = _PLACE.match(place.strip())
    if m is None:
        return None
    path = m.group("path").replace("\\", "/")
    if "src/" in path:
        path = path.rsplit("src/", 1)[1]
    return path.lstrip("./"), int(m.group("line"))


def host_memory_call(places: Sequence[str | None], version: str | None = None) -> str | None:
    """The CUDA call that allocates or pins *host* memory (``cudaHostAlloc``,
    ``cudaHostRegister``, a cuMem call of a host-located allocation: ``cuMemSetAccess`` in
    include/alloc.h's ncclCuMemHostAlloc) that NCCL checks at a "Cuda failure" WARN's
    place (``places[0]``), in every release the failure's lines (its "-> rc" chain, read
    in the stage table) and the printed version allow among those with a CUDA check at
    that line (their names joined by "/" where those releases differ, each a check of the
    same host allocation); None where some such release checks another call there, or none is
    known."""
    parsed = _source_place(places[0]) if places and places[0] else None
    if parsed is None:
        return None
    path, line = parsed
    held_files = _host_memory()
    if path not in held_files:
        # A base name (``alloc.h:65``), or a place whose start a paste cut (``lloc.h:65``,
        # a first line cut in half): the one file of the table whose path ends so.
        named = [f for f in held_files if f.endswith(path)]
        if len(named) != 1:
            return None
        path = named[0]
    host, checks = held_files[path]
    held = table()
    sites = [site for place in places[1:] if place and (site := held.resolve(place)) is not None]
    releases = _chain_releases(held, sites, version) & checks.get(line, frozenset())
    at = host.get(line, ())
    calls = {call for call, runs in at if runs & releases}
    covered = frozenset().union(*(runs for _, runs in at))
    if not releases or not releases <= covered:
        return None
    return "/".join(sorted(calls))  # several where releases differ (all host allocation)
