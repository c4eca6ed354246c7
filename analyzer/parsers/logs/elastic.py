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

from hangdoc.analyzer.parsers.logs.hit import Hit, put
from hangdoc.analyzer.parsers.logs.process import match_exception_line, signal_name
from hangdoc.analyzer.parsers.logs.timefmt import Stamp, dated_stamp, epoch_stamp
from hangdoc.analyzer.parsers.logs.torch_pg import match_torch
from hangdoc.analyzer.vocabulary import (
    F_EXC_TYPE,
    F_EXIT_CODE,
    F_HOST,
    F_LOCAL_RANK,
    F_MESSAGE,
    F_PID,
    F_SIGNAL,
    EventKind,
)

_FAILED = re.compile(
    r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<lr>\d+) \(pid: (?P<pid>\d+)\)"
)
_CLOSING = re.compile(r"Sending process (?P<pid>\d+) closing signal (?P<sig>SIG\w+)")
_DEATH = re.compile(
    r"Received (?P<sig>\d+|SIG\w+|Signals\.SIG\w+) death signal, shutting down workers"
)
_ENTRY = re.compile(r"\[(\d+)\]:\s*$")
_KV = re.compile(r"\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_RANK_VAL = re.compile(r"(\d+) \(local_rank: (\d+)\)")
_EXIT_VAL = re.compile(r"(-?\d+) \(pid: (\d+)\)(?:\s*\((SIG\w+)\))?")
_TIME_VAL = re.compile(r"(\d{4})-(\d{2})-(\d{2})_(\d{2}:\d{2}:\d{2})")
_SIGNAL_TB = re.compile(r"Signal (\d+) \((SIG\w+)\) received by PID (\d+)")


def match_agent(text: str) -> Hit | None:
    """One line of the torchrun agent (prefix already peeled)."""
    if "exitcode" in text and (m := _FAILED.search(text)):
        code = int(m.group("code"))
        fields = {
            F_EXIT_CODE: str(code),
            F_LOCAL_RANK: m.group("lr"),
            F_PID: m.group("pid"),
            "launcher": "torchrun",
        }
        put(fields, F_SIGNAL, signal_name(-code) if code < 0 else None)
        return Hit(EventKind.WORKER_FAILED, fields, key=("agentfail", m.group("pid")))
    if "closing signal" in text and (c := _CLOSING.search(text)):
        return Hit(
            EventKind.AGENT_TERMINATING,
            {F_PID: c.group("pid"), F_SIGNAL: c.group("sig")},
            key=("closing", c.group("pid")),
        )
    if "death signal" in text and (d := _DEATH.search(text)):
        sig = d.group("sig").replace("Signals.", "")
        if sig.isdigit():
            sig = signal_name(int(sig)) or sig
        return Hit(
            EventKind.AGENT_SIGNAL, {F_SIGNAL: sig, "launcher": "torchrun"}, key=("death", sig)
        )
    return None


@dataclass(slots=True)
class ChildFailedBlock:
    """Consumes the lines of one ChildFailedError block; yields one Hit per entry."""

    root_cause: bool = False
    current: dict[str, str] | None = None
    stamp: Stamp | None = None
    in_traceback: bool = False
    traceback_last: str = ""
    done: list[tuple[Hit, Stamp | None, int]] = field(default_factory=list)
    lines_seen: int = 0
    last_line: int = 0  # set by the scanner before each feed
    entry_line: int = 0

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
            self.current = {
                "ordinal": stripped.strip("[]:"),
                "root_cause": str(self.root_cause).lower(),
            }
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
            return True
        if self.in_traceback and stripped:
            if not text.startswith("    "):
                self.traceback_last = stripped
            return True
        return not stripped or self.current is not None

    def _field(self, key: str, value: str) -> None:
        cur = self.current
        assert cur is not None
        if key == "time" and (t := _TIME_VAL.search(value)):
            self.stamp = dated_stamp(t.group(1), t.group(2), t.group(3), t.group(4))
        elif key == "host":
            cur[F_HOST] = value
        elif key == "rank" and (r := _RANK_VAL.search(value)):
            cur["rank"], cur[F_LOCAL_RANK] = r.group(1), r.group(2)
        elif key == "exitcode" and (e := _EXIT_VAL.search(value)):
            cur[F_EXIT_CODE], cur[F_PID] = e.group(1), e.group(2)
            code = int(e.group(1))
            put(cur, F_SIGNAL, e.group(3) or (signal_name(-code) if code < 0 else None))
        elif key == "error_file" and value != "<N/A>":
            cur["error_file"] = value
        elif key == "traceback":
            if (s := _SIGNAL_TB.search(value)) is not None:
                cur[F_SIGNAL] = s.group(2)
            elif value.startswith("Traceback"):
                self.in_traceback = True
            elif value and "To enable traceback" not in value:
                cur[F_MESSAGE] = value[:300]

    def _close(self) -> None:
        cur = self.current
        if cur is None:
            return
        rank = int(cur["rank"]) if "rank" in cur else None
        if self.traceback_last:
            exc = match_exception_line(self.traceback_last)
            if exc is not None:
                cur[F_EXC_TYPE], cur[F_MESSAGE] = exc[0], exc[1][:300]
            inner = match_torch(self.traceback_last)  # a DETAIL mismatch, an NCCL error…
            if inner is not None:
                inner.rank = rank
                self.done.append((inner, self.stamp, self.entry_line))
        text = f"rank {cur.get('rank', '?')} failed (exitcode {cur.get(F_EXIT_CODE, '?')})"
        how = cur.get(F_EXC_TYPE) or cur.get(F_SIGNAL)
        if how:
            text += f": {how}"
        if cur.get(F_MESSAGE):
            text += f": {cur[F_MESSAGE]}"
        if self.root_cause:
            text = "[root cause] " + text
        hit = Hit(
            EventKind.CHILD_FAILURE,
            dict(cur),
            rank=rank,
            text=text,
            key=("child", cur.get(F_PID), cur.get("ordinal")),
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
    fields: dict[str, str] = {}
    stamp: float | None = None
    if isinstance(message, dict):
        fields[F_MESSAGE] = str(message.get("message", ""))[:300]
        extra = message.get("extraInfo")
        if isinstance(extra, dict):
            callstack = str(extra.get("py_callstack", ""))
            last = [ln for ln in callstack.splitlines() if ln.strip() and not ln.startswith(" ")]
            if last and (exc := match_exception_line(last[-1].strip())):
                fields[F_EXC_TYPE], fields[F_MESSAGE] = exc[0], exc[1][:300]
            ts = extra.get("timestamp")
            stamp = float(ts) if isinstance(ts, (str, int, float)) and str(ts).isdigit() else None
    else:
        fields[F_MESSAGE] = str(message)[:300]
        ts = data.get("timestamp")
        stamp = float(ts) if isinstance(ts, (int, float)) else None
    if F_EXC_TYPE not in fields and (exc := match_exception_line(fields.get(F_MESSAGE, ""))):
        fields[F_EXC_TYPE], fields[F_MESSAGE] = exc[0], exc[1][:300]
    traits = data.get("errorTraits")
    if isinstance(traits, dict) and traits.get("category"):
        fields["category"] = str(traits["category"])
    hit = Hit(EventKind.ERROR_FILE, fields, text=fields.get(F_MESSAGE, "error file"))
    if stamp is not None:
        hit.fields["epoch"] = str(stamp)
    return hit


def error_json_stamp(hit: Hit) -> Stamp | None:
    epoch = hit.fields.get("epoch")
    return epoch_stamp(float(epoch)) if epoch else None
