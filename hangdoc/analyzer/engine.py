"""Runs every rule over the Evidence and turns their findings into a Diagnosis.

Ranking: a finding that proves progress (not hung) comes first, then by severity, then
by the strength of its evidence (then rule id). The verdict follows from the findings:
progress → ``not_hung``; a critical or error finding → ``hang``; otherwise
``inconclusive`` with the fallback rule's ``unknown`` finding on top.
"""

from __future__ import annotations

import gc
from dataclasses import replace

from hangdoc.analyzer.calibration import CalibrationTable, calibrated
from hangdoc.analyzer.diagnosis import Diagnosis, NotEvaluated
from hangdoc.analyzer.model import Evidence, Finding, LogWindow, Severity, Verdict
from hangdoc.analyzer.views.activity import classify_ranks, forget_shapes
from hangdoc.common.redact import redact_text
from hangdoc.rules import all_rules
from hangdoc.rules.base import Rule, RuleContext


def analyze(
    evidence: Evidence,
    rules: tuple[type[Rule], ...] | None = None,
    *,
    calibrate: bool = True,
    table: CalibrationTable | None = None,
) -> Diagnosis:
    """Run the rules; with ``calibrate`` (the default) each finding's confidence is the
    calibrated probability of its strength (``table``, else the shipped one:
    analyzer/calibration.py); without, the strength's stated one (to measure the rules)."""
    # Rules build many small acyclic objects (one per rank and rule at 16k ranks); the
    # cyclic collector would rescan the whole Evidence again and again for nothing.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        notes = len(evidence.notes)
        while True:
            diagnosis = _analyze(evidence, rules, table if calibrate else None, calibrate)
            kept = _drop_damaged_windows(evidence, notes)
            if kept is None:
                return diagnosis
            forget_shapes()
            notes = kept
    finally:
        forget_shapes()  # nothing of this Evidence outlives the analysis
        if gc_was_enabled:
            gc.enable()


def _drop_damaged_windows(evidence: Evidence, notes: int) -> int | None:
    """After an analysis: were ranks' log windows found damaged as they were read (a node
    summary's numbers are checked a run at a time, when first read: LogWindow.damage)?
    Then each is left out, with a warning naming its summary file and rank, the notes of
    that analysis are undone (a rule that stopped on the damaged run noted a failure),
    and True: the analysis is run again without them, so that what the other ranks'
    windows say is read as if the damaged window had never been there (the notes kept
    then: their count; None when nothing was damaged)."""
    damaged = [
        (proc, why)
        for proc in evidence.processes
        if isinstance(proc.log_lines, LogWindow) and (why := proc.log_lines.damage()) is not None
    ]
    if not damaged:
        return None
    del evidence.notes[notes:]
    for proc, why in damaged:
        proc.log_lines = []
        proc.log_templates = None
        evidence.notes.append(f"{why}; that rank's log window is left out, the rest is read")
    return len(evidence.notes)


def _analyze(
    evidence: Evidence,
    rules: tuple[type[Rule], ...] | None,
    table: CalibrationTable | None,
    calibrate: bool,
) -> Diagnosis:
    activities = classify_ranks(evidence)
    ctx = RuleContext(evidence=evidence, activities=activities)
    chosen = rules if rules is not None else all_rules()
    findings: list[Finding] = []
    not_evaluated: list[NotEvaluated] = []
    fallbacks = [r for r in chosen if r.fallback]
    afters = [r for r in chosen if r.after and not r.fallback]
    for rule_cls in chosen:
        if not (rule_cls.fallback or rule_cls.after):
            _run(rule_cls, ctx, evidence, not_evaluated, findings)
    if afters:
        # After rules weigh what the others found (HD038: did anything explain it?).
        before = replace(ctx, prior=tuple(sorted(findings, key=Finding.sort_key)))
        found: list[Finding] = []
        for rule_cls in afters:
            _run(rule_cls, before, evidence, not_evaluated, found)
        findings.extend(found)
    # Ordered by the strengths of their evidence, then calibrated: the probability of
    # a (family, strength) never decides which finding comes first.
    findings.sort(key=Finding.sort_key)
    if evidence.redacted:
        findings = [_redacted(f) for f in findings]
    if calibrate:
        findings = [calibrated(f, table) for f in findings]
    verdict = _verdict(findings)
    if verdict is Verdict.INCONCLUSIVE:
        after = replace(ctx, prior=tuple(findings))  # they weigh what the others found
        for rule_cls in fallbacks:
            findings = [*rule_cls().check(after), *findings]
    expected = evidence.expected_world_size()
    seen = evidence.seen_ranks()
    missing_ranks = sorted(set(range(expected)) - set(seen)) if expected else []
    return Diagnosis(
        verdict=verdict,
        findings=findings,
        evidence=evidence,
        activities=activities,
        expected_world_size=expected,
        seen_ranks=seen,
        missing_ranks=missing_ranks,
        not_evaluated=not_evaluated,
        rule_docs=tuple(r.rule_doc() for r in chosen if r.id in {f.rule for f in findings}),
    )


def _redacted(finding: Finding) -> Finding:
    """The finding with its words redacted as the Evidence was.

    The Evidence is redacted once after loading, but not the ranks' log windows
    (``log_lines``: 1,567 lines a rank, millions at 16,384 ranks, each a few µs): the
    views quote those lines into findings (the last thing a rank said, the line its log
    stopped on), so the findings, a few per analysis, are where a credential in such a
    line is caught before any output is written."""
    title, explanation, fix = (
        redact_text(t) for t in (finding.title, finding.explanation, finding.fix)
    )
    refs = tuple(
        replace(r, detail=detail) if (detail := redact_text(r.detail)) != r.detail else r
        for r in finding.evidence
    )
    if (title, explanation, fix) == (finding.title, finding.explanation, finding.fix) and all(
        a is b for a, b in zip(refs, finding.evidence, strict=True)
    ):
        return finding
    return replace(finding, title=title, explanation=explanation, fix=fix, evidence=refs)


def _run(
    rule_cls: type[Rule],
    ctx: RuleContext,
    evidence: Evidence,
    not_evaluated: list[NotEvaluated],
    into: list[Finding],
) -> None:
    """One rule's findings, added to ``into``; a missing need or a failure is noted."""
    missing = [need for need in sorted(rule_cls.requires) if not ctx.has(need)]
    if missing:
        not_evaluated.append(
            NotEvaluated(rule_cls.id, "missing " + ", ".join(str(m) for m in missing))
        )
        return
    try:
        into.extend(rule_cls().check(ctx))
    except Exception as exc:  # one rule's bug must not cost the user the others
        not_evaluated.append(
            NotEvaluated(rule_cls.id, f"failed ({type(exc).__name__}: {exc}); a bug")
        )
        evidence.notes.append(
            f"rule {rule_cls.id} failed on these inputs ({type(exc).__name__}: {exc}); "
            "the other rules ran. Please report it with the inputs."
        )


def _verdict(findings: list[Finding]) -> Verdict:
    if findings and findings[0].says_not_hung:
        return Verdict.NOT_HUNG
    if any(f.severity in (Severity.CRITICAL, Severity.ERROR) for f in findings):
        return Verdict.HANG
    return Verdict.INCONCLUSIVE
