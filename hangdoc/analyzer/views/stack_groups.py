"""Stack groups: STAT-style merging of stacks across ranks, one tree with each node's rank
set, and the classes of ranks that share a whole call path. A view, so that the report's
pictures, its tables and the terminal group ranks the one same way.

Nodes are keyed by (function, file, line), outermost frame at the root, so ranks that
share a call path share nodes, and the place where they part is where the tree forks.
Equivalence classes are the distinct whole paths with the ranks that share them. Cost is
linear in ranks × depth.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from hangdoc.analyzer.model import Evidence, Frame, TextStack, ThreadStack

FrameKey = tuple[str, str, int | None]


@dataclass(slots=True)
class StackNode:
    function: str
    file: str
    line: int | None
    ranks: set[int] = field(default_factory=set)
    children: dict[FrameKey, StackNode] = field(default_factory=dict)

    @property
    def key(self) -> FrameKey:
        return (self.function, self.file, self.line)

    def label(self) -> str:
        return Frame(self.function, self.file, self.line).label()

    def sorted_children(self) -> list[StackNode]:
        """Largest rank set first, then by the smallest rank: the common path on top."""
        return sorted(self.children.values(), key=lambda n: (-len(n.ranks), min(n.ranks)))

    def walk(self, depth: int = 0) -> Iterator[tuple[int, StackNode]]:
        yield depth, self
        for child in self.sorted_children():
            yield from child.walk(depth + 1)


@dataclass(frozen=True, slots=True)
class StackClass:
    """Ranks whose chosen thread had exactly the same call path, all from live samples
    or all read from text (never one class of both)."""

    ranks: tuple[int, ...]
    frames: tuple[Frame, ...]  # innermost first, like ThreadStack
    # For a class read from text, where (its first rank's): "read from text: traceback,
    # rank3.log:12"; None for live samples.
    read_from_text: str | None = None


def _chosen_threads(
    evidence: Evidence, all_threads: bool
) -> Iterator[tuple[int, ThreadStack, TextStack | None]]:
    """Each rank's main thread (or every thread) at its latest stacks, with the text
    stack it was read from (None for a live sample)."""
    for rank, proc in sorted(evidence.ranked().items()):
        sample = proc.latest_stacks()
        if sample is None:
            continue
        text = sample if isinstance(sample, TextStack) else None
        if all_threads:
            for thread in sample.threads:
                yield rank, thread, text
        else:
            main = sample.main_thread()
            if main is not None:
                yield rank, main, text


def merge_stacks(evidence: Evidence, *, all_threads: bool = False) -> StackNode:
    """The merged tree of every rank's main thread (or every thread) at its latest sample."""
    root = StackNode(function="<all ranks>", file="", line=None)
    for rank, thread, _text in _chosen_threads(evidence, all_threads):
        root.ranks.add(rank)
        node = root
        for frame in reversed(thread.python_frames()):
            key = (frame.function, frame.file, frame.line)
            child = node.children.get(key)
            if child is None:
                child = StackNode(frame.function, frame.file, frame.line)
                node.children[key] = child
            child.ranks.add(rank)
            node = child
    return root


def equivalence_classes(evidence: Evidence) -> list[StackClass]:
    """Distinct main-thread call paths, the biggest class first."""
    groups: dict[tuple[object, ...], tuple[list[int], tuple[Frame, ...], str | None]] = {}
    for rank, thread, text in _chosen_threads(evidence, all_threads=False):
        frames = thread.python_frames()
        key = (text is not None, *((f.function, f.file, f.line) for f in frames))
        entry = groups.setdefault(key, ([], frames, text.label(short=True) if text else None))
        entry[0].append(rank)
    classes = [StackClass(tuple(sorted(r)), frames, label) for r, frames, label in groups.values()]
    return sorted(classes, key=lambda c: (-len(c.ranks), c.ranks[0]))
