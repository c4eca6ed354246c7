"""What the job said it was doing just before the first timeout.

A ticket's console often ends like this: the job's own line ("Saving checkpoint. This may
take some time.", "Evaluating the results...", "Getting full model state dict took 114 s")
and then the watchdog's timeouts. The rank that prints such lines is usually the one the
others waited for: it was still checkpointing or evaluating. The line's words are read with
the same vocabulary as the job's frame names (views/meaning.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hangdoc.analyzer.model import Evidence, LogEvent, LogLine, LogWindow
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import CollectiveTimeout
from hangdoc.analyzer.views.activity_table import PHASES, Activity
from hangdoc.analyzer.views.meaning import meaning_of, tokens
from hangdoc.analyzer.vocabulary import EventKind, Phase

_LOOK_BACK = 3  # job lines before the first timeout that may name the activity
# A line that reports a loss is a training step's progress line, whatever else it names
# (batch size, data time, iterations): the job was training, not saving or evaluating.
_TRAINING = frozenset({"loss", "losses"})
# A configuration dump ("xtuner_dataset_timeout = 1:00:00", "save_steps: 500",
# "eval_strategy=steps,"): frameworks print their settings at start (mmengine's config,
# HF TrainingArguments, argparse Namespaces), and a setting's name is not an activity.
_SETTING = re.compile(r"^\s*[\w.\-]+\s*[=:]\s*\S+\s*$")
_LETTER = re.compile(r"[A-Za-z]")
_TELLING = frozenset(
    {
        Activity.CHECKPOINT_SAVE,
        Activity.EVAL,
        Activity.METRICS,
        Activity.DATA,
        Activity.PREPROCESS,
    }
)


_NAME = re.compile(r"[^A-Za-z0-9_]+")


def _beside_losses(text: str) -> list[str]:
    """The words of a line outside the names of the losses it reports: a strong word in a
    loss's name says which loss ("best_validation_loss 0.2032" is a number the last
    evaluation left), not what the job is doing now."""
    words: list[str] = []
    for name in _NAME.split(text):
        own = tokens(name)
        if not _TRAINING.intersection(own):
            words.extend(own)
    return words


@dataclass(frozen=True, slots=True)
class LastWords:
    meaning: Activity
    line: LogLine
    rank: int | None  # the rank that printed it, when a prefix or its file said so
    failure: LogEvent  # the first timeout after it, in the same file


def _failures(evidence: Evidence, kinds: frozenset[EventKind]) -> dict[str, LogEvent]:
    """The first failure event (by line) of each source file."""
    first: dict[str, LogEvent] = {}
    events: Iterable[LogEvent] = [
        *evidence.job_log_events,
        *(e for p in evidence.processes for e in p.log_events),
    ]
    for event in events:
        if event.kind not in kinds or not event.line:
            continue
        known = first.get(event.source)
        if known is None or (known.line or 0) > event.line:
            first[event.source] = event
    return first


def _slot(
    by_source: dict[str, tuple[list[LogLine], list[LogEvent]]], source: str
) -> tuple[list[LogLine], list[LogEvent]]:
    found = by_source.get(source)
    if found is None:
        found = by_source[source] = ([], [])
    return found


def _of_files(lines: Sequence[LogLine], files: Iterable[str]) -> Sequence[LogLine]:
    """``lines``, or none when it is a window of a node summary none of whose lines is of
    ``files``: its lines are not built to be passed over (a job of 16,384 ranks has 25
    million, and the files a view reads are the few with a failure or a marker)."""
    if isinstance(lines, LogWindow) and all(source not in files for source in lines.sources()):
        return ()
    return lines


def _phase(event: LogEvent) -> Phase | None:
    """The phase a PHASE event's marker or bar says."""
    marker = event.payload_as(PhaseMarker)
    return marker.phase if marker is not None else None


# A bar whose own estimate (elapsed plus remaining) is under this share of the collective
# timeout is not what the ranks waited for (``_outrun``).
_WITHIN_TIMEOUT = 0.5


def _outrun(event: LogEvent, failure: LogEvent) -> bool:
    """Whether a progress bar's own numbers say its work was due to end long before the
    timeout fired: tqdm's meter states the time the work has run and its estimate of the
    time left ("5/6 [00:14<00:03, 3.19s/it]"). The ranks that timed out waited the whole
    timeout (``Timeout(ms)=1800000``); work that, by its own clock, takes a small part of
    that and printed no later state was not running when the timeout fired: it had ended
    or stopped advancing, neither of which the bar shows (a job whose work outlasts the
    timeout prints a bar whose elapsed time nears it: the README's slow-or-stuck rule)."""
    marker = event.payload_as(PhaseMarker)
    bar = marker.progress if marker is not None else None
    timeout = failure.payload_as(CollectiveTimeout)
    if bar is None or bar.elapsed_s is None or bar.remaining_s is None:
        return False
    if timeout is None or not timeout.timeout_ms:
        return False
    return bar.elapsed_s + bar.remaining_s < _WITHIN_TIMEOUT * timeout.timeout_ms / 1000


def last_words(
    evidence: Evidence,
    failure_kinds: frozenset[EventKind],
    phase_kind: EventKind,
    phases: Mapping[Phase, Activity | None],
) -> LastWords | None:
    """The activity the job's last lines before the first failure of a file name.

    Two kinds of line count: the job's own lines (read by their words), and the phase
    markers the log parser recognised in the frameworks' lines (events of ``phase_kind``
    whose ``phase`` field ``phases`` maps to an activity, or to None for a marker that
    ends one: "checkpoint saved" means the save before it is not what they waited for,
    a training bar that the job went back to training). A progress bar on the failure's
    own line counts: the timeout interrupted it.
    """
    failures = _failures(evidence, failure_kinds)
    owned = [(None, evidence.job_log_lines, evidence.job_log_events)] + [
        (p.rank, p.log_lines, p.log_events) for p in evidence.processes
    ]
    # Each writer's lines and markers by file, once: a job where every rank timed out has
    # a failure in every file, and reading every rank's lines for each file was quadratic.
    lines_in: dict[str, list[tuple[int | None, list[LogLine], list[LogEvent]]]] = {}
    for rank, lines, events in owned:
        by_source: dict[str, tuple[list[LogLine], list[LogEvent]]] = {}
        for line in _of_files(lines, failures):
            if line.source in failures:
                _slot(by_source, line.source)[0].append(line)
        for e in events:
            if e.source in failures:
                _slot(by_source, e.source)[1].append(e)
        for source, (its_lines, its_events) in by_source.items():
            lines_in.setdefault(source, []).append((rank, its_lines, its_events))
    for source, failure in sorted(failures.items()):
        limit = failure.line or 0
        said: list[tuple[int, int | None, LogLine, Activity | bool]] = []
        for rank, lines, events in lines_in.get(source, ()):
            said += [(line.line, rank, line, False) for line in lines if 0 < line.line < limit]
            for e in events:
                phase = _phase(e)
                # A tqdm bar has no newline: the timeout message that interrupts it is
                # glued to its end, on the same line (yolov5 #4409, DeepSpeed #4247).
                if (
                    e.kind == phase_kind
                    and e.line
                    and e.line <= limit
                    and phase is not None
                    and phase in phases
                ):
                    # A bar that by its own clock ended long before the timeout says
                    # nothing of what ran then: it stops the look-back, as an end does.
                    known = True if _outrun(e, failure) else phases[phase] or True
                    said.append((e.line, rank, LogLine(e.text, e.source, e.line), known))
        said.sort(key=lambda item: item[0])
        for _, rank, line, known in reversed(said[-_LOOK_BACK:]):
            if known is True:
                break  # the activity before it ended
            if known is False and _SETTING.match(line.text):
                continue
            words = tokens(line.text)
            if known is False and _TRAINING.intersection(words):
                # A training step's report ("loss=1.54, batch_size=4, d_time=0.02"): it was
                # training, unless a strong word says more (a save message glued to the
                # last training bar: torchtune #2059).
                meaning = meaning_of(_beside_losses(line.text), strong_only=True)
                if meaning not in _TELLING:
                    break
            meaning = known or meaning_of(words)
            if meaning in _TELLING:
                return LastWords(meaning, line, rank, failure)
    return None


@dataclass(frozen=True, slots=True)
class Stopped:
    """A log whose last lines say the job was evaluating or saving, and then nothing."""

    meaning: Activity
    lines: tuple[LogLine, ...]  # the last lines that name it, oldest first
    rank: int | None


_STOP_RUN = 2  # the log's last lines that must all name the activity
# Evaluation only: "checkpoint" words also fill the banners of activation checkpointing
# and of loading (gpt-neox #985 ends in DeepSpeed's activation-checkpointing banner).
_STOPPED = frozenset({Activity.EVAL, Activity.METRICS})


def stopped_during(evidence: Evidence) -> Stopped | None:
    """The activity a log ends in: its last ``_STOP_RUN`` lines with words all name the
    same one (evaluation or metrics), with no training report among them. Read on
    its own this is weak (a log can end anywhere); the caller decides when it may speak.
    Seen in detectron2 #3886: the evaluator's "Inference done 4313/4313" and "Total
    inference time" lines, then nothing while the main process computed the metrics."""
    owned = [(None, evidence.job_log_lines)] + [(p.rank, p.log_lines) for p in evidence.processes]
    for rank, lines in owned:
        by_source: dict[str, list[LogLine]] = {}
        for line in lines:
            if tokens(line.text):
                by_source.setdefault(line.source, []).append(line)
        for source in sorted(by_source):
            tail = sorted(by_source[source], key=lambda line: line.line)[-_STOP_RUN:]
            if len(tail) < _STOP_RUN:
                continue
            meanings: set[Activity | None] = set()
            for line in tail:
                words = tokens(line.text)
                if _TRAINING.intersection(words):
                    meanings.add(None)
                    break
                meanings.add(meaning_of(words))
            if len(meanings) == 1 and (meaning := meanings.pop()) in _STOPPED:
                return Stopped(meaning, tuple(tail), rank)
    return None


@dataclass(frozen=True, slots=True)
class Unfinished:
    """A save or an evaluation that a framework's marker began and no marker ended."""

    meaning: Activity
    begin: LogLine  # the last marker of the activity (DeepSpeed's "[Torch] Saving x...")
    rank: int | None  # the rank that printed it, when a prefix, its file or its text said
    failure: LogEvent | None  # the first failure after it in the same file, if any
    at_end: bool  # nothing of its writer's came after it: the log stops there


# Begin and end markers come in pairs in the frameworks' own logs (parsers/logs/phases.py
# cites each): DeepSpeed's checkpoint engines print "[Torch] Checkpoint {tag} is about to be
# saved!" / "[Torch] Saving {path}..." and then "[Torch] Saved {path}." / "… is ready now!";
# Megatron "saving checkpoint at iteration" / "successfully saved checkpoint"; HF Trainer
# "***** Running Evaluation *****" / "{'eval_loss': …}"; mmengine "Epoch(val) [1][50/500]
# eta" / "Epoch(val) [1][500/500] metrics"; detectron2 "Start inference on N batches" /
# "Evaluation results for … in csv format". A training marker (a step's report, a training
# bar) ends either: the job went back to training. Which marker begins or ends what is the
# activity table's (views/activity_table.PHASES); saves and evaluations are followed here.
_TRACKED = frozenset({Activity.CHECKPOINT_SAVE, Activity.EVAL})
_BEGINS: dict[Phase, Activity] = {
    phase: mark.begins for phase, mark in PHASES.items() if mark.begins in _TRACKED
}
_ENDS: dict[Phase, frozenset[Activity]] = {
    phase: mark.ends & _TRACKED for phase, mark in PHASES.items() if mark.ends & _TRACKED
}
# A begin further back than this many of its writer's lines before the failure (or the end)
# is too old to say what the rank did at the time: a log can miss an end marker.
_OPEN_WINDOW = 30


# Lines of its writer's that may follow the begin in a log that "stops" there: one stray
# line of a library (DeepSpeed ZeRO-3's "Invalidate trace cache @ step 0 …" warning).
_STRAY = 1


def _stopped_at(evidence: Evidence, stops: frozenset[EventKind]) -> dict[str, int]:
    """The first line of each file where someone stopped the job from outside: a launcher
    that got a signal or kills its workers (DeepSpeed launch.py's sigkill_handler
    "Killing subprocess N", torchrun's "Received Signals.SIGINT death signal"), a
    KeyboardInterrupt. What follows is the teardown, not the job's work."""
    first: dict[str, int] = {}
    events = [*evidence.job_log_events, *(e for p in evidence.processes for e in p.log_events)]
    for event in events:
        if not event.line or not (
            event.kind in stops
            or (event.kind == EventKind.EXCEPTION and Sign.INTERRUPT in event.payload.signs)
        ):
            continue
        first[event.source] = min(first.get(event.source, event.line), event.line)
    return first


def unfinished(
    evidence: Evidence,
    failure_kinds: frozenset[EventKind],
    stops: frozenset[EventKind] = frozenset(),
) -> list[Unfinished]:
    """Every writer's (rank's, or the job log's) save or evaluation left open: begun by a
    framework marker before its file's first failure (or before the end of a file without
    one, or before the line where someone stopped it: an event of ``stops``), with no end
    marker, no training marker and no training report (a line with a loss) after it,
    within the last ``_OPEN_WINDOW`` of its writer's lines. Markers only,
    never a job's own words: "checkpoint" words also fill activation-checkpointing
    banners, and a begin needs its end to be read at all."""
    failures = _failures(evidence, failure_kinds)
    stopped = _stopped_at(evidence, stops) if stops else {}
    owned = [(None, evidence.job_log_lines, evidence.job_log_events)] + [
        (p.rank, p.log_lines, p.log_events) for p in evidence.processes
    ]
    # One pass per file over every writer's lines in it: DeepSpeed's "[Rank 0] [Torch]
    # Checkpoint … is about to be saved!" names its rank, the "[Torch] Saved …" that ends it
    # does not; a marker of no one's closes what anyone opened, a rank's closes its own.
    # Only files where a marker begins something are read (nothing else can be left
    # open), and a line's words only for the last lines of its file, where they count:
    # at 1,024 ranks tokenizing every line of every log was 85 % of the analysis.
    with_begin = {
        e.source
        for _, _, events in owned
        for e in events
        if e.line and e.kind == EventKind.PHASE and _phase(e) in _BEGINS
    }
    said: dict[str, list[tuple[int, bool | None, Phase | None, str, int | None]]] = {}
    for owner, lines, events in owned:
        for line in _of_files(lines, with_begin):
            # tokens() finds a word in a line exactly when it holds a letter
            if line.source in with_begin and _LETTER.search(line.text):
                said.setdefault(line.source, []).append((line.line, None, None, line.text, owner))
        for e in events:
            if not e.line or e.kind != EventKind.PHASE:
                continue
            failure = failures.get(e.source)
            if failure is not None and _outrun(e, failure):
                # A bar that by its own clock ended long before the timeout: what it began
                # is not shown running then; it closes what is open, as a training line.
                said.setdefault(e.source, []).append((e.line, True, None, e.text, owner))
                continue
            said.setdefault(e.source, []).append((e.line, False, _phase(e), e.text, owner))
    found: list[Unfinished] = []
    for source in sorted(said):
        if not any(item[2] in _BEGINS for item in said[source]):
            continue
        failure = failures.get(source)
        limit = (failure.line or 0) if failure is not None else None
        items = [s for s in said[source] if limit is None or s[0] <= limit]
        if limit is None and source in stopped:
            items = [s for s in items if s[0] < stopped[source]]
        items.sort(key=lambda item: item[0])
        opened: dict[int | None, tuple[Activity, int, str]] = {}
        after: dict[int | None, set[int]] = {}
        for number, known, phase, text, owner in items[-_OPEN_WINDOW:]:
            training = known if known is not None else bool(_TRAINING.intersection(tokens(text)))
            if phase in _BEGINS:
                opened[owner], after[owner] = (_BEGINS[phase], number, text), set()
                continue
            closes = [
                who
                for who, (meaning, _, _) in opened.items()
                if (owner is None or who is None or who == owner)
                and (training or (phase is not None and meaning in _ENDS.get(phase, ())))
            ]
            for who in closes:
                del opened[who]
            for who, (_, begun, _) in opened.items():
                if number > begun:
                    after[who].add(number)
        for owner, (meaning, number, text) in sorted(
            opened.items(), key=lambda item: (item[0] is None, item[0] or 0)
        ):
            at_end = len(after[owner]) <= _STRAY and failure is None
            found.append(Unfinished(meaning, LogLine(text, source, number), owner, failure, at_end))
    return found
