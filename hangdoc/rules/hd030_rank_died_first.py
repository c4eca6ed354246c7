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
Log events of every rank in time order (analyzer/views/timeline.py): Python tracebacks, fatal
signals, `torchrun` exit codes and ChildFailedError entries, TORCHELASTIC error files,
Slurm/mpirun/DeepSpeed launcher reports, kernel OOM-killer lines, gdb's report of the
signal that ended a program ("Program terminated with signal SIGSEGV, Segmentation fault."
on opening its core), a kernel's device-side assert (CUDA's "block: [22,0,0], thread:
[64,0,0] Assertion `…` failed.", which leaves the process's context with "device-side
assert triggered"). A Ray wrapper ("RayTaskError(RuntimeError): ray::…") whose remote
exception's own line follows it is that exception, read on its line. An exception is not a
cause when its message is itself a consequence (a timeout, an NCCL error, a lost peer,
SIGTERM); a storage error (EIO, a stale handle, a full disk) or a save's failed
file-system call is HD110's, a CUDA error whose documented meaning points at the GPU or
its driver (the message catalog's cuda rows: a kernel cut by the device's run-time limit,
an unknown internal error) is HD301's, and a CUDA failure NCCL WARNed about from its set-up
code before anything ran is the communicator's set-up failing (HD206's, or HD200's where
a proxy's failed Connect sits beside it). NCCL's report of a CUDA call it made, "Cuda
failure 1 'invalid argument'" (a WARN, or a "Last error:"), is no crash at all: its
CUDACHECK returns the error to the caller and the process goes on; only an error that ends
the process wherever it is reported (a kernel fault, the GPU's own) is a death there. A
worker process the rank could not start (its traceback ends in multiprocessing's start
path) is HD109's. A SIGBUS whose native backtrace (UCX's, under its "Caught signal 7
(Bus error: …)") runs through libnccl, before anything shows collectives or steps
running, is NCCL's shared memory on a /dev/shm too small to back it (a container's 64 MB
default): named as the communicator's set-up failing, with the fix of --shm-size /
--ipc=host (after hours of steps, the same signature is a death of its own). torchrun's
"Root Cause (first observed failure)" is *not* trusted: it is only the first rank to exit
on that node, often a victim. Also read: torch.multiprocessing's "process N terminated
with signal SIGKILL / exit code N" (N is the spawn index), mpirun's "The first process to
do so was: Process name: [[j,1],N] Exit code: C", Ray's "A worker died or was killed while
executing a task" (not when the raylet's reports of lost workers, none of them a rank's
by the job's own lines, are all the text holds besides progress: the raylet reports any
worker of the cluster, and nothing then shows it was a rank the job waited on). A bare
non-zero exit code with no reason is a low-confidence error when it comes before the
timeouts (or there are none), else a warning only, and no death at all when every rank
the logs name ended so at the same second, with no timeout (torchrun's ChildFailedError
listing every worker with "exitcode: 1" and no error file: the agent stamps each with the
time it collected it, so its "Root Cause" is the lowest rank by a tie; the job failed on
every rank alike, none ended before the others); torchrun's
"failed (exitcode: -9) local_rank: N" printed after the others' timeouts still names the
culprit when rank N reported no timeout of its own (the agent names the first worker it saw
end, and a timed-out rank aborts itself with SIGABRT, not SIGKILL); a paste that *ends*
in a bare exception line (its traceback cut) and an abort that names no exception ("Fatal
Python error: Aborted") are low-confidence errors. A death that gives no reason of its own
(a Ray worker its raylet lost, an exit code, an abort) of a process that reported a timeout
itself, by rank or by pid, is that timeout's teardown wherever the paste puts it; an abort
("terminate called after throwing …") a few lines after an uncaught exception of the same
process is that exception's exit (a destructor throwing as the interpreter shuts down,
"driver shutting down"), not a second failure. Nor is an abort just below the same
process's NCCL WARN whose result is ncclInvalidArgument or ncclInvalidUsage (argcheck's
"invalid root", a destroyed communicator: "enqueue.cc:447 -> 4"): the process's own NCCL
call was made wrongly and it threw (torch's "NCCL Error 4: invalid argument"), the
caller's bug, whatever waited (nccl #276: single-process DataParallel under NCCL 2.5).

When the failure's own lines name no rank (one traceback, printed once; an abort with the
what() below it; a kernel's device-side assertion with the exception that raises it) and the
launcher reports one worker that exited with an error code of its own (srun's "task 3:
Exited with exit code 1" beside "tasks 0-2: Terminated", torchrun's "failed (exitcode: 1)
local_rank: 3") or ended by the signal the failure shows (torch.multiprocessing's "process 3
terminated with signal SIGABRT" beside an abort), the failure is taken to be that worker's,
and the finding says so. So it is when what its process printed as it went down, just below
it, names its rank (~ProcessGroupNCCL's "Process Group destroyed on rank 0" under a failed
abort's "NCCL error in: …"). A GPU Xid that NVIDIA's Xid catalog lays at the program's door
(13, a graphics engine exception; 31, a memory page fault: payloads/xid.py) is the death of
the process on that GPU: the driver killed its CUDA context. Of deaths that
give no reason (exit codes, launcher-reported signals: a ChildFailedError table), the one
rank that did not abort is named when the others aborted (SIGABRT: most often the NCCL
watchdog tearing its process down after the failure).

The number a launcher prints for a worker that ended is read by its printer's convention
(payloads/launch.py read_exit: Python's exitcode -N and a shell's 128 + N are signal N,
os.waitpid's raw status holds the signal in its low bits): vLLM's "Worker … pid 198 died,
exit code: -6" is an abort, SGLang's "Child process unexpectedly failed with an exit code
256" an exit status of 1. An abort a launcher reports without naming a rank, in a job
where torch's watchdog or heartbeat monitor fired, is that watchdog ending its process,
not a first fault: the timeout's cause is the cause. SIGKILL is named a kill from outside,
the OOM killer only where the logs hold its line. torchrun's "failed (exitcode: -6)
local_rank: N" where no watchdog fired and rank N reported nothing itself is rank N's own
abort, the first fault, though the survivors' teardown (NCCL's "[Service thread] Connection
closed by localRank M") is printed above it: the agent stops the survivors before it logs
the first failure it collected. TGI's launcher names the shard whose process ended ("Shard
N failed to start", "Shard N crashed"; the shard's RANK is its index) without its exit code.

Nor is an exception whose words say it was raised after a shutdown, or that relay a
failure told elsewhere (Sign.SHUT_DOWN, read from the sources that raise them:
parsers/logs/errors.py): an object used after its close (asyncio's "Event loop is
closed", multiprocessing's "Queue … is closed", concurrent.futures' "cannot schedule new
futures after shutdown", vllm-omni's "DiffusionEngine is closed."), a framework being shut
down (Horovod's "Horovod has been shut down. This was caused by an exception on one of the
ranks …"), a framework's report that one of its processes failed, "see above" (vLLM's
EngineDeadError "EngineCore encountered an issue. See stack trace (above) for the root
cause.", its executor's "Worker failed with error '…', please check the stack trace above
for the root cause", Horovod's "Job has been shutdown, see above error messages for
details."), also where an HTTP client's status error carries it as the server's words
(openai's "Error code: 500 - EngineCore encountered an issue"). Such an exception comes
after whatever ended the job, wherever the paste puts it (a test client's output pasted
above the server's log, nothing timing either): it is the shutdown's evidence, never the
first failure, and the failure it follows is named by its own lines (a rank's traceback
before the others' timeouts: this rule), or, where the paste holds only a timeout, by the
timeout's rules or not at all (vllm-omni #5627: rank 1's watchdog timeout, then "RuntimeError:
DiffusionExecutor is closed." and the client's 500, no cause shown).

Where an exception was raised is read from its traceback (its innermost frame or call
naming a stage, parsers/logs/tb_stage.py). Raised while the ranks set up communication
(init_process_group, new_group, a rendezvous or its store, DDP's construction, the CUDA
device's set-up), it is that set-up failing: the finding names
`nccl_init_or_bootstrap_hang`, not a crash. Raised while the process tears down
(destroy_process_group, a destructor, an exit handler), or by a collective's wait for the
other ranks (`work.wait()`, a barrier: it reports what failed, a peer's failure as often
as its own), it is no death of its own, nor is the bare exit code the launcher reports
for that rank. Nor is an exception raised by a check that compares the ranks (DDP's
parameter shapes, FSDP's forward order): the ranks differ, which it reports. A collective
refusing its own rank's arguments is that rank's failure.
An exception whose words the message catalog means as another failure, with a strength
of the message's own (moderate or above: a store's, a transport's, a lock's message
raised as an exception), is that failure reported, not a crash, and a CUDA error
documented as the GPU's, its driver's or the platform's (the fabric manager not ready,
exclusive-process mode, an NVLink error) is HD301's.

Whether a death's own exception names such a failure is decided by one table
(analyzer/views/death_kind.py), its first row that holds: a CUDA out-of-memory; the GPU's
words or a CUDA error the catalog means as the GPU's or its driver's; a forked child's
CUDA; the catalog's meaning of its words; the storage's words, or an errno of the
storage's family (EIO, ENOSPC, EDQUOT, EROFS, ESTALE …, read from Python's own errno
tables and OSError subclasses: parsers/logs/oserror.py); a child process it could not
start; a path's errno (ENOENT, EEXIST, EXDEV, EACCES …) raised while a checkpoint was
saved (writers racing on a directory, one not shared between nodes; not a load's: a
checkpoint that is not there is the job's path, not the storage); a host-memory error
raised in a DataLoader worker (its loop's frame, or torch's "Caught MemoryError in
DataLoader worker process N"), HD109's; a CUDA call a collective library reported failing
from code that only sets a communicator up; NCCL's set-up classes raised where
communicators are created; an exception in words nothing reads (no catalog row, no sign;
torch's RuntimeError or DistError family, or a framework's record of a worker's exception)
raised in a serving or RL framework's worker set-up (vLLM's `init_device`, verl's
`init_model`, OpenRLHF's `init_model_from_pretrained`: the set-up entry points' table read
from their sources, parsers/catalog/data/stages/setup_entry_points.json), named as set-up
one step weaker (`WORDS_UNREAD`: those methods also select the device and check the
configuration, whose own failures have words the catalog holds); a framework's logged
error record of a traceback (vLLM's logger header, ERROR, on each line) that the paste cut
before its exception line, whose innermost frames are a set-up entry point
(`PyNcclCommunicator.__init__` calling `ncclCommInitRank`), named as set-up one step weaker
(`WORDS_UNREAD`: where it failed is shown, what failed is lost); any exception raised in
set-up, which this rule names as set-up; last, a directory entry another process made,
moved or removed (ENOENT, EEXIST, ENOTEMPTY, EBUSY; EXDEV) under a call that makes, moves
or removes one, whatever the job named its own code: the library frame that raised
(shutil.rmtree, os.makedirs, pathlib's), the source line's call (os.rename, os.symlink,
Path.mkdir), CPython's two-path message (only link, rename and symlink print it), HD110's.
A death no row holds for is a crash. An
exception whose words carry no sign the parser reads and whose traceback shows no stage
is stated one step weaker (`CAUSE_UNREAD`): on four batches of reports scored at first
sight (fixtures/first_sight), 14 of the 26 wrong answers were this rule's, crashes whose
message named a more specific cause or that were a consequence.

A death that comes after such a more specific failure (a CUDA OOM, the GPU's hardware,
storage, a message the catalog means as another failure, a worker that could not start),
itself before the timeouts, is most often its consequence: the failing rank's own exit
code, the launcher stopping the others ("Forcefully terminating all other processes", a
shell's "Killed"), a rank that lost its peer. The failure that came first is the cause, and
the rule that names it answers (HD031, HD301, HD110, HD109, HD035 …); this rule yields,
unless the death's times show it first (HD031 then yields to this one in turn). So does a
death after NCCL's failing to set a communicator up (HD206's lines: a setup WARN, its
return chain, a synchronous NCCL error of a setup class): vLLM's workers that then log
"WorkerProc failed to start." report that failure. So does a death after its own
process's NCCL failed to set a connection up before anything ran (HD200's: a connect
that failed for good, `Call to ibv_modify_qp failed`, which only brings a queue pair of
the IB transport's connection up, a WARN whose source lines are set-up): NCCL returned the
failure to the call that created or first used the communicator, and the process raised
it (OpenRLHF's "Error executing method update_weight" on a weight-sync group's first
broadcast). Another process's connect failure does not count: it may be this death's
consequence. And so does a death after another
rank's (or an unranked line's) exception carrying an NCCL error of a set-up class
(`NCCL error: unhandled system error`, `internal error`, …) wherever that NCCL call was
made: that rank's NCCL failed first, which is no crash; HD206 names it where the
traceback shows set-up, else no cause is named.

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

from collections.abc import Iterable
from dataclasses import replace

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.payloads.launch import SignalName
from hangdoc.analyzer.views.deaths import (
    Death,
    DeathHow,
    first_deaths,
    one_failure,
    rank_of_failure,
)
from hangdoc.analyzer.views.nccl_setup import connect_failures, first_running, setup_failure
from hangdoc.analyzer.views.timeline import Placed, Timeline, precedes_wave, victims, wave
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import Shift, shifted

# A launcher's report of the worker it saw end first (torchrun's "failed (exitcode: …)",
# its ChildFailedError table).
_LAUNCHER_REPORTS = frozenset({EventKind.WORKER_FAILED, EventKind.CHILD_FAILURE})
_HOW = {
    DeathHow.EXCEPTION: "raised an exception",
    DeathHow.SIGNAL: "was killed by a signal",
    DeathHow.HOST_OOM: "was killed for host memory",
    DeathHow.EXIT: "exited with an error",
    DeathHow.MEMORY_CLIMB: "ran out of host memory",
    DeathHow.ACTOR: "died (Ray actor)",
    DeathHow.CUDA_ERROR: "hit a CUDA error",
}


# Progress and counts: what a job prints while nothing goes wrong.
_QUIET = frozenset({EventKind.PHASE, EventKind.DATA_COUNT})


def _only_lost_workers(tl: Timeline) -> bool:
    """Nothing but the raylet's reports that worker processes ended (and progress), none
    of them a rank's: the raylet reports any worker of the cluster, a task's or an
    actor's, and says neither that it was a rank of the job nor that the job waited on
    it. The job's own lines naming the worker's pid as a rank's (Ray Train's "(RayTrainWorker
    pid=N) … [rank=R, …]"), a caller's RayActorError, a rank's failure or a timeout
    beside it would."""
    lost = False
    for p in tl.events:
        if Sign.RAYLET_WORKER_LOST in p.event.payload.signs and p.rank is None:
            lost = True
        elif p.kind not in _QUIET:
            return False
    return lost


class RankDiedFirst(Rule):
    __doc__ = __doc__
    id = "HD030"
    name = "rank-died-first"
    summary = "a rank crashed or was killed before the others timed out"
    categories = (Category.RANK_DEAD, Category.NCCL_INIT)
    severity = Severity.CRITICAL
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        # A CUDA OOM (HD031's), the GPU's hardware or a CUDA error documented as the
        # GPU's or driver's (HD301's), a storage failure (HD110's), words the message
        # catalog means as another failure (a store's, a transport's, a driver's) raised
        # as an exception: that failure, no crash (Death.specific).
        found = first_deaths(tl)
        deaths = [d for d in found if not d.specific]
        if not deaths or _only_lost_workers(tl):
            return
        wave_events = wave(tl)
        leading = [d for d in deaths if precedes_wave(d.placed, wave_events) is not False]
        if not leading:
            leading = _killed_outside_wave(deaths, victims(tl))
        # after a more specific failure: its consequences; that failure's rule answers
        leading = _not_after_specific(leading, found, wave_events)
        # after NCCL's set-up failing (HD206's lines): the workers that then fail to start
        # report its consequence
        leading = _not_after_setup(leading, tl, wave_events)
        # after its own process's NCCL failed to set a connection up (HD200's connect
        # failures): the call that created or first used the communicator raised it
        leading = _not_after_own_connect_failure(leading, tl)
        # after another rank's NCCL call failed with a set-up class's error, wherever it
        # was called: that rank failed first, by NCCL, not by a crash
        leading = _not_after_nccl_failure(leading, tl, wave_events)
        if not leading:
            return  # every failure came after the timeouts: consequences
        certain = [d for d in leading if d.certain]
        chosen = certain or _not_aborts(leading)
        if (
            not certain
            and not wave_events
            and _every_rank_at_once(chosen, tl, ctx.evidence.expected_world_size())
        ):
            return  # the job failed on every rank alike: no rank ended before the others
        first = chosen[0]
        ordered = precedes_wave(first.placed, wave_events)
        culprits = sorted({d.rank for d in chosen if d.rank is not None})
        named = None
        if one_failure(certain) and not culprits:
            # The failure's own lines name no rank: the launcher's report of the one worker
            # that ended so, the lines its process printed as it went down, or its group's
            # prefix may (views/deaths.py rank_of_failure).
            named = rank_of_failure(tl, leading, certain)
        if named is not None:
            chosen = [*chosen, named.death]
            culprits = [named.rank]
        waiting = sorted(victims(tl) - set(culprits))
        finding = self._finding(
            first,
            chosen,
            culprits,
            waiting,
            ordered,
            bool(certain),
            wave_events,
            oom_seen=bool(tl.of(EventKind.HOST_OOM_KILL)),
            # nothing shows collectives or steps running before it: NCCL was setting up
            before_running=first.placed.index < first_running(tl),
        )
        if named is not None:
            finding = replace(finding, explanation=f"{finding.explanation} {named.reading}")
        yield finding

    def _finding(
        self,
        first: Death,
        chosen: list[Death],
        culprits: list[int],
        waiting: list[int],
        ordered: bool | None,
        certain: bool,
        wave_events: list[Placed],
        *,
        oom_seen: bool = False,
        before_running: bool = False,
    ) -> Finding:
        who = ranks_text(culprits) if culprits else "a process (rank unknown)"
        if (
            before_running
            and first.signal == SignalName.SIGBUS
            and Sign.NATIVE_IN_NCCL in first.payload.signs
        ):
            return self._nccl_shm_finding(first, chosen, culprits, waiting, who)
        if first.in_setup:
            return self._setup_finding(first, chosen, culprits, waiting, who)
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
        if ordered is False:
            lines[0] = (
                f"{who} ended first, though the launcher reports it after the timeouts: "
                f"{first.summary}. The launcher names the first worker it saw end, before it "
                "stops the others, and a timed-out rank aborts itself (SIGABRT); this one "
                "reported no timeout of its own, so it was not in the collective the others "
                "waited in."
            )
        elif ordered is None and wave_events:
            lines.append(
                "The logs carry no times that order this failure against the timeouts; "
                "it is taken as the cause because it is not itself a timeout."
            )
        if first.how == DeathHow.SIGNAL and first.signal is not None:
            lines.append(_signal_reading(first.signal, oom_seen))
        if first.how == DeathHow.MEMORY_CLIMB and not certain:
            lines.append(
                "No kill is shown, only where its memory was going: a process whose host "
                "memory climbs so is what the kernel's OOM killer (the largest process) or "
                "the scheduler's memory limit ends; check dmesg and the scheduler's log."
            )
        elif not certain:
            lines.append(
                "The logs give no reason for the exit: collect the rank's stderr or "
                "its TORCHELASTIC_ERROR_FILE (decorate main with @record)."
            )
        severity = Severity.CRITICAL if certain else Severity.WARNING
        # A death the logs give a reason for is one direct signal; that it caused the
        # hang is stated only when its time comes before the others' timeouts.
        strength = Strength.SIGNAL if certain else Strength.HINT
        if certain and ordered:
            strength = shifted(strength, Shift.ORDER_SHOWN)
        if certain and _weak(first):
            # One line that may be the end of the story or an excerpt's cut: a bare
            # exception line ending the paste, an abort with no exception named.
            severity, strength = Severity.ERROR, shifted(strength, Shift.MAY_BE_CUT)
        if not first.read and not first.bare:
            # An exception nothing reads a meaning or a stage of: a crash, most likely, but
            # its message may name a more specific cause (first-sight reports: a library
            # not found, a file-system race, a DNS lookup) or be a consequence. A bare
            # line (no traceback above it) has stepped down for that already (MAY_BE_CUT):
            # its frames are what is missing, one reason, one step.
            strength = shifted(strength, Shift.CAUSE_UNREAD)
        if not certain and culprits and (ordered is True or not wave_events):
            # A launcher's "exited with code 1" for a named rank, before any timeout (or
            # with none at all): the rank ended first, though the logs do not say why.
            severity = Severity.ERROR
        if not certain and not culprits and not wave_events:
            # The same with no rank named, where nothing else happened: a launcher's report
            # that a worker exited (DeepSpeed killing the others after one did) is all the
            # story there is, though it names neither the worker nor why.
            severity = Severity.ERROR
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
            strength=strength,
        )

    def _nccl_shm_finding(
        self,
        first: Death,
        chosen: list[Death],
        culprits: list[int],
        waiting: list[int],
        who: str,
    ) -> Finding:
        """A SIGBUS whose native backtrace runs through NCCL (Sign.NATIVE_IN_NCCL): a touch
        of a /dev/shm mapping NCCL made (its SHM transport's segments, the proxy's
        buffers) past what the file system could back. A set-up resource, not a crash."""
        return Finding(
            rule=self.id,
            category=Category.NCCL_INIT,
            severity=Severity.CRITICAL,
            title=f"{who} died of SIGBUS inside NCCL (shared memory it mapped could not be "
            f"backed: /dev/shm too small): {first.summary}",
            explanation=(
                f"{who} was killed by SIGBUS in NCCL's own code (its backtrace runs through "
                "libnccl): NCCL maps segments of /dev/shm for the ranks of a node (the SHM "
                "transport, the proxy's buffers), and a touch of a page the file system "
                "cannot back raises SIGBUS, not an error. A container's /dev/shm (docker's "
                "64 MB default) is too small for them. The other ranks wait in their "
                "communicator's set-up for the one that died."
            ),
            fix=(
                "Give the container enough shared memory: docker run --shm-size=<several GB> "
                "or --ipc=host (Kubernetes: an emptyDir with medium: Memory on /dev/shm); "
                "check `df -h /dev/shm` inside it. NCCL_SHM_DISABLE=1 avoids the SHM "
                "transport at a cost in speed."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(waiting),
            evidence=tuple(limited_refs([d.placed for d in chosen], limit=6)),
            strength=Strength.SIGNAL,
        )

    def _setup_finding(
        self,
        first: Death,
        chosen: list[Death],
        culprits: list[int],
        waiting: list[int],
        who: str,
    ) -> Finding:
        """A rank whose exception was raised while the ranks set up communication: the
        set-up failed there (its traceback shows init_process_group, a rendezvous, a store
        or DDP's construction), the others wait for it in their own set-up."""
        title = f"{who} failed while setting up distributed communication: {first.summary}"
        lines = [
            f"{who} {_HOW.get(first.how, 'failed')} while the ranks set up distributed "
            f"communication (its traceback shows the set-up: init_process_group, a rendezvous, "
            f"a store, DDP's construction or NCCL's communicator creation): {first.summary}.",
            "The job cannot start its steps until every rank finishes the set-up; the "
            "others wait in theirs until its timeout.",
        ]
        # A set-up told only by where it was raised, or by a line that may be an excerpt's
        # cut, is not as grave as one its words state: a finding that reads the failure's
        # own words (HD206's NCCL error) comes first, as in the crash's own path above.
        weak = _weak(first) or first.setup_unread
        return Finding(
            rule=self.id,
            category=Category.NCCL_INIT,
            severity=Severity.ERROR if weak else Severity.CRITICAL,
            title=title,
            explanation=" ".join(lines),
            fix=(
                "Fix what the set-up's exception names on that rank: the address and port "
                "of the store (MASTER_ADDR/MASTER_PORT, resolvable and reachable from every "
                "node), a file store's path (shared, writable, not left over from an earlier "
                "run), the world size and ranks each process is given, the device each rank "
                "selects."
            ),
            culprit_ranks=tuple(culprits),
            waiting_ranks=tuple(waiting),
            evidence=tuple(limited_refs([d.placed for d in chosen], limit=6)),
            strength=shifted(
                Strength.SIGNAL,
                *((Shift.MAY_BE_CUT,) if _weak(first) else ()),
                # only where it was raised says set-up (a framework's worker set-up, words
                # nothing reads): most likely the set-up, not for certain
                *((Shift.WORDS_UNREAD,) if first.setup_unread else ()),
            ),
        )


def _not_after_specific(
    leading: list[Death], found: list[Death], wave_events: list[Placed]
) -> list[Death]:
    """The deaths that do not follow a more specific failure (Death.specific: an OOM, the
    GPU's hardware, storage, a failure the catalog names) which itself came before the
    timeouts. The failure that came first is the cause (fixtures/cases/README.md: the
    culprit is the rank that died first); a crash, a kill or an exit reported after it —
    the OOMing rank's own exit, the launcher stopping the others ("Forcefully terminating
    all other processes"), a rank that lost its peer — is most often its consequence, and
    the rule that names the specific failure (HD031, HD301, HD110 …) answers. A death
    whose times show it before that failure stays (HD031 then yields to HD030 in turn)."""
    specific = [
        d for d in found if d.specific and precedes_wave(d.placed, wave_events) is not False
    ]
    if not specific:
        return leading
    cause = specific[0]
    return [
        d
        for d in leading
        if d.placed.index < cause.placed.index or precedes_wave(d.placed, [cause.placed]) is True
    ]


def _not_after_setup(leading: list[Death], tl: Timeline, wave_events: list[Placed]) -> list[Death]:
    """The deaths that do not follow NCCL's failing to set a communicator up
    (views/nccl_setup.py, HD206's evidence) before the timeouts: a worker that then fails
    to start, or raises because its peer's communicator never came up, reports that
    failure, whose rule (HD206) answers. A death whose times show it before the set-up
    failure stays, as for _not_after_specific."""
    failure = setup_failure(tl)
    if failure is None:
        return leading
    first = failure.placed[0]
    if precedes_wave(first, wave_events) is False:
        return leading
    return [
        d
        for d in leading
        if d.placed.index < first.index or precedes_wave(d.placed, [first]) is True
    ]


def _not_after_own_connect_failure(leading: list[Death], tl: Timeline) -> list[Death]:
    """The deaths that do not follow, in the same process, NCCL's failing to set a
    connection up before anything ran (views/nccl_setup.connect_failures: a connect that
    failed for good, a queue pair of the IB transport that could not be brought up, a
    WARN whose source lines are set-up). NCCL returns that failure to the call that
    created or first used the communicator (init, a group's first broadcast), and the
    process raises it: its exception or exit is the failure's consequence, which HD200
    names. Only the same process (the rank, else the pid both lines print): another
    process's connect failure may be the consequence of this one's death, whatever order
    a paste shows them in."""
    failures = connect_failures(tl)
    if not failures:
        return leading
    return [
        d
        for d in leading
        if not any(f.index < d.placed.index and _same_process(f, d.placed) for f in failures)
    ]


def _same_process(a: Placed, b: Placed) -> bool:
    """Both lines name the same process: the same rank, else the same pid on hosts that do
    not differ by name (NCCL's header prints the host's name, Ray's prefix its address)."""
    if a.rank is not None and b.rank is not None:
        return a.rank == b.rank
    pid_a, pid_b = a.event.pid, b.event.pid
    if pid_a is None or pid_a != pid_b:
        return False
    host_a, host_b = a.event.host, b.event.host
    if not host_a or not host_b or _address(host_a) or _address(host_b):
        return True
    return host_a.split(".", 1)[0].lower() == host_b.split(".", 1)[0].lower()


def _address(host: str) -> bool:
    """An IP address, not a host's name (Ray's prefix "(Actor pid=N, ip=10.0.0.7)")."""
    return host.replace(".", "").isdigit() or ":" in host


def _not_after_nccl_failure(
    leading: list[Death], tl: Timeline, wave_events: list[Placed]
) -> list[Death]:
    """The deaths that do not follow another rank's (or an unranked line's: which process
    printed it is not known) exception carrying an NCCL error of a
    class a failed set-up returns (Sign.NCCL_SETUP_CLASS: ncclGetErrorString's "unhandled
    system error", "internal error", "unhandled cuda error", "invalid usage", raised by
    torch or by a framework's binding) before the timeouts. That rank's NCCL failed first;
    its error is no crash (the parser reads it as a consequence, since it may be one), so
    a crash reported after it is not the first failure either, and this rule yields (the
    set-up's rule answers where the traceback shows set-up, else no cause is named)."""
    failures = [
        p
        for p in tl.of(EventKind.EXCEPTION)
        if Sign.NCCL_SETUP_CLASS in p.event.payload.signs
        and precedes_wave(p, wave_events) is not False
    ]
    if not failures:
        return leading
    return [
        d
        for d in leading
        if not any(
            f.index < d.placed.index and (f.rank is None or f.rank != d.rank) for f in failures
        )
    ]


def _killed_outside_wave(deaths: list[Death], waited: set[int]) -> list[Death]:
    """torchrun's first failure, a rank killed by SIGKILL that reported no timeout of its
    own, though the launcher printed it after the others' timeouts.

    torch's elastic agent logs ``failed (exitcode: -9) local_rank: N`` for the *first*
    failure it observed (``SubprocessContext._poll`` in
    torch/distributed/elastic/multiprocessing/api.py: ``first_failure = min(failures,
    key=timestamp)``), before it tears the survivors down, so the kill is not its own.
    Nor is it the watchdog's: a timed-out rank ends itself with SIGABRT (exit code -6).
    A rank that was in the timed-out collective would have timed out with the others; one
    killed by SIGKILL without doing so was elsewhere (the kernel's OOM killer, most often)
    and the others waited for it, whatever order the paste prints the lines in."""
    return [
        d
        for d in deaths
        if d.signal == SignalName.SIGKILL
        and d.rank is not None
        and d.rank not in waited
        and d.placed.kind in _LAUNCHER_REPORTS
    ]


# torchrun's agent stamps a worker that left no error file with the time it collected the
# failure (ProcessFailure._set_no_reply_file: int(time.time())), to the second: workers
# collected in one poll carry the same time, which orders nothing between them.
_SAME_POLL_S = 1.0


def _every_rank_at_once(chosen: list[Death], tl: Timeline, world: int | None) -> bool:
    """Every rank the logs name ended with a bare exit code (no signal, no reason), at the
    same second where the report gives times: a launcher's table of the whole job failing
    alike (torchrun's ChildFailedError listing every worker, "exitcode: 1", error_file
    <N/A>). No rank waited for another: the failure is one all of them met (their own
    tracebacks, not shown, hold it), and its "Root Cause (first observed failure)" is the
    lowest rank by the table's tie (ChildFailedError.get_first_failure takes the minimal
    timestamp, whole seconds). Naming every rank a culprit would say nothing; a signal, an
    exception or any death that gives its reason is not this. ``world``: the world size
    the ranks reported, where one did (a table of one node's workers is not every rank's)."""
    if len(chosen) < 2 or any(d.how is not DeathHow.EXIT or d.rank is None for d in chosen):
        return False
    ended = {d.rank for d in chosen}
    if ended != tl.ranks() or (world is not None and len(ended) < world):
        return False
    times = [d.placed.event.time for d in chosen if d.placed.event.time is not None]
    return not times or max(times) - min(times) <= _SAME_POLL_S


def _not_aborts(leading: list[Death]) -> list[Death]:
    """Of deaths that give no reason (exit codes, launcher-reported signals), the one
    rank that did not abort, when the others did: torchrun's ChildFailedError lists every
    worker it saw end, and an abort (SIGABRT, exit code -6) is most often the NCCL
    watchdog tearing its own process down after the failure (ProcessGroupNCCL: "To avoid
    data inconsistency, we are taking the entire process down"), while a worker that
    exited with code 1 raised an exception of its own. Several ranks that did not abort
    leave the list as it is: which of them began it, nothing says."""
    aborted = [d for d in leading if d.signal == SignalName.SIGABRT]
    rest = [d for d in leading if d.signal != SignalName.SIGABRT]
    if not aborted or not rest or len({d.rank for d in rest}) != 1 or rest[0].rank is None:
        return leading
    return rest


def _weak(death: Death) -> bool:
    """A death read from one ambiguous line: the paste's last line being an exception
    with nothing above it (the parser marks it ``bare``), or an abort (SIGABRT, "Fatal
    Python error: Aborted") that names no exception — the watchdog aborts that way too."""
    if death.bare:
        return True
    return death.signal == SignalName.SIGABRT and not death.payload.exc_type


def _signal_reading(signal: SignalName, oom_seen: bool) -> str:
    """What the signal that ended the rank says of why (POSIX signal(7)). SIGKILL cannot be
    caught: something outside the process sent it, and the OOM killer is named only where
    the logs hold its line (dmesg's "Killed process", a cgroup's oom_kill)."""
    if signal == SignalName.SIGKILL:
        if oom_seen:
            return (
                "SIGKILL comes from outside the process; the kernel's OOM killer reports "
                "killing a process in these logs, most likely this one (host memory)."
            )
        return (
            "SIGKILL comes from outside the process (it cannot be caught): the kernel's "
            "OOM killer, the scheduler's time or memory limit, or a person; these logs hold "
            "no OOM-killer line, so check dmesg and the scheduler's log."
        )
    if signal in (SignalName.SIGSEGV, SignalName.SIGBUS, SignalName.SIGILL, SignalName.SIGFPE):
        return f"{signal} is a native crash of that rank's own process (its code or a library's)."
    if signal == SignalName.SIGABRT:
        return (
            "SIGABRT is the process aborting itself: a C++ exception nobody caught, a failed "
            "check, or torch's NCCL watchdog after a timeout (then the timeout's cause is "
            "the cause)."
        )
    return f"It ended by {signal}."


def _fix(death: Death) -> str:
    if death.how in (DeathHow.HOST_OOM, DeathHow.MEMORY_CLIMB) or (
        death.signal == SignalName.SIGKILL
    ):
        return (
            "Reduce host memory use on that rank (dataloader workers and prefetch, "
            "pinned memory, loading whole checkpoints into RAM), or raise the job's memory "
            "limit; if the scheduler killed it, raise the time limit."
        )
    if death.how == DeathHow.SIGNAL:
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
