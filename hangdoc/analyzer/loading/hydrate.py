"""Open the raw files of the few ranks that stand out, after the summaries were read.

A summary is exact about stacks and reduced elsewhere (the flight recorder keeps its
frontier, /proc its telling threads, logs their first and last events). That is all a
rule needs about the thousands of ranks that wait in the same collective; about the few
that do something else it may want everything. Those are the ranks the findings will be
about, and they can be told *before* the rules run, from the summaries alone:

* ranks that exited or have no stack (py-spy could not read them: their /proc facts and
  logs are the whole story);
* ranks in a small stack class: their main thread stands where few others stand;
* ranks with a minority flight recorder frontier (a different pending op, or none).

They are read again from their rank folders, exactly as a raw analysis reads them, and
replace their summary-built records (except their logs, where the node kept every log
event: the summary then holds the rank's events, log window and text stacks exactly as
the raw files give them, and parsing a 1 MB log again was most of this step's cost); at
most ``budget`` ranks, smallest classes first, whole classes only (so ranks the rules
compare with each other are read the same way).
The rules then run once, over the mixed Evidence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hangdoc.analyzer.loading.merge import SCALAR_FIELDS
from hangdoc.analyzer.model import Evidence, OpState, ProcessEvidence
from hangdoc.analyzer.ranges import plural_ranks
from hangdoc.collectors.dumpformat import rank_dir_name

DEFAULT_BUDGET = 16


class DumpLoader(Protocol):
    """Reads dumps, each restricted to some ranks, one Evidence per dump in the order
    asked, without the files named in ``skip`` (the loader's load_dumps: their rank logs
    are read in worker processes together)."""

    def __call__(
        self, requests: Sequence[tuple[Path, str, frozenset[int]]], skip: frozenset[str] = ...
    ) -> list[Evidence]: ...


@dataclass(frozen=True, slots=True)
class SummaryDump:
    """A dump whose summary was read: where its raw files are, and its ranks;
    ``whole_logs``: the ranks whose every log event the summary holds; ``log_files``: the
    logs it lists (display path, the ranks each holds lines of)."""

    path: Path
    display: str
    ranks: tuple[int, ...]
    whole_logs: frozenset[int] = frozenset()
    log_files: tuple[tuple[str, tuple[int, ...]], ...] = ()


def _stack_key(proc: ProcessEvidence) -> object:
    latest = proc.latest_stacks()
    main = latest.main_thread() if latest is not None else None
    return main.frames if main is not None else None


def _fr_key(proc: ProcessEvidence) -> object:
    """Where a rank stands in its flight recorder: its unfinished ops, per group."""
    pending = tuple(
        (c.group, c.seq_id, c.op) for c in proc.collectives if c.state != OpState.COMPLETED
    )
    return pending or None


def _minority_classes(
    procs: dict[int, ProcessEvidence], key: Callable[[ProcessEvidence], object]
) -> list[list[int]]:
    # Ranks by their key's identity first (a summary's ranks share one frames tuple per
    # stack shape: hashing it hashes each Frame again, in Python), then the keys by value.
    by_id: dict[int, tuple[object, list[int]]] = {}
    for rank, proc in procs.items():
        found = key(proc)
        entry = by_id.get(id(found))
        if entry is None:
            entry = by_id[id(found)] = (found, [])  # (held here: its id stays its own)
        entry[1].append(rank)
    classes: dict[object, list[int]] = {}
    for found, ranks in by_id.values():
        classes.setdefault(found, []).extend(ranks)
    if len(classes) < 2:
        return []
    largest = max(len(members) for members in classes.values())
    small = [sorted(m) for m in classes.values() if len(m) < largest]
    return sorted(small, key=lambda m: (len(m), m[0]))


def pick_ranks(evidence: Evidence, candidates: Iterable[int], budget: int) -> dict[int, str]:
    """Ranks worth their raw files, with why; at most ``budget``, whole classes only."""
    ranked = evidence.ranked()
    procs = {r: ranked[r] for r in candidates if r in ranked}
    chosen: dict[int, str] = {}

    def take(members: list[int], why: str) -> None:
        fresh = [r for r in members if r not in chosen]
        if fresh and len(chosen) + len(fresh) <= budget:
            chosen.update(dict.fromkeys(fresh, why))

    take(sorted(r for r, p in procs.items() if p.exited), "exited")
    take(sorted(r for r, p in procs.items() if not p.has_stacks()), "no stack")
    with_stacks = {r: p for r, p in procs.items() if p.has_stacks()}
    for members in _minority_classes(with_stacks, _stack_key):
        take(members, "its stack class is small")
    with_fr = {r: p for r, p in procs.items() if p.collectives}
    for members in _minority_classes(with_fr, _fr_key):
        take(members, "its flight recorder frontier differs")
    return chosen


def hydrate(
    evidence: Evidence, dumps: list[SummaryDump], load: DumpLoader, budget: int = DEFAULT_BUDGET
) -> list[int]:
    """Replace the summary records of the ranks that stand out by their raw records;
    returns the ranks replaced. A rank whose raw files are gone keeps its summary record,
    and a note says so."""
    if budget <= 0 or not dumps:
        return []
    home: dict[int, SummaryDump] = {}
    for dump in dumps:
        for rank in dump.ranks:
            home.setdefault(rank, dump)
    chosen = pick_ranks(evidence, home, budget)
    if not chosen:
        return []
    by_dump: dict[SummaryDump, list[int]] = {}
    for rank in chosen:
        by_dump.setdefault(home[rank], []).append(rank)
    index = {id(p): i for i, p in enumerate(evidence.processes)}
    ranked = evidence.ranked()
    replaced: list[int] = []
    plans = [
        (dump, wanted, [r for r in wanted if (dump.path / rank_dir_name(r, 0)).is_dir()])
        for dump, wanted in sorted(by_dump.items(), key=lambda kv: kv[0].display)
    ]
    from_summary, skip = _logs_from_summaries(plans)
    loaded = iter(
        load([(d.path, d.display, frozenset(ranks)) for d, _, ranks in plans if ranks], skip)
    )
    for dump, wanted, ranks in plans:
        if len(ranks) < len(wanted):  # a summary-only transfer left them on the node
            evidence.notes.append(
                f"{dump.display}: the raw files of {plural_ranks(sorted(set(wanted) - set(ranks)))}"
                " are not here (a summary-only collection?); the summary is used"
            )
        if not ranks:
            continue
        raw = next(loaded)
        raw_ranked = raw.ranked()
        for rank in ranks:
            fresh = raw_ranked.get(rank)
            if fresh is None or not (fresh.has_stacks() or fresh.proc_samples):
                evidence.notes.append(
                    f"{dump.display}: the raw files of rank {rank} are not there; "
                    "its summary is used"
                )
                continue
            if rank in from_summary:
                _take_logs(fresh, ranked[rank])
            evidence.processes[index[id(ranked[rank])]] = fresh
            replaced.append(rank)
        listed = {item.path for item in evidence.inputs}  # FR files the summary read already
        evidence.inputs.extend(item for item in raw.inputs if item.path not in listed)
        evidence.notes.extend(n for n in raw.notes if n not in evidence.notes)
    if replaced:
        reasons = Counter(chosen[r] for r in replaced)
        why = ", ".join(f"{n} because {reason}" for reason, n in sorted(reasons.items()))
        evidence.notes.append(
            f"read from node summaries; the raw files of {plural_ranks(sorted(replaced))} were "
            f"opened as well ({why})"
        )
    return sorted(replaced)


def _logs_from_summaries(
    plans: list[tuple[SummaryDump, list[int], list[int]]],
) -> tuple[set[int], frozenset[str]]:
    """(the ranks whose logs come from their summary, the log files not to read): a log
    file is left unread when every rank it holds lines of is one whose summary kept every
    log event; those ranks take their log records from the summary."""
    ranks: set[int] = set()
    skip: set[str] = set()
    for dump, _, loaded in plans:
        wanted = set(loaded) & dump.whole_logs
        for path, holders in dump.log_files:
            if holders and set(holders) <= dump.whole_logs and wanted & set(holders):
                skip.add(path)
        ranks |= wanted
    return ranks, frozenset(skip)


_LOG_FIELDS = ("log_events", "log_lines", "text_stacks")


def _take_logs(fresh: ProcessEvidence, summary: ProcessEvidence) -> None:
    """What the unread logs gave the rank, from its summary record (built from the whole
    raw load of the same folder): its log events, window and text stacks whole, the facts
    only a log named (as merging the log's record would: a field still unknown), and the
    log files among its sources."""
    for name in _LOG_FIELDS:
        setattr(fresh, name, getattr(summary, name))  # (the summary record is dropped)
    fresh.log_templates = summary.log_templates  # (which describe that very window)
    for name in SCALAR_FIELDS:
        if getattr(fresh, name) is None and getattr(summary, name) is not None:
            setattr(fresh, name, getattr(summary, name))
    for key, value in summary.env.items():
        fresh.env.setdefault(key, value)
    fresh.exited = fresh.exited or summary.exited
    listed = set(summary.sources)
    fresh.sources = [*summary.sources, *(s for s in fresh.sources if s not in listed)]
