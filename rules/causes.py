"""What a rank's activity says about the cause: which activity explains the culprit.

The kernel and the rank's other threads speak first (a stalled file system, a lock cycle,
the GIL), then the frame catalog's activities innermost first, then the job's own names.
The words, category and fix of each activity are the activity table's
(analyzer/views/activity_table.py). Shared by the rules that name a culprit by what it is
doing (HD001, HD108, the flight recorder's texts), so the same activity always gets the
same category and the same fix.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hangdoc.analyzer.model import Category, Frame
from hangdoc.analyzer.views.activity import GENERIC_TAGS, RankActivity, is_user_frame
from hangdoc.analyzer.views.activity_table import TABLE, Activity
from hangdoc.analyzer.views.iofacts import fs_stall
from hangdoc.analyzer.views.locks import WaitKind, gil_holder, lock_waits
from hangdoc.analyzer.views.meaning import Signal, job_meaning
from hangdoc.analyzer.views.netwait import network_wait


@dataclass(frozen=True, slots=True)
class Cause:
    category: Category
    doing: str  # "is saving a checkpoint"
    fix: str
    # When the cause comes from the job's own names (not the catalog): the independent
    # signals that agree on it (its frames, the files it writes, its last log line).
    signals: tuple[Signal, ...] = ()


def _cause(activity: Activity, signals: tuple[Signal, ...] = ()) -> Cause:
    row = TABLE[activity]
    return Cause(row.category, f"is {row.phrase}", row.fix, signals)


# Appended for issue 22: a main thread blocked in a network client call waits for a server
# outside the job (views/netwait.py), whatever the job's own names say it was doing.
def _network_cause(activity: RankActivity) -> Cause | None:
    wait = network_wait(activity.process)
    if wait is None:
        return None
    row = TABLE[Activity.NETWORK_IO]
    where = f"in {wait.where()} (a server outside the job does not answer)"
    return Cause(row.category, f"is {row.phrase} {where}", row.fix)


def _node_cause(activity: RankActivity) -> Cause | None:
    process = activity.process
    if fs_stall(process) is not None:
        return _cause(Activity.FS_STALL)
    if gil_holder(process) is not None:
        return _cause(Activity.GIL_STARVED)
    waits = lock_waits(process)
    main = next((w for w in waits if w.track.is_main), None)
    others = [
        w for w in waits if not w.track.is_main and w.kind in (WaitKind.NATIVE, WaitKind.FUTEX)
    ]
    if main is not None and (others or main.kind == WaitKind.NATIVE):
        return _cause(Activity.LOCK_CYCLE)
    return _network_cause(activity)


def cause_of(activity: RankActivity) -> Cause:
    """The most specific cause the culprit's main thread shows, innermost frame first;
    then what the job's own names say; else the generic divergence."""
    node = _node_cause(activity)
    if node is not None:
        return node
    if activity.main is not None:
        for tag in activity.main.tags:
            if TABLE[tag].names_cause:
                return _cause(tag)
    own = _own_words_cause(activity)
    if own is not None:
        return own
    return _cause(Activity.OUTSIDE_COLLECTIVES)


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
    cause = _cause(meaning, signals)
    return replace(cause, doing=f"{cause.doing}, by its own names ({said})")


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
