"""Shared helpers of the log tests: parse fixture files, merge them, run the log rules."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterable
from pathlib import Path

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.merge import ProcessIndex
from hangdoc.analyzer.model import Evidence, Finding, LogEvent
from hangdoc.analyzer.parsers.base import ParsedFile
from hangdoc.analyzer.parsers.logs import LogParser
from hangdoc.rules.base import Rule

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "fixtures" / "logs"
PUBLIC = FIXTURES / "public"
RECORDED = FIXTURES / "recorded"
MULTIRANK = FIXTURES / "multirank"
SAMPLES = Path("/work/shared/samples")

LOG_RULE_MODULES = (
    "hd030_rank_died_first", "hd031_cuda_oom_first", "hd032_lagging_rank",
    "hd033_timeout_op_mismatch", "hd034_timeout_size_mismatch", "hd035_detail_mismatch",
    "hd036_frtrace_report", "hd037_monitored_barrier", "hd038_timeout_cause_unknown",
    "hd039_slow_rank_work", "hd040_uneven_data_counts", "hd200_nccl_transport_error",
    "hd201_nccl_init_incomplete", "hd202_nccl_bootstrap_interface", "hd203_nccl_config_mismatch",
    "hd204_nccl_coll_divergence", "hd205_nccl_ras_report", "hd300_gpu_xid",
    "hd301_gpu_ecc_or_lost", "hd302_gpu_p2p_topology",
)  # fmt: skip


def log_rules() -> tuple[type[Rule], ...]:
    rules: list[type[Rule]] = []
    for name in LOG_RULE_MODULES:
        rules.append(importlib.import_module(f"hangdoc.rules.{name}").RULE)
    return tuple(rules)


def fallback_rule() -> tuple[type[Rule], ...]:
    """HD000 (another module's) when it imports, so verdict tests see the 'unknown' finding."""
    try:
        return (importlib.import_module("hangdoc.rules.hd000_no_cause").RULE,)
    except Exception:  # pragma: no cover - the fallback rule belongs to another module
        return ()


def parse(path: Path, display: str | None = None) -> ParsedFile:
    return LogParser().parse(path, display or path.name)


def evidence_from(paths: Iterable[Path]) -> Evidence:
    """Parse files with the log parser and merge them like the loader does."""
    evidence = Evidence()
    index = ProcessIndex()
    for path in paths:
        parsed = parse(
            path, str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
        )
        for proc in parsed.processes:
            index.add(proc)
        evidence.job_log_events.extend(parsed.job_log_events)
        evidence.notes.extend(parsed.notes)
    evidence.processes = index.finish()
    return evidence


def diagnose(*paths: Path) -> Diagnosis:
    return analyze(evidence_from(paths), (*log_rules(), *fallback_rule()))


def findings_of(diagnosis: Diagnosis, rule: str) -> list[Finding]:
    return [f for f in diagnosis.findings if f.rule == rule]


def events(parsed: ParsedFile, kind: str) -> list[tuple[int | None, LogEvent]]:
    """(rank, event) of one kind, ranked processes first then job-level events."""
    out = [(p.rank, e) for p in parsed.processes for e in p.log_events if e.kind == kind]
    out += [(None, e) for e in parsed.job_log_events if e.kind == kind]
    return out


def fields(event: LogEvent) -> dict[str, object]:
    """What the parser read from the event's line, by name: the process it is about and
    its payload's fields (typed values: ints, enums)."""
    found: dict[str, object] = {
        name: value
        for name in ("host", "pid", "tid", "cuda_dev", "local_rank", "rank_from", "clock")
        if (value := getattr(event, name)) is not None
    }
    if event.repeats:
        found["repeats"] = event.repeats
    if event.folded_lines:
        found["folded_lines"] = event.folded_lines
    found.update(
        (f.name, getattr(event.payload, f.name)) for f in dataclasses.fields(event.payload)
    )
    found.update(event.fields)
    return {k: v for k, v in found.items() if v is not None}
