"""Multi-line reports other tools print: the ``ncclras`` status report (NCCL ≥ 2.24)
and the flight recorder analyser's text output (``torchfrtrace``/``fr_trace.py``).

Both are job-level: their rank numbers are inside the report, not in a line prefix.
RAS prints the *minority* of ranks at a different operation count; those are not
necessarily the laggards (gh:NVIDIA/nccl/issues/1911), so every count group is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.logs.hit import Hit, put
from hangdoc.analyzer.vocabulary import F_ERROR, F_OP, F_RANKS, F_SEQ, EventKind

_RAS_START = re.compile(r"^(?:Job summary|Communicators\.\.\.|Group\s+Comms\s+Nodes)")
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
class RasBlock:
    """One ``ncclras`` report; ``hits`` holds what it said."""

    hits: list[Hit] = field(default_factory=list)
    section: str = ""
    comm: dict[str, str] | None = None
    groups: list[tuple[int | None, int, list[int]]] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)

    @staticmethod
    def start(text: str) -> RasBlock | None:
        return RasBlock() if _RAS_START.match(text) else None

    def feed(self, text: str) -> bool:
        if not text.strip():
            return True
        if (row := _RAS_ROW.match(text)) is not None:
            g = row.groups()
            self.hits.append(
                Hit(
                    EventKind.RAS_REPORT,
                    {
                        "group": g[0],
                        "comms": g[1],
                        "nodes": g[2],
                        "ranks_per_comm": g[4],
                        "status": g[6],
                        F_ERROR: g[7],
                    },
                    key=("ras", g[0], g[7]),
                )
            )
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
            self.comm = {"comm": c.group(2), "group": c.group(1), "state": c.group(3)}
            return True
        return (
            self._detail(text)
            or bool(_RAS_KNOWN.match(text))
            or text.startswith(("Job summary", "Communicators", "Group"))
        )

    def _detail(self, text: str) -> bool:
        if (d := _RAS_DEAD.match(text)) is not None or (d := _RAS_MISSING.match(text)) is not None:
            if self.comm is not None:
                self.comm["missing"] = d.group(1)
            else:
                self.processes = [f"count={d.group(1)}"]
            return True
        if (p := _RAS_PROCESS.match(text)) is not None:
            self.processes.append(f"{p.group(2)}:{p.group(1)}:{p.group(3)}")
            return True
        if self.comm is None:
            return False
        if (o := _RAS_OPS.search(text)) is not None:
            self._flush_groups()
            self.comm[F_OP] = o.group(1)
            return True
        if (n := _RAS_COUNT.match(text)) is not None:
            self.groups.append((int(n.group(2) or 0), int(n.group(1)), []))
            return True
        if (s := _RAS_STATUS.match(text)) is not None:
            self.comm.setdefault("status_groups", "")
            self.comm["status_groups"] += f"{s.group(2)}:{s.group(1)};"
            return True
        if (r := _RAS_RANK.match(text)) is not None:
            rank = int(r.group(1))
            if r.group(2) is not None or "not launched" in text:
                self.groups.append((int(r.group(2) or 0), 1, [rank]))
            elif r.group(3) is not None:
                self.comm["status_ranks"] = (
                    self.comm.get("status_ranks", "") + f"{rank}:{r.group(3)};"
                )
            elif self.groups:
                self.groups[-1][2].append(rank)
            else:
                self.comm["listed_ranks"] = self.comm.get("listed_ranks", "") + f"{rank},"
            if r.group(6):
                self.comm["nodes"] = (
                    self.comm.get("nodes", "") + f"{rank}@{r.group(6)}:{r.group(5)};"
                )
            return True
        if (e := _RAS_ERRS.match(text)) is not None:
            self.comm[e.group(1).lower() + "_errors"] = e.group(2)
            return True
        return text.startswith("  ")

    def _flush_groups(self) -> None:
        if self.comm is None or not self.groups:
            return
        fields = dict(self.comm)
        fields["groups"] = ";".join(
            f"{op}:{count}:{'/'.join(str(r) for r in ranks)}" for op, count, ranks in self.groups
        )
        self.hits.append(
            Hit(EventKind.RAS_MISMATCH, fields, key=("rasmm", fields["comm"], fields.get(F_OP)))
        )
        self.groups = []

    def _close(self) -> None:
        if self.comm is not None:
            state = self.comm["state"]
            if state == "MISMATCH":
                self._flush_groups()
                if "status_groups" in self.comm or "status_ranks" in self.comm:
                    self.hits.append(
                        Hit(
                            EventKind.RAS_MISMATCH,
                            dict(self.comm),
                            key=("rasst", self.comm["comm"]),
                        )
                    )
            elif state == "INCOMPLETE":
                fields = dict(self.comm)
                put(fields, F_RANKS, fields.pop("listed_ranks", "").rstrip(",") or None)
                self.hits.append(
                    Hit(EventKind.RAS_INCOMPLETE, fields, key=("rasinc", fields["comm"]))
                )
            else:
                self.hits.append(
                    Hit(EventKind.RAS_ERROR, dict(self.comm), key=("raserr", self.comm["comm"]))
                )
        elif self.section in ("DEAD", "INCOMPLETE") and self.processes:
            kind = EventKind.RAS_DEAD if self.section == "DEAD" else EventKind.RAS_INCOMPLETE
            self.hits.append(
                Hit(
                    kind,
                    {"processes": ";".join(self.processes), "source": "ras_report"},
                    key=("rasproc", self.section),
                )
            )
        self.comm, self.groups, self.processes = None, [], []

    def finish(self) -> list[Hit]:
        self._close()
        return self.hits


_FR_HEAD = re.compile(
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


@dataclass(slots=True)
class FrTraceBlock:
    """One finding of the flight recorder analyser's text output."""

    fields: dict[str, str]
    kind: EventKind

    @staticmethod
    def start(text: str) -> FrTraceBlock | None:
        m = _FR_HEAD.match(text)
        if m is None:
            return None
        fields: dict[str, str] = {"source": "fr_trace"}
        if m.group("eseq") or m.group("eseq2") or m.group("ioseq"):
            put(fields, F_SEQ, m.group("eseq") or m.group("eseq2") or m.group("ioseq"))
            if m.group("ioseq"):
                fields[F_ERROR] = "SIZE_OR_SYNTAX_MISMATCH"
            return FrTraceBlock(fields, EventKind.FR_MISMATCH)
        put(fields, F_SEQ, m.group("seq") or m.group("seq2"))
        put(fields, "group", m.group("group"))
        put(fields, "collective", m.group("coll"))
        return FrTraceBlock(fields, EventKind.FR_MISSING_RANKS)

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
                bool(text.strip()) and (" at " in text and ":" in text) and not _FR_HEAD.match(text)
            )
        if key in ("missing ranks", "expected ranks"):
            s = _SET.search(value)
            ranks = ",".join(x.strip() for x in s.group(1).split(",") if x.strip()) if s else ""
            self.fields[F_RANKS if key != "expected ranks" else "expected"] = ranks
        elif key == "error msg" and (c := _FR_CULPRIT.search(value)):
            self.fields.update({"culprit": c.group(1), F_ERROR: c.group(2)})
            put(self.fields, "detail", (c.group(3) or "")[:200] or None)
        else:
            self.fields[key.replace(" ", "_")] = value[:200]
        return True

    def finish(self) -> Hit:
        return Hit(
            self.kind,
            self.fields,
            key=("fr", self.kind, self.fields.get(F_SEQ), self.fields.get("group_info")),
        )
