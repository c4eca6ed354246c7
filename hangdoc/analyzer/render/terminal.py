"""The terminal summary: the verdict and the cause first, then what every rank is doing.

Written for the person on call: the first three lines must answer "which rank, where,
why"; everything else is detail below them. It prints ``build_terminal_data``'s plain
data (terminal_data.py), never the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from hangdoc.analyzer.render.report_common import JsonDict
from hangdoc.analyzer.render.terminal_data import build_terminal_data

if TYPE_CHECKING:
    from hangdoc.analyzer.diagnosis import Diagnosis

_VERDICT_STYLE = {"hang": "bold red", "not_hung": "bold green", "inconclusive": "bold yellow"}
_SEVERITY_STYLE = {"critical": "red", "error": "red", "warning": "yellow", "info": "cyan"}


def render_terminal(diagnosis: Diagnosis, console: Console, *, verbose: bool = False) -> None:
    print_terminal_data(build_terminal_data(diagnosis), console, verbose=verbose)


def print_terminal_data(data: JsonDict, console: Console, *, verbose: bool = False) -> None:
    """Print ``build_terminal_data``'s dict: the answer, its evidence and fix first; what
    was not evaluated is one closing line (``verbose``: every rule by reason), so it never
    buries the answer's end."""
    console.print(_headline(data))
    if data["primary"] is not None:
        console.print(_primary_panel(data["primary"]))
    if data["others"]:
        table = Table(title="Other findings", show_lines=False, expand=False)
        table.add_column("rule")
        table.add_column("severity")
        table.add_column("category")
        table.add_column("finding")
        for finding in data["others"]:
            table.add_row(
                finding["rule"],
                Text(finding["severity"], style=_SEVERITY_STYLE[finding["severity"]]),
                finding["category"],
                Text(finding["title"]),
            )
        console.print(table)
    _print_classes(data, console)
    _print_inputs(data, console)
    if data["legend"]:
        console.print(Text(f"rank sets: {data['legend']}", style="dim"))
    _print_not_evaluated(data, console, verbose=verbose)


def _headline(data: JsonDict) -> Text:
    text = Text()
    text.append(f"verdict: {data['verdict']}", style=_VERDICT_STYLE[data["verdict"]])
    text.append(f"   ranks seen: {data['seen']}")
    if data["expected"] is not None:
        text.append(f" of {data['expected']}")
    if data["missing"]:
        text.append(f"   missing: {data['missing']}", style="red")
    return text


def _primary_panel(primary: JsonDict) -> Panel:
    body = Text()
    body.append(primary["title"] + "\n", style="bold")
    body.append(f"category: {primary['category']}   ")
    if primary["culprit"]:
        body.append(f"culprit: {primary['culprit']}   ", style="bold red")
    body.append(f"confidence: {primary['confidence']}   rule: {primary['rule']}\n")
    if primary["waiting"]:  # its own line: 3-1011:8 is short, a ragged set is not
        body.append(f"waiting: {primary['waiting']}\n")
    body.append("\n")
    body.append(primary["explanation"] + "\n\n")
    body.append("fix: ", style="bold green")
    body.append(primary["fix"])
    if primary["evidence"]:
        body.append("\n\nevidence:\n", style="bold")
        for ref in primary["evidence"]:
            body.append(f"  {ref['where']}  {ref['detail']}\n")
    return Panel(body, title="primary cause", expand=False)


def _print_classes(data: JsonDict, console: Console) -> None:
    if not data["classes"]:
        return
    console.print(Text("What every rank is doing (main thread, last sample)", style="bold"))
    for cls in data["classes"]:
        line = Text(cls["ranks"] + ": ", style="bold") + Text(cls["doing"])
        if cls["read_from_text"]:
            line += Text(f" [{cls['read_from_text']}]", style="dim")
        console.print(line)
        lines = [
            Text(f"    {frame['label']}", style="bold" if frame["user"] else "dim")
            for frame in cls["frames"]
        ]
        if cls["more_frames"]:
            lines.append(Text(f"    … {cls['more_frames']} more frames", style="dim"))
        console.print(Group(*lines))
    if data["more_classes"]:
        console.print(f"… {data['more_classes']} more stack classes (see the HTML report)")


def _print_inputs(data: JsonDict, console: Console) -> None:
    """Input problems in yellow only when the diagnosis is incomplete; beside a diagnosis
    that names a cause they are detail, in a neutral colour."""
    problems = data["input_problems"]
    if problems:
        style = "yellow" if data["problems_matter"] else "dim"
        total = len(problems) + data["more_input_problems"]
        console.print(Text(f"{total} input problem(s):", style=style))
        for problem in problems:
            console.print(Text(f"  {problem}", style=style))
        if data["more_input_problems"]:
            more = data["more_input_problems"]
            console.print(Text(f"  … and {more} more (see the reports)", style=style))
    for note in data["notes"]:
        console.print(Text(f"note: {note}", style="dim"))


def _print_not_evaluated(data: JsonDict, console: Console, *, verbose: bool) -> None:
    """Rules that lacked the evidence they need: a count, or (verbose) each by reason."""
    groups = data["not_evaluated"]
    count = sum(len(group["rules"]) for group in groups)
    if not count:
        return
    if not verbose:
        noun = "rule" if count == 1 else "rules"
        line = f"{count} {noun} lacked the evidence they need; --verbose lists them"
        console.print(Text(line, style="dim"))
        return
    for skipped in groups:
        rules = skipped["rules"]
        console.print(
            Text(
                f"not evaluated ({skipped['reason']}): {len(rules)} rules, {', '.join(rules)}",
                style="dim",
            )
        )
