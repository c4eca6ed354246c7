"""What a rank's activity says about the cause: tag → category, and the advice for each.

Shared by the rules that name a culprit by what it is doing (HD001, HD002), so the same
activity always gets the same category and the same fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.model import Category, Frame
from hangdoc.analyzer.views.activity import GENERIC_TAGS, RankActivity, is_user_frame
from hangdoc.analyzer.views.catalog import Tag
from hangdoc.analyzer.views.iofacts import fs_stall
from hangdoc.analyzer.views.locks import gil_holder, lock_waits
from hangdoc.analyzer.views.meaning import CATEGORY_OF, DOING, Meaning, Signal, job_meaning
from hangdoc.analyzer.views.netwait import network_wait


@dataclass(frozen=True, slots=True)
class Cause:
    category: Category
    doing: str  # "is saving a checkpoint"
    fix: str
    # When the cause comes from the job's own names (not the catalog): the independent
    # signals that agree on it (its frames, the files it writes, its last log line).
    signals: tuple[Signal, ...] = ()


_CAUSES: dict[Tag, Cause] = {
    Tag.CHECKPOINT_SAVE: Cause(
        Category.CHECKPOINT_SAVE,
        "is saving a checkpoint",
        "Find why the save on the culprit rank does not finish (a stuck or full filesystem, "
        "an object store upload, a save that only some ranks enter). Make every rank reach "
        "the same collectives around the save: save from all ranks with "
        "torch.distributed.checkpoint, or guard a rank-0-only torch.save with a barrier that "
        "every rank enters after it; write to local disk and copy asynchronously; raise the "
        "process-group timeout if saves are legitimately long.",
    ),
    Tag.DATALOADER_TEARDOWN: Cause(
        Category.DATALOADER,
        "is shutting down its DataLoader workers",
        "A worker does not exit: look at the worker processes' stacks (hangdoc collect takes "
        "them with --subprocesses). Common causes: a worker blocked in I/O or on a lock "
        "inherited through fork, persistent_workers with an iterator abandoned mid-epoch, "
        "workers ignoring SIGTERM. Try num_workers=0 to confirm, use the 'spawn' or "
        "'forkserver' start method, and set DataLoader(timeout=...) so a stuck worker raises.",
    ),
    Tag.DATALOADER_FETCH: Cause(
        Category.DATALOADER,
        "is waiting for its next batch from the DataLoader",
        "The culprit's data pipeline is stuck or slow: check its DataLoader workers (dead, "
        "zombie, or blocked in I/O), the storage they read from, and whether this rank's "
        "sampler gives it more or slower batches. Set DataLoader(timeout=...) so a stuck "
        "worker raises instead of hanging the job.",
    ),
    Tag.DATALOADER_WORKER: Cause(
        Category.DATALOADER,
        "is inside a DataLoader worker",
        "Check the DataLoader worker processes for a blocked read or a deadlock after fork.",
    ),
    Tag.EVAL: Cause(
        Category.EVAL_SOME_RANKS,
        "is running evaluation",
        "Evaluation runs on some ranks only (or takes another path there) while the others "
        "already wait in the next collective. Run evaluation on every rank, or keep the "
        "rank-0-only part free of collectives and put a barrier that all ranks enter after it; "
        "gather metrics with a collective every rank calls.",
    ),
    Tag.CHECKPOINT_LOAD: Cause(
        Category.RANK_DIVERGENCE,
        "is loading a checkpoint",
        "The culprit is still loading a checkpoint while the others started training: check "
        "the storage it reads from, and load on every rank before the first collective.",
    ),
    Tag.COMPILE: Cause(
        Category.RANK_DIVERGENCE,
        "is compiling (torch.compile)",
        "One rank is (re)compiling while the others wait: warm up compilation on every rank "
        "before timing-sensitive collectives, check for recompilations caused by shapes that "
        "differ between ranks (TORCH_LOGS=recompiles), and raise the collective timeout.",
    ),
}

_GENERIC_FIX = (
    "The culprit rank took a code path the others did not: compare its stack with theirs and "
    "make every rank issue the same collectives in the same order (typical causes: a branch "
    "on rank or on data that differs between ranks, an early return or break, an exception "
    "swallowed on one rank). If it is merely slow, raise the process-group timeout."
)


# Appended for issue 7: what the kernel and the other threads of the culprit say beats
# what its main thread's frames say (a checkpoint write stuck in D state is a storage
# stall; a main thread in user code sleeping on a futex that another thread of the same
# rank also waits on is a deadlock).
_IO_STALL = Cause(
    Category.IO_STALL,
    "is stuck in the file system (a thread in D state, its file not growing)",
    "Restore the storage the culprit writes to (NFS/Lustre server, FUSE daemon, disk; "
    "`dmesg -T` shows 'not responding' or hung-task reports); write checkpoints to local "
    "disk and copy them asynchronously.",
)
_LOCK = Cause(
    Category.PYTHON_DEADLOCK,
    "is blocked on a lock its own threads hold",
    "Take locks in one order everywhere, never call logging/metrics/callbacks while "
    "holding a lock, and confirm with `py-spy dump --native --locals`.",
)
_GIL = Cause(
    Category.PYTHON_DEADLOCK,
    "is starved by a thread that holds the GIL",
    "Release the GIL around long native work, bound regular expressions, or move the work "
    "to a subprocess.",
)

# Appended for issue 22: a main thread blocked in a network client call waits for a server
# outside the job (views/netwait.py), whatever the job's own names say it was doing.
_NETWORK_FIX = (
    "Find the server the culprit talks to (its frames name the call; `ss -tnp` on the node "
    "shows the connection and its unsent bytes) and why it stopped answering (endpoint down, "
    "proxy, firewall, credentials). Give every client call a timeout (http.client/requests "
    "timeout=, boto3 connect_timeout/read_timeout), and upload or report from a background "
    "thread or process so that the training loop never waits on the network."
)


def _network_cause(activity: RankActivity) -> Cause | None:
    wait = network_wait(activity.process)
    if wait is None:
        return None
    return Cause(
        Category.IO_STALL,
        f"is blocked on the network in {wait.where()} (a server outside the job does not answer)",
        _NETWORK_FIX,
    )


def _node_cause(activity: RankActivity) -> Cause | None:
    process = activity.process
    if fs_stall(process) is not None:
        return _IO_STALL
    if gil_holder(process) is not None:
        return _GIL
    waits = lock_waits(process)
    main = next((w for w in waits if w.track.is_main), None)
    others = [w for w in waits if not w.track.is_main and w.kind in ("native", "futex")]
    if main is not None and (others or main.kind == "native"):
        return _LOCK
    return _network_cause(activity)


def cause_of(activity: RankActivity) -> Cause:
    """The most specific cause the culprit's main thread shows, innermost frame first;
    then what the job's own names say; else the generic divergence."""
    node = _node_cause(activity)
    if node is not None:
        return node
    if activity.main is not None:
        for tag in activity.main.tags:
            cause = _CAUSES.get(tag)
            if cause is not None:
                return cause
    own = _own_words_cause(activity)
    if own is not None:
        return own
    return Cause(Category.RANK_DIVERGENCE, "is outside any collective", _GENERIC_FIX)


# The advice for an activity read off the job's own names is the catalog's for the same
# activity; a callback gets the generic advice.
_MEANING_FIX: dict[Meaning, str] = {
    Meaning.CHECKPOINT: _CAUSES[Tag.CHECKPOINT_SAVE].fix,
    Meaning.EVAL: _CAUSES[Tag.EVAL].fix,
    Meaning.METRICS: _CAUSES[Tag.EVAL].fix,
    Meaning.DATA: _CAUSES[Tag.DATALOADER_FETCH].fix,
    Meaning.CALLBACK: _GENERIC_FIX,
}


def _own_words_cause(activity: RankActivity) -> Cause | None:
    """What the job's own frames, files and last log line say the culprit is doing."""
    frames: list[Frame] = []
    if activity.main is not None:
        frames = [f for f in activity.main.thread.frames if is_user_frame(f)]
    found = job_meaning(frames, activity.process)
    if found is None:
        return None
    meaning, signals = found
    said = "; ".join(f"{s.kind}: {s.text}" for s in signals)
    return Cause(
        CATEGORY_OF[meaning],
        f"{DOING[meaning]}, by its own names ({said})",
        _MEANING_FIX[meaning],
        signals,
    )


def key_frame_text(activity: RankActivity) -> str:
    """The frame that gave the culprit's activity, plus its innermost user frame."""
    main = activity.main
    if main is None:
        return "no Python stack"
    parts: list[str] = []
    telling = [f for t, f in main.tag_frames if t not in GENERIC_TAGS] or [
        f for _, f in main.tag_frames
    ]
    if telling:
        parts.append(telling[0].label())
    if main.user_frame is not None and main.user_frame.label() not in parts:
        parts.append("user code " + main.user_frame.label())
    if not parts and main.thread.frames:
        parts.append(main.thread.frames[0].label())
    return "; ".join(parts)
