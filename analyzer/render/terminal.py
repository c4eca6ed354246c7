"""The terminal summary: the verdict and the cause first, then what every rank is doing.

Written for the person on call: the first three lines must answer "which rank, where,
why"; everything else is detail below them.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.model import Severity, Verdict
from hangdoc.analyzer.ranges import LEGEND, format_ranks, has_stride, plural_ranks
from hangdoc.analyzer.render.stacktree import equivalence_classes
from hangdoc.analyzer.views.activity import is_user_frame

_VERDICT_STYLE = {
    Verdict.HANG: "bold red",
    Verdict.NOT_HUNG: "bold green",
    Verdict.INCONCLUSIVE: "bold yellow",
}
_SEVERITY_STYLE = {
    Severity.CRITICAL: "red",
    Severity.ERROR: "red",
    Severity.WARNING: "yellow",
    Severity.INFO: "cyan",
}
MAX_CLASSES = 8
MAX_FRAMES = 12


def render_terminal(diagnosis: Diagnosis, console: Console, *, verbose: bool = False) -> None:
    """The answer, its evidence and fix first; what was not evaluated is one closing line
    (``verbose``: every rule by reason), so it never buries the answer's end."""
    console.print(_headline(diagnosis))
    if diagnosis.findings:
        console.print(_primary_panel(diagnosis))
    others = diagnosis.findings[1:]
    if others:
        table = Table(title="Other findings", show_lines=False, expand=False)
        table.add_column("rule")
        table.add_column("severity")
        table.add_column("category")
        table.add_column("finding")
        for finding in others:
            table.add_row(
                finding.rule,
                Text(finding.severity.value, style=_SEVERITY_STYLE[finding.severity]),
                finding.category.value,
                Text(finding.title),
            )
        console.print(table)
    _print_classes(diagnosis, console)
    _print_inputs(diagnosis, console)
    if _uses_stride(diagnosis):
        console.print(Text(f"rank sets: {LEGEND}", style="dim"))
    _print_not_evaluated(diagnosis, console, verbose=verbose)


def _uses_stride(diagnosis: Diagnosis) -> bool:
    """Whether any rank set printed above is strided: then the legend follows, once."""
    texts = [format_ranks(diagnosis.seen_ranks), format_ranks(diagnosis.missing_ranks)]
    for finding in diagnosis.findings:
        texts += [finding.title, finding.explanation, format_ranks(finding.culprit_ranks)]
        texts.append(format_ranks(finding.waiting_ranks))
    texts += [format_ranks(c.ranks) for c in equivalence_classes(diagnosis.evidence)[:MAX_CLASSES]]
    return any(has_stride(t) for t in texts)


def _headline(diagnosis: Diagnosis) -> Text:
    text = Text()
    text.append(f"verdict: {diagnosis.verdict.value}", style=_VERDICT_STYLE[diagnosis.verdict])
    expected = diagnosis.expected_world_size
    seen = format_ranks(diagnosis.seen_ranks) or "none"
    text.append(f"   ranks seen: {seen}")
    if expected is not None:
        text.append(f" of {expected}")
    if diagnosis.missing_ranks:
        text.append(f"   missing: {format_ranks(diagnosis.missing_ranks)}", style="red")
    return text


def _primary_panel(diagnosis: Diagnosis) -> Panel:
    primary = diagnosis.findings[0]
    body = Text()
    body.append(primary.title + "\n", style="bold")
    body.append(f"category: {primary.category.value}   ")
    if primary.culprit_ranks:
        body.append(f"culprit: {format_ranks(primary.culprit_ranks)}   ", style="bold red")
    body.append(f"confidence: {primary.confidence:.0%}   rule: {primary.rule}\n")
    if primary.waiting_ranks:  # its own line: 3-1011:8 is short, a ragged set is not
        body.append(f"waiting: {format_ranks(primary.waiting_ranks)}\n")
    body.append("\n")
    body.append(primary.explanation + "\n\n")
    body.append("fix: ", style="bold green")
    body.append(primary.fix)
    if primary.evidence:
        body.append("\n\nevidence:\n", style="bold")
        for ref in primary.evidence[:6]:
            where = ref.source + (f":{ref.line}" if ref.line else "")
            body.append(f"  {where}  {ref.detail}\n")
    return Panel(body, title="primary cause", expand=False)


def _print_classes(diagnosis: Diagnosis, console: Console) -> None:
    classes = equivalence_classes(diagnosis.evidence)
    if not classes:
        return
    console.print(Text("What every rank is doing (main thread, last sample)", style="bold"))
    for cls in classes[:MAX_CLASSES]:
        activity = diagnosis.activities.get(cls.ranks[0])
        what = activity.description() if activity else ""
        head = f"{plural_ranks(cls.ranks)}" + (f" ({len(cls.ranks)})" if len(cls.ranks) > 1 else "")
        line = Text(head + ": ", style="bold") + Text(what)
        if cls.read_from_text:
            line += Text(f" [{cls.read_from_text}]", style="dim")
        console.print(line)
        lines: list[Text] = []
        for frame in cls.frames[:MAX_FRAMES]:
            style = "bold" if is_user_frame(frame) else "dim"
            lines.append(Text(f"    {frame.label()}", style=style))
        if len(cls.frames) > MAX_FRAMES:
            lines.append(Text(f"    … {len(cls.frames) - MAX_FRAMES} more frames", style="dim"))
        console.print(Group(*lines))
    if len(classes) > MAX_CLASSES:
        console.print(f"… {len(classes) - MAX_CLASSES} more stack classes (see the HTML report)")


def _print_inputs(diagnosis: Diagnosis, console: Console) -> None:
    """Input problems once (the loader also keeps each as a note: those are not repeated),
    in yellow only when the diagnosis is incomplete (no cause found, or ranks missing);
    beside a diagnosis that names a cause they are detail, in a neutral colour."""
    bad = [i for i in diagnosis.evidence.inputs if i.error]
    problems = {f"{i.path}: {i.error}" for i in bad}
    if bad:
        matters = diagnosis.verdict is Verdict.INCONCLUSIVE or bool(diagnosis.missing_ranks)
        style = "yellow" if matters else "dim"
        console.print(Text(f"{len(bad)} input problem(s):", style=style))
        for item in bad[:20]:
            console.print(Text(f"  {item.path}: {item.error}", style=style))
        if len(bad) > 20:
            console.print(Text(f"  … and {len(bad) - 20} more (see the reports)", style=style))
    notes = []
    for note in diagnosis.evidence.notes:
        lines = [ln for ln in note.splitlines() if ln.strip() not in problems]
        if lines:
            notes.append("\n".join(lines))
    for note in notes[:10]:
        console.print(Text(f"note: {note}", style="dim"))


def _print_not_evaluated(diagnosis: Diagnosis, console: Console, *, verbose: bool) -> None:
    """Rules that lacked the evidence they need: a count, or (verbose) each by reason."""
    skipped = diagnosis.not_evaluated
    if not skipped:
        return
    if not verbose:
        noun = "rule" if len(skipped) == 1 else "rules"
        console.print(
            Text(
                f"{len(skipped)} {noun} lacked the evidence they need; --verbose lists them",
                style="dim",
            )
        )
        return
    by_reason: dict[str, list[str]] = {}
    for rule in skipped:
        by_reason.setdefault(rule.reason, []).append(rule.rule)
    for reason, rules in sorted(by_reason.items()):
        console.print(
            Text(f"not evaluated ({reason}): {len(rules)} rules, {', '.join(rules)}", style="dim")
        )
