"""Flight recorder test data in torch's own shapes (FORMATS.md §5), and Evidence from it.

``Rank`` builds one rank's ring buffer the way ProcessGroupNCCL/Gloo record it: every
collective bumps the group's collective_seq_id, every send/recv the group's p2p_seq_id,
every entry the record_id. ``evidence`` runs the dumps through the real parser.
"""

from __future__ import annotations

import importlib.util
import pickle
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from hangdoc.analyzer.model import Evidence, InputFile, InputKind, ProcessEvidence
from hangdoc.analyzer.parsers.flight_recorder import Reducer, document_to_parsed
from hangdoc.analyzer.views.activity import classify_ranks
from hangdoc.analyzer.views.fr_matching import MatchResult, match

REPO = Path(__file__).resolve().parents[3]

Entry = dict[str, Any]
FRAMES = [
    {"name": "all_reduce", "filename": "/venv/torch/distributed/distributed_c10d.py", "line": 3245},
    {"name": "train_step", "filename": "/job/train.py", "line": 42},
]


@dataclass
class Rank:
    """One rank's FR buffer under construction."""

    backend: str = "nccl"
    entries: list[Entry] = field(default_factory=list)
    record_id: int = 0
    seqs: dict[str, int] = field(default_factory=dict)
    p2p: dict[str, int] = field(default_factory=dict)

    def op(
        self,
        op: str = "all_reduce",
        *,
        group: str = "0",
        desc: str = "default_pg",
        sizes: Sequence[Sequence[int]] = ((4,),),
        out: Sequence[Sequence[int]] | None = None,
        dtype: str = "Float",
        out_dtype: str | None = None,
        state: str = "completed",
        meta: str = "",
    ) -> Rank:
        is_p2p = op in ("send", "recv")
        if is_p2p:
            self.p2p[group] = self.p2p.get(group, 0) + 1
        else:
            self.seqs[group] = self.seqs.get(group, 0) + 1
        name = f"{self.backend}:{op}" + (f" {meta}" if meta else "")
        done = state == "completed"
        self.entries.append(
            {
                "record_id": self.record_id,
                "pg_id": int(group) if group.isdigit() else 9,
                "process_group": (group, desc),
                "collective_seq_id": self.seqs.get(group, 0),
                "p2p_seq_id": self.p2p.get(group, 0),
                "op_id": self.record_id + 1,
                "profiling_name": name,
                "time_created_ns": 1_795_000_000_000_000_000 + self.record_id,
                "input_sizes": [list(s) for s in sizes],
                "input_dtypes": [dtype] * len(sizes),
                "output_sizes": [list(s) for s in (sizes if out is None else out)],
                "output_dtypes": [out_dtype or dtype] * len(sizes if out is None else out),
                "state": "scheduled" if self.backend == "gloo" and done else state,
                "time_discovered_started_ns": None,
                "time_discovered_completed_ns": None,
                "retired": done,
                "timeout_ms": 600000,
                "is_p2p": is_p2p,
                "frames": FRAMES,
            }
        )
        self.record_id += 1
        return self

    def ops(self, n: int, op: str = "all_reduce", **kw: Any) -> Rank:
        for _ in range(n):
            self.op(op, **kw)
        return self

    def send(self, dst: int, *, src: int, group: str = "0", state: str = "scheduled") -> Rank:
        return self.op("send", group=group, meta=f"{src}->{dst}", state=state)

    def recv(self, src: int, *, dst: int, group: str = "0", state: str = "scheduled") -> Rank:
        return self.op("recv", group=group, meta=f"{dst}<-{src}", state=state)

    def dump(self, pg_config: Mapping[str, Any] | None = None, *, first: int = 0) -> Entry:
        """The dump dict; ``first`` drops older entries as a wrapped ring buffer does."""
        return {
            "version": "2.10",
            "pg_config": dict(pg_config or {}),
            "pg_status": {},
            "entries": self.entries[first:],
        }


def pg_config(groups: Mapping[str, tuple[str, Sequence[int]]]) -> dict[str, Any]:
    """``{name: (desc, ranks)}`` → pg_config with ranks as the STRING torch writes."""
    return {
        name: {"name": name, "desc": desc, "ranks": str(list(ranks))}
        for name, (desc, ranks) in groups.items()
    }


def evidence(docs: Mapping[int, object], *, world: int | None = None) -> Evidence:
    """Evidence with one process per rank, through the real parser."""
    reducer = Reducer()
    ev = Evidence()
    for rank, doc in sorted(docs.items()):
        parsed = document_to_parsed(doc, rank, f"fr/rank{rank}", reducer)
        ev.inputs.append(InputFile(f"fr/rank{rank}", InputKind.FLIGHT_RECORDER, (rank,)))
        for info in parsed.process_groups:
            known = ev.process_groups.get(info.name)
            if known is None or (info.ranks and not known.ranks):
                ev.process_groups[info.name] = info
        for proc in parsed.processes:
            proc.world_size = world
            ev.processes.append(proc)
    return ev


def add_process(ev: Evidence, rank: int, **kw: Any) -> ProcessEvidence:
    proc = ProcessEvidence(rank=rank, **kw)
    ev.processes.append(proc)
    return proc


def matched(ev: Evidence) -> MatchResult:
    return match(ev, classify_ranks(ev))


def write_pickles(directory: Path, docs: Mapping[int, object], prefix: str = "trace_") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for rank, doc in docs.items():
        (directory / f"{prefix}{rank}").write_bytes(pickle.dumps(doc))
    return directory


def load_synth() -> ModuleType:
    """``scripts/fr_synth.py`` (the benchmark's generator of FR dumps), imported by path."""
    name = "fr_synth"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "fr_synth.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# Over the 64 files past which the loader reads flight recorder files in worker processes.
WORKER_RANKS = 72


def write_worker_job(folder: Path, entries: int = 60) -> Path:
    """A synthetic job of ``WORKER_RANKS`` ranks' flight recorder files in ``folder``: enough
    files that the loader reads them through its workers."""
    load_synth().Job(ranks=WORKER_RANKS, entries=entries).write(folder)
    return folder
