"""What the job said it was doing just before the first timeout.

A ticket's console often ends like this: the job's own line ("Saving checkpoint. This may
take some time.", "Evaluating the results...", "Getting full model state dict took 114 s")
and then the watchdog's timeouts. The rank that prints such lines is usually the one the
others waited for: it was still checkpointing or evaluating. The line's words are read with
the same vocabulary as the job's frame names (views/meaning.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hangdoc.analyzer.model import Evidence, LogEvent, LogLine
from hangdoc.analyzer.views.meaning import Meaning, meaning_of, tokens

_LOOK_BACK = 3  # job lines before the first timeout that may name the activity
# A line that reports a loss is a training step's progress line, whatever else it names
# (batch size, data time, iterations): the job was training, not saving or evaluating.
_TRAINING = frozenset({"loss", "losses"})
_TELLING = frozenset(
    {Meaning.CHECKPOINT, Meaning.EVAL, Meaning.METRICS, Meaning.DATA, Meaning.PREPROCESS}
)


@dataclass(frozen=True, slots=True)
class LastWords:
    meaning: Meaning
    line: LogLine
    rank: int | None  # the rank that printed it, when a prefix or its file said so
    failure: LogEvent  # the first timeout after it, in the same file


def _failures(evidence: Evidence, kinds: frozenset[str]) -> dict[str, LogEvent]:
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


def last_words(
    evidence: Evidence,
    failure_kinds: frozenset[str],
    phase_kind: str,
    phases: Mapping[str, Meaning | None],
) -> LastWords | None:
    """The activity the job's last lines before the first failure of a file name.

    Two kinds of line count: the job's own lines (read by their words), and the phase
    markers the log parser recognised in the frameworks' lines (events of ``phase_kind``
    whose ``phase`` field ``phases`` maps to an activity, or to None for a marker that
    ends one: "checkpoint saved" means the save before it is not what they waited for,
    a training bar that the job went back to training). A progress bar on the failure's
    own line counts: the timeout interrupted it.
    """
    for source, failure in sorted(_failures(evidence, failure_kinds).items()):
        limit = failure.line or 0
        owned = [(None, evidence.job_log_lines, evidence.job_log_events)] + [
            (p.rank, p.log_lines, p.log_events) for p in evidence.processes
        ]
        said: list[tuple[int, int | None, LogLine, Meaning | bool]] = []
        for rank, lines, events in owned:
            said += [
                (line.line, rank, line, False)
                for line in lines
                if line.source == source and 0 < line.line < limit
            ]
            said += [
                (e.line, rank, LogLine(e.text, e.source, e.line), phases[phase] or True)
                for e in events
                if e.kind == phase_kind
                and e.source == source
                and e.line
                # A tqdm bar has no newline: the timeout message that interrupts it is
                # glued to its end, on the same line (yolov5 #4409, DeepSpeed #4247).
                and e.line <= limit
                and (phase := dict(e.fields).get("phase", "")) in phases
            ]
        said.sort(key=lambda item: item[0])
        for _, rank, line, known in reversed(said[-_LOOK_BACK:]):
            if known is True:
                break  # the activity before it ended
            words = tokens(line.text)
            if known is False and _TRAINING.intersection(words):
                # A training step's report ("loss=1.54, batch_size=4, d_time=0.02"): it was
                # training, unless a strong word says more (a save message glued to the
                # last training bar: torchtune #2059).
                meaning = meaning_of(words, strong_only=True)
                if meaning not in _TELLING:
                    break
            meaning = known or meaning_of(words)
            if meaning in _TELLING:
                return LastWords(meaning, line, rank, failure)
    return None


@dataclass(frozen=True, slots=True)
class Stopped:
    """A log whose last lines say the job was evaluating or saving, and then nothing."""

    meaning: Meaning
    lines: tuple[LogLine, ...]  # the last lines that name it, oldest first
    rank: int | None


_STOP_RUN = 2  # the log's last lines that must all name the activity
# Evaluation only: "checkpoint" words also fill the banners of activation checkpointing
# and of loading (gpt-neox #985 ends in DeepSpeed's activation-checkpointing banner).
_STOPPED = frozenset({Meaning.EVAL, Meaning.METRICS})


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
            meanings: set[Meaning | None] = set()
            for line in tail:
                words = tokens(line.text)
                if _TRAINING.intersection(words):
                    meanings.add(None)
                    break
                meanings.add(meaning_of(words))
            if len(meanings) == 1 and (meaning := meanings.pop()) in _STOPPED:
                return Stopped(meaning, tuple(tail), rank)
    return None
