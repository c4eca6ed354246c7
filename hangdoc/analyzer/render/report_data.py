"""The data behind the report: a Diagnosis turned into one plain, JSON-able dict.

memray's split: this module (with the section builders ``report_pictures``,
``report_ranks``, ``report_stacks``) reads the Diagnosis and the views; the writers
(``html`` with its templates, ``markdown``, ``terminal``) render the dict and never the
model, so golden tests can assert on what the report says (``build_report_data``)
without parsing HTML, and the renderers cannot disagree. The dict is deterministic for
the same Diagnosis: sorted inputs, no clock, no version (the writers add those).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.model import (
    DOC_SECTIONS,
    NO_REDACT_NOTE,
    Evidence,
    Finding,
    RuleDoc,
    Verdict,
)
from hangdoc.analyzer.ranges import LEGEND, format_ranks, has_stride, plural_ranks
from hangdoc.analyzer.render.report_common import (
    CATEGORY_LABELS,
    JsonDict,
    RankSets,
    format_time,
)
from hangdoc.analyzer.render.report_pictures import event_lanes, icicle, wavefront_map
from hangdoc.analyzer.render.report_ranks import env_differences, rank_groups, timeline
from hangdoc.analyzer.render.report_stacks import stack_classes, stack_tree, wavefront
from hangdoc.analyzer.views.fr_positions import positions

REPORT_SCHEMA = "hangdoc.report/1"
MAX_EVIDENCE_PER_FINDING = 200

_VERDICT_WORDS = {
    Verdict.HANG: "Hung",
    Verdict.NOT_HUNG: "Not hung",
    Verdict.INCONCLUSIVE: "Inconclusive",
}
_NO_CAUSE = {
    Verdict.HANG: "Hung: the job is stuck, but no rule named a cause.",
    Verdict.NOT_HUNG: "Not hung: the job was making progress.",
    Verdict.INCONCLUSIVE: "Inconclusive: no rule found a cause in the evidence given.",
}


class Documented(Protocol):
    """What supplies a rule's docs: a rule class (``Rule.rule_doc``)."""

    def rule_doc(self) -> RuleDoc: ...


def build_report_data(
    diagnosis: Diagnosis, *, rules: Sequence[Documented] | None = None
) -> JsonDict:
    """Everything the report shows, as plain data.

    ``rules`` supplies the docs for the appendix; by default the docs the engine put in
    the Diagnosis. Tests pass their own so that goldens do not change whenever a rule's
    wording does.
    """
    sets = RankSets()
    evidence = diagnosis.evidence
    culprits = set(diagnosis.primary.culprit_ranks) if diagnosis.primary else set()
    ranks, rank_index = rank_groups(
        evidence, diagnosis.activities, diagnosis.missing_ranks, culprits, sets
    )
    fr = positions(evidence)
    groups = wavefront(evidence, fr, sets)
    data: JsonDict = {
        "schema": REPORT_SCHEMA,
        "verdict": diagnosis.verdict.value,
        "headline": _headline(diagnosis, sets),
        "job": _job(diagnosis, sets),
        "stack_tree": stack_tree(evidence, diagnosis.activities, sets),
        "stack_classes": stack_classes(evidence, diagnosis.activities, sets),
        "wavefront": groups,
        "groups": _groups_summary(groups),
        "pictures": {
            "wavefront": wavefront_map(evidence, fr, culprits, sets),
            "icicle": icicle(evidence, diagnosis.activities, culprits, sets),
            "lanes": event_lanes(evidence, sets),
        },
        "timeline": timeline(evidence, sets),
        "findings": [_finding(f, diagnosis, i, sets) for i, f in enumerate(diagnosis.findings)],
        "not_evaluated": [{"rule": n.rule, "reason": n.reason} for n in diagnosis.not_evaluated],
        "ranks": ranks,
        "environment": env_differences(evidence, sets),
        "inputs": _inputs(evidence),
        "notes": list(evidence.notes),
        # said apart from the notes: a summary pasted into a ticket must carry it
        "redaction_warning": None if evidence.redacted else NO_REDACT_NOTE,
        "appendix": _appendix(
            diagnosis.findings,
            diagnosis.rule_docs if rules is None else [r.rule_doc() for r in rules],
        ),
        "rank_index": rank_index,
    }
    data["rank_sets"] = sets.items
    # Shown sets are interned with their full text too: one look decides the legend.
    data["legend"] = LEGEND if any(has_stride(t) for t in sets.items) else None
    return data


def _groups_summary(groups: list[JsonDict]) -> JsonDict:
    """How many groups need reading and which are fully matched, named in one line.

    At 1,024 ranks a job has ~140 groups, all but a few matched; a table per group put
    the findings 20,000 px down the page. The matched ones are named, not drawn.
    """
    healthy = [g["name"] for g in groups if g["healthy"]]
    numeric = [int(n) for n in healthy if n.isdigit()]
    names = [format_ranks(numeric, max_parts=40)] if numeric else []
    names += [n for n in healthy if not n.isdigit()][:20]
    return {
        "total": len(groups),
        "healthy": len(healthy),
        "healthy_names": ",".join(names) if names else None,
        "problem": len(groups) - len(healthy),
    }


def _headline(diagnosis: Diagnosis, sets: RankSets) -> JsonDict:
    """The one sentence above the fold: verdict, who, where, why, and the fix."""
    primary = diagnosis.primary
    if primary is None:
        return {
            "sentence": _NO_CAUSE[diagnosis.verdict],
            "verdict_word": _VERDICT_WORDS[diagnosis.verdict],
            "rule": None,
            "severity": None,
            "category": None,
            "category_label": None,
            "confidence_pct": None,
            "confidence_word": None,
            "culprit": None,
            "culprit_doing": [],
            "waiting": None,
            "fix": None,
        }
    title = primary.title.strip()
    sentence = f"{_VERDICT_WORDS[diagnosis.verdict]}: {title}"
    if not sentence.endswith((".", "!", "?")):
        sentence += "."
    doing: dict[str, list[int]] = {}
    for rank in primary.culprit_ranks:
        activity = diagnosis.activities.get(rank)
        if activity is not None:
            doing.setdefault(activity.description(), []).append(rank)
    culprit_doing = [
        {**sets.fields(members), "doing": text}
        for text, members in sorted(doing.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))[:3]
    ]
    return {
        "sentence": sentence,
        "verdict_word": _VERDICT_WORDS[diagnosis.verdict],
        "rule": primary.rule,
        "severity": primary.severity.value,
        "category": primary.category.value,
        "category_label": CATEGORY_LABELS[primary.category],
        "confidence_pct": round(primary.confidence * 100),
        # The strength of the evidence, in words: what the percentage rests on.
        "confidence_word": primary.strength.word,
        "culprit": sets.fields(primary.culprit_ranks) if primary.culprit_ranks else None,
        "culprit_doing": culprit_doing,
        "waiting": sets.fields(primary.waiting_ranks) if primary.waiting_ranks else None,
        "fix": primary.fix,
    }


def _job(diagnosis: Diagnosis, sets: RankSets) -> JsonDict:
    evidence = diagnosis.evidence
    hosts = sorted({p.host for p in evidence.processes if p.host} | set(evidence.hosts))
    return {
        "expected_world_size": diagnosis.expected_world_size,
        "seen": sets.fields(diagnosis.seen_ranks),
        "missing": sets.fields(diagnosis.missing_ranks) if diagnosis.missing_ranks else None,
        "hosts": len(hosts),
        "processes": len(evidence.processes),
        "collected_at": _collected_at(evidence),
    }


def _collected_at(evidence: Evidence) -> str | None:
    """When the evidence was taken, from the dumps themselves: the only time on the page."""
    stamps = sorted({h.collected_at for h in evidence.hosts.values() if h.collected_at})
    if stamps:
        return stamps[0] if len(stamps) == 1 else f"{stamps[0]} … {stamps[-1]}"
    times = [s.time for p in evidence.processes for s in p.stack_samples if s.time is not None]
    times += [s.time for p in evidence.processes for s in p.proc_samples if s.time is not None]
    if not times:
        return None
    first, last = format_time(min(times)), format_time(max(times))
    return first if first == last else f"{first} … {last}"


def _finding(finding: Finding, diagnosis: Diagnosis, index: int, sets: RankSets) -> JsonDict:
    involved = {*finding.culprit_ranks, *finding.waiting_ranks}
    involved |= {e.rank for e in finding.evidence if e.rank is not None}
    evidence = [
        {
            "rank": e.rank,
            "source": e.source,
            "line": e.line,
            "where": e.source if e.line is None else f"{e.source}:{e.line}",
            "detail": e.detail,
        }
        for e in finding.evidence[:MAX_EVIDENCE_PER_FINDING]
    ]
    return {
        "index": index,
        "primary": index == 0,
        "rule": finding.rule,
        "category": finding.category.value,
        "category_label": CATEGORY_LABELS[finding.category],
        "severity": finding.severity.value,
        "title": finding.title,
        "explanation": finding.explanation,
        "fix": finding.fix,
        "confidence_pct": round(finding.confidence * 100),
        "strength": finding.strength.word,
        "culprit": sets.fields(finding.culprit_ranks) if finding.culprit_ranks else None,
        "culprit_text": plural_ranks(finding.culprit_ranks) if finding.culprit_ranks else None,
        "waiting": sets.fields(finding.waiting_ranks) if finding.waiting_ranks else None,
        "involved": sets.fields(involved),
        "evidence": evidence,
        "more_evidence": max(0, len(finding.evidence) - MAX_EVIDENCE_PER_FINDING),
        "ranked_lower_because": _ranked_lower(finding, diagnosis.primary) if index else None,
    }


def _ranked_lower(finding: Finding, primary: Finding | None) -> str:
    """Why a finding is not the primary cause, in the engine's own ordering terms."""
    if primary is None:
        return ""
    if primary.says_not_hung and not finding.says_not_hung:
        return "progress was observed, which outweighs a hang finding"
    if finding.severity.order > primary.severity.order:
        return f"lower severity ({finding.severity.value} vs {primary.severity.value})"
    if finding.strength < primary.strength:
        return f"weaker evidence ({finding.strength.word} vs {primary.strength.word})"
    if primary.rule == finding.rule:
        return "another instance of the primary rule"
    return "same severity and strength of evidence as the primary; ordered by rule id"


def _inputs(evidence: Evidence) -> JsonDict:
    """Every file read, failures first: what could not be used is what the reader must see."""
    files = sorted(evidence.inputs, key=lambda i: (i.error is None, i.path))
    kinds: dict[str, list[int]] = {}
    for item in evidence.inputs:
        counts = kinds.setdefault(item.kind.value, [0, 0])
        counts[0] += 1
        counts[1] += item.error is not None
    return {
        "files": [
            {
                "path": i.path,
                "kind": i.kind.value,
                "ranks": plural_ranks(i.ranks) if i.ranks else None,
                "size": i.size,
                "error": i.error,
            }
            for i in files
        ],
        "errors": sum(1 for i in evidence.inputs if i.error is not None),
        "kinds": [{"kind": k, "count": c[0], "errors": c[1]} for k, c in sorted(kinds.items())],
    }


def _appendix(findings: Sequence[Finding], rules: Sequence[RuleDoc]) -> JsonDict:
    """Docs of the rules that fired, so the report explains itself offline."""
    fired = sorted({f.rule for f in findings})
    if not fired:
        return {"rules": [], "unavailable": []}
    by_id = {r.id: r for r in rules}
    out: list[JsonDict] = []
    unavailable: list[str] = []
    for rule_id in fired:
        rule = by_id.get(rule_id)
        if rule is None:
            unavailable.append(f"{rule_id}: no such rule in this version of hangdoc")
            continue
        out.append(
            {
                "rule": rule.id,
                "name": rule.name,
                "title": rule.get("title"),
                "sections": [
                    {"heading": h, "paragraphs": _paragraphs(rule.get(h))} for h in DOC_SECTIONS
                ],
            }
        )
    return {"rules": out, "unavailable": unavailable}


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in text.split("\n\n") if p.strip()]
