"""Multi-line reports other tools print: the ``ncclras`` status report (NCCL ≥ 2.24)
and the flight recorder analyser's text output (``torchfrtrace``/``fr_trace.py``).

Both are job-level: their rank numbers are inside the report, not in a line prefix.
RAS prints the *minority* of ranks at a different operation count; those are not
necessarily the laggards (gh:NVIDIA/nccl/issues/1911), so every count group is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.logs.hit import Hit, as_int
from hangdoc.analyzer.payloads.nccl import (
    OpCountGroup,
    RankNode,
    RankStatus,
    RasComm,
    RasReport,
    RasState,
    StatusCount,
)
from hangdoc.analyzer.payloads.torch_pg import FrError, FrReport
from hangdoc.analyzer.vocabulary import EventKind, parse_enum

RAS_START = re.compile(r"^(?:Job summary|Communicators\.\.\.|Group\s+Comms\s+Nodes)")
_RAS_ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+([A-Z]+)\s+([A-Z]+)\s*$"
)
_RAS_COMM = re.compile(r"^#(\d+-\d+) \(([0-9a-f]+)\) (MISMATCH|INCOMPLETE|ERROR)")
_RAS_OPS = re.compile(r"Communicator ranks have different (\w+) operation counts")
_RAS_COUNT = re.compile(
    r"^\s*(\d+) ranks have (?:launched up to operation (\d+)|not launched any operations)"
)
_RAS_RANK = re.compile(
    r"^\s*Rank (\d+)(?: has (?:launched up to operation (\d+)|not launched any operations|status "
    r"(\w+)))?"
    r" -- (?:GPU (\S+) managed by process (\d+) on node (\S+)|\[process information not found\])"
)
_RAS_STATUS = re.compile(r"^\s*(\d+) ranks have status (\w+)")
_RAS_DEAD = re.compile(r"^\s*(\d+) job process(?:es are| is) considered dead")
_RAS_MISSING = re.compile(r"^\s*Missing communicator data from (\d+) (job process|rank)")
_RAS_PROCESS = re.compile(r"^\s*Process (\d+) on node (\S+) managing GPUs? (\S+)")
_RAS_ERRS = re.compile(r"^\s*(Initialization|Asynchronous) errors? on (\d+) ranks?")
_RAS_KNOWN = re.compile(
    r"^(?:=+|Errors|Warnings|DEAD|INCOMPLETE|TIMEOUT|NCCL version|CUDA runtime|Nodes|\s*\(total\)|"
    r"\s*#\s+in group|\s+Encountered \d+ communication timeout|\s+Nodes|\s+\d+\s+\d+)"
)


@dataclass(slots=True)
class _Comm:
    """What the report said so far about one communicator."""

    comm: str
    group: str
    state: RasState
    op: str | None = None
    status_counts: list[StatusCount] = field(default_factory=list)
    status_ranks: list[RankStatus] = field(default_factory=list)
    listed: list[int] = field(default_factory=list)
    nodes: list[RankNode] = field(default_factory=list)
    missing: int | None = None
    init_errors: int | None = None
    async_errors: int | None = None

    def payload(self, **more: object) -> RasComm:
        return RasComm(
            comm=self.comm,
            group=self.group,
            state=self.state,
            op=self.op,
            status_counts=tuple(self.status_counts),
            status_ranks=tuple(self.status_ranks),
            nodes=tuple(self.nodes),
            missing=self.missing,
            init_errors=self.init_errors,
            async_errors=self.async_errors,
            **more,  # type: ignore[arg-type]
        )


@dataclass(slots=True)
class RasBlock:
    """One ``ncclras`` report; ``hits`` holds what it said."""

    hits: list[Hit] = field(default_factory=list)
    section: str = ""
    comm: _Comm | None = None
    groups: list[OpCountGroup] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)

    @staticmethod
    def start(text: str) -> RasBlock | None:
        return RasBlock() if RAS_START.match(text) else None

    def feed(self, text: str) -> bool:
        if not text.strip():
            return True
        if (row := _RAS_ROW.match(text)) is not None:
            g = row.groups()
            report = RasReport(
                group=int(g[0]),
                comms=int(g[1]),
                nodes=int(g[2]),
                ranks_per_comm=int(g[4]),
                status=g[6],
                state=parse_enum(RasState, g[7]),
            )
            self.hits.append(Hit(EventKind.RAS_REPORT, payload=report, key=("ras", g[0], g[7])))
            return True
        if text.startswith(("DEAD", "INCOMPLETE", "TIMEOUT")) and text.strip() in (
            "DEAD",
            "INCOMPLETE",
            "TIMEOUT",
        ):
            self._close()
            self.section = text.strip()
            return True
        if (c := _RAS_COMM.match(text)) is not None:
            self._close()
            self.section = c.group(3)
            self.comm = _Comm(c.group(2), c.group(1), RasState(c.group(3)))
            return True
        return (
            self._detail(text)
            or bool(_RAS_KNOWN.match(text))
            or text.startswith(("Job summary", "Communicators", "Group"))
        )

    def _detail(self, text: str) -> bool:
        if (d := _RAS_DEAD.match(text)) is not None or (d := _RAS_MISSING.match(text)) is not None:
            if self.comm is not None:
                self.comm.missing = int(d.group(1))
            else:
                self.processes = [f"count={d.group(1)}"]
            return True
        if (p := _RAS_PROCESS.match(text)) is not None:
            self.processes.append(f"{p.group(2)}:{p.group(1)}:{p.group(3)}")
            return True
        comm = self.comm
        if comm is None:
            return False
        if (o := _RAS_OPS.search(text)) is not None:
            self._flush_groups()
            comm.op = o.group(1)
            return True
        if (n := _RAS_COUNT.match(text)) is not None:
            self.groups.append(OpCountGroup(int(n.group(2) or 0), int(n.group(1))))
            return True
        if (s := _RAS_STATUS.match(text)) is not None:
            comm.status_counts.append(StatusCount(s.group(2), int(s.group(1))))
            return True
        if (r := _RAS_RANK.match(text)) is not None:
            rank = int(r.group(1))
            if r.group(2) is not None or "not launched" in text:
                self.groups.append(OpCountGroup(int(r.group(2) or 0), 1, (rank,)))
            elif r.group(3) is not None:
                comm.status_ranks.append(RankStatus(rank, r.group(3)))
            elif self.groups:
                last = self.groups[-1]
                self.groups[-1] = OpCountGroup(last.opcount, last.count, (*last.ranks, rank))
            else:
                comm.listed.append(rank)
            if r.group(6):
                comm.nodes.append(RankNode(rank, r.group(6), int(r.group(5))))
            return True
        if (e := _RAS_ERRS.match(text)) is not None:
            if e.group(1) == "Initialization":
                comm.init_errors = int(e.group(2))
            else:
                comm.async_errors = int(e.group(2))
            return True
        return text.startswith("  ")

    def _flush_groups(self) -> None:
        if self.comm is None or not self.groups:
            return
        mismatch = self.comm.payload(groups=tuple(self.groups))
        self.hits.append(
            Hit(EventKind.RAS_MISMATCH, payload=mismatch, key=("rasmm", mismatch.comm, mismatch.op))
        )
        self.groups = []

    def _close(self) -> None:
        comm = self.comm
        if comm is not None:
            if comm.state is RasState.MISMATCH:
                self._flush_groups()
                if comm.status_counts or comm.status_ranks:
                    self.hits.append(
                        Hit(
                            EventKind.RAS_MISMATCH,
                            payload=comm.payload(),
                            key=("rasst", comm.comm),
                        )
                    )
            elif comm.state is RasState.INCOMPLETE:
                incomplete = comm.payload(ranks=tuple(comm.listed))
                self.hits.append(
                    Hit(EventKind.RAS_INCOMPLETE, payload=incomplete, key=("rasinc", comm.comm))
                )
            else:
                self.hits.append(
                    Hit(EventKind.RAS_ERROR, payload=comm.payload(), key=("raserr", comm.comm))
                )
        elif self.section in ("DEAD", "INCOMPLETE") and self.processes:
            kind = EventKind.RAS_DEAD if self.section == "DEAD" else EventKind.RAS_INCOMPLETE
            dead = RasComm(processes=tuple(self.processes))
            self.hits.append(Hit(kind, payload=dead, key=("rasproc", self.section)))
        self.comm, self.groups, self.processes = None, [], []

    def finish(self) -> list[Hit]:
        self._close()
        return self.hits


FR_HEAD = re.compile(
    r"^(?:Not all ranks joining collective(?:, sequence number: (?P<seq>\d+)| (?P<seq2>\d+) at "
    r"entry \d+"
    r"| for group (?P<group>\S+) collective (?P<coll>\S+))"
    r"|Collective sequence number: (?P<eseq>\d+) has errors|Collective (?P<eseq2>\d+) at entry \d+ "
    r"errors"
    r"|Input/output mismatch in the collective sequence number: (?P<ioseq>\d+))"
)
_FR_KV = re.compile(
    r"^(?:(internal record id|group info|collective|missing ranks|input sizes|output sizes|"
    r"world size|expected ranks|collective state|error msg):\s*(.*)|(Missing ranks are)\s*(.*))$"
)
_FR_CULPRIT = re.compile(r"Culprit rank (\d+); Error type: (\w+)(?:, (.*))?")
_SET = re.compile(r"\{([\d,\s]*)\}")
# The analyser's "key: value" lines, by the payload field each fills (as printed, up to 200).
_FR_TEXT_FIELDS = {
    "group info": "group_info",
    "collective": "collective",
    "input sizes": "input_sizes",
    "output sizes": "output_sizes",
    "collective state": "collective_state",
    "error msg": "message",  # an error message without a culprit
}


@dataclass(slots=True)
class FrTraceBlock:
    """One finding of the flight recorder analyser's text output."""

    found: dict[str, object]
    kind: EventKind

    @staticmethod
    def start(text: str) -> FrTraceBlock | None:
        m = FR_HEAD.match(text)
        if m is None:
            return None
        if m.group("eseq") or m.group("eseq2") or m.group("ioseq"):
            found: dict[str, object] = {
                "seq": int(m.group("eseq") or m.group("eseq2") or m.group("ioseq"))
            }
            if m.group("ioseq"):
                found["error"] = FrError.SIZE_OR_SYNTAX_MISMATCH
            return FrTraceBlock(found, EventKind.FR_MISMATCH)
        found = {
            "seq": as_int(m.group("seq") or m.group("seq2")),
            "group": m.group("group"),
            "collective": m.group("coll"),
        }
        return FrTraceBlock(found, EventKind.FR_MISSING_RANKS)

    def feed(self, text: str) -> bool:
        m = _FR_KV.match(text.strip())
        if m is not None and m.group(3):
            key, value = "missing ranks", m.group(4)
        elif m is not None:
            key, value = m.group(1), m.group(2).strip()
        if m is None:
            if text.strip().startswith("collective stack trace"):
                return True
            return (
                bool(text.strip()) and (" at " in text and ":" in text) and not FR_HEAD.match(text)
            )
        if key in ("missing ranks", "expected ranks"):
            s = _SET.search(value)
            ranks = tuple(int(x) for x in s.group(1).split(",") if x.strip()) if s else ()
            self.found["missing" if key != "expected ranks" else "expected"] = ranks
        elif key == "error msg" and (c := _FR_CULPRIT.search(value)):
            self.found.update(
                {"culprit": int(c.group(1)), "error": parse_enum(FrError, c.group(2))}
            )
            self.found["detail"] = (c.group(3) or "")[:200] or None
        elif key in _FR_TEXT_FIELDS:
            self.found[_FR_TEXT_FIELDS[key]] = value[:200]
        elif key == "world size":
            self.found["world_size"] = as_int(value)
        elif key == "internal record id":
            self.found["record_id"] = as_int(value)
        return True

    def finish(self) -> Hit:
        report = FrReport(**self.found)  # type: ignore[arg-type]
        return Hit(
            self.kind,
            payload=report,
            key=("fr", self.kind, report.seq, report.group_info),
        )
