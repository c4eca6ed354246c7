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
from hangdoc.analyzer.parsers.logs.hit import Hit
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


def fields(item: LogEvent | Hit) -> dict[str, object]:
    """What the parser read from a line, by name (typed values: ints, enums): the process
    the line is about (host, pid, tid, cuda_dev, local_rank), its payload's fields, and
    those of records nested in it as ``record.field`` (``side_a.rank``, ``error.tag``)."""
    found: dict[str, object] = {}
    if isinstance(item, Hit):
        found.update(
            host=item.named_host or item.host,
            pid=item.named_pid if item.named_pid is not None else item.pid,
            tid=item.tid,
            cuda_dev=item.cuda_dev,
            local_rank=item.named_local_rank,
            partial_header=item.partial_header or None,
        )
    else:
        for name in ("host", "pid", "tid", "cuda_dev", "local_rank", "rank_from", "clock"):
            found[name] = getattr(item, name)
        found["partial_header"] = item.partial_header or None
        found["repeats"] = item.repeats or None
        found["folded_lines"] = item.folded_lines or None
    _flatten(item.payload, "", found)
    return {k: v for k, v in found.items() if v is not None}


def _flatten(record: object, prefix: str, into: dict[str, object]) -> None:
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        into[prefix + f.name] = value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            _flatten(value, f"{prefix}{f.name}.", into)
            for name in dir(type(value)):
                if isinstance(getattr(type(value), name, None), property):
                    into[f"{prefix}{f.name}.{name}"] = getattr(value, name)
