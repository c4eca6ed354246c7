"""The one table of what a rank can be doing: each activity's words, category and fix.

Four readers name activities, each from its own evidence: the frame catalog (library
frames: ``catalog.SIGNATURES``), the job's own words (``meaning.py``: its frame names,
the files it writes, its last log line), the frameworks' phase markers in logs (``Phase``,
the wire value of a log event, mapped here by ``PHASES``) and the kernel and the other
threads of a rank (``rules/causes.py``: a file system stall, a lock cycle, the GIL). They
all name a member of :class:`Activity`, and this table alone says what the terminal and
the reports call it, which cause it points to and what to do about it: a rule, a view and
a renderer never disagree about what a rank was doing, nor word it twice.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from hangdoc.analyzer.model import Category
from hangdoc.analyzer.vocabulary import Phase


class Activity(enum.StrEnum):
    """What a rank (or one of its threads) is doing. The values of the frame catalog's
    activities are shown in the report's thread table: keep them."""

    # Read off library frames (the frame catalog) and the user's function names.
    COLLECTIVE = "collective"
    RENDEZVOUS = "rendezvous"
    DATALOADER_FETCH = "dataloader_fetch"
    DATALOADER_TEARDOWN = "dataloader_teardown"
    DATALOADER_WORKER = "dataloader_worker"
    CHECKPOINT_SAVE = "checkpoint_save"
    CHECKPOINT_LOAD = "checkpoint_load"
    EVAL = "eval"
    OPTIMIZER_STEP = "optimizer_step"
    CUDA_SYNC = "cuda_sync"
    COMPILE = "compile"
    NETWORK_IO = "network_io"
    LOCK_WAIT = "lock_wait"
    SLEEP = "sleep"
    SUBPROCESS_WAIT = "subprocess_wait"
    TRAIN_LOOP = "train_loop"
    GIL_WAIT = "gil_wait"
    FILE_LOCK = "file_lock"  # a file lock's acquire (filelock, flock); its holder unknown
    # A loop that sleeps while a lock file exists (torch's FileBaton): the file, not a
    # kernel lock, is the lock, and it outlives a killed holder (wait_frames.POLLED_LOCKS).
    LOCK_FILE_POLL = "lock_file_poll"
    # Read only from the job's own words (meaning.py) or phase markers (PHASES).
    DATA = "data"
    METRICS = "metrics"
    CALLBACK = "callback"
    PREPROCESS = "preprocess"
    # Read off the kernel and the rank's other threads (rules/causes.py).
    FS_STALL = "fs_stall"
    LOCK_CYCLE = "lock_cycle"
    GIL_STARVED = "gil_starved"
    # What the kernel says a blocked thread waits on, and who holds it (views/waits.py).
    STALE_LOCK = "stale_lock"
    RANK_LOCK = "rank_lock"
    CHILD_CYCLE = "child_cycle"
    CHILD_STUCK = "child_stuck"
    CHILD_DIED = "child_died"  # a pipe only the rank holds open; a child of its own dead
    TERMINAL_INPUT = "terminal_input"  # a read of a terminal: a prompt nobody sees
    # Waiting for what its own workers return through multiprocessing (a Pool's result, a
    # Queue, a Pipe, a Manager's reply): the stdlib's frames (views/catalog.py).
    WORKER_RESULT = "worker_result"
    # Nothing more telling: the user's own code, or only "not in a collective".
    OWN_CODE = "own_code"
    OUTSIDE_COLLECTIVES = "outside_collectives"


class Kind(enum.StrEnum):
    """What an activity says about a thread."""

    CALL = "call"  # inside a collective or group-creation call: waiting for the others
    WAIT = "wait"  # how a thread waits (a lock, the network, a sleep), not what it does
    WORK = "work"  # what the rank is busy with (a save, an evaluation, its own code)


@dataclass(frozen=True, slots=True)
class ActivityRow:
    phrase: str  # what a rank "is" doing, in the reports' words: "saving a checkpoint"
    category: Category  # the cause it points to (DESIGN.md's fixed vocabulary)
    fix: str  # the advice when a culprit is stuck in it
    kind: Kind
    # The activity alone explains why the other ranks wait for this one: a culprit seen in
    # it is blamed on it (rules/causes.py), where the training loop or a generic wait
    # says nothing yet and the search for a cause goes on.
    names_cause: bool
    # The advice when the activity outlasted the collectives' timeout on one rank (HD061:
    # the job's last lines before the timeouts); None: ``fix`` serves.
    timeout_fix: str | None = None

    @property
    def after_timeout_fix(self) -> str:
        return self.timeout_fix if self.timeout_fix is not None else self.fix


_GENERIC_FIX = (
    "The culprit rank took a code path the others did not: compare its stack with theirs and "
    "make every rank issue the same collectives in the same order (typical causes: a branch "
    "on rank or on data that differs between ranks, an early return or break, an exception "
    "swallowed on one rank). If it is merely slow, raise the process-group timeout."
)
_SAVE_FIX = (
    "Find why the save on the culprit rank does not finish (a stuck or full filesystem, "
    "an object store upload, a save that only some ranks enter). Make every rank reach "
    "the same collectives around the save: save from all ranks with "
    "torch.distributed.checkpoint, or guard a rank-0-only torch.save with a barrier that "
    "every rank enters after it; write to local disk and copy asynchronously; raise the "
    "process-group timeout if saves are legitimately long."
)
_FETCH_FIX = (
    "The culprit's data pipeline is stuck or slow: check its DataLoader workers (dead, "
    "zombie, or blocked in I/O), the storage they read from, and whether this rank's "
    "sampler gives it more or slower batches. Set DataLoader(timeout=...) so a stuck "
    "worker raises instead of hanging the job."
)
_EVAL_FIX = (
    "Evaluation runs on some ranks only (or takes another path there) while the others "
    "already wait in the next collective. Run evaluation on every rank, or keep the "
    "rank-0-only part free of collectives and put a barrier that all ranks enter after it; "
    "gather metrics with a collective every rank calls."
)
_LOCK_FIX = (
    "Take locks in one order everywhere, never call logging/metrics/callbacks while "
    "holding a lock, and confirm with `py-spy dump --native --locals`."
)
_SAVE_TIMEOUT_FIX = (
    "Make the save finish within the timeout on every rank, or save from every rank "
    "(torch.distributed.checkpoint); a rank-0-only save must not issue collectives, "
    "and a barrier every rank enters must follow it. Raise the process-group timeout "
    "if saves are legitimately long."
)
_EVAL_TIMEOUT_FIX = (
    "Run evaluation on every rank (a DistributedSampler for the evaluation set), or keep "
    "the rank-0-only part free of collectives and follow it with a barrier; raise the "
    "process-group timeout if evaluation is legitimately long."
)
_FILE_LOCK_FIX = (
    "Find who holds the lock file (`lslocks` or `cat /proc/locks`, then `ps -p PID -o "
    "pid,lstart,args`) and why it does not let go. Acquire file locks with a timeout "
    "(filelock's FileLock(path, timeout=...), fcntl.flock with LOCK_NB in a bounded retry "
    "loop) so a stuck holder raises instead of hanging the rank."
)
_LOCK_FILE_POLL_FIX = (
    "The rank sleeps in a loop until a lock file disappears; only its holder's release "
    "removes it, and a holder killed mid-way (SIGKILL, the OOM killer, a job cancel) never "
    "does. Check whether any process still works under the lock (a build, a download); if "
    "none does, delete the lock file (for torch.utils.cpp_extension.load: the extension's "
    "folder under TORCH_EXTENSIONS_DIR, default ~/.cache/torch_extensions) and restart. "
    "Build once before the job starts, or give each job its own cache folder."
)
_STALE_LOCK_FIX = (
    "The holder is no process of this job: most often a leftover of an earlier run (a "
    "crashed job's rank, a data-preparation process that never exited) that still holds "
    "the lock. Check it (`ps -p PID -o pid,lstart,args`), end it, and restart the job; "
    "make lock files per job (put the job id in the path), clean up stale processes before "
    "a restart (the scheduler's epilog, `pkill` of the previous run's job id), and acquire "
    "with a timeout that names the holder."
)
_RANK_LOCK_FIX = (
    "One rank holds a file lock and then waits in a collective that the ranks blocked on "
    "the lock never reach. Never hold a file lock across a collective: let the holder "
    "release it before the barrier (prepare the cache under the lock, leave the lock, then "
    "synchronise), or have every rank take the lock in the same order outside collectives "
    "(the main-process-first pattern: rank 0 prepares, a barrier, then the others read)."
)
_CHILD_CYCLE_FIX = (
    "The rank and its subprocess each wait for the other: typically a request written to "
    "the child's stdin but never flushed or closed while the rank reads the child's output "
    "(or waits for it to exit), or a pipe the child fills that nobody reads. Flush and "
    "close stdin, read both pipes with Popen.communicate(timeout=...), or give the reads a "
    "timeout (select/poll with a deadline)."
)
_PREPROCESS_FIX = (
    "Do the preprocessing on every rank (each its shard), or before the job and cache it; "
    "or let the other ranks wait in a barrier whose timeout covers it "
    "(init_process_group(timeout=...), HF --ddp_timeout)."
)

_A, _C, _K = Activity, Category, Kind
# fmt: off
_ROWS: dict[Activity, ActivityRow] = {
    _A.COLLECTIVE: ActivityRow(
        "waiting in a collective", _C.RANK_DIVERGENCE, _GENERIC_FIX, _K.CALL, False),
    _A.RENDEZVOUS: ActivityRow(
        "creating a process group / rendezvous", _C.NCCL_INIT,
        "Check that every rank started with the same world size and reaches "
        "MASTER_ADDR:MASTER_PORT, and what the ranks that never joined do before "
        "init_process_group.",
        _K.CALL, False),
    _A.DATALOADER_FETCH: ActivityRow(
        "waiting for its next batch from the DataLoader", _C.DATALOADER, _FETCH_FIX, _K.WORK,
        True),
    _A.DATALOADER_TEARDOWN: ActivityRow(
        "shutting down its DataLoader workers", _C.DATALOADER,
        "A worker does not exit: look at the worker processes' stacks (hangdoc collect takes "
        "them with --subprocesses). Common causes: a worker blocked in I/O or on a lock "
        "inherited through fork, persistent_workers with an iterator abandoned mid-epoch, "
        "workers ignoring SIGTERM. Try num_workers=0 to confirm, use the 'spawn' or "
        "'forkserver' start method, and set DataLoader(timeout=...) so a stuck worker raises.",
        _K.WORK, True),
    _A.DATALOADER_WORKER: ActivityRow(
        "inside a DataLoader worker", _C.DATALOADER,
        "Check the DataLoader worker processes for a blocked read or a deadlock after fork.",
        _K.WORK, True),
    _A.CHECKPOINT_SAVE: ActivityRow(
        "saving a checkpoint", _C.CHECKPOINT_SAVE, _SAVE_FIX, _K.WORK, True, _SAVE_TIMEOUT_FIX),
    _A.CHECKPOINT_LOAD: ActivityRow(
        "loading a checkpoint", _C.RANK_DIVERGENCE,
        "The culprit is still loading a checkpoint while the others started training: check "
        "the storage it reads from, and load on every rank before the first collective.",
        _K.WORK, True),
    _A.EVAL: ActivityRow(
        "running evaluation", _C.EVAL_SOME_RANKS, _EVAL_FIX, _K.WORK, True, _EVAL_TIMEOUT_FIX),
    _A.OPTIMIZER_STEP: ActivityRow(
        "in the optimizer step", _C.RANK_DIVERGENCE, _GENERIC_FIX, _K.WORK, False),
    _A.CUDA_SYNC: ActivityRow(
        "waiting for the GPU (CUDA synchronize)", _C.GPU_HARDWARE,
        "The GPU does not finish the work queued before the synchronize: look for a NCCL "
        "kernel that waits for its peers (the other ranks' stacks, the flight recorder) or "
        "a GPU fault (Xid lines in `dmesg -T`, nvidia-smi).",
        _K.WORK, False),
    _A.COMPILE: ActivityRow(
        "compiling (torch.compile)", _C.RANK_DIVERGENCE,
        "One rank is (re)compiling while the others wait: warm up compilation on every rank "
        "before timing-sensitive collectives, check for recompilations caused by shapes that "
        "differ between ranks (TORCH_LOGS=recompiles), and raise the collective timeout.",
        _K.WORK, True),
    _A.NETWORK_IO: ActivityRow(
        "waiting on network I/O", _C.IO_STALL,
        "Find the server the culprit talks to (its frames name the call; `ss -tnp` on the "
        "node shows the connection and its unsent bytes) and why it stopped answering "
        "(endpoint down, proxy, firewall, credentials). Give every client call a timeout "
        "(http.client/requests timeout=, boto3 connect_timeout/read_timeout), and upload or "
        "report from a background thread or process so that the training loop never waits "
        "on the network.",
        _K.WAIT, False),
    _A.LOCK_WAIT: ActivityRow(
        "waiting on a lock, event or queue", _C.PYTHON_DEADLOCK, _LOCK_FIX, _K.WAIT, False),
    _A.SLEEP: ActivityRow("sleeping", _C.RANK_DIVERGENCE, _GENERIC_FIX, _K.WAIT, False),
    _A.SUBPROCESS_WAIT: ActivityRow(
        "waiting for a subprocess", _C.RANK_DIVERGENCE,
        "Look at the child process the culprit waits for (its stack, its state) and give "
        "the wait a timeout.",
        _K.WAIT, False),
    _A.TRAIN_LOOP: ActivityRow(
        "in the training loop", _C.RANK_DIVERGENCE, _GENERIC_FIX, _K.WORK, False),
    _A.GIL_WAIT: ActivityRow(
        "waiting for the GIL", _C.PYTHON_DEADLOCK,
        "Find the thread that holds the GIL (`py-spy dump --native` marks it, or gdb `thread "
        "apply all bt`): it waits for a lock or event that the thread taking the GIL holds. "
        "Release the GIL before blocking in native code (pybind11 gil_scoped_release, "
        "torch's no-GIL regions), and never take a C++ mutex while holding the GIL in one "
        "thread and the GIL while holding that mutex in another.",
        _K.WAIT, False),
    # Its holder decides who is to blame (the rank itself, another rank, a stale process):
    # the frames alone do not say, the kernel does (STALE_LOCK, RANK_LOCK below).
    _A.FILE_LOCK: ActivityRow(
        "waiting on a file lock", _C.PYTHON_DEADLOCK, _FILE_LOCK_FIX, _K.WAIT, False),
    _A.DATA: ActivityRow(
        "reading data", _C.DATALOADER, _FETCH_FIX, _K.WORK, True,
        "The data step before the timeout is slow or stuck on some rank: check its "
        "DataLoader workers and storage, and set DataLoader(timeout=...)."),
    _A.METRICS: ActivityRow(
        "computing or gathering metrics", _C.EVAL_SOME_RANKS, _EVAL_FIX, _K.WORK, True,
        _EVAL_TIMEOUT_FIX),
    _A.CALLBACK: ActivityRow("running a callback", _C.RANK_DIVERGENCE, _GENERIC_FIX, _K.WORK, True),
    # A rank busy in non-collective work (a dataset map, packing) while the others wait in
    # a collective: divergence, the generic category (not a stuck DataLoader).
    _A.PREPROCESS: ActivityRow(
        "preprocessing alone (tokenizing, mapping, packing, clustering)", _C.RANK_DIVERGENCE,
        _PREPROCESS_FIX, _K.WORK, True),
    _A.FS_STALL: ActivityRow(
        "stuck in the file system (a thread in D state, its file not growing)", _C.IO_STALL,
        "Restore the storage the culprit writes to (NFS/Lustre server, FUSE daemon, disk; "
        "`dmesg -T` shows 'not responding' or hung-task reports); write checkpoints to local "
        "disk and copy them asynchronously.",
        _K.WORK, True),
    _A.LOCK_CYCLE: ActivityRow(
        "blocked on a lock its own threads hold", _C.PYTHON_DEADLOCK, _LOCK_FIX, _K.WORK, True),
    _A.GIL_STARVED: ActivityRow(
        "starved by a thread that holds the GIL", _C.PYTHON_DEADLOCK,
        "Release the GIL around long native work, bound regular expressions, or move the work "
        "to a subprocess.",
        _K.WORK, True),
    # A file lock's holder is the kernel's word (/proc/locks), not a guess: the rank is
    # blocked on a lock that is never released. The file system answers (the call sits in
    # the kernel's lock queue, no I/O is pending), so the lock category, not the storage's.
    # A lock file whose existence is the lock (torch's FileBaton): no kernel lock, no
    # holder on record, no timeout; a rank that polls it while the others wait in a
    # collective waits on a file nobody in the job holds (a holder of the job would be
    # shown working under it, not waiting with the others).
    _A.LOCK_FILE_POLL: ActivityRow(
        "waiting for a lock file to be removed (a polling loop: the file outlives a killed "
        "holder)", _C.PYTHON_DEADLOCK, _LOCK_FILE_POLL_FIX, _K.WORK, True),
    _A.STALE_LOCK: ActivityRow(
        "waiting on a file lock held by a process outside the job", _C.PYTHON_DEADLOCK,
        _STALE_LOCK_FIX, _K.WORK, True),
    _A.RANK_LOCK: ActivityRow(
        "waiting on a file lock held by another rank", _C.PYTHON_DEADLOCK, _RANK_LOCK_FIX,
        _K.WORK, True),
    _A.CHILD_CYCLE: ActivityRow(
        "blocked on its own subprocess, which waits on it in turn (a pipe deadlock)",
        _C.PYTHON_DEADLOCK, _CHILD_CYCLE_FIX, _K.WORK, True),
    _A.CHILD_STUCK: ActivityRow(
        "waiting for a subprocess that does not answer", _C.RANK_DIVERGENCE,
        "Look at the child the culprit waits for (`py-spy dump --pid CHILD`, its state and "
        "wait channel in the report): fix what it waits on, and give the wait a timeout "
        "(Popen.wait(timeout=...), communicate(timeout=...)).",
        _K.WORK, True),
    _A.CHILD_DIED: ActivityRow(
        "waiting on a pipe that a worker process of its own fed, and that worker is dead",
        _C.DATALOADER,
        "A process the rank started to produce its data died (killed by the OOM killer or a "
        "signal: check `dmesg` and the job's memory) and the rank still waits for what it "
        "would have sent. Give the read a timeout (Queue.get(timeout=...), "
        "Connection.poll(timeout)) and check the producer's exitcode when it fires; restart "
        "or fail instead of waiting.",
        _K.WORK, True),
    # How it waits (the kernel's view of a dead child, CHILD_DIED, says more where it has
    # one): the rank's own worker processes owe it a result that does not come. A Pool
    # replaces a worker killed mid-task (by the OOM killer, a signal) and the task is lost:
    # its ApplyResult is never set (CPython's multiprocessing.pool), so get() without a
    # timeout waits for ever; a Queue or Pipe whose producer died never delivers.
    _A.WORKER_RESULT: ActivityRow(
        "waiting for a result from its own worker processes (multiprocessing)",
        _C.DATALOADER,
        "A worker process the rank feeds work to died or hangs, and the rank waits for its "
        "result without a timeout (a Pool replaces a killed worker but never returns the "
        "task it held). Look at the workers (their stacks: hangdoc collect takes them; "
        "`dmesg` for the OOM killer), give the wait a timeout (AsyncResult.get(timeout=...), "
        "Queue.get(timeout=...)) and fail or retry when it fires, or use "
        "concurrent.futures.ProcessPoolExecutor, which raises BrokenProcessPool when a "
        "worker dies.",
        _K.WAIT, False),
    _A.TERMINAL_INPUT: ActivityRow(
        "waiting for input on a terminal (an interactive prompt nobody sees)",
        _C.RANK_DIVERGENCE,
        "The rank reads its terminal: a prompt (a tracker's login, a confirmation, "
        "input(), breakpoint()) that only a person at that terminal could answer. Make it "
        "non-interactive on every node (credentials or a mode that never prompts in the "
        "environment), and start ranks with stdin closed (< /dev/null) so that a prompt "
        "fails at once instead of waiting.",
        _K.WORK, True),
    _A.OWN_CODE: ActivityRow("running its own code", _C.RANK_DIVERGENCE, _GENERIC_FIX, _K.WORK,
                             False),
    _A.OUTSIDE_COLLECTIVES: ActivityRow(
        "outside any collective", _C.RANK_DIVERGENCE, _GENERIC_FIX, _K.WORK, False),
}
# fmt: on

TABLE: Mapping[Activity, ActivityRow] = MappingProxyType(_ROWS)


def phrase(activity: Activity) -> str:
    """What the reports say a rank in this activity is doing ("saving a checkpoint")."""
    return TABLE[activity].phrase


def of_kind(kind: Kind) -> frozenset[Activity]:
    return frozenset(a for a, row in TABLE.items() if row.kind is kind)


@dataclass(frozen=True, slots=True)
class PhaseMark:
    """What a framework's phase marker in a log says (parsers/logs/phases.py cites each)."""

    begins: Activity | None  # the activity its writer is in from this line on
    ends: frozenset[Activity] = frozenset()  # the activities it says are over


# Begin and end markers come in pairs in the frameworks' logs (DeepSpeed's "[Torch] Saving
# …" / "[Torch] Saved …", HF Trainer's "***** Running Evaluation *****" / "{'eval_loss': …}");
# a training marker (a step's report, a training bar) ends a save or an evaluation: the
# job went back to training.
PHASES: Mapping[Phase, PhaseMark] = MappingProxyType(
    {
        Phase.PREPROCESS: PhaseMark(Activity.PREPROCESS),
        Phase.LOAD: PhaseMark(Activity.CHECKPOINT_LOAD),
        Phase.TRAIN: PhaseMark(
            Activity.TRAIN_LOOP, frozenset({Activity.CHECKPOINT_SAVE, Activity.EVAL})
        ),
        Phase.EVAL: PhaseMark(Activity.EVAL),
        Phase.CHECKPOINT_SAVE: PhaseMark(Activity.CHECKPOINT_SAVE),
        Phase.CHECKPOINT_SAVED: PhaseMark(None, frozenset({Activity.CHECKPOINT_SAVE})),
        Phase.INIT: PhaseMark(Activity.RENDEZVOUS),
        # A rank out of batches before the others (torch's Join): it left the loop.
        Phase.DATA_EXHAUSTED: PhaseMark(None, frozenset({Activity.TRAIN_LOOP})),
        Phase.EVAL_DONE: PhaseMark(None, frozenset({Activity.EVAL})),
    }
)


def begun_by(phase: str | None) -> Activity | None:
    """The activity a phase marker begins, from the ``phase`` a log event carries (its wire
    value); None for a marker that only ends one, or a value this version does not know."""
    if phase is None:
        return None
    try:
        return PHASES[Phase(phase)].begins
    except (ValueError, KeyError):
        return None


def phases_beginning(*activities: Activity) -> frozenset[Phase]:
    """The phase markers that begin one of ``activities`` (a ``phase`` field's value is in
    it when its marker does: ``Phase`` is a ``StrEnum``)."""
    return frozenset(p for p, mark in PHASES.items() if mark.begins in activities)
