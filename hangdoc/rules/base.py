"""The rule contract: what a rule declares, what it reads, what it returns.

A rule is a class with a docstring of fixed sections (checked at registration, rendered
by ``hangdoc explain`` and the report's appendix) and a pure ``check`` that reads a
:class:`RuleContext` and yields Findings. No I/O, no logging, no parsing in a rule.
"""

from __future__ import annotations

import abc
import enum
import inspect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from hangdoc.analyzer.model import (
    DOC_SECTIONS,
    Category,
    DocSection,
    Evidence,
    Finding,
    ProcessEvidence,
    RuleDoc,
    Severity,
)
from hangdoc.analyzer.views.activity import RankActivity
from hangdoc.analyzer.views.fr_matching import MatchResult, match
from hangdoc.analyzer.views.gpu_state import GpuView, gpu_views
from hangdoc.analyzer.views.log_compare import LogComparison, compare_logs
from hangdoc.analyzer.views.progress import RankProgress, rank_progress
from hangdoc.analyzer.views.silence import Silence, silence
from hangdoc.analyzer.views.timeline import Timeline
from hangdoc.analyzer.views.waits import JobWaits

_ID = re.compile(r"^HD\d{3}$")


class Need(enum.StrEnum):
    """Kinds of evidence a rule reads; a rule whose needs are absent is 'not evaluated'."""

    STACKS = "stacks"
    PROC = "process state (/proc)"
    SAMPLES = "two or more samples"
    WORLD_SIZE = "the job's world size"
    FLIGHT_RECORDER = "flight recorder"
    LOGS = "logs"
    LOG_LINES = "the ranks' own log lines (two or more ranks)"
    GPU = "GPU state"


@dataclass(frozen=True, slots=True)
class RuleContext:
    evidence: Evidence
    activities: Mapping[int, RankActivity]
    # Views computed on first use, once per analysis; the context (and so the cache) goes
    # with the analysis, so nothing keeps an Evidence alive after it.
    _views: dict[str, object] = field(default_factory=dict)
    # For rules that run after the others (after=True or fallback=True): the findings so
    # far, best first.
    prior: tuple[Finding, ...] = ()

    @property
    def log_comparison(self) -> LogComparison:
        """The ranks' logs compared line by line (analyzer/views/log_compare.py)."""
        found = self._views.get("log_comparison")
        if not isinstance(found, LogComparison):
            found = self._views["log_comparison"] = compare_logs(self.evidence)
        return found

    @property
    def timeline(self) -> Timeline:
        """Every rank's log events in time order (analyzer/views/timeline.py)."""
        found = self._views.get("timeline")
        if not isinstance(found, Timeline):
            found = self._views["timeline"] = Timeline(self.evidence)
        return found

    @property
    def fr_match(self) -> MatchResult:
        """The flight recorder buffers matched across ranks (analyzer/views/fr_matching.py)."""
        found = self._views.get("fr_match")
        if not isinstance(found, MatchResult):
            found = self._views["fr_match"] = match(self.evidence, self.activities)
        return found

    @property
    def silence(self) -> Silence:
        """What the ranks that said nothing (or less) tell: the job's size, each rank's
        voice, ranks behind, quiet and unheard, the one gap (analyzer/views/silence.py)."""
        found = self._views.get("silence")
        if not isinstance(found, Silence):
            found = self._views["silence"] = silence(self.evidence, self.timeline)
        return found

    @property
    def waits(self) -> JobWaits:
        """What each process's blocked main thread waits on, placed against the job
        (analyzer/views/waits.py)."""
        found = self._views.get("waits")
        if not isinstance(found, JobWaits):
            found = self._views["waits"] = JobWaits(self.evidence)
        return found

    @property
    def gpu_views(self) -> Mapping[int, GpuView]:
        """Each live rank's main GPU (analyzer/views/gpu_state.py); HD350 and HD351 read
        it, and it reads every process's log events."""
        found = self._views.get("gpu_views")
        if not isinstance(found, dict):
            found = self._views["gpu_views"] = gpu_views(self.evidence)
        return found

    def progress(self, process: ProcessEvidence) -> RankProgress:
        """Whether one process moved between samples (analyzer/views/progress.py); several
        rules ask for the same ranks, so each is computed once per analysis."""
        cache = self._views.setdefault("progress", {})
        assert isinstance(cache, dict)
        hit = cache.get(id(process))
        if hit is not None and hit[0] is process:
            return hit[1]  # type: ignore[no-any-return]
        result = rank_progress(process)
        cache[id(process)] = (process, result)  # held by the context: the id stays unique
        return result

    def has(self, need: Need) -> bool:
        ev = self.evidence
        if need is Need.STACKS:
            return bool(self.activities)
        if need is Need.PROC:
            return any(p.proc_samples for p in ev.processes)
        if need is Need.SAMPLES:
            # Text stacks count where a process has no live sample (two pasted dumps): the
            # thread rules follow threads through them; progress reads live samples only.
            return any(len(p.stack_series()) >= 2 or len(p.proc_samples) >= 2 for p in ev.processes)
        if need is Need.WORLD_SIZE:
            return ev.expected_world_size() is not None
        if need is Need.FLIGHT_RECORDER:
            return any(p.collectives for p in ev.processes)
        if need is Need.LOG_LINES:
            return sum(1 for p in ev.processes if p.rank is not None and p.log_lines) >= 2
        if need is Need.LOGS:
            return bool(ev.job_log_events) or any(p.log_events for p in ev.processes)
        return any(p.gpu for p in ev.processes)


class Rule(abc.ABC):
    """Subclass, fill the ClassVars, write the docstring sections, implement ``check``."""

    id: ClassVar[str]
    name: ClassVar[str]  # kebab-case
    summary: ClassVar[str]  # one line for listings
    categories: ClassVar[tuple[Category, ...]]
    severity: ClassVar[Severity]
    requires: ClassVar[frozenset[Need]]
    # Fallback rules run only when no other rule found a cause (HD000).
    fallback: ClassVar[bool] = False
    # After rules run once the others have, and read their findings in ``ctx.prior``
    # (HD038); their own findings are calibrated and ranked with the others.
    after: ClassVar[bool] = False

    @abc.abstractmethod
    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        """Yield findings; must be deterministic (sorted ranks, stable order)."""

    @classmethod
    def docs(cls) -> dict[str, str]:
        return parse_doc_sections(inspect.getdoc(cls) or "")

    @classmethod
    def rule_doc(cls) -> RuleDoc:
        """The docs as the report's appendix shows them (the renderers import no rule)."""
        return RuleDoc(cls.id, cls.name, tuple(DocSection(h, t) for h, t in cls.docs().items()))

    @classmethod
    def doc_text(cls) -> str:
        return inspect.getdoc(cls) or ""


def parse_doc_sections(doc: str) -> dict[str, str]:
    """``## Heading`` sections of a rule docstring, plus the title line under ``title``."""
    sections: dict[str, str] = {}
    lines = doc.splitlines()
    sections["title"] = lines[0].strip() if lines else ""
    current: str | None = None
    buffer: list[str] = []
    for line in lines[1:]:
        if line.startswith("## "):
            if current is not None:
                sections[current] = "\n".join(buffer).strip()
            current = line[3:].strip()
            buffer = []
        elif current is not None:
            buffer.append(line)
    if current is not None:
        sections[current] = "\n".join(buffer).strip()
    return sections


def validate_rule(cls: type[Rule]) -> None:
    """Registration-time checks: a rule without its docs or a well-formed id is a bug."""
    if not _ID.match(cls.id):
        raise ValueError(f"{cls.__name__}: rule id {cls.id!r} is not HDnnn")
    docs = cls.docs()
    missing = [s for s in DOC_SECTIONS if not docs.get(s)]
    if missing:
        raise ValueError(f"{cls.id}: docstring lacks sections {missing}")
    if not cls.categories:
        raise ValueError(f"{cls.id}: declares no category")
