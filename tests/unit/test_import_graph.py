"""The import graph, rebuilt from the source (grimp, as import-linter builds it): no cycle
between the analyzer's packages, renderers that read only the report's data, and an
analyzer that takes nothing from the collectors but the dump formats.

pyproject.toml's contracts (``lint-imports``) hold the whole layering; these are the
lines a plain test run holds too, with the imports that break them named.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

import grimp
import pytest

ANALYZER = "hangdoc.analyzer"
# What a renderer may not reach, directly or through other modules: it renders the
# report's plain data, built from the Diagnosis and the views.
NOT_FOR_RENDERERS = (
    "hangdoc.analyzer.parsers",
    "hangdoc.analyzer.loading",
    "hangdoc.analyzer.summaries",
    "hangdoc.analyzer.summarize",
    "hangdoc.analyzer.flight_recorder",
    "hangdoc.analyzer.ticket",
    "hangdoc.collectors",
)
DUMP_FORMATS = frozenset({"hangdoc.collectors.dumpformat", "hangdoc.collectors.jobformat"})


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("hangdoc", cache_dir=None)


def _squashed_edges(graph: grimp.ImportGraph, package: str) -> dict[str, dict[str, list[str]]]:
    """Imports between the children of ``package``, each child with all it contains:
    child → child → the module-level imports behind that edge."""
    owner: dict[str, str] = {}
    for child in graph.find_children(package):
        owner[child] = child
        for descendant in graph.find_descendants(child):
            owner[descendant] = child
    edges: dict[str, dict[str, list[str]]] = {}
    for module, child in owner.items():
        for imported in graph.find_modules_directly_imported_by(module):
            target = owner.get(imported)
            if target is not None and target != child:
                edges.setdefault(child, {}).setdefault(target, []).append(f"{module} -> {imported}")
    return edges


def _cycles(nodes: Iterable[str], edges: Mapping[str, Mapping[str, object]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for node in sorted(nodes):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def package_cycles(graph: grimp.ImportGraph, package: str) -> list[str]:
    """Each cycle between the children of ``package``, with the imports that close it."""
    edges = _squashed_edges(graph, package)
    out = []
    for cycle in _cycles(graph.find_children(package), edges):
        members = set(cycle)
        imports = [
            line
            for source in cycle
            for target, lines in sorted(edges.get(source, {}).items())
            if target in members
            for line in lines[:3]
        ]
        out.append(" ⇄ ".join(cycle) + "\n    " + "\n    ".join(imports))
    return out


def test_no_cycle_between_the_analyzers_packages(graph: grimp.ImportGraph) -> None:
    cycles = package_cycles(graph, ANALYZER)
    assert not cycles, "\n".join(cycles)


def test_the_cycle_check_sees_a_cycle_through_a_subpackage() -> None:
    # GIVEN a package whose a.x imports b, and b.y imports a: a cycle of packages that no
    # single module closes WHEN checked THEN it is found, with both imports named
    planted = grimp.ImportGraph()
    for name in ("p", "p.a", "p.a.x", "p.b", "p.b.y", "p.c"):
        planted.add_module(name)
    planted.add_import(importer="p.a.x", imported="p.b")
    planted.add_import(importer="p.b.y", imported="p.a")
    planted.add_import(importer="p.c", imported="p.a.x")
    (cycle,) = package_cycles(planted, "p")
    assert cycle.startswith("p.a ⇄ p.b") and "p.a.x -> p.b" in cycle and "p.b.y -> p.a" in cycle


def test_renderers_reach_no_loading_parser_summary_or_collector(graph: grimp.ImportGraph) -> None:
    chains = []
    for target in NOT_FOR_RENDERERS:
        if target in graph.modules:
            found = graph.find_shortest_chains(importer="hangdoc.analyzer.render", imported=target)
            chains += [" -> ".join(chain) for chain in found]
    assert not chains, "\n".join(sorted(chains))


def test_the_analyzer_takes_only_the_dump_formats_from_the_collectors(
    graph: grimp.ImportGraph,
) -> None:
    taken = {
        f"{module} -> {imported}"
        for module in graph.find_descendants(ANALYZER)
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith("hangdoc.collectors") and imported not in DUMP_FORMATS
    }
    assert not taken, "\n".join(sorted(taken))
