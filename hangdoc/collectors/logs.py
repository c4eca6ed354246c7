"""Collect the job's own logs for one rank: what hangdoc analyze reads when a dump has
no stacks, and what explains them when it has.

Per rank, from the live process (never modifying it):

* ``NCCL_DEBUG_FILE`` with ``%h`` (host name cut at the first dot, as NCCL does), ``%p``
  (pid) and ``%%`` expanded, relative to the process's working directory;
* the regular files its stdout and stderr point to (``/proc/PID/fd/1``, ``/fd/2``): the
  torchrun ``--log-dir`` files, a shell redirect, a Slurm output file — pipes, ttys and
  sockets are skipped (their past output is gone);
* ``TORCHELASTIC_ERROR_FILE`` (the ``@record`` error.json);
* every ``--log PATH`` given to ``hangdoc collect`` (once per dump, not per rank).

Each file is copied capped — its first MiB (NCCL init lines map processes to ranks) and
its tail (where the hang is) — with its size recorded, and passed through
``hangdoc.common.redact.redact_text`` unless redaction is off. Paths are also tried
under ``/proc/PID/root`` so that files of a containerised rank are found from the host.
"""

from __future__ import annotations

import os
import socket
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.collectors.dumpformat import StepRecord
from hangdoc.collectors.extras import ExtraContext, register
from hangdoc.common.atomic import write_bytes_atomic

STEP = "logs"
HEAD_BYTES = 1 * 1024 * 1024
TAIL_BYTES = 15 * 1024 * 1024
MAX_DIR_FILES = 50
LOGS_DIR = "logs"


def expand_nccl_path(template: str, host: str, pid: int) -> str:
    """NCCL_DEBUG_FILE's own expansion: ``%h`` short host, ``%p`` pid, ``%%`` a percent."""
    short = host.split(".", 1)[0]
    out: list[str] = []
    i = 0
    while i < len(template):
        ch = template[i]
        if ch == "%" and i + 1 < len(template):
            nxt = template[i + 1]
            if nxt in "hp%":
                out.append(short if nxt == "h" else str(pid) if nxt == "p" else "%")
                i += 2
                continue
        out.append(ch)
        i += 1
    return "".join(out)


@dataclass(slots=True)
class Copied:
    """What one copy kept of its source."""

    size: int
    kept: int
    truncated: bool


def read_capped(path: Path, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> tuple[bytes, Copied]:
    """The first ``head`` and last ``tail`` bytes of a file (all of it when it is small),
    with a marker line where bytes were left out; never reads more than head + tail."""
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size <= head + tail:
            data = handle.read(head + tail)
            return data, Copied(size, len(data), False)
        first = handle.read(head)
        cut = first.rfind(b"\n")
        first = first[: cut + 1] if cut >= 0 else first
        handle.seek(size - tail)
        last = handle.read(tail)
        nl = last.find(b"\n")
        last = last[nl + 1 :] if nl >= 0 else last
        omitted = size - len(first) - len(last)
        marker = f"[hangdoc: {omitted} bytes of this log omitted]\n".encode()
        return first + marker + last, Copied(size, len(first) + len(last), True)


def _redacted(data: bytes, redact: bool) -> bytes:
    if not redact:
        return data
    from hangdoc.common.redact import redact_text  # lazy: keeps this module importable alone

    return redact_text(data.decode("utf-8", errors="replace")).encode("utf-8")


@dataclass(slots=True)
class _Run:
    ctx: ExtraContext
    deadline: float
    records: list[StepRecord] = field(default_factory=list)
    seen: set[tuple[int, int]] = field(default_factory=set)

    def record(
        self, source: str, status: str, reason: str | None, began: float, file: str | None = None
    ) -> None:
        step: StepRecord = {
            "step": f"{STEP}:{source}",
            "status": "ok" if status == "ok" else "failed" if status == "failed" else "skipped",
            "rank": self.ctx.target.rank,
            "pid": self.ctx.target.pid,
            "sample": None,
            "reason": reason,
            "duration_s": round(time.monotonic() - began, 3),
            "file": file,
        }
        self.records.append(step)

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def copy(self, source: str, path: Path, dest_dir: Path, name: str) -> None:
        began = time.monotonic()
        if self.out_of_time():
            self.record(source, "skipped", f"no time left for {path}", began)
            return
        try:
            st = path.stat()
            if not stat.S_ISREG(st.st_mode):
                self.record(source, "skipped", f"{path} is not a regular file", began)
                return
            key = (st.st_dev, st.st_ino)
            if key in self.seen:
                self.record(source, "skipped", f"{path} already copied", began)
                return
            self.seen.add(key)
            data, info = read_capped(path)
            dest = dest_dir / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(dest, _redacted(data, self.ctx.redact))
        except OSError as exc:
            self.record(source, "failed", f"{path}: {exc.strerror or exc}", began)
            return
        kept = (
            f"kept {info.kept} of {info.size} bytes (first and last part)"
            if info.truncated
            else f"{info.size} bytes"
        )
        rel = (
            str(dest.relative_to(self.ctx.dump_dir))
            if dest.is_relative_to(self.ctx.dump_dir)
            else str(dest)
        )
        self.record(source, "ok", f"{path}: {kept}", began, rel)


def _resolve(ctx: ExtraContext, raw: str) -> list[Path]:
    """A path as the rank sees it: relative to its cwd; also under its root (containers)."""
    pid = ctx.target.pid
    candidates: list[Path] = []
    path = raw
    if not os.path.isabs(path):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = ""
        path = os.path.join(cwd, path) if cwd else path
    candidates.append(Path(path))
    if os.path.isabs(path):
        candidates.append(Path(f"/proc/{pid}/root{path}"))
    return candidates


def _first_existing(paths: list[Path]) -> Path | None:
    for p in paths:
        try:
            if p.exists():
                return p
        except OSError:
            continue
    return None


def _safe_name(text: str) -> str:
    keep = "".join(c if c.isalnum() or c in "._-" else "_" for c in text)
    return keep.strip("._")[:120] or "log"


@register(STEP)
def collect_logs(ctx: ExtraContext) -> list[StepRecord]:
    """Copy the rank's log files (capped, redacted) into ``<rank_dir>/logs``; never raises."""
    run = _Run(ctx, deadline=time.monotonic() + ctx.timeout_s)
    target = ctx.target
    dest = ctx.rank_dir / LOGS_DIR
    began = time.monotonic()
    try:
        _nccl_file(run, dest)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            began = time.monotonic()
            try:
                link = os.readlink(f"/proc/{target.pid}/fd/{fd}")
            except OSError as exc:
                run.record(name, "failed", f"cannot read fd {fd}: {exc.strerror or exc}", began)
                continue
            if not link.startswith("/") or link.endswith(" (deleted)"):
                run.record(
                    name, "skipped", f"fd {fd} is {link} (not a file that can be read back)", began
                )
                continue
            found = _first_existing([Path(f"/proc/{target.pid}/fd/{fd}"), *(_resolve(ctx, link))])
            if found is None:
                run.record(name, "failed", f"{link} not found", began)
                continue
            run.copy(name, found, dest, f"{name}.{_safe_name(Path(link).name)}")
        error_file = target.env.get("TORCHELASTIC_ERROR_FILE")
        if error_file:
            found = _first_existing(_resolve(ctx, error_file))
            if found is None:
                run.record(
                    "error_file",
                    "skipped",
                    f"{error_file} does not exist (no @record error yet)",
                    time.monotonic(),
                )
            else:
                run.copy("error_file", found, dest, "error.json")
        _extra_paths(run)
    except Exception as exc:  # a collector must never raise
        run.record("logs", "failed", f"{type(exc).__name__}: {exc}", began)
    return run.records


def _nccl_file(run: _Run, dest: Path) -> None:
    target = run.ctx.target
    template = target.env.get("NCCL_DEBUG_FILE")
    began = time.monotonic()
    if not template:
        run.record(
            "nccl_debug_file", "skipped", "NCCL_DEBUG_FILE not set (NCCL logs go to stdout)", began
        )
        return
    host = target.host or socket.gethostname()
    expanded = expand_nccl_path(template, host, target.pid)
    found = _first_existing(_resolve(run.ctx, expanded))
    if found is None:
        run.record("nccl_debug_file", "failed", f"{expanded} not found", began)
        return
    run.copy("nccl_debug_file", found, dest, f"nccl.{_safe_name(Path(expanded).name)}")


def _extra_paths(run: _Run) -> None:
    """``--log PATH`` values: copied once into ``<dump>/logs``, whichever rank comes first."""
    dest = run.ctx.dump_dir / LOGS_DIR
    for raw in run.ctx.extra_paths:
        began = time.monotonic()
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file())[:MAX_DIR_FILES]
        else:
            files = [path]
        for file in files:
            name = _safe_name(str(file).lstrip("/").replace("/", "_"))
            if (dest / name).exists():
                run.record("extra", "skipped", f"{file} already copied by another rank", began)
                continue
            run.copy("extra", file, dest, name)
