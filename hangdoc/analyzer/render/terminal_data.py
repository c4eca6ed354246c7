"""The data behind the terminal summary: what it prints, as plain JSON-able values.

The terminal's own ``build_report_data`` (report_data.py): smaller, with no pictures and
no tree, since it runs after every analysis, also of 16,384 ranks, before the person on
call reads a line. ``terminal.py`` prints it and never reads the model.
"""

from __future__ import annotations

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.model import Finding, Verdict
from hangdoc.analyzer.ranges import LEGEND, format_ranks, has_stride, plural_ranks
from hangdoc.analyzer.render.report_common import JsonDict
from hangdoc.analyzer.views.activity import is_user_frame
from hangdoc.analyzer.views.stack_groups import StackClass, equivalence_classes

TERMINAL_CLASSES = 8
TERMINAL_FRAMES = 12
TERMINAL_EVIDENCE = 6
TERMINAL_INPUT_PROBLEMS = 20
TERMINAL_NOTES = 10


def build_terminal_data(diagnosis: Diagnosis) -> JsonDict:
    """The verdict and the cause first, then what every rank is doing, then the inputs'
    problems."""
    primary = diagnosis.primary
    classes = equivalence_classes(diagnosis.evidence)
    shown = classes[:TERMINAL_CLASSES]
    data: JsonDict = {
        "verdict": diagnosis.verdict.value,
        "seen": format_ranks(diagnosis.seen_ranks) or "none",
        "expected": diagnosis.expected_world_size,
        "missing": format_ranks(diagnosis.missing_ranks) if diagnosis.missing_ranks else None,
        "primary": _terminal_primary(primary) if primary is not None else None,
        "others": [
            {
                "rule": f.rule,
                "severity": f.severity.value,
                "category": f.category.value,
                "title": f.title,
            }
            for f in diagnosis.findings[1:]
        ],
        "classes": [_terminal_class(c, diagnosis) for c in shown],
        "more_classes": len(classes) - len(shown),
        **_terminal_inputs(diagnosis),
    }
    texts = [format_ranks(diagnosis.seen_ranks), format_ranks(diagnosis.missing_ranks)]
    for finding in diagnosis.findings:
        texts += [finding.title, finding.explanation, format_ranks(finding.culprit_ranks)]
        texts.append(format_ranks(finding.waiting_ranks))
    texts += [format_ranks(c.ranks) for c in shown]
    data["legend"] = LEGEND if any(has_stride(t) for t in texts) else None
    return data


def _terminal_primary(primary: Finding) -> JsonDict:
    return {
        "title": primary.title,
        "category": primary.category.value,
        "culprit": format_ranks(primary.culprit_ranks) if primary.culprit_ranks else None,
        "confidence": f"{primary.confidence:.0%}",
        "rule": primary.rule,
        "waiting": format_ranks(primary.waiting_ranks) if primary.waiting_ranks else None,
        "explanation": primary.explanation,
        "fix": primary.fix,
        "evidence": [
            {"where": ref.source + (f":{ref.line}" if ref.line else ""), "detail": ref.detail}
            for ref in primary.evidence[:TERMINAL_EVIDENCE]
        ],
    }


def _terminal_class(cls: StackClass, diagnosis: Diagnosis) -> JsonDict:
    ranks, frames = cls.ranks, cls.frames
    activity = diagnosis.activities.get(ranks[0])
    return {
        "ranks": plural_ranks(ranks) + (f" ({len(ranks)})" if len(ranks) > 1 else ""),
        "doing": activity.description() if activity else "",
        "read_from_text": cls.read_from_text,
        "frames": [
            {"label": f.label(), "user": is_user_frame(f)} for f in frames[:TERMINAL_FRAMES]
        ],
        "more_frames": max(0, len(frames) - TERMINAL_FRAMES),
    }


def _terminal_inputs(diagnosis: Diagnosis) -> JsonDict:
    """Input problems once (the loader also keeps each as a note: those are not repeated);
    they matter when the diagnosis is incomplete (no cause found, or ranks missing)."""
    bad = [i for i in diagnosis.evidence.inputs if i.error]
    problems = {f"{i.path}: {i.error}" for i in bad}
    notes = []
    for note in diagnosis.evidence.notes:
        lines = [ln for ln in note.splitlines() if ln.strip() not in problems]
        if lines:
            notes.append("\n".join(lines))
    by_reason: dict[str, list[str]] = {}
    for skipped in diagnosis.not_evaluated:
        by_reason.setdefault(skipped.reason, []).append(skipped.rule)
    matters = diagnosis.verdict is Verdict.INCONCLUSIVE or bool(diagnosis.missing_ranks)
    return {
        "input_problems": [f"{i.path}: {i.error}" for i in bad[:TERMINAL_INPUT_PROBLEMS]],
        "more_input_problems": max(0, len(bad) - TERMINAL_INPUT_PROBLEMS),
        "problems_matter": matters,
        "notes": notes[:TERMINAL_NOTES],
        "not_evaluated": [
            {"reason": reason, "rules": rules} for reason, rules in sorted(by_reason.items())
        ],
    }
