"""The first thing that ended each rank: deaths in the logs, told from consequences.

A rank that dies (an exception, a CUDA OOM, a fatal signal, the OOM killer) makes the
others time out; this view names, per rank, the earliest cause-like event that is not
itself part of that wave (timeouts, teardown, lost peers). HD030, HD031, HD032, HD039 and
HD200 read it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from hangdoc.analyzer.payloads.torch_pg import WatchdogTeardown
from hangdoc.analyzer.views.nccl_setup import setup_error_lines
from hangdoc.analyzer.views.timeline import Placed, Timeline, fint
from hangdoc.analyzer.vocabulary import (
    CONSEQUENCE_TEXT,
    F_ERROR,
    F_EXC_TYPE,
    F_EXIT_CODE,
    F_MESSAGE,
    F_SIGNAL,
    EventKind,
)

CONSEQUENCE_KINDS = frozenset(
    k.value
    for k in (
        EventKind.COLLECTIVE_TIMEOUT,
        EventKind.WATCHDOG_STATUS,
        EventKind.WATCHDOG_TEARDOWN,
        EventKind.HEARTBEAT_TIMEOUT,
        EventKind.DUMP_SIGNAL,
        EventKind.CONNECTION_LOST,
        EventKind.AGENT_TERMINATING,
        EventKind.NCCL_ERROR,
        EventKind.STORE_TIMEOUT,
        EventKind.MONITORED_BARRIER,
        EventKind.COLLECTIVE_MISMATCH,
    )
)
_CAUSE_SIGNALS = frozenset({"SIGKILL", "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT"})


def is_wave(p: Placed) -> bool:
    """Part of the wave of timeouts/teardown that follows a failure."""
    return p.kind in CONSEQUENCE_KINDS


class DeathHow(enum.StrEnum):
    """What ended a rank."""

    EXCEPTION = "exception"
    CUDA_OOM = "cuda_oom"
    CUDA_ERROR = "cuda_error"
    SIGNAL = "signal"
    HOST_OOM = "host_oom"
    EXIT = "exit"  # an exit code, no reason given
    ACTOR = "actor"  # a Ray actor died


@dataclass(frozen=True, slots=True)
class Death:
    """The first thing that ended (or broke) one rank, if it was not a consequence."""

    rank: int | None
    how: DeathHow
    summary: str
    placed: Placed
    certain: bool  # False for a bare exit code with no reason


# An NCCL call's error string in another framework's exception (Horovod's NCCL_CHECK in
# horovod/common/ops/nccl_operations.cc: "<op_name> failed: " + ncclGetErrorString(…);
# XLA's xla/service/gpu/nccl_utils.cc: "NCCL operation <expr(args)> failed: <string>";
# NVIDIA/nccl src/init.cc's strings): an NCCL failure that the parser reads as an
# NCCL_ERROR event (HD206 at communicator creation, HD200 for a remote error), not a crash.
# cupy's "NcclError: NCCL_ERROR_…" is already a consequence by CONSEQUENCE_TEXT.
_NCCL_CALL_FAILED = re.compile(
    r"\bnccl[A-Z]\w*(?:\(.*?\))? failed: (?:(?:unhandled )?(?:cuda|system) error|internal error"
    r"|invalid argument|invalid usage|remote process exited|NCCL operation in progress)"
)


def _exception_is_consequence(exc_type: str, message: str) -> bool:
    return bool(
        CONSEQUENCE_TEXT.search(exc_type)
        or CONSEQUENCE_TEXT.search(message)
        or _NCCL_CALL_FAILED.search(message)
    )


def _object_collective_got_nothing(p: Placed, exc_type: str) -> bool:
    """torch.distributed's object collectives (broadcast_object_list, all_gather_object,
    gather_object, scatter_object_list) unpickle the bytes the collective delivered in
    ``distributed_c10d._tensor_to_object``; EOFError ("Ran out of input") or an
    UnpicklingError there means the collective delivered no data because it was aborted
    (a watchdog timeout): a consequence, not a death of its own."""
    where = p.get("where") or ""
    return (
        "_tensor_to_object" in where
        and "distributed_c10d" in where
        and exc_type.rsplit(".", 1)[-1] in ("EOFError", "UnpicklingError")
    )


def _host_memory(exc_type: str, message: str) -> bool:
    """Ray's memory monitor kills a task or actor for *host* RAM and says so with an
    exception named OutOfMemoryError ("Task was killed due to the node running low on
    memory"): not a GPU OOM."""
    return "running low on memory" in message or exc_type.startswith("ray.exceptions.")


def death_of(p: Placed) -> Death | None:
    """The event as a cause candidate, or None when it is a consequence or context."""
    kind = p.kind
    exc_type, message = p.get(F_EXC_TYPE) or "", p.get(F_MESSAGE) or ""
    signal = p.get(F_SIGNAL)
    if (
        kind != EventKind.HOST_OOM_KILL
        and _host_memory(exc_type, message)
        and ("OutOfMemoryError" in exc_type or "low on memory" in message)
    ):
        return Death(
            p.rank, DeathHow.HOST_OOM, "killed for host memory (Ray memory monitor)", p, True
        )
    if kind == EventKind.CUDA_OOM:
        return Death(p.rank, DeathHow.CUDA_OOM, "CUDA out of memory" + _tried(p), p, True)
    if "OutOfMemoryError" in exc_type or "CUDA out of memory" in message:
        return Death(p.rank, DeathHow.CUDA_OOM, "CUDA out of memory" + _tried(p), p, True)
    if kind in (EventKind.EXCEPTION.value, EventKind.ERROR_FILE.value):
        if not exc_type and not message:
            return None
        if "DataLoader worker" in message or "encountered in worker" in message:
            return None  # a worker died, not the rank by itself: HD109 says so
        if "OutOfMemoryError" in exc_type or "out of memory" in message:
            return Death(p.rank, DeathHow.CUDA_OOM, f"{exc_type}: {message}"[:200], p, True)
        if _exception_is_consequence(exc_type, message) or _object_collective_got_nothing(
            p, exc_type
        ):
            return None
        return Death(
            p.rank, DeathHow.EXCEPTION, f"{exc_type}: {message}".strip(": ")[:160], p, True
        )
    if kind == EventKind.CUDA_ERROR:
        return Death(p.rank, DeathHow.CUDA_ERROR, f"CUDA error: {p.get(F_ERROR)}", p, True)
    if kind == EventKind.FATAL_SIGNAL and signal in _CAUSE_SIGNALS:
        if signal == "SIGABRT" and CONSEQUENCE_TEXT.search(p.get(F_EXC_TYPE) or ""):
            return (
                None  # "terminate called after throwing c10::DistBackendError": watchdog teardown
            )
        # A bare abort ("Fatal Python error: Aborted") is a death; after a wave of timeouts
        # it is the watchdog's teardown, which first_deaths leaves out.
        return Death(p.rank, DeathHow.SIGNAL, f"killed by {signal}", p, True)
    if kind == EventKind.HOST_OOM_KILL:
        return Death(
            p.rank, DeathHow.HOST_OOM, "killed by the kernel OOM killer (host memory)", p, True
        )
    if kind == EventKind.ACTOR_DIED:
        return Death(p.rank, DeathHow.ACTOR, "Ray actor died", p, True)
    if kind in (EventKind.WORKER_FAILED.value, EventKind.CHILD_FAILURE.value):
        code = fint(p.event, F_EXIT_CODE)
        if exc_type or message:
            if "OutOfMemoryError" in exc_type or "out of memory" in message:
                return Death(p.rank, DeathHow.CUDA_OOM, f"{exc_type}: {message}"[:200], p, True)
            if _exception_is_consequence(exc_type, message):
                return None
            return Death(
                p.rank, DeathHow.EXCEPTION, f"{exc_type}: {message}".strip(": ")[:160], p, True
            )
        if p.get("oom") == "host":
            return Death(
                p.rank, DeathHow.HOST_OOM, "killed for exceeding its memory (OOM)", p, True
            )
        if signal in _CAUSE_SIGNALS:
            shown = f" (exit code {code})" if code is not None else ""
            # A launcher-reported SIGABRT is most often the NCCL watchdog's own teardown.
            return Death(
                p.rank, DeathHow.SIGNAL, f"killed by {signal}{shown}", p, signal != "SIGABRT"
            )
        if code is not None and code > 0:
            return Death(p.rank, DeathHow.EXIT, f"exited with code {code}", p, False)
    return None


_TRIED = re.compile(r"Tried to allocate (\d+(?:\.\d+)? ?[KMGTPE]i?B)")


def _tried(p: Placed) -> str:
    tried = p.get("tried")
    if tried is None and (m := _TRIED.search(p.get(F_MESSAGE) or "")):
        tried = m.group(1)
    return f" (tried to allocate {tried})" if tried else ""


def watchdog_cuda_error(p: Placed) -> Death | None:
    """A watchdog teardown that names a CUDA error of its own rank's GPU, as a death."""
    teardown = p.event.payload_as(WatchdogTeardown)
    if teardown is None or teardown.cuda_error is None or p.rank is None:
        return None
    return Death(p.rank, DeathHow.CUDA_ERROR, "CUDA error: " + teardown.cuda_error, p, True)


_WHAT_WINDOW = 12  # lines between an abort and the what() of its exception, interleaved

# An abort (SIGABRT, exit code -6) is the teardown of a failure reported elsewhere, not a
# crash of its own, when
# * it comes after the timeouts began (the NCCL watchdog aborts its process after one);
# * its rank reports a timeout anywhere in the logs, wherever the paste puts the
#   launcher's exit line (tickets are pasted out of order);
# * the "what(): …" below its "terminate called after throwing an instance of 'T'" is a
#   collective mismatch (gloo's "op.preamble.length <= op.nbytes", DETAIL's fingerprints)
#   or a timeout (torch < 2.0's watchdog threw std::runtime_error("[Rank 7] Watchdog
#   caught collective operation timeout …")). libstdc++ prints the what() after the
#   abort line, and when ranks abort together their lines interleave: hence the window.


def _what_is_explained(p: Placed, explained: list[tuple[str, int]]) -> bool:
    """An abort whose exception's what() below it is a mismatch or a timeout."""
    if "terminate called" not in p.event.text or not p.event.line:
        return False
    line = p.event.line
    return any(
        source == p.event.source and line <= at <= line + _WHAT_WINDOW for source, at in explained
    )


def first_deaths(tl: Timeline) -> list[Death]:
    """Per rank (and for unattributed events), the earliest cause-like event, unless that
    rank already showed a consequence (a timeout, a lost peer) before it, or an agent
    SIGTERM/SIGKILL made it. Ordered by the job's order."""
    wave_seen: set[int | None] = set()
    terminated_pids = {p.event.pid for p in tl.of(EventKind.AGENT_TERMINATING)}
    # NCCL's "Last error: Cuda failure …" of a communicator-setup error is that error's
    # detail (views/nccl_setup.py, HD206), not a crash of its own.
    setup_lines = setup_error_lines(tl)
    found: dict[int | None, Death] = {}
    unranked: list[Death] = []
    any_wave = False
    wave_events = [p for p in tl.events if is_wave(p)]
    timed_out = {p.rank for p in wave_events if p.rank is not None}
    # where the failures an abort may be the teardown of were reported (mismatches too:
    # COLLECTIVE_MISMATCH is a wave kind)
    explained = [(p.event.source, p.event.line or 0) for p in wave_events]
    for p in tl.events:
        if (gpu_fault := watchdog_cuda_error(p)) is not None and p.rank not in wave_seen:
            found.setdefault(p.rank, gpu_fault)
            wave_seen.add(p.rank)
            continue
        if is_wave(p) and p.kind != EventKind.AGENT_TERMINATING:
            any_wave = True
            if p.rank is not None:
                wave_seen.add(p.rank)
            continue
        death = death_of(p)
        if death is None:
            continue
        if death.how == DeathHow.CUDA_ERROR and (p.event.source, p.event.line) in setup_lines:
            continue
        if death.how in (DeathHow.SIGNAL, DeathHow.EXIT) and p.event.pid in terminated_pids:
            continue  # the launcher killed a survivor
        if any_wave and p.rank is None:
            continue  # unranked after timeouts: unprovable
        if "SIGABRT" in death.summary and (
            any_wave or p.rank in timed_out or _what_is_explained(p, explained)
        ):
            continue  # the teardown of a reported failure (the cases above _WHAT_WINDOW)
        if p.rank is None:
            unranked.append(death)
        elif (p.rank not in found and p.rank not in wave_seen) or (
            p.rank in found and not found[p.rank].certain and death.certain
        ):
            found[p.rank] = death
    return sorted([*found.values(), *unranked], key=lambda d: d.placed.index)
