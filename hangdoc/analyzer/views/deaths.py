"""The first thing that ended each rank: deaths in the logs, told from consequences.

A rank that dies (an exception, a CUDA OOM, a fatal signal, the OOM killer) makes the
others time out; this view names, per rank, the earliest cause-like event that is not
itself part of that wave (timeouts, teardown, lost peers). HD030, HD031, HD032, HD039 and
HD200 read it.

A launcher's report of a worker that ended is read by the signal or exit status its number
means (the parsers read it by the printer's convention: payloads.launch.read_exit), not by
its words: SIGKILL is a kill from outside the process, SIGSEGV/SIGBUS/SIGILL/SIGFPE a crash
of its own, SIGABRT an abort that, where a watchdog fired and the report names no rank, is
that watchdog ending its process (the timeout's cause is the cause), and an exit status
with no reason a death that gives none (its traceback, where one is shown, is the reason).
"""

from __future__ import annotations

import enum
import weakref
from dataclasses import dataclass

from hangdoc.analyzer.model import Category
from hangdoc.analyzer.payloads.base import EventPayload, Sign
from hangdoc.analyzer.payloads.host import GpuXid
from hangdoc.analyzer.payloads.launch import (
    RAY_MEMORY_MONITOR,
    CodeStage,
    ExceptionRaised,
    FatalReport,
    FatalSignal,
    HostMemory,
    HostOomKill,
    Launcher,
    LauncherReport,
    SignalName,
)
from hangdoc.analyzer.payloads.nccl import CudaFailure, NcclWarn
from hangdoc.analyzer.payloads.torch_pg import InGroup, NcclResult, WatchdogTeardown
from hangdoc.analyzer.views.death_kind import (
    INIT_UNREAD,
    SET_UP_ROWS,
    DeathKind,
    facts_of,
    kind_of,
)
from hangdoc.analyzer.views.nccl_setup import first_running, is_setup_warn, setup_error_lines
from hangdoc.analyzer.views.nccl_setup import setup_lines as nccl_setup_lines
from hangdoc.analyzer.views.timeline import Placed, Timeline
from hangdoc.analyzer.vocabulary import EventKind, parse_enum

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
        EventKind.STALL_WATCHDOG,
    )
)
_RAY_KILLED = "killed for host memory (Ray memory monitor)"
_CAUSE_SIGNALS = frozenset(
    {
        SignalName.SIGKILL,
        SignalName.SIGSEGV,
        SignalName.SIGBUS,
        SignalName.SIGFPE,
        SignalName.SIGILL,
        SignalName.SIGABRT,
    }
)


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
    # its host memory climbed steeply to its last reading, and nothing after: no kill shown
    MEMORY_CLIMB = "memory_climb"
    ACTOR = "actor"  # a Ray actor died


@dataclass(frozen=True, slots=True)
class Death:
    """The first thing that ended (or broke) one rank, if it was not a consequence."""

    rank: int | None
    how: DeathHow
    summary: str  # for people: "killed by SIGKILL (exit code -9)", "ValueError: bad input"
    placed: Placed
    certain: bool  # False for a bare exit code with no reason
    signal: SignalName | None = None  # SIGNAL: the signal that ended it

    @property
    def payload(self) -> EventPayload:
        """What the parser read from the event's line (its error, the hardware or storage
        failure it names)."""
        return self.placed.event.payload

    @property
    def hardware(self) -> bool:
        """The failure names the GPU hardware (ECC, NVLink, off the bus): HD301's."""
        return self.payload.hardware is not None

    @property
    def gpu_suspect(self) -> Sign | None:
        """The failure is a CUDA error whose documented meaning points at the GPU or its
        driver, not for certain (Sign.GPU_DRIVER_LIKELY or GPU_DRIVER_POSSIBLE, read from
        the message catalog): HD301's weaker reading, not a crash of the program."""
        for sign in self.payload.signs:
            if sign in (Sign.GPU_DRIVER_LIKELY, Sign.GPU_DRIVER_POSSIBLE):
                return sign
        return None

    @property
    def after_fork(self) -> bool:
        """The failure is CUDA unable to initialise under state made before it, the what()
        of an abort (Sign.CUDA_AFTER_FORK): a child forked after its parent initialised
        CUDA, most often a DataLoader worker: HD109's weaker reading, not the GPU's."""
        return Sign.CUDA_AFTER_FORK in self.payload.signs

    @property
    def storage(self) -> bool:
        """The failure is a storage error (EIO, a stale handle, a full disk), or the table
        reads it as the file system's (a path writers raced on while a checkpoint was
        saved): HD110's."""
        if self.payload.storage is not None:
            return True
        found = self.kind
        return found is not None and found.category is Category.IO_STALL

    @property
    def stage(self) -> CodeStage | None:
        """The stage of the job its traceback shows it was raised in (None when the
        death is no exception, or its frames name none)."""
        raised = self.placed.event.payload_as(ExceptionRaised)
        if raised is not None:
            return raised.stage
        signal = self.placed.event.payload_as(FatalSignal)
        return signal.stage if signal is not None else None

    @property
    def kind(self) -> DeathKind | None:
        """What its own exception says failed, by the one table of views/death_kind.py
        (its errno's family, its stage, the catalog's meaning of its words, its signs):
        None when nothing there names more than a crash."""
        facts = facts_of(self.payload, self.stage, cuda_oom=self.how == DeathHow.CUDA_OOM)
        return kind_of(facts)

    @property
    def in_setup(self) -> bool:
        """Raised while the ranks set up communication (init_process_group, a
        rendezvous, a store, DDP's construction), and its words name nothing more
        specific: that set-up failed, which is a more specific cause than a crash (HD030
        says so)."""
        found = self.kind
        return found is not None and found.row.name in SET_UP_ROWS

    @property
    def setup_unread(self) -> bool:
        """Read as set-up by where it was raised alone (a framework's worker set-up), its
        words unknown, or lost with its exception line (a logged traceback cut before
        it, in a set-up entry point): the set-up most likely failed, one step weaker
        (HD030)."""
        found = self.kind
        return found is not None and (
            found.row is INIT_UNREAD
            or (found.row.name in SET_UP_ROWS and _line_lost_in_setup(self.payload))
        )

    @property
    def known_as(self) -> Category | None:
        """The category the message catalog gives the exception's words when it is
        another than a crash (a store's, a transport's, a driver's message raised as an
        exception): that failure, reported by the rank that met it."""
        raised = self.placed.event.payload_as(ExceptionRaised)
        if raised is None or raised.known_as is None:
            return None
        meant = parse_enum(Category, raised.known_as)
        return None if meant in (Category.UNKNOWN, Category.RANK_DEAD) else meant

    @property
    def worker_start(self) -> bool:
        """Raised while the rank started a child process (its traceback's innermost
        frames are multiprocessing's start path, not torch.multiprocessing starting the
        ranks nor a Pool's workers): a worker that could not start, HD109's."""
        return self.stage is CodeStage.WORKER_START

    @property
    def specific(self) -> bool:
        """What ended the rank is known as a more specific failure than a crash, which
        another rule names (views/death_kind.py's table: a CUDA out-of-memory, HD031; the
        GPU's hardware or a CUDA error documented as the GPU's or its driver's, HD301;
        storage or a checkpoint's file-system race, HD110; words the message catalog
        means as another failure; a worker process the rank could not start or a forked
        child's CUDA, HD109), set-up aside (HD030 names it). A crash reported after it
        is most often its consequence (the rank's exit, the launcher stopping the
        others), so HD030 yields to it."""
        found = self.kind
        return found is not None and found.row.name not in SET_UP_ROWS

    @property
    def read(self) -> bool:
        """What failed is known beyond "an exception": its words carry a sign the parser
        read (a consequence, an interrupt, memory, the GPU, storage) or are a catalog row's
        with a meaning, or its traceback shows the stage it was raised in. An exception
        of neither may be the cause, or have a more specific one its message does not
        give away (HD030 states it weaker)."""
        payload = self.payload
        if payload.signs or payload.hardware or payload.storage:
            return True
        raised = self.placed.event.payload_as(ExceptionRaised)
        if raised is not None and raised.known:
            return True  # the message catalog knows its words and what they mean
        if self.how is not DeathHow.EXCEPTION or self.stage not in (None, CodeStage.UNKNOWN):
            return True
        # a collective of its own refusing its arguments (not waiting: those are not deaths)
        return raised is not None and raised.in_collective

    @property
    def bare(self) -> bool:
        """An exception line with no traceback above it, ending a paste."""
        raised = self.placed.event.payload_as(ExceptionRaised)
        return raised is not None and raised.bare


# The kinds of event that can be a death by their kind (the branches of ``death_of``
# below); any other kind is one only by a sign of memory running out. A job's events
# are mostly of other kinds (NCCL's set-up lines: 13 a rank of the benchmark's), decided
# by this test alone (``deaths_at`` asks it of every event of the job).
_DEATH_KINDS = frozenset(
    {
        EventKind.EXCEPTION,
        EventKind.ERROR_FILE,
        EventKind.CUDA_OOM,
        EventKind.CUDA_ERROR,
        EventKind.FATAL_SIGNAL,
        EventKind.HOST_OOM_KILL,
        EventKind.ACTOR_DIED,
        EventKind.WORKER_FAILED,
        EventKind.CHILD_FAILURE,
        EventKind.HOST_MEMORY,
        EventKind.GPU_XID,
    }
)


def death_of(p: Placed) -> Death | None:
    """The event as a cause candidate, or None when it is a consequence or context. The
    parser read the event's error once (payloads.base.Sign); this decides on those signs."""
    kind = p.event.kind
    payload = p.event.payload
    signs = payload.signs
    if kind not in _DEATH_KINDS and (
        not signs or (Sign.HOST_OOM not in signs and Sign.CUDA_OOM not in signs)
    ):
        return None
    exc_type, message = payload.exc_type or "", payload.message or ""
    said = f"{exc_type}: {message}"
    if kind != EventKind.HOST_OOM_KILL and Sign.HOST_OOM in signs:
        return Death(p.rank, DeathHow.HOST_OOM, _RAY_KILLED, p, True)
    if Sign.PINNED_HOST_MEMORY in signs:
        # NCCL could not pin host memory for its buffers (a host allocation's "out of
        # memory", parsers/logs/nccl_stage.py): its set-up failed (HD206), the GPU's
        # memory did not run out and the process was not ended by it.
        return None
    if kind == EventKind.CUDA_OOM or Sign.CUDA_OOM in signs:
        return Death(p.rank, DeathHow.CUDA_OOM, "CUDA out of memory" + _tried(payload), p, True)
    if kind in (EventKind.EXCEPTION, EventKind.ERROR_FILE):
        if not exc_type and not message and not _line_lost_in_setup(payload):
            return None
        if Sign.DATALOADER_WORKER in signs:
            return None  # a worker died, not the rank by itself: HD109 says so
        if Sign.OUT_OF_MEMORY in signs:
            return Death(p.rank, DeathHow.CUDA_OOM, said[:200], p, True)
        if Sign.CONSEQUENCE in signs or Sign.EMPTY_COLLECTIVE in signs:
            return None
        if Sign.SHUT_DOWN in signs:
            # Raised by an object already shut down ("Event loop is closed", "DiffusionEngine
            # is closed.") or a framework's relay of a failure told above (vLLM's
            # EngineDeadError, also inside a client's HTTP 500): the evidence of a shutdown,
            # which whatever ended the job began; not a death that others waited for.
            return None
        raised = p.event.payload_as(ExceptionRaised)
        if raised is not None and raised.cause_shown:
            # A Ray wrapper whose remote exception's own line follows it: that line is the
            # failure (its words, its signs), read as a death or a consequence on its own.
            return None
        if raised is not None and raised.stage is CodeStage.TEARDOWN:
            # Raised while the process tore down (destroy_process_group, a destructor,
            # an exit handler): the work had ended, by a failure told elsewhere or none.
            return None
        if raised is not None and raised.stage is CodeStage.RANK_CHECK:
            # Raised by a check that compares the ranks (DDP's parameter shapes, FSDP's
            # forward order): the ranks differ, which the check reports; not a crash.
            return None
        if raised is not None and raised.in_wait:
            # Raised by a collective's wait for the other ranks (work.wait(), a barrier):
            # what the wait reports is a failure it saw, a peer's as often as its own
            # (gloo's pair errors of a closed peer; ProcessGroupNCCL's WorkNCCL::wait
            # rethrows the exception its watchdog set). A CUDA error among its words is
            # an event of its own (CUDA_ERROR), read as a death where it is one.
            return None
        if raised is not None and _line_lost_in_setup(raised):
            said = f"its exception line lost, raised at {_frame_call(raised)}"
        return Death(p.rank, DeathHow.EXCEPTION, said.strip(": ")[:160], p, True)
    if kind == EventKind.CUDA_ERROR:
        failure = p.event.payload_as(CudaFailure)
        if failure is not None and failure.by_nccl and not failure.fatal:
            # NCCL's report of a CUDA call it made that failed with an error which leaves
            # the process running ("Cuda failure 1 'invalid argument'"): its CUDACHECK
            # returns ncclUnhandledCudaError to the caller, and what that means (a set-up
            # failing, a collective's) is the caller's error's, HD206's and HD301's to
            # read; a kernel fault NCCL reports (the context dead) stays a death.
            return None
        error = failure.error if failure is not None else None
        return Death(p.rank, DeathHow.CUDA_ERROR, f"CUDA error: {error}", p, True)
    xid = p.event.payload_as(GpuXid) if kind == EventKind.GPU_XID else None
    if xid is not None and xid.program_fault and (meaning := xid.meaning) is not None:
        # The program's own kernel faulted on the GPU (Xid 13, 31: NVIDIA's Xid catalog,
        # payloads/xid.py): the driver killed the channel and with it the CUDA context of
        # the process on that GPU, which dies of it. A crash of that process, read from the
        # driver's line; the GPU's and the driver's own Xids are HD300's and HD301's.
        named = f"; process {xid.name}" if xid.name else ""
        said = f"its kernel faulted on the GPU (Xid {xid.xid}: {meaning.description}{named})"
        return Death(p.rank, DeathHow.CUDA_ERROR, said, p, True)
    fatal = p.event.payload_as(FatalSignal) if kind == EventKind.FATAL_SIGNAL else None
    if fatal is not None and fatal.signal in _CAUSE_SIGNALS:
        if fatal.signal == SignalName.SIGABRT and Sign.CONSEQUENCE in signs:
            # "terminate called after throwing c10::DistBackendError": watchdog teardown
            return None
        # A bare abort ("Fatal Python error: Aborted") is a death; after a wave of timeouts
        # it is the watchdog's teardown, which first_deaths leaves out.
        return Death(p.rank, DeathHow.SIGNAL, f"killed by {fatal.signal}", p, True, fatal.signal)
    if kind == EventKind.HOST_OOM_KILL:
        killer = p.event.payload_as(HostOomKill)
        if killer is not None and killer.name == RAY_MEMORY_MONITOR:
            return Death(p.rank, DeathHow.HOST_OOM, _RAY_KILLED, p, True)
        return Death(
            p.rank, DeathHow.HOST_OOM, "killed by the kernel OOM killer (host memory)", p, True
        )
    if kind == EventKind.ACTOR_DIED:
        return Death(p.rank, DeathHow.ACTOR, "Ray actor died", p, True)
    memory = p.event.payload_as(HostMemory) if kind == EventKind.HOST_MEMORY else None
    if memory is not None and memory.climbed:
        # The process's own readings climb steeply to their last (memory.py): the kernel's
        # OOM killer or the scheduler's memory limit ends such a process, and it printed
        # nothing after. Not certain: no kill is shown, only where it was going.
        used = f", {memory.percent:g}% of the host's" if memory.percent is not None else ""
        said = (
            f"its host memory climbed from {memory.low_gib:.3g} GiB to {memory.last_gib:.3g} "
            f"GiB{used} in its last readings, and it printed none after"
        )
        return Death(p.rank, DeathHow.MEMORY_CLIMB, said, p, False)
    report = p.event.payload_as(LauncherReport)
    if kind in (EventKind.WORKER_FAILED, EventKind.CHILD_FAILURE) and report is not None:
        return _reported(p, report)
    return None


def _reported(p: Placed, report: LauncherReport) -> Death | None:
    """A launcher's report of a worker that ended (torchrun, Slurm, mpirun, DeepSpeed…)."""
    exc_type, message, code = report.exc_type or "", report.message or "", report.exit_code
    if (
        p.kind == EventKind.WORKER_FAILED
        and not exc_type
        and (code is not None or report.signal is not None)
    ):
        # A launcher's line that prints how the worker ended (a catalog row's: vLLM's
        # "Worker … pid 198 died, exit code: -6", SGLang's waitpid status): its words are
        # the launcher's, not the worker's error; the number, read by its printer's
        # convention (payloads.launch.read_exit), says how it ended.
        message = ""
    if exc_type or message:
        said = f"{exc_type}: {message}"
        if Sign.CUDA_OOM in report.signs or Sign.OUT_OF_MEMORY in report.signs:
            return Death(p.rank, DeathHow.CUDA_OOM, said[:200], p, True)
        if Sign.CONSEQUENCE in report.signs or Sign.SHUT_DOWN in report.signs:
            return None
        return Death(p.rank, DeathHow.EXCEPTION, said.strip(": ")[:160], p, True)
    if report.host_oom:
        return Death(p.rank, DeathHow.HOST_OOM, "killed for exceeding its memory (OOM)", p, True)
    signal = report.signal
    if signal in _CAUSE_SIGNALS:
        shown = f" (exit code {code})" if code is not None else ""
        # A launcher-reported SIGABRT is most often the NCCL watchdog's own teardown.
        return Death(
            p.rank,
            DeathHow.SIGNAL,
            f"killed by {signal}{shown}",
            p,
            signal != SignalName.SIGABRT,
            signal,
        )
    if code is not None and code > 0:
        return Death(p.rank, DeathHow.EXIT, f"exited with code {code}", p, False)
    if code is None and signal is None and report.launcher in _ENDS_WITHOUT_CODE:
        return Death(p.rank, DeathHow.EXIT, "ended (its launcher prints no exit code)", p, False)
    return None


# Launchers whose report of a worker that ended prints no exit code: TGI's "Shard {rank}
# failed to start" / "Shard {rank} crashed" (launcher/src/main.rs: sent when the shard's
# process exited, whatever its status; parsers/logs/tgi.py), a death that gives no reason.
_ENDS_WITHOUT_CODE = frozenset({Launcher.TGI})


# The stages of set-up (the set-up entry points' stages, setup_entry_points.json).
_SETUP_STAGES = frozenset({CodeStage.SETUP, CodeStage.DEVICE_INIT, CodeStage.WORKER_INIT})


def _line_lost_in_setup(payload: EventPayload) -> bool:
    """An exception whose line the paste lost (no type, no words: a framework's logged
    traceback cut before its exception line, parsers/logs/scanner.py _cut_setup) raised
    in a set-up entry point: a failure of set-up, whatever its words were."""
    return (
        isinstance(payload, ExceptionRaised)
        and payload.bare
        and payload.unread
        and not payload.exc_type
        and not payload.message
        and payload.stage in _SETUP_STAGES
    )


def _frame_call(raised: ExceptionRaised) -> str:
    """The innermost frame's function and its source line, as a traceback shows them."""
    where = raised.where_function or "?"
    return f"{where}(): '{raised.source}'" if raised.source else f"{where}()"


def _tried(payload: EventPayload) -> str:
    return f" (tried to allocate {payload.tried})" if payload.tried else ""


def watchdog_cuda_error(p: Placed) -> Death | None:
    """A watchdog teardown that names a CUDA error of its own rank's GPU, as a death: of
    its rank, or of a process no rank is known for (a non-default group's prefix, "[PG ID
    2 PG GUID 3 Rank 1]", names its rank in that group only; sglang #8296's what())."""
    teardown = p.event.payload_as(WatchdogTeardown)
    if teardown is None or teardown.cuda_error is None:
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
    fatal = p.event.payload_as(FatalSignal)
    if fatal is None or fatal.reported_by != FatalReport.TERMINATE or not p.event.line:
        return False
    line = p.event.line
    return any(
        source == p.event.source and line <= at <= line + _WHAT_WINDOW for source, at in explained
    )


# NCCL's own results for a call made wrongly (nccl.h): ncclInvalidArgument (4: argcheck's
# "invalid root", "invalid type", "argument is NULL"; a destroyed communicator) and
# ncclInvalidUsage (5: group semantics). NCCL returns them to the caller, which throws:
# torch's NCCL_CHECK "NCCL Error 4: invalid argument", then libstdc++'s "terminate called
# after throwing …" when nothing catches it (nccl #276: DataParallel's Reduce under NCCL
# 2.5). The abort is that call's failure ending its own process, whose meaning the WARN
# carries (the catalog's nccl-usage family: the caller's bug, cause unknown), not a
# process dying of its own that others then waited for.
_CALLER_ERRORS = frozenset({NcclResult.INVALID_ARGUMENT, NcclResult.INVALID_USAGE})


def _usage_error_lines(tl: Timeline) -> list[tuple[str, int, int | None]]:
    """(source, line, pid) of each NCCL WARN whose result is the caller's error."""
    out: list[tuple[str, int, int | None]] = []
    for p in tl.of(EventKind.NCCL_WARN):
        warn = p.event.payload_as(NcclWarn)
        if warn is not None and warn.rc_name in _CALLER_ERRORS and p.event.line:
            out.append((p.event.source, p.event.line, p.event.pid))
    return out


def _after_usage_error(p: Placed, usage: list[tuple[str, int, int | None]]) -> bool:
    """An abort ("terminate called after throwing …") just below an NCCL call's
    invalid-argument or invalid-usage WARN of the same process: that call's exit."""
    fatal = p.event.payload_as(FatalSignal)
    if fatal is None or fatal.reported_by != FatalReport.TERMINATE or not p.event.line:
        return False
    line, pid = p.event.line, p.event.pid
    return any(
        source == p.event.source
        and line - _WHAT_WINDOW <= at < line
        and (pid is None or warn_pid is None or pid == warn_pid)
        for source, at, warn_pid in usage
    )


# Deaths that say nothing of why the process ended: a Ray worker lost by its raylet
# ("Worker exit type: SYSTEM_ERROR … connection error code 2. End of file": the worker's
# socket closed), an exit code with no reason, an abort (SIGABRT: the watchdog ends its
# own process so after a timeout, ProcessGroupNCCL's "To avoid data inconsistency, we are
# taking the entire process down").
def _unexplained(death: Death) -> bool:
    return (
        death.how in (DeathHow.ACTOR, DeathHow.EXIT) or death.signal == SignalName.SIGABRT
    ) and not (death.payload.exc_type or death.payload.hardware or death.payload.storage)


# The wave kinds of torch's ProcessGroupNCCL watchdog and its heartbeat monitor, which end
# their process with std::abort (SIGABRT) after a collective timed out or the watchdog
# hung (ProcessGroupNCCL.cpp: "To avoid data inconsistency, we are taking the entire
# process down", the heartbeat monitor's "Process will be terminated").
_WATCHDOG_ABORTS = frozenset(
    {EventKind.COLLECTIVE_TIMEOUT, EventKind.WATCHDOG_TEARDOWN, EventKind.HEARTBEAT_TIMEOUT}
)


def _launcher_abort(death: Death) -> bool:
    """A launcher's report that a worker ended by SIGABRT (vLLM's "exit code: -6", a
    waitpid status of 6 or 134), with no error of its own: where a watchdog fired in the
    job, wherever the paste puts its lines, that watchdog's abort of its process, not a
    first fault (the timeout's cause is the cause). Printed by the launcher, which names
    no rank: which worker aborted, and when against the timeouts, the line cannot say."""
    return (
        death.signal == SignalName.SIGABRT
        and death.placed.kind == EventKind.WORKER_FAILED
        and not death.payload.exc_type
    )


def _agent_first_abort(
    death: Death,
    watchdog_fired: bool,
    timed_out: set[int],
    reported: set[tuple[str | None, int]],
) -> bool:
    """torchrun's first failure, a worker that aborted (exit code -6), where no watchdog
    fired in the job and the worker reported nothing of the wave itself: its own abort (a
    C++ exception nobody caught, glibc's "double free or corruption", a failed check), the
    first fault, though the survivors' teardown is printed above it.

    torch's elastic agent (``SubprocessContext._poll`` in
    torch/distributed/elastic/multiprocessing/api.py) collects the workers that had ended
    with a non-zero code, then ``self.close()``s the survivors (SIGTERM, waiting for them
    to exit), and only then logs ``failed (exitcode: …) local_rank: N`` for the earliest of
    the failures it collected: what the survivors print as they go (NCCL's "[Service
    thread] Connection closed by localRank M", an INFO of src/proxy.cc ncclProxyService
    when a local peer's socket closes) comes before the line, and is that teardown. An
    abort is the watchdog's only where a watchdog or its heartbeat monitor fired
    (ProcessGroupNCCL ends its process with std::abort after a timeout) or where the
    worker itself reported a timeout or a lost peer; with neither, nothing else in the
    job aborts a process that had not failed."""
    p = death.placed
    report = p.event.payload_as(LauncherReport)
    return (
        report is not None
        and report.launcher is Launcher.TORCHRUN
        and p.kind == EventKind.WORKER_FAILED
        and p.rank is not None
        and not watchdog_fired
        and p.rank not in timed_out
        and not _reported_itself(p, reported)
    )


def _reporting_processes(wave_events: list[Placed]) -> set[tuple[str | None, int]]:
    """(host, pid) of every process that reported a timeout or teardown of its own."""
    return {
        (p.event.host, p.event.pid)
        for p in wave_events
        if p.event.pid is not None and p.kind != EventKind.AGENT_TERMINATING
    }


def _reported_itself(p: Placed, reported: set[tuple[str | None, int]]) -> bool:
    """The process this death is about (by pid, on the same host where both say one)
    reported a timeout or teardown itself, wherever the paste puts the lines: a Ray
    driver prints a worker's death when it notices it, before the worker's own streamed
    lines, and a launcher names the worker that ended after the watchdog aborted it."""
    pid, host = p.event.pid, p.event.host
    if pid is None:
        return False
    return any(
        pid == other_pid and (host is None or other_host is None or host == other_host)
        for other_host, other_pid in reported
    )


def _at_exit(death: Death) -> bool:
    """What a process prints as it exits after an uncaught exception: an abort
    ("terminate called after throwing …") of a C++ destructor that threw while the
    interpreter shut down, and the CUDA error that destructor's call failed with (its
    what(): gloo's "error == cudaSuccess. 29 vs 0 … driver shutting down", a CUDA call
    once the runtime unloads)."""
    fatal = death.placed.event.payload_as(FatalSignal)
    if fatal is not None:
        return fatal.signal == SignalName.SIGABRT and fatal.reported_by == FatalReport.TERMINATE
    return death.how == DeathHow.CUDA_ERROR


def _after_own_exception(p: Placed, raised: list[Placed]) -> bool:
    """A few lines after an uncaught exception of the same process in the same file:
    Python printed the exception's traceback and exited, and what it printed as it exited
    (``_at_exit``) is that exit. The exception is the story, a cause or a consequence."""
    if p.event.line is None:
        return False
    return any(
        e.event.source == p.event.source
        and e.rank == p.rank
        and e.event.pid == p.event.pid
        and e.event.line is not None
        and 0 < p.event.line - e.event.line <= _WHAT_WINDOW
        for e in raised
    )


# first_deaths of each timeline: six rules and the silence view ask for it, and it
# reads every event of the job (a timeline is never changed once built).
_FIRST_DEATHS: weakref.WeakKeyDictionary[Timeline, tuple[Death, ...]] = weakref.WeakKeyDictionary()


def first_deaths(tl: Timeline) -> list[Death]:
    """Per rank (and for unattributed events), the earliest cause-like event, unless that
    rank already showed a consequence (a timeout, a lost peer) before it, or an agent
    SIGTERM/SIGKILL made it. Ordered by the job's order."""
    found = _FIRST_DEATHS.get(tl)
    if found is None:
        found = _FIRST_DEATHS[tl] = tuple(_first_deaths(tl))
    return list(found)


# death_of of every event of each timeline, by the event's index: first_deaths reads it
# for every event, and HD110 for the lines that are deaths (kept as _FIRST_DEATHS is).
_DEATHS_AT: weakref.WeakKeyDictionary[Timeline, tuple[Death | None, ...]] = (
    weakref.WeakKeyDictionary()
)


def deaths_at(tl: Timeline) -> tuple[Death | None, ...]:
    """``death_of`` of each event of the timeline, at the event's index, read once."""
    found = _DEATHS_AT.get(tl)
    if found is None:
        found = _DEATHS_AT[tl] = tuple(death_of(p) for p in tl.events)
    return found


def death_lines(tl: Timeline) -> frozenset[tuple[str, int | None]]:
    """(file, line) of every event that is a cause candidate (``death_of``)."""
    at = deaths_at(tl)
    return frozenset((p.event.source, p.event.line) for p in tl.events if at[p.index] is not None)


def _first_deaths(tl: Timeline) -> list[Death]:
    at = deaths_at(tl)
    wave_seen: set[int | None] = set()
    terminated_pids = {p.event.pid for p in tl.of(EventKind.AGENT_TERMINATING)}
    # NCCL's "Last error: Cuda failure …" of a communicator-setup error is that error's
    # detail (views/nccl_setup.py, HD206), not a crash of its own.
    # So is a CUDA failure NCCL WARNed about from its setup code (the same view).
    setup_lines = setup_error_lines(tl) | nccl_setup_lines(tl)
    # A CUDA failure NCCL WARNed about from its set-up code (transport.cc, init.cc …: the
    # parser marks it) before anything shows collectives running is that set-up failing,
    # whatever else the set-up's failure printed: a proxy's failed Connect beside it
    # (HD200 names the set-up stage then) takes it out of setup_lines, not out of set-up.
    running_from = first_running(tl)
    found: dict[int | None, Death] = {}
    unranked: list[Death] = []
    any_wave = False
    wave_events = [p for p in tl.events if p.kind in CONSEQUENCE_KINDS]  # (is_wave)
    timed_out = {p.rank for p in wave_events if p.rank is not None}
    reported = _reporting_processes(wave_events)
    # Ranks that raised an exception which is no death of its own (a consequence, a
    # wait's report, an error while tearing down): a bare exit of theirs is that
    # exception's, wherever the paste puts the launcher's line.
    ended_by_exception = {
        p.rank
        for p in tl.of(EventKind.EXCEPTION)
        if p.rank is not None and p.event.payload.exc_type and at[p.index] is None
    }
    # where the failures an abort may be the teardown of were reported (mismatches too:
    # COLLECTIVE_MISMATCH is a wave kind)
    explained = [(p.event.source, p.event.line or 0) for p in wave_events]
    usage_lines = _usage_error_lines(tl)
    watchdog_fired = any(p.kind in _WATCHDOG_ABORTS for p in wave_events)
    raised: list[Placed] = []  # the exceptions so far, consequences too
    # The lines a check across ranks reported a mismatch on: an exception read from the
    # same line is that check raising its report (DETAIL's fingerprints, FSDP's forward
    # order check), the mismatch's, not a crash of the rank.
    mismatched = {
        (p.event.source, p.event.line)
        for p in wave_events
        if p.kind == EventKind.COLLECTIVE_MISMATCH and p.event.line
    }
    # Where a failure more specific than a crash was read (a CUDA OOM, the GPU's hardware,
    # storage …: Death.specific): an abort whose what() below it is one of these is that
    # failure ending the process (c10's "terminate called after throwing an instance of
    # 'c10::Error'" then "what():  CUDA error: out of memory"), read from its own line.
    specific_whats = [
        (p.event.source, p.event.line)
        for p in tl.events
        if p.event.line and (d := at[p.index]) is not None and d.specific
    ]
    for p in tl.events:
        kind = p.kind
        if (
            at[p.index] is None
            and kind not in CONSEQUENCE_KINDS
            and kind != EventKind.EXCEPTION
            and not isinstance(p.event.payload, WatchdogTeardown)
        ):
            continue  # (none of the branches below reads it: most of a job's events)
        if (gpu_fault := watchdog_cuda_error(p)) is not None and p.rank is None:
            # The process's own abort, as an unranked death is read (below): a cause
            # unless timeouts came before it, whose teardown it may be for all we know.
            if not any_wave:
                unranked.append(gpu_fault)
            any_wave = True
            continue
        if gpu_fault is not None and p.rank not in wave_seen:
            found.setdefault(p.rank, gpu_fault)
            wave_seen.add(p.rank)
            continue
        if is_wave(p) and p.kind != EventKind.AGENT_TERMINATING:
            any_wave = True
            if p.rank is not None:
                wave_seen.add(p.rank)
            continue
        if p.kind == EventKind.EXCEPTION:
            raised.append(p)
        death = at[p.index]
        if death is None:
            continue
        if death.signal == SignalName.SIGABRT and _what_is_explained(p, specific_whats):
            continue  # the abort of a specific failure, which its what() line names
        if death.signal == SignalName.SIGABRT and Sign.ABORTED_BY_TRANSPORT in death.payload.signs:
            continue  # the abort of a transport's failure (its what(): HD200's)
        if death.signal == SignalName.SIGABRT and _after_usage_error(p, usage_lines):
            continue  # an NCCL call made wrongly, thrown by its own process
        if death.how == DeathHow.CUDA_ERROR and (
            (p.event.source, p.event.line) in setup_lines
            or (p.index < running_from and is_setup_warn(p))
        ):
            continue
        if death.how == DeathHow.EXCEPTION and (p.event.source, p.event.line) in mismatched:
            continue
        if death.how in (DeathHow.SIGNAL, DeathHow.EXIT) and p.event.pid in terminated_pids:
            continue  # the launcher killed a survivor
        if _unexplained(death) and (
            (p.rank is not None and (p.rank in timed_out or p.rank in ended_by_exception))
            or _reported_itself(p, reported)
        ):
            continue  # the end of a process that timed out itself: its teardown
        if _at_exit(death) and _after_own_exception(p, raised):
            continue  # the exit of an uncaught exception already read (its destructors)
        if any_wave and p.rank is None:
            continue  # unranked after timeouts: unprovable
        if p.rank is None and watchdog_fired and _launcher_abort(death):
            continue  # a worker's abort, no rank named, where a watchdog fired: its own
        if death.signal == SignalName.SIGABRT and (
            (any_wave and not _agent_first_abort(death, watchdog_fired, timed_out, reported))
            or p.rank in timed_out
            or _what_is_explained(p, explained)
        ):
            continue  # the teardown of a reported failure (the cases above _WHAT_WINDOW)
        if p.rank is None:
            unranked.append(death)
        elif (p.rank not in found and p.rank not in wave_seen) or (
            p.rank in found and not found[p.rank].certain and death.certain
        ):
            found[p.rank] = death
    if not found and not unranked and not any_wave:
        stopped = _stopped_after_an_exit(tl)
        if stopped is not None:
            unranked.append(stopped)
    return sorted([*found.values(), *unranked], key=lambda d: d.placed.index)


def _stopped_after_an_exit(tl: Timeline) -> Death | None:
    """DeepSpeed's launcher killing its workers when nothing says it was interrupted: a
    worker had exited with a non-zero code (its line may be cut away), as a death that
    gives no reason.

    deepspeed/launcher/launch.py runs ``sigkill_handler`` ("Killing subprocess <pid>" for
    every worker) in two cases only: its poll loop saw a worker end with a non-zero return
    code, or the launcher got SIGINT or SIGTERM, which it then reports ("Main process
    received SIGINT, exiting"; a terminal's "^C" echo before the first kill, or a
    KeyboardInterrupt, says the same). With neither shown, and no timeout before (a
    timed-out worker's abort would have set it off), a worker's exit set it off."""
    kills = [p for p in tl.of(EventKind.AGENT_TERMINATING) if _by_deepspeed(p)]
    if not kills:
        return None
    if any(Sign.INTERRUPT in p.event.payload.signs for p in tl.events):
        return None  # a person stopped it: Ctrl-C echoed, a KeyboardInterrupt
    if any(_by_deepspeed(p) for p in tl.of(EventKind.AGENT_SIGNAL)):
        return None  # the launcher itself was signalled (SIGINT, SIGTERM)
    return Death(
        None,
        DeathHow.EXIT,
        "a worker exited with an error (DeepSpeed's launcher then killed the others: "
        "sigkill_handler)",
        kills[0],
        False,
    )


def _by_deepspeed(p: Placed) -> bool:
    report = p.event.payload_as(LauncherReport)
    return report is not None and report.launcher is Launcher.DEEPSPEED


# The launchers whose report names the worker that ended (torchrun's "failed (exitcode: …)",
# its ChildFailedError table, Slurm's, DeepSpeed's, torch.multiprocessing's, Lightning's).
_REPORT_KINDS = frozenset({EventKind.WORKER_FAILED.value, EventKind.CHILD_FAILURE.value})


def one_failure(failures: list[Death]) -> bool:
    """The failures are one line printed once (an exception and the CUDA error its
    message names are two readings of one line) by the process that failed: one worker's
    failure. The same exception printed by two workers is folded into one event that
    counts the repeat; a shell's "Killed" is about the command it ran (the launcher), not
    a worker. An abort's what() below it, and a kernel's device-side assertion that an
    exception below it raises, are more lines of the same failure (the assertion is
    printed once per failing GPU thread, so its repeats are that kernel's)."""
    lines = {(d.placed.event.source, d.placed.event.line) for d in failures}
    raised = _raised_later(failures)
    return (
        len(lines - _whats_of_aborts(failures) - raised) == 1
        and all(
            d.placed.event.repeats == 0
            for d in failures
            if (d.placed.event.source, d.placed.event.line) not in raised
        )
        and not any(_by_shell(d) for d in failures)
    )


def _whats_of_aborts(failures: list[Death]) -> set[tuple[str, int | None]]:
    """The lines of failures that are the what() of an abort among them: libstdc++'s
    "terminate called after throwing an instance of 'c10::Error'" is followed by "what():
    CUDA error: an illegal memory access …" (its exception's message), one process's one
    failure read twice: the abort, and the error its what() names."""
    aborts = [
        (d.placed.event.source, d.placed.event.line)
        for d in failures
        if (fatal := d.placed.event.payload_as(FatalSignal)) is not None
        and fatal.reported_by == FatalReport.TERMINATE
        and d.placed.event.line
    ]
    return {
        (d.placed.event.source, line)
        for d in failures
        if (line := d.placed.event.line)
        and any(
            source == d.placed.event.source and at is not None and at < line <= at + _WHAT_WINDOW
            for source, at in aborts
        )
    }


def _raised_later(failures: list[Death]) -> set[tuple[str, int | None]]:
    """The lines of CUDA errors that an exception among the failures, below them in the
    same file, raises: a kernel's device-side assertion ("block: [0,0,0], thread: [28,0,0]
    Assertion `…` failed.") leaves its process's context with "device-side assert
    triggered", which the next CUDA call of that process raises ("RuntimeError: CUDA
    error: device-side assert triggered"): one failure, printed by the kernel and then by
    the exception. Only where no other failure's line comes between them."""
    ordered = sorted(failures, key=lambda d: d.placed.index)
    out: set[tuple[str, int | None]] = set()
    for k, d in enumerate(ordered):
        failure = d.placed.event.payload_as(CudaFailure)
        if d.how is not DeathHow.CUDA_ERROR or failure is None or not failure.error:
            continue
        later = ordered[k + 1] if k + 1 < len(ordered) else None
        if (
            later is not None
            and later.how is DeathHow.EXCEPTION
            and later.placed.event.source == d.placed.event.source
            and failure.error in (later.payload.message or "")
        ):
            out.add((d.placed.event.source, d.placed.event.line))
    return out


def _by_shell(death: Death) -> bool:
    fatal = death.placed.event.payload_as(FatalSignal)
    return fatal is not None and fatal.reported_by == FatalReport.SHELL


def one_exit(deaths: list[Death]) -> Death | None:
    """The one rank a launcher reports exiting with an error code of its own (Slurm's
    ``srun: error: node: task 3: Exited with exit code 1``, torchrun's ``failed
    (exitcode: 1) local_rank: 3``, torch.multiprocessing's ``process 3 terminated with
    exit code 1``, DeepSpeed's ``… '--local_rank=3'] exits with return code = 1``,
    Lightning's ``[rank: 3] Child process with PID … terminated with code 1``), None when
    it reports none or several. The workers it stopped afterwards end by its signal
    (``tasks 0-2: Terminated``), which is no death here. A failure whose own lines name
    no rank (``one_failure``) beside it is that worker's."""
    exits = [
        d
        for d in deaths
        if d.how == DeathHow.EXIT and d.rank is not None and d.placed.kind in _REPORT_KINDS
    ]
    return exits[0] if len({d.rank for d in exits}) == 1 else None


def one_ended(deaths: list[Death], failure: list[Death]) -> Death | None:
    """The one rank a launcher reports ending, by an exit code (``one_exit``) or by the
    signal the failure's own lines show its process ending by, None when it reports none,
    several, or a signal the failure does not show. torch.multiprocessing's
    ``ProcessExitedException: process 3 terminated with signal SIGABRT`` (spawn.py
    ProcessContext.join: "process %d terminated with signal %s", the index spawn started
    the process at, which it passes to the function as its rank) beside an unranked
    "terminate called after throwing …" (an abort: SIGABRT) is that abort's process; a
    launcher's SIGKILL beside a Python traceback is not (the traceback's process exits
    with code 1), and a second worker reported ending leaves it open."""
    exited = one_exit(deaths)
    if exited is not None:
        return exited
    ended = [
        d
        for d in deaths
        if d.rank is not None and d.placed.kind in _REPORT_KINDS and d.how is not DeathHow.ACTOR
    ]
    if len({d.rank for d in ended}) != 1 or ended[0].how is not DeathHow.SIGNAL:
        return None
    shown = {
        fatal.signal
        for d in failure
        if (fatal := d.placed.event.payload_as(FatalSignal)) is not None
    }
    return ended[0] if ended[0].signal in shown else None


# What a process prints about its own rank as it goes down: ~ProcessGroupNCCL's reason
# for aborting its communicators, "Process Group destroyed on rank N" (ProcessGroupNCCL.cpp:
# abortReason = c10::str("Process Group destroyed on rank ", rank_), which C10D_NCCL_CHECK
# prints under a failed ncclCommAbort's "NCCL error in: …"), the watchdog's own teardown
# under its "[Rank N]" prefix: WATCHDOG_TEARDOWN events, each the process's own group's.
_OWN_RANK_KINDS = frozenset({EventKind.WATCHDOG_TEARDOWN})


def own_rank_named(tl: Timeline, failure: list[Death]) -> Death | None:
    """The failure as the rank that the lines its process printed as it went down name,
    None when they name none or several. A failure whose own lines name no rank (one
    traceback, its abort and what()) is followed, within an abort's what() window in the
    same file and by the same process where both lines give a pid, by the teardown of its
    own process group: an uncaught exception ends the interpreter, the group's destructor
    aborts its communicators and prints its rank (timm: a device-side assert, then
    "terminate called …", "what(): NCCL error …", "Process Group destroyed on rank 0").
    Any other rank named in that window leaves it open: lines of several processes."""
    last = max(failure, key=lambda d: d.placed.index).placed
    source, line = last.event.source, last.event.line
    if line is None:
        return None
    window = [
        p
        for p in tl.events
        if p.event.source == source
        and p.event.line is not None
        and line < p.event.line <= line + _WHAT_WINDOW
        and p.rank is not None
    ]
    ranks = {p.rank for p in window}
    own = [
        p
        for p in window
        if p.kind in _OWN_RANK_KINDS
        and (p.event.pid is None or last.event.pid is None or p.event.pid == last.event.pid)
    ]
    if len(ranks) != 1 or not own:
        return None
    first = failure[0]
    return Death(own[0].rank, first.how, first.summary, own[0], True, first.signal)


def group_rank_named(tl: Timeline, failure: list[Death]) -> Death | None:
    """The failure as the rank its own process group's prefix names, where nothing in the
    job names a global rank: torch's watchdog prints "[PG ID 2 PG GUID 3 Rank 1] Process
    group watchdog thread terminated with exception: CUDA error: …" (ProcessGroupNCCL's
    logPrefix: the group's rank of the process whose watchdog saw its own GPU fail), the
    rank within that group, global only in the default group (parsers/logs/attribution.py
    gives only that one as the line's rank). With no other numbering of the processes in
    the paste (a serving engine's tensor-parallel group, most often the whole world), the
    group's rank is the name the artifacts give the process that died; beside global
    ranks, a second numbering is not mixed in. One group rank only: several name none."""
    if tl.ranks():
        return None
    named = [
        d for d in failure if isinstance(d.payload, InGroup) and d.payload.group_rank is not None
    ]
    if len({d.payload.group_rank for d in named if isinstance(d.payload, InGroup)}) != 1:
        return None
    first, payload = named[0], named[0].payload
    assert isinstance(payload, InGroup)
    return Death(
        payload.group_rank, first.how, first.summary, first.placed, first.certain, first.signal
    )


@dataclass(frozen=True, slots=True)
class NamedRank:
    """The rank a failure whose own lines name none is taken to be, and the line that
    names it (``death``: the failure as that line's), with the reading for people."""

    rank: int
    death: Death
    reading: str


def rank_of_failure(tl: Timeline, deaths: list[Death], failure: list[Death]) -> NamedRank | None:
    """The rank of one process's failure (``one_failure``) whose own lines name none, from
    the other messages that name the dying process: the launcher's report of the one worker
    that ended so (``one_ended``), what its process printed as it went down
    (``own_rank_named``), its own process group's prefix where nothing names a global rank
    (``group_rank_named``). None when none of them names one rank."""
    if (ended := one_ended(deaths, failure)) is not None and ended.rank is not None:
        said = ended.placed.event.text.strip()[:120]
        return NamedRank(
            ended.rank,
            ended,
            f"The failure's own lines name no rank; the launcher reports rank {ended.rank} as "
            f"the one worker that ended with an error of its own ({said}), and the others as "
            "stopped after it: the failure is taken to be that worker's.",
        )
    if (own := own_rank_named(tl, failure)) is not None and own.rank is not None:
        said = own.placed.event.text.strip()[:120]
        return NamedRank(
            own.rank,
            own,
            "The failure's own lines name no rank; what its process printed as it went "
            f"down, just below them, names rank {own.rank} ({said}): the failure is taken "
            "to be that rank's.",
        )
    if (grouped := group_rank_named(tl, failure)) is not None and grouped.rank is not None:
        return NamedRank(
            grouped.rank,
            grouped,
            "Nothing in these logs names a global rank; the failure's own process-group "
            f"prefix names the process rank {grouped.rank} of its group, the only numbering "
            "the logs give it.",
        )
    return None
