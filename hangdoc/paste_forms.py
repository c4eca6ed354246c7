"""A recorded hang as a person pastes it: py-spy's text per rank under a hand-written label.

``hangdoc collect`` reads py-spy's JSON; a person on a ticket runs ``py-spy dump --pid P``
on each rank and pastes its text, each under a label they type ("rank 3:", "[rank3]",
"=== Rank 3 ===", "Rank 3 py-spy dump", tail's "==> rank3.txt <==", the host and pid with
the rank, the py-spy command run, or a file per rank named ``rank3.txt``), often
without py-spy's ``Process``/``Python``/``Thread`` lines (frames only, a blank line
between threads), and the tail of the rank's log under it. The evidence is the same as the
live dump's last sample, so the diagnosis must be too, or less specific (one sample cannot
show progress; a dead rank's absence says nothing without the world size).

The text is py-spy's own (``src/dump.rs`` ``print_traces`` and ``stack_trace.rs``): a
``Process PID: CMDLINE`` line, ``Python vX (EXE)``, a blank line, then per thread, last
first, ``Thread TID (idle|active|active+gil): "NAME"`` (TID the OS thread id, else the
pthread id as ``0x…`` upper-case hex) and its frames innermost first, four spaces in:
``NAME (SHORT_FILENAME:LINE)``, or ``NAME (SHORT_FILENAME)`` when the line is 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

LOG_TAIL_LINES = 15
_PYTHON_VERSION = re.compile(r"/python(\d+\.\d+)/")
_PYSPY_FILE = re.compile(r"(?:rank(\d+)\.)?pyspy(?:\.(\d+))?\.json$")


@dataclass(frozen=True, slots=True)
class RankPaste:
    """What a person has of one rank: its last py-spy sample and its log's tail."""

    rank: int
    pid: int | None
    cmdline: str
    traces: tuple[Mapping[str, object], ...]  # py-spy JSON's stack traces, as py-spy gave them
    log_tail: tuple[str, ...]


def _traces(path: Path) -> tuple[Mapping[str, object], ...]:
    """The last document's traces: ``py-spy dump --json`` run twice into one file holds
    two documents, one after the other."""
    text = path.read_text(encoding="utf-8")
    decoder = json.JSONDecoder()
    at, doc = 0, None
    while at < len(text):
        doc, at = decoder.raw_decode(text, at)
        while at < len(text) and text[at].isspace():
            at += 1
    if isinstance(doc, dict):
        doc = doc.get("stack_traces", [])
    return tuple(t for t in doc if isinstance(t, dict)) if isinstance(doc, list) else ()


def _last_sample(files: Sequence[Path]) -> Path | None:
    def index(path: Path) -> int:
        m = _PYSPY_FILE.search(path.name)
        return int(m.group(2)) if m and m.group(2) else 0

    return max(files, key=index) if files else None


def _tail(folder: Path) -> tuple[str, ...]:
    """The last lines of the rank's stdout, then of its stderr (what a terminal shows)."""
    lines: list[str] = []
    for pattern in ("stdout*", "stderr*"):
        for path in sorted(folder.glob(pattern)):
            text = path.read_text(encoding="utf-8", errors="replace").splitlines()
            lines.extend(text[-LOG_TAIL_LINES:])
    return tuple(lines)


def read_ranks(dump: Path) -> list[RankPaste]:
    """Each rank of a recorded dump (a ``hangdoc collect`` folder, or loose
    ``rankN.pyspy.json`` files) with the sample a person would have pasted: the last."""
    ranks: list[RankPaste] = []
    for folder in sorted(dump.glob("rank*")):
        if folder.is_dir():
            m = re.fullmatch(r"rank(\d+)", folder.name)
            sample = _last_sample(sorted(folder.glob("pyspy*.json")))
            if m is None or sample is None:
                continue
            info = json.loads((folder / "process.json").read_text(encoding="utf-8"))
            cmdline = " ".join(str(a) for a in info.get("cmdline") or [])
            pid = info.get("pid")
            ranks.append(
                RankPaste(
                    int(m.group(1)),
                    pid if isinstance(pid, int) else None,
                    cmdline,
                    _traces(sample),
                    _tail(folder / "logs"),
                )
            )
        elif (m := _PYSPY_FILE.fullmatch(folder.name)) is not None and m.group(1):
            traces = _traces(folder)
            pid = traces[0].get("pid") if traces else None
            ranks.append(
                RankPaste(
                    int(m.group(1)), pid if isinstance(pid, int) else None, "python", traces, ()
                )
            )
    return sorted(ranks, key=lambda r: r.rank)


def _status(trace: Mapping[str, object]) -> str:
    if not trace.get("active"):
        return "idle"
    return "active+gil" if trace.get("owns_gil") else "active"


def _thread_id(trace: Mapping[str, object]) -> str:
    tid = trace.get("os_thread_id")
    if isinstance(tid, int):
        return str(tid)
    pthread = trace.get("thread_id")
    return f"0x{pthread:X}" if isinstance(pthread, int) else "0x0"


def _frame(frame: Mapping[str, object]) -> str:
    where = frame.get("short_filename") or frame.get("filename") or "?"
    line = frame.get("line")
    if isinstance(line, int) and line != 0:
        return f"    {frame.get('name')} ({where}:{line})"
    return f"    {frame.get('name')} ({where})"


def pyspy_text(rank: RankPaste, *, headers: bool = True) -> str:
    """``py-spy dump``'s text for the rank: its own process, then (``-s``) each child
    process with its ``Parent Process`` line. Without ``headers``, frames only, one blank
    line between threads, and the rank's own threads only (a child's frames under no
    header would pass for the rank's)."""
    own = [t for t in rank.traces if rank.pid is None or t.get("pid") in (None, rank.pid)]
    if not headers:
        return _threads(own, headers=False)
    children: dict[object, list[Mapping[str, object]]] = {}
    for trace in rank.traces:
        if not any(trace is t for t in own):
            children.setdefault(trace.get("pid"), []).append(trace)
    exe = rank.cmdline.split(" ", 1)[0] or "python"
    versions = (
        _PYTHON_VERSION.search(str(f.get("filename"))) for t in rank.traces for f in _frames(t)
    )
    version = next((m.group(1) for m in versions if m), "3")
    head = [f"Process {rank.pid}: {rank.cmdline}", f"Python v{version} ({exe})", ""]
    text = "\n".join(head) + "\n" + _threads(own, headers=True)
    for pid, traces in children.items():
        head = [f"Process {pid}: {rank.cmdline}", f"Python v{version} ({exe})"]
        head += [f"Parent Process {rank.pid}: {rank.cmdline}", ""]
        text += "\n".join(head) + "\n" + _threads(traces, headers=True)
    return text


def _threads(traces: Sequence[Mapping[str, object]], *, headers: bool) -> str:
    """The threads, last first as py-spy prints them."""
    out: list[str] = []
    for number, trace in enumerate(reversed(traces)):
        if headers:
            name = trace.get("thread_name")
            label = f': "{name}"' if isinstance(name, str) else ""
            out.append(f"Thread {_thread_id(trace)} ({_status(trace)}){label}")
        elif number:
            out.append("")
        out.extend(_frame(f) for f in _frames(trace))
    return "\n".join(out) + "\n"


def _frames(trace: Mapping[str, object]) -> list[Mapping[str, object]]:
    frames = trace.get("frames")
    return [f for f in frames if isinstance(f, dict)] if isinstance(frames, list) else []


Label = Callable[[RankPaste], str]
LABELS: dict[str, Label] = {
    "rank N:": lambda r: f"rank {r.rank}:",
    "[rankN]": lambda r: f"[rank{r.rank}]",
    "=== Rank N ===": lambda r: f"=== Rank {r.rank} ===",
    "Rank N py-spy dump": lambda r: f"Rank {r.rank} py-spy dump",
    # GNU head/tail over several files (``tail -n 40 rank*.txt``): "==> NAME <==".
    "==> rankN.txt <==": lambda r: f"==> rank{r.rank}.txt <==",
    # The host and pid a person copied from ``ps`` or the launcher, and the rank.
    "host:pid (rank N)": lambda r: f"node-1:{r.pid} (rank {r.rank})",
    # The command run, the rank in a shell comment.
    "$ py-spy dump --pid P  # rank N": lambda r: f"$ py-spy dump --pid {r.pid}  # rank {r.rank}",
}


@dataclass(frozen=True, slots=True)
class PasteForm:
    """One way of pasting every rank: file names and their text."""

    name: str
    build: Callable[[Sequence[RankPaste]], dict[str, str]]


def _files(headers: bool) -> Callable[[Sequence[RankPaste]], dict[str, str]]:
    def build(ranks: Sequence[RankPaste]) -> dict[str, str]:
        files: dict[str, str] = {}
        for rank in ranks:
            files[f"rank{rank.rank}.txt"] = pyspy_text(rank, headers=headers)
            if rank.log_tail:
                files[f"rank{rank.rank}.log"] = "\n".join(rank.log_tail) + "\n"
        return files

    return build


def _one_file(label: Label, headers: bool) -> Callable[[Sequence[RankPaste]], dict[str, str]]:
    def build(ranks: Sequence[RankPaste]) -> dict[str, str]:
        parts: list[str] = []
        for rank in ranks:
            parts.append(label(rank))
            parts.append(pyspy_text(rank, headers=headers))
            if rank.log_tail:
                parts.append("\n".join(rank.log_tail) + "\n")
        return {"pasted.txt": "\n".join(parts)}

    return build


FORMS: tuple[PasteForm, ...] = (
    PasteForm("a file per rank", _files(headers=True)),
    PasteForm("a file per rank, frames only", _files(headers=False)),
    *(
        PasteForm(f"one file, {name}{suffix}", _one_file(label, headers))
        for name, label in LABELS.items()
        for headers, suffix in ((True, ""), (False, ", frames only"))
    ),
)


def write_form(form: PasteForm, ranks: Sequence[RankPaste], folder: Path) -> list[Path]:
    """The form's files written into ``folder``; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in form.build(ranks).items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
