"""torch.distributed.elastic / torchrun (FORMATS.md §3): agent lines, the
ChildFailedError block, and TORCHELASTIC_ERROR_FILE (error.json) contents.

ChildFailedError entries are numbered by an *ordinal* (``[1]:``), not by rank; the
``rank :`` field is the global rank. "Root Cause (first observed failure)" is only the
smallest timestamp the agent saw on this node: when the watchdog tears every rank
down, it is merely the first rank to abort, which the rules must not take as proof.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.parsers.logs.process import match_exception_line, signal_name
from hangdoc.analyzer.parsers.logs.timefmt import Stamp, dated_stamp, epoch_stamp
from hangdoc.analyzer.parsers.logs.torch_pg import match_torch
from hangdoc.analyzer.payloads.launch import ErrorFile, Launcher, LauncherReport, SignalName
from hangdoc.analyzer.vocabulary import EventKind

# The agent's report of the first worker that ended (torch/distributed/elastic/
# multiprocessing/api.py, SubprocessContext._poll and MultiprocessContext._poll, one format
# from 1.9 to 2.x): ``failed (exitcode: C) local_rank: L (pid: P) of binary: …`` (``of fn:
# … (start_method: …)``). Its body, ``failed (exitcode: C)``, is what says a worker
# ended and how (-N: killed by signal N); the worker's coordinates after it are read where
# the paste kept them, as a paste cut or garbled inside them (``local_rankroot/…``) keeps
# the death and loses only whose it was.
_FAILED = re.compile(
    r"failed \(exitcode: (?P<code>-?\d+)\)"
    r"(?: local_rank: (?P<lr>\d+)(?: \(pid: (?P<pid>\d+)\))?)?"
)
# SubprocessContext._close: ``Sending process P closing signal SIG…`` (1.10 to 2.x). The
# signal's name is read where it is; a line cut after ``closing`` is the same warning (the
# agent closing the workers that are left), its signal unknown.
_CLOSING = re.compile(r"Sending process (?P<pid>\d+) closing(?: signal (?P<sig>SIG\w+))?")
_DEATH = re.compile(
    r"Received (?P<sig>\d+|SIG\w+|Signals\.SIG\w+) death signal, shutting down workers"
)
_ENTRY = re.compile(r"\[(\d+)\]:\s*$")
_KV = re.compile(r"\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_RANK_VAL = re.compile(r"(\d+) \(local_rank: (\d+)\)")
_EXIT_VAL = re.compile(r"(-?\d+) \(pid: (\d+)\)(?:\s*\((SIG\w+)\))?")
_TIME_VAL = re.compile(r"(\d{4})-(\d{2})-(\d{2})_(\d{2}:\d{2}:\d{2})")
_SIGNAL_TB = re.compile(r"[Ss]ignal (\d+) \((SIG\w+)\) received by PID (\d+)")
# An entry's fields where the paste lost the table's layout (retyped from a screenshot,
# copied from a rendered page): a field's name run into its value or into the field
# before ("rank2 (local rank: 2)exitcode: -9 (pid: 36071)error file: <N/A>"), several
# fields on one line. The "rank" and "exitcode" fields are told by their values' shapes
# (format_msg's "R (local_rank: L)" and "C (pid: P)"), which no other text has.
_RANK_LOOSE = re.compile(r"\brank\s*:?\s*(\d+)\s*\(local[_ ]rank:\s*(\d+)\)")
_EXIT_LOOSE = re.compile(r"\bexitcode\s*:?\s*(-?\d+)\s*\(pid:\s*(\d+)\)")
# A table whose header a selection cut away (torch/distributed/elastic/multiprocessing/
# errors/__init__.py ChildFailedError.format_msg: "Root Cause (first observed failure):",
# then per entry "[k]:" and the fields "  time      : …", "  host      : …",
# "  rank      : R (local_rank: L)", …, each name padded to the same column): it starts at
# its root-cause line or at an entry's rank field, the one field that says whose it is.
_CUT_START = re.compile(
    r"Root Cause \(first observed failure\):|\s{1,4}rank\s+: \d+ \(local_rank: \d+\)"
)
# What a line must hold for CUT_START to match it (the scanner's prefilter).
CUT_START_WORDS = ("Root Cause (first observed failure)", "(local_rank: ")


# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
NEED = Need.words(("exitcode", "Sending process", "death signal"))


def match_agent(text: str) -> Hit | None:
    """One line of the torchrun agent (prefix already peeled)."""
    if not NEED.admits(text):
        return None
    if "exitcode" in text and (m := _FAILED.search(text)):
        code = int(m.group("code"))
        failed = LauncherReport(
            launcher=Launcher.TORCHRUN,
            exit_code=code,
            signal=signal_name(-code) if code < 0 else None,
        )
        pid, local = m.group("pid"), m.group("lr")
        hit = Hit(EventKind.WORKER_FAILED, payload=failed, key=("agentfail", pid, local, code))
        hit.named_pid = int(pid) if pid else None
        hit.named_local_rank = int(local) if local else None
        return hit
    if "Sending process" in text and (c := _CLOSING.search(text)):
        sig = c.group("sig")
        closing = LauncherReport(signal=SignalName.parse(sig) if sig else None)
        hit = Hit(EventKind.AGENT_TERMINATING, payload=closing, key=("closing", c.group("pid")))
        hit.named_pid = int(c.group("pid"))
        return hit
    if "death signal" in text and (d := _DEATH.search(text)):
        sig = d.group("sig").replace("Signals.", "")
        got = signal_name(int(sig)) if sig.isdigit() else SignalName.parse(sig)
        death = LauncherReport(launcher=Launcher.TORCHRUN, signal=got)
        return Hit(EventKind.AGENT_SIGNAL, payload=death, key=("death", sig))
    return None


@dataclass(slots=True)
class _Entry:
    """One ``[k]:`` entry of a ChildFailedError table, as it is read."""

    ordinal: int
    root_cause: bool
    host: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    exit_code: int | None = None
    pid: int | None = None
    signal: SignalName | None = None
    error_file: str | None = None
    exc_type: str | None = None
    message: str | None = None


@dataclass(slots=True)
class ChildFailedBlock:
    """Consumes the lines of one ChildFailedError block; yields one Hit per entry."""

    root_cause: bool = False
    current: _Entry | None = None
    stamp: Stamp | None = None
    in_traceback: bool = False
    traceback_last: str = ""
    done: list[tuple[Hit, Stamp | None, int]] = field(default_factory=list)
    lines_seen: int = 0
    last_line: int = 0  # set by the scanner before each feed
    entry_line: int = 0

    @classmethod
    def cut(cls, text: str) -> ChildFailedBlock | None:
        """A table that starts at this line, its header cut away; its first line taken."""
        m = _CUT_START.match(text)
        if m is None:
            return None
        block = cls()
        if text.lstrip().startswith("Root Cause"):
            block.root_cause = True
            block.lines_seen = 1
            return block
        # an entry's fields without its "[k]:": its ordinal is unknown (0)
        block.current = _Entry(0, root_cause=False)
        block.lines_seen = 1
        kv = _KV.match(text)
        if kv is not None:
            block._field(kv.group(1), kv.group(2).strip())
        return block

    def feed(self, text: str) -> bool:
        """Take one line; False when the block has ended (the line is not consumed)."""
        self.lines_seen += 1
        stripped = text.strip()
        if self.lines_seen > 2 and stripped.startswith("=") and set(stripped) == {"="}:
            if self.lines_seen > 3:
                self._close()
                return False
            return True
        if stripped.startswith("Root Cause"):
            self._close()
            self.root_cause = True
            return True
        if _ENTRY.match(stripped):
            self._close()
            self.current = _Entry(int(stripped.strip("[]:")), self.root_cause)
            self.stamp, self.entry_line = None, self.last_line
            return True
        if stripped.startswith("-") and set(stripped) == {"-"}:
            self._close()
            return True
        if self.current is None:
            return self.lines_seen < 12 or stripped in ("Failures:", "<NO_OTHER_FAILURES>")
        kv = _KV.match(text)
        if kv is not None and not (self.in_traceback and text.startswith("    ")):
            self.in_traceback = False
            self._field(kv.group(1), kv.group(2).strip())
            if kv.group(1) in ("time", "host", "error_file"):
                self._loose_fields(kv.group(2))  # the fields after it, their newlines lost
            return True
        if self.in_traceback and stripped:
            if not text.startswith("    "):
                self.traceback_last = stripped
            return True
        self._loose_fields(stripped)
        return not stripped or self.current is not None

    def _loose_fields(self, text: str) -> None:
        """The rank and exitcode fields of a line that is no field as format_msg writes
        it (_RANK_LOOSE): read by their values' shapes wherever they are in it."""
        if "rank" in text and (r := _RANK_LOOSE.search(text)) is not None:
            self._field("rank", f"{r.group(1)} (local_rank: {r.group(2)})")
        if "exitcode" in text and (e := _EXIT_LOOSE.search(text)) is not None:
            self._field("exitcode", f"{e.group(1)} (pid: {e.group(2)})")

    def _field(self, key: str, value: str) -> None:
        cur = self.current
        assert cur is not None
        if key == "time" and (t := _TIME_VAL.search(value)):
            self.stamp = dated_stamp(t.group(1), t.group(2), t.group(3), t.group(4))
        elif key == "host":
            cur.host = value
        elif key == "rank" and (r := _RANK_VAL.search(value)):
            cur.rank, cur.local_rank = int(r.group(1)), int(r.group(2))
        elif key == "exitcode" and (e := _EXIT_VAL.search(value)):
            code = int(e.group(1))
            cur.exit_code, cur.pid = code, int(e.group(2))
            named = SignalName.parse(e.group(3)) if e.group(3) else None
            cur.signal = named or (signal_name(-code) if code < 0 else None)
        elif key == "error_file" and value != "<N/A>":
            cur.error_file = value
        elif key == "traceback":
            if (s := _SIGNAL_TB.search(value)) is not None:
                cur.signal = SignalName.parse(s.group(2))
            elif value.startswith("Traceback"):
                self.in_traceback = True
            elif value and "To enable traceback" not in value:
                cur.message = value[:300]

    def _close(self) -> None:
        cur = self.current
        if cur is None:
            return
        rank = cur.rank
        if self.traceback_last:
            exc = match_exception_line(self.traceback_last)
            if exc is not None:
                cur.exc_type, cur.message = exc[0], exc[1][:300]
            inner = match_torch(self.traceback_last)  # a DETAIL mismatch, an NCCL error…
            if inner is not None:
                inner.rank = rank
                self.done.append((inner, self.stamp, self.entry_line))
        shown_rank = rank if rank is not None else "?"
        shown_code = cur.exit_code if cur.exit_code is not None else "?"
        text = f"rank {shown_rank} failed (exitcode {shown_code})"
        how = cur.exc_type or (cur.signal.value if cur.signal is not None else None)
        if how:
            text += f": {how}"
        if cur.message:
            text += f": {cur.message}"
        if self.root_cause:
            text = "[root cause] " + text
        report = LauncherReport(
            exc_type=cur.exc_type,
            message=cur.message,
            exit_code=cur.exit_code,
            signal=cur.signal,
            ordinal=cur.ordinal,
            rank=rank,
            root_cause=cur.root_cause,
            error_file=cur.error_file,
        )
        hit = Hit(
            EventKind.CHILD_FAILURE,
            payload=report,
            rank=rank,
            text=text,
            key=("child", cur.pid, cur.ordinal),
            named_host=cur.host,
            named_pid=cur.pid,
            named_local_rank=cur.local_rank,
        )
        self.done.append((hit, self.stamp, self.entry_line))
        self.current, self.traceback_last, self.in_traceback = None, "", False

    def finish(self) -> list[tuple[Hit, Stamp | None, int]]:
        self._close()
        return self.done


def parse_error_json(text: str) -> Hit | None:
    """TORCHELASTIC_ERROR_FILE: ``{"message": {"message", "extraInfo": {...}}}`` or legacy."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or "message" not in data:
        return None
    message = data["message"]
    exc_type: str | None = None
    stamp: float | None = None
    if isinstance(message, dict):
        said = str(message.get("message", ""))[:300]
        extra = message.get("extraInfo")
        if isinstance(extra, dict):
            callstack = str(extra.get("py_callstack", ""))
            last = [ln for ln in callstack.splitlines() if ln.strip() and not ln.startswith(" ")]
            if last and (exc := match_exception_line(last[-1].strip())):
                exc_type, said = exc[0], exc[1][:300]
            ts = extra.get("timestamp")
            stamp = float(ts) if isinstance(ts, (str, int, float)) and str(ts).isdigit() else None
    else:
        said = str(message)[:300]
        ts = data.get("timestamp")
        stamp = float(ts) if isinstance(ts, (int, float)) else None
    if exc_type is None and (exc := match_exception_line(said)):
        exc_type, said = exc[0], exc[1][:300]
    traits = data.get("errorTraits")
    category = (
        str(traits["category"]) if isinstance(traits, dict) and traits.get("category") else None
    )
    report = ErrorFile(exc_type=exc_type, message=said, category=category, timestamp=stamp)
    return Hit(EventKind.ERROR_FILE, payload=report, text=said)


def error_json_stamp(hit: Hit) -> Stamp | None:
    report = hit.payload
    epoch = report.timestamp if isinstance(report, ErrorFile) else None
    return epoch_stamp(epoch) if epoch is not None else None
