"""A rank died first; the others then timed out waiting for it

## What it means
One rank's process ended — an uncaught Python exception, a segmentation fault, a
SIGKILL (most often the kernel's out-of-memory killer or the scheduler), a Ray actor
death — before any other rank reported a problem. Every rank that later timed out in a
collective, lost its connection to a peer, or was sent SIGTERM by the launcher was
waiting for the dead one: those lines are the consequence, this is the cause.

## Why it hangs
A collective completes only when all members join. Once a member is gone the others
wait in their next collective until the process-group timeout (10 to 30 minutes), and
then the watchdog or the launcher tears the whole job down, flooding the logs with
timeout messages that hide the original failure.

## Evidence used
Log events of every rank in time order (rules/timeline.py): Python tracebacks, fatal
signals, `torchrun` exit codes and ChildFailedError entries, TORCHELASTIC error files,
Slurm/mpirun/DeepSpeed launcher reports, kernel OOM-killer lines. An exception is not a
cause when its message is itself a consequence (a timeout, an NCCL error, a lost peer,
SIGTERM). torchrun's "Root Cause (first observed failure)" is *not* trusted: it is only
the first rank to exit on that node, often a victim. A bare non-zero exit code with no
reason gives a warning only.

## How to confirm
Read the culprit's log around the cited line: its traceback or signal is the failure.
Check that every other rank's first error is later (or is a timeout). For SIGKILL,
look at `dmesg -T | grep -i -e oom -e killed` on that node and at the scheduler's
records (time or memory limits).

## How to fix
Fix the failure on the culprit rank (the exception, or the memory use that got it
killed). To fail fast instead of hanging, keep `TORCH_NCCL_ASYNC_ERROR_HANDLING`
enabled (the default), use `torchrun` (it tears down the other ranks when one exits),
and wrap the entry point with `torch.distributed.elastic.multiprocessing.errors.record`
so the error file names the exception.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from hangdoc.analyzer.model import Category, Finding, Severity
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.hd301_gpu_ecc_or_lost import HARDWARE
from hangdoc.rules.timeline import (
    F_ERROR,
    F_EXC_TYPE,
    F_EXIT_CODE,
    F_MESSAGE,
    F_PID,
    F_SIGNAL,
    EventKind,
    Placed,
    Timeline,
    fint,
    limited_refs,
    precedes_wave,
    ranks_text,
    timeline_of,
    victims,
    wave,
)

# Messages that a rank prints *because another rank failed* (or because the job was
# torn down): never the cause of a hang by themselves.
CONSEQUENCE_TEXT = re.compile(
    r"timed out|timeout|watchdog|DistBackendError|NCCL error|nccl\w*Error|remote process exiting|"
    r"Connection closed by peer|Connection reset by peer|Read error|pair closure|monitoredBarrier|"
    r"aborted|Signal 15|SIGTERM|KeyboardInterrupt|Detected mismatch between collectives|"
    r"DistStoreError|DistNetworkError|Rendezvous|Broken pipe|Socket Timeout|ChildFailedError|"
    r"NCCL communicator|ProcessGroup\w* is|heartbeat|collective operation|SignalException|"
    r"got signal: 15|Terminated",
    re.IGNORECASE,
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


@dataclass(frozen=True, slots=True)
class Death:
    """The first thing that ended (or broke) one rank, if it was not a consequence."""

    rank: int | None
    how: str  # exception | cuda_oom | cuda_error | signal | host_oom | exit | actor
    summary: str
    placed: Placed
    certain: bool  # False for a bare exit code with no reason


def _exception_is_consequence(exc_type: str, message: str) -> bool:
    return bool(CONSEQUENCE_TEXT.search(exc_type) or CONSEQUENCE_TEXT.search(message))


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
        return Death(p.rank, "host_oom", "killed for host memory (Ray memory monitor)", p, True)
    if kind == EventKind.CUDA_OOM:
        return Death(p.rank, "cuda_oom", "CUDA out of memory" + _tried(p), p, True)
    if "OutOfMemoryError" in exc_type or "CUDA out of memory" in message:
        return Death(p.rank, "cuda_oom", "CUDA out of memory" + _tried(p), p, True)
    if kind in (EventKind.EXCEPTION.value, EventKind.ERROR_FILE.value):
        if not exc_type and not message:
            return None
        if "DataLoader worker" in message or "encountered in worker" in message:
            return None  # a worker died, not the rank by itself: HD109 says so
        if "OutOfMemoryError" in exc_type or "out of memory" in message:
            return Death(p.rank, "cuda_oom", f"{exc_type}: {message}"[:200], p, True)
        if _exception_is_consequence(exc_type, message):
            return None
        return Death(p.rank, "exception", f"{exc_type}: {message}".strip(": ")[:160], p, True)
    if kind == EventKind.CUDA_ERROR:
        return Death(p.rank, "cuda_error", f"CUDA error: {p.get(F_ERROR)}", p, True)
    if kind == EventKind.FATAL_SIGNAL and signal in _CAUSE_SIGNALS:
        if signal == "SIGABRT" and CONSEQUENCE_TEXT.search(p.get(F_EXC_TYPE) or "DistBackendError"):
            return (
                None  # "terminate called after throwing c10::DistBackendError": watchdog teardown
            )
        return Death(p.rank, "signal", f"killed by {signal}", p, True)
    if kind == EventKind.HOST_OOM_KILL:
        return Death(p.rank, "host_oom", "killed by the kernel OOM killer (host memory)", p, True)
    if kind == EventKind.ACTOR_DIED:
        return Death(p.rank, "actor", "Ray actor died", p, True)
    if kind in (EventKind.WORKER_FAILED.value, EventKind.CHILD_FAILURE.value):
        code = fint(p.event, F_EXIT_CODE)
        if exc_type or message:
            if "OutOfMemoryError" in exc_type or "out of memory" in message:
                return Death(p.rank, "cuda_oom", f"{exc_type}: {message}"[:200], p, True)
            if _exception_is_consequence(exc_type, message):
                return None
            return Death(p.rank, "exception", f"{exc_type}: {message}".strip(": ")[:160], p, True)
        if p.get("oom") == "host":
            return Death(p.rank, "host_oom", "killed for exceeding its memory (OOM)", p, True)
        if signal in _CAUSE_SIGNALS:
            shown = f" (exit code {code})" if code is not None else ""
            # A launcher-reported SIGABRT is most often the NCCL watchdog's own teardown.
            return Death(p.rank, "signal", f"killed by {signal}{shown}", p, signal != "SIGABRT")
        if code is not None and code > 0:
            return Death(p.rank, "exit", f"exited with code {code}", p, False)
    return None


_TRIED = re.compile(r"Tried to allocate (\d+(?:\.\d+)? ?[KMGTPE]i?B)")


def _tried(p: Placed) -> str:
    tried = p.get("tried")
    if tried is None and (m := _TRIED.search(p.get(F_MESSAGE) or "")):
        tried = m.group(1)
    return f" (tried to allocate {tried})" if tried else ""


def first_deaths(tl: Timeline) -> list[Death]:
    """Per rank (and for unattributed events), the earliest cause-like event, unless that
    rank already showed a consequence (a timeout, a lost peer) before it, or an agent
    SIGTERM/SIGKILL made it. Ordered by the job's order."""
    wave_seen: set[int | None] = set()
    terminated_pids = {p.get(F_PID) for p in tl.of(EventKind.AGENT_TERMINATING)}
    found: dict[int | None, Death] = {}
    unranked: list[Death] = []
    any_wave = False
    for p in tl.events:
        if is_wave(p) and p.kind != EventKind.AGENT_TERMINATING:
            any_wave = True
            if p.rank is not None:
                wave_seen.add(p.rank)
            continue
        death = death_of(p)
        if death is None:
            continue
        if death.how in ("signal", "exit") and p.get(F_PID) in terminated_pids:
            continue  # the launcher killed a survivor
        if any_wave and (p.rank is None or "SIGABRT" in death.summary):
            continue  # an abort after timeouts is the watchdog's teardown; unranked, unprovable
        if p.rank is None:
            unranked.append(death)
        elif (p.rank not in found and p.rank not in wave_seen) or (
            p.rank in found and not found[p.rank].certain and death.certain
        ):
            found[p.rank] = death
    return sorted([*found.values(), *unranked], key=lambda d: d.placed.index)


_HOW = {
    "exception": "raised an exception",
    "signal": "was killed by a signal",
    "host_oom": "was killed by the kernel OOM killer",
    "exit": "exited with an error",
    "actor": "died (Ray actor)",
    "cuda_error": "hit a CUDA error",
}


class RankDiedFirst(Rule):
    __doc__ = __doc__
    id = "HD030"
    name = "rank-died-first"
    summary = "a rank crashed or was killed before the others timed out"
    categories = (Category.RANK_DEAD,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = timeline_of(ctx.evidence)
        deaths = [
            d for d in first_deaths(tl) if d.how != "cuda_oom" and not HARDWARE.search(d.summary)
        ]
        if not deaths:
            return
        wave_events = wave(tl)
        leading = [d for d in deaths if precedes_wave(d.placed, wave_events) is not False]
        if not leading:
            return  # every failure came after the timeouts: consequences
        certain = [d for d in leading if d.certain]
        chosen = certain or leading
        first = chosen[0]
        ordered = precedes_wave(first.placed, wave_events)
        culprits = sorted({d.rank for d in chosen if d.rank is not None})
        waiting = sorted(victims(tl) - set(culprits))
        yield self._finding(first, chosen, culprits, waiting, ordered, bool(certain), wave_events)

    def _finding(
        self,
        first: Death,
        chosen: list[Death],
        culprits: list[int],
        waiting: list[int],
        ordered: bool | None,
        certain: bool,
        wave_events: list[Placed],
    ) -> Finding:
        who = ranks_text(culprits) if culprits else "a process (rank unknown)"
        if len(culprits) > 1:
            title = f"{who} failed first ({first.summary})"
        else:
            title = f"{who} {_HOW.get(first.how, 'failed')} first: {first.summary}"
        if waiting:
            title += f"; {ranks_text(waiting)} then timed out or lost their peer"
        lines = [
            f"{who} failed before any timeout: {first.summary}.",
            "The timeouts and teardown messages of the other ranks are the consequence: "
            "they were waiting for it in a collective."
            if wave_events
            else "No other rank reported a timeout in these logs; the job stopped because "
            "this rank did.",
        ]
        if ordered is None and wave_events:
            lines.append(
                "The logs carry no times that order this failure against the timeouts; "
                "it is taken as the cause because it is not itself a timeout."
            )
        if first.how == "signal" and "SIGKILL" in first.summary:
            lines.append(
                "SIGKILL is usually the kernel OOM killer (host memory) or the "
                "scheduler (time/memory limit); check dmesg and the scheduler log."
            )
        if not certain:
            lines.append(
                "The logs give no reason for the exit: collect the rank's stderr or "
                "its TORCHELASTIC_ERROR_FILE (decorate main with @record)."
            )
        severity = Severity.CRITICAL if certain else Severity.WARNING
        confidence = 0.9 if certain and ordered else 0.75 if certain else 0.4
        return Finding(
            rule=self.id,
            category=Category.RANK_DEAD,
            severity=severity,
            title=title,
            explanation=" ".join(lines),
            fix=_fix(first),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(waiting),
            evidence=tuple(limited_refs([d.placed for d in chosen], limit=6)),
            confidence=confidence,
        )


def _fix(death: Death) -> str:
    if death.how == "host_oom" or "SIGKILL" in death.summary:
        return (
            "Reduce host memory use on that rank (dataloader workers and prefetch, "
            "pinned memory, loading whole checkpoints into RAM), or raise the job's memory "
            "limit; if the scheduler killed it, raise the time limit."
        )
    if death.how == "signal":
        return (
            "A native crash: run the rank with PYTHONFAULTHANDLER=1 and "
            "TORCH_SHOW_CPP_STACKTRACES=1 to get its stack, and check for mismatched "
            "CUDA/NCCL/driver versions or a bad extension module."
        )
    return (
        "Fix the exception on the culprit rank; wrap the entry point with "
        "torch.distributed.elastic.multiprocessing.errors.record so torchrun reports it, "
        "and make every rank fail fast (keep TORCH_NCCL_ASYNC_ERROR_HANDLING enabled)."
    )


RULE = RankDiedFirst
