"""What each rank is doing, read off its stacks with the frame catalog.

Pure functions over the model. The engine computes one :class:`RankActivity` per rank
once and hands the table to every rule, and the report shows the same words (the
activity table's phrases: views/activity_table.py), so a rule and the page never disagree
about what a rank was doing.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from hangdoc.analyzer.model import (
    Evidence,
    Frame,
    ProcessEvidence,
    StackSample,
    StackTextKind,
    TextStack,
    ThreadStack,
)
from hangdoc.analyzer.views.activity_table import Activity, Kind, of_kind, phrase
from hangdoc.analyzer.views.catalog import (
    HOST_LOOP_FRAMES,
    IDLE_COLLECTIVE_FRAMES,
    LIBRARY_MARKERS,
    LIBRARY_PACKAGES,
    LIBRARY_SHORT_FILES,
    NAME_HINTS,
    OP_FAMILIES,
    SAVE_COMPLETION_WAITS,
    SIGNATURES,
    Signature,
)
from hangdoc.analyzer.views.gil_native import waits_for_gil

# Activities of a thread inside a collective or group-creation call (it waits for peers).
_WAITING_TAGS = of_kind(Kind.CALL)
# Activities that say how a thread waits, not what it is doing.
GENERIC_TAGS = of_kind(Kind.WAIT)


@dataclass(frozen=True, slots=True)
class CollectiveCall:
    """The collective a thread is in: the wire op and the API the user called."""

    op: str  # innermost matched function, e.g. "all_gather"
    family: str  # canonical family, e.g. "all_gather" for all_gather_object
    api: str  # outermost matched call, e.g. "accelerate gather"
    framework: str
    frame_index: int  # index in the thread's frames (innermost first)


@dataclass(frozen=True, slots=True)
class ThreadActivity:
    thread: ThreadStack
    tags: tuple[Activity, ...]  # innermost first, each tag once
    tag_frames: tuple[tuple[Activity, Frame], ...]  # the frame that gave each tag
    collective: CollectiveCall | None
    user_frame: Frame | None  # innermost frame in the user's own code

    @property
    def primary_tag(self) -> Activity | None:
        return self.tags[0] if self.tags else None

    def has(self, tag: Activity) -> bool:
        return tag in self.tags


@dataclass(frozen=True, slots=True)
class RankActivity:
    """One rank at its latest stacks (``ProcessEvidence.latest_stacks``: a live sample,
    or where none, a stack read from text)."""

    rank: int
    process: ProcessEvidence
    main: ThreadActivity | None
    threads: tuple[ThreadActivity, ...]
    # Threads that a traceback read from text says raised (a thread that died of an
    # uncaught exception, an exception a thread logged), when the activity is a live
    # sample: evidence about those threads, never the rank's main thread now.
    raised: tuple[tuple[ThreadStack, TextStack], ...] = ()

    @property
    def read_from_text(self) -> TextStack | None:
        """The text stack this activity was read from; None for a live sample."""
        latest = self.process.latest_stacks()
        return latest if isinstance(latest, TextStack) else None

    @property
    def waiting_call(self) -> CollectiveCall | None:
        """The collective/rendezvous the rank is blocked in (main thread), if any."""
        if self.main is not None and self.main.collective is not None:
            return self.main.collective
        return None

    @property
    def in_collective(self) -> bool:
        return self.waiting_call is not None

    def description(self) -> str:
        """Plain words: 'saving a checkpoint, waiting on a lock at StuckFile.write (train.py:66)'.

        The most telling activity comes first (checkpoint over the lock it waits on), then
        the generic wait it is blocked in, then the innermost frame of the user's code.
        """
        if self.main is None:
            return "no Python stack"
        call = self.main.collective
        where = self.main.user_frame.label() if self.main.user_frame else None
        domain = [t for t in self.main.tags if t not in GENERIC_TAGS]
        generic = [t for t in self.main.tags if t in GENERIC_TAGS]
        if call is not None:
            text = f"in {call.op}"
            if call.api and call.api != call.op:
                text += f" (via {call.api})"
        elif domain:
            text = phrase(domain[0])
            if generic and self.main.tags[0] in GENERIC_TAGS:
                text += ", " + phrase(generic[0])
        elif generic:
            text = phrase(generic[0])
        else:
            text = phrase(Activity.OWN_CODE)
        return f"{text} at {where}" if where else text


def is_user_frame(frame: Frame) -> bool:
    """True for the job's own code: not the standard library, not an installed package."""
    if frame.native:
        return False
    path = frame.file
    if not path or path.startswith("<"):
        return False
    if "/" not in path:
        return path not in LIBRARY_SHORT_FILES
    if not path.startswith("/") and path.split("/", 1)[0] in LIBRARY_PACKAGES:
        return False  # "torch/distributed/…": a package's file, as text dumps print it
    return not any(marker in path for marker in LIBRARY_MARKERS)


def _file_matches(path: str, pattern: str) -> bool:
    if pattern.endswith("/*"):
        prefix = pattern[:-1]
        return path.startswith(prefix) or f"/{prefix}" in path
    if path == pattern or path.endswith("/" + pattern):
        return True
    # Text dumps carry only the file name: accept a match on the last component.
    return "/" not in path and pattern.rsplit("/", 1)[-1] == path


@functools.lru_cache(maxsize=65536)
def _match_signature(function_leaf: str, file: str, native: bool) -> Signature | None:
    for sig in SIGNATURES:
        if native:
            if any(s in function_leaf for s in sig.native_substrings):
                return sig
            continue
        if not sig.files:
            continue
        if "*" not in sig.functions and function_leaf not in sig.functions:
            continue
        if any(_file_matches(file, pattern) for pattern in sig.files):
            return sig
    return None


@functools.lru_cache(maxsize=65536)
def _name_hint(function_leaf: str) -> Activity | None:
    for tag, pattern in NAME_HINTS:
        if pattern.search(function_leaf):
            return tag
    return None


def waits_for_every_writer(frame: Frame) -> bool:
    """The frame is a save's wait for every rank's writer to finish (the catalog's
    SAVE_COMPLETION_WAITS): a rank blocked in a collective under it has asked whether the
    others are done; the one still writing is another rank."""
    if frame.native:
        return False
    return any(
        frame.function_leaf in functions and any(_file_matches(frame.file, p) for p in files)
        for files, functions in SAVE_COMPLETION_WAITS
    )


def frame_tag(frame: Frame) -> tuple[Activity, Signature | None] | None:
    """The activity one frame stands for, if the catalog knows it."""
    leaf = frame.function if frame.native else frame.function_leaf
    sig = _match_signature(leaf, frame.file, frame.native)
    if sig is not None:
        return sig.activity, sig
    if frame.native and frame.locals and waits_for_gil(frame):
        return Activity.GIL_WAIT, None  # a wait on the GIL's own cond/mutex (gil_native.py)
    if is_user_frame(frame):
        hint = _name_hint(frame.function_leaf)
        if hint is Activity.EVAL and _unit_test(frame):
            return None  # a test runner's test case, not the job's evaluation
        if hint is not None:
            return hint, None
    return None


# A test case that pytest or unittest collects: a ``test_…`` function in a module named as
# both collect them by default (pytest's python_files "test_*.py *_test.py",
# python_functions "test"; unittest's discover pattern "test*.py" and its "test" method
# prefix). Its name says it is a test of the code, not the job evaluating a model: a
# distributed test suite's worker (torch's test_distributed.py test_get_rank_size_group)
# sets process groups up and runs collectives under such names.
_TEST_MODULE = re.compile(r"(?:^|/)(?:test_\w*|\w+_test)\.py$")
_TEST_CASE = re.compile(r"test_\w+")


def _unit_test(frame: Frame) -> bool:
    return bool(_TEST_CASE.fullmatch(frame.function_leaf) and _TEST_MODULE.search(frame.file))


def classify_thread(thread: ThreadStack) -> ThreadActivity:
    """What one thread is doing. The work depends on the frames only, and thousands of
    ranks share them (a 16k-rank job waits in one all_gather), so it is done once per
    distinct (frames, active) and the result re-labelled with this thread, its frame
    objects included (rules compare frames by identity)."""
    frames = thread.frames
    shape, tag_index, user_index = _shape_of(frames, thread.active)
    if frames is shape.thread.frames:
        tag_frames, user_frame = shape.tag_frames, shape.user_frame
    else:
        tag_frames = tuple(
            (tag, frames[i]) for (tag, _), i in zip(shape.tag_frames, tag_index, strict=True)
        )
        user_frame = frames[user_index] if user_index is not None else None
    return ThreadActivity(
        thread=thread,
        tags=shape.tags,
        tag_frames=tag_frames,
        collective=shape.collective,
        user_frame=user_frame,
    )


# The shapes by the frames tuple's identity: thread shapes are interned (a summary's
# ranks share one tuple per shape, summaries/read.py), and the lru_cache's key hashes
# every Frame of the tuple again at each call (a dataclass __hash__ in Python: 72 a rank
# at 4,096 ranks). The tuple is held with its entry, so its id is not reused while there.
_BY_ID: dict[
    tuple[int, bool | None],
    tuple[tuple[Frame, ...], tuple[ThreadActivity, tuple[int, ...], int | None]],
] = {}


def _shape_of(
    frames: tuple[Frame, ...], active: bool | None
) -> tuple[ThreadActivity, tuple[int, ...], int | None]:
    hit = _BY_ID.get((id(frames), active))
    if hit is not None and hit[0] is frames:
        return hit[1]
    found = _classify_shape(frames, active)
    if len(_BY_ID) >= _SHAPES_KEPT:  # (stacks not interned: one entry a thread)
        _BY_ID.clear()
    _BY_ID[(id(frames), active)] = (frames, found)
    return found


def _position(frames: tuple[Frame, ...], frame: Frame | None) -> int | None:
    return next((i for i, f in enumerate(frames) if f is frame), None)


_SHAPES_KEPT = 1 << 16


@functools.lru_cache(maxsize=_SHAPES_KEPT)
def _classify_shape(
    frames: tuple[Frame, ...], active: bool | None
) -> tuple[ThreadActivity, tuple[int, ...], int | None]:
    """The classification of a thread with these frames, and the positions of the frames
    it names (tag frames, user frame) so that an equal tuple can be re-labelled."""
    shape = _classify_uncached(ThreadStack(frames=frames, active=active))
    tag_index = tuple(_position(frames, f) or 0 for _, f in shape.tag_frames)
    return shape, tag_index, _position(frames, shape.user_frame)


def forget_shapes() -> None:
    """Drop the classified thread shapes: they hold frames (and their ``--locals``) of
    the last Evidence; the engine calls this when an analysis ends. The catalog lookups
    (_match_signature, _name_hint) are keyed on names only and stay."""
    _classify_shape.cache_clear()
    _BY_ID.clear()


def _classify_uncached(thread: ThreadStack) -> ThreadActivity:
    tags: list[Activity] = []
    tag_frames: list[tuple[Activity, Frame]] = []
    inner_call: tuple[int, Frame, Signature] | None = None
    outer_call: tuple[int, Frame, Signature] | None = None
    user_frame: Frame | None = None
    for index, frame in enumerate(thread.frames):
        if user_frame is None and is_user_frame(frame):
            user_frame = frame
        found = frame_tag(frame)
        if found is None:
            continue
        tag, sig = found
        if tag not in tags:
            tags.append(tag)
            tag_frames.append((tag, frame))
        if tag in _WAITING_TAGS and sig is not None:
            if inner_call is None or (
                inner_call[2].native_substrings and not sig.native_substrings
            ):
                inner_call = (index, frame, sig)
            if not sig.native_substrings:
                outer_call = (index, frame, sig)
    collective = None
    if inner_call is not None:
        index, frame, sig = inner_call
        op = frame.function_leaf if not frame.native else "wait"
        api_frame, api_sig = (outer_call[1], outer_call[2]) if outer_call else (frame, sig)
        api_name = api_frame.function_leaf
        api = (
            api_name
            if api_sig.framework == "torch.distributed"
            else f"{api_sig.framework} {api_name}"
        )
        family = OP_FAMILIES.get(op, op.lstrip("_"))
        if sig.activity is Activity.RENDEZVOUS:
            # Store creation, handlers and barriers are steps of one group creation: name
            # it by the call the user made (init_process_group, new_group).
            op = api_name
            family = OP_FAMILIES.get(api_name, "init_process_group")
        collective = CollectiveCall(
            op=op,
            family=family,
            api=api,
            framework=api_sig.framework,
            frame_index=index,
        )
    # A process whose only Python frame is a sleep shows nothing more: leave tags empty.
    return ThreadActivity(
        thread=thread,
        tags=tuple(tags),
        tag_frames=tuple(tag_frames),
        collective=collective,
        user_frame=user_frame,
    )


def _sleeping(thread: ThreadStack, process: ProcessEvidence) -> bool:
    """py-spy called the thread idle, or (its idle flag being a heuristic) the thread
    used next to no CPU time between the last two samples."""
    if thread.active is False:
        return True
    states = [
        t
        for sample in process.proc_samples[-2:]
        for t in sample.threads
        if t.tid == thread.os_thread_id
    ]
    ticks = [t.cpu_ticks for t in states if t.cpu_ticks is not None]
    return len(ticks) == 2 and ticks[1] - ticks[0] <= 2


def _idle_collective(thread: ThreadStack) -> CollectiveCall | None:
    """An idle thread whose innermost Python frame waits for a collective it does not
    name (catalog.IDLE_COLLECTIVE_FRAMES: DDP's gradient all_reduce inside backward)."""
    for index, frame in enumerate(thread.frames):
        if frame.native:
            continue
        for file, function, family, api in IDLE_COLLECTIVE_FRAMES:
            if frame.function_leaf == function and _file_matches(frame.file, file):
                return CollectiveCall(
                    op=family,
                    family=family,
                    api=api,
                    framework="torch.nn.parallel (DDP)",
                    frame_index=index,
                )
        return None
    return None


def _hosting(thread: ThreadStack) -> bool:
    """The thread's innermost Python frame is a runtime's loop that hosts the job's code
    in other threads (catalog.HOST_LOOP_FRAMES: a Ray worker's main_loop)."""
    frame = next((f for f in thread.frames if not f.native), None)
    return frame is not None and any(
        frame.function_leaf == function and _file_matches(frame.file, file)
        for file, function in HOST_LOOP_FRAMES
    )


def _hosted_work(host: ThreadActivity, threads: tuple[ThreadActivity, ...]) -> ThreadActivity:
    """The thread that does the job's work in a process whose main thread only hosts it:
    the one in a collective, else the one the catalog says most about (an activity that
    is not only a way of waiting), else the one in the job's own code; the host where no
    other thread shows any of these."""
    others = [a for a in threads if a is not host]
    tests: tuple[Callable[[ThreadActivity], bool], ...] = (
        lambda a: a.collective is not None,
        lambda a: any(t not in GENERIC_TAGS for t in a.tags),
        lambda a: a.user_frame is not None,
    )
    for wanted in tests:
        found = [a for a in others if wanted(a)]
        if len(found) == 1:
            return found[0]
        if found:
            # several: the deepest stack is the one running the job's call chain
            return max(found, key=lambda a: len(a.thread.frames))
    return host


def classify_process(rank: int, process: ProcessEvidence) -> RankActivity | None:
    sample = process.latest_stacks()
    if sample is None:
        return None
    threads = tuple(classify_thread(t) for t in sample.threads)
    main: ThreadActivity | None = None
    for activity in threads:
        if activity.thread.is_main:
            main = activity
            break
    if main is None and threads:
        # No thread is marked main (a faulthandler dump without "Current thread"):
        # prefer the one in a collective, else the first.
        main = next((a for a in threads if a.collective is not None), threads[0])
    if main is not None and _hosting(main.thread):
        main = _hosted_work(main, threads)
    if main is not None and main.collective is None and _sleeping(main.thread, process):
        # Idle in backward is DDP's gradient all_reduce — unless another thread holds the
        # GIL, in which case the main thread may merely be waiting for it.
        others_hold_gil = any(a.thread.owns_gil for a in threads if a is not main)
        call = None if others_hold_gil else _idle_collective(main.thread)
        if call is not None:
            waiting = dataclasses.replace(main, collective=call)
            threads = tuple(waiting if a is main else a for a in threads)
            main = waiting
    raised: tuple[tuple[ThreadStack, TextStack], ...] = ()
    if isinstance(sample, StackSample):
        raised = tuple(
            (thread, text)
            for text in process.text_stacks
            for thread in text.threads
            if thread.exception is not None
        )
    return RankActivity(rank=rank, process=process, main=main, threads=threads, raised=raised)


def classify_ranks(evidence: Evidence) -> dict[int, RankActivity]:
    out: dict[int, RankActivity] = {}
    for rank, process in evidence.ranked().items():
        activity = classify_process(rank, process)
        if activity is not None:
            out[rank] = activity
    return out


# Appended for issue 21 (text agrees with live): a thread in backward() whose stack says
# nothing of whether it sleeps (frames pasted without py-spy's thread lines, no /proc).
def may_wait_in_gradient_sync(activity: RankActivity) -> bool:
    """The main thread is in a frame DDP's gradient all-reduce waits from
    (catalog.IDLE_COLLECTIVE_FRAMES) and nothing says whether it is idle there: no py-spy
    idle mark (frames only, faulthandler) and no CPU time from /proc. It may be computing
    its backward, or waiting for peers in the all-reduce: neither a culprit outside the
    collectives nor a rank known to wait in one."""
    main = activity.main
    if main is None or main.collective is not None or main.thread.active is not None:
        return False
    if activity.process.proc_samples:
        return False
    return _idle_collective(main.thread) is not None


def live_activities(activities: Mapping[int, RankActivity]) -> list[RankActivity]:
    """Ranks whose process was alive at collection, by rank: what cross-rank rules compare."""
    return sorted((a for a in activities.values() if not a.process.exited), key=lambda a: a.rank)


def group_by_call(activities: Iterable[RankActivity]) -> Mapping[str, list[int]]:
    """Ranks per collective family they are blocked in (main thread)."""
    groups: dict[str, list[int]] = {}
    for activity in activities:
        call = activity.waiting_call
        if call is not None:
            groups.setdefault(call.family, []).append(activity.rank)
    return groups


# Appended for issue 21 (stacks known by their frames, with or without their headers):
# the stacks of processes no rank is known for. A paste of several ranks' stacks often
# names none of them (frames only, or py-spy's thread lines without a rank label), yet
# where each process waits is read the same way as a rank's.
UNRANKED = -1  # the rank of a RankActivity whose process's rank is unknown
# Text that is a snapshot of a process's threads where it was (a dump), not a post-mortem
# record of where one raised (a traceback, a C++ exception stack).
_SNAPSHOT_KINDS = frozenset(
    {
        StackTextKind.PYSPY,
        StackTextKind.FAULTHANDLER,
        StackTextKind.PYSTACK,
        StackTextKind.GDB,
        StackTextKind.PY_BT,
    }
)


def unranked_activities(evidence: Evidence) -> list[RankActivity]:
    """What each live process whose rank is unknown was doing at its latest snapshot (a
    live sample, or a dump read from text: not a traceback, which says where a thread
    raised, perhaps long before), with ``UNRANKED`` as its rank. The loader keeps
    processes apart by what the inputs say (a file, a pid, a dump of its own in a
    paste), so each is another process than the others, whose rank nobody wrote."""
    out: list[RankActivity] = []
    for process in evidence.processes:
        if process.rank is not None or process.exited:
            continue
        latest = process.latest_stacks()
        if latest is None or (
            isinstance(latest, TextStack) and _SNAPSHOT_KINDS.isdisjoint(latest.kinds)
        ):
            continue
        activity = classify_process(UNRANKED, process)
        if activity is not None:
            out.append(activity)
    return out
