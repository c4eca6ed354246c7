"""The Markdown summary for a GitHub or Jira ticket: verdict, culprit, evidence, fix.

Rendered from the same data as the HTML page, and bounded: each section has a fixed
budget of lines, so the summary stays under ``MAX_LINES`` at 16,384 ranks and a ticket
stays readable. Text from the dump (paths, function names, log lines) is escaped or put
in code spans and fences that it cannot close.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hangdoc.analyzer.render.report_common import JsonDict, truncate
from hangdoc.analyzer.render.report_data import Documented, build_report_data
from hangdoc.common.version import __version__

if TYPE_CHECKING:
    from hangdoc.analyzer.diagnosis import Diagnosis

MAX_LINES = 60
MAX_LINE_CHARS = 300
_CLASSES = 5
_EVIDENCE = 8
_OTHER_FINDINGS = 4
_GROUPS = 3
_FAILED_INPUTS = 3
_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~!&])")
_BACKTICKS = re.compile(r"`+")
_NEWLINES = re.compile(r"\s*[\r\n\v\f\u2028\u2029]+\s*")


def render_markdown(diagnosis: Diagnosis, *, rules: Sequence[Documented] | None = None) -> str:
    """A short Markdown summary; always fewer than ``MAX_LINES`` lines."""
    data = build_report_data(diagnosis, rules=rules)
    lines: list[str] = []
    lines += _head(data)
    lines += _classes(data)
    lines += _evidence(data)
    lines += _other_findings(data)
    lines += _collectives(data)
    lines += _first_failure(data)
    lines += _inputs(data)
    legend = f" Rank sets: {text(data['legend'])}." if data["legend"] else ""
    lines += [
        "",
        f"_hangdoc {__version__}: the HTML report has every rank, stack and log line.{legend}_",
    ]
    if len(lines) >= MAX_LINES:  # sections are budgeted; this only guards future edits
        lines = [*lines[: MAX_LINES - 2], "", "_(summary cut; see the HTML report)_"]
    return "\n".join(lines) + "\n"


def text(value: object, limit: int = MAX_LINE_CHARS) -> str:
    """Plain text from a dump, made inert: one line, Markdown and HTML characters escaped."""
    flat = " ".join(str(value).split())
    return _SPECIAL.sub(r"\\\1", truncate(flat, limit))


def code(value: object) -> str:
    """An inline code span that the value's own backticks cannot close."""
    flat = truncate(" ".join(str(value).split()), MAX_LINE_CHARS)
    longest = max((len(run) for run in _BACKTICKS.findall(flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _block(rows: list[str]) -> list[str]:
    flat = [truncate(_NEWLINES.sub(" ", r), MAX_LINE_CHARS) for r in rows]
    longest = max((len(run) for r in flat for run in _BACKTICKS.findall(r)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", *flat, fence]


def _ranks(rs: JsonDict | None) -> str:
    if rs is None:
        return "none"
    word = "rank" if rs["count"] == 1 else "ranks"
    return f"{word} {code(rs['ranks'])}" + (f" ({rs['count']})" if rs["count"] > 1 else "")


def _head(data: JsonDict) -> list[str]:
    h = data["headline"]
    job = data["job"]
    lines = [f"## hangdoc: {text(h['sentence'])}", ""]
    if data["redaction_warning"]:  # a summary pasted into a ticket must say so
        lines += [f"> **Warning:** {text(data['redaction_warning'])}", ""]
    if h["rule"] is not None:
        lines.append(
            f"**Cause:** {text(h['category_label'])} ({code(h['category'])}) · "
            f"**Confidence:** {h['confidence_pct']}% ({h['confidence_word']}) · "
            f"**Rule:** {code(h['rule'])} ({h['severity']})"
        )
        if h["culprit"] is not None:
            doing = "; ".join(text(c["doing"]) for c in h["culprit_doing"])
            lines.append(f"**Culprit:** {_ranks(h['culprit'])}" + (f" — {doing}" if doing else ""))
        if h["waiting"] is not None:
            lines.append(f"**Waiting:** {_ranks(h['waiting'])}")
        lines.append(f"**Fix:** {text(h['fix'], 4 * MAX_LINE_CHARS)}")
    seen = f"{job['seen']['count']}" + (
        f" of {job['expected_world_size']}" if job["expected_world_size"] is not None else ""
    )
    facts = [f"**Ranks seen:** {seen}"]
    if job["missing"] is not None:
        facts.append(f"**missing:** {_ranks(job['missing'])}")
    facts.append(f"{job['hosts']} host(s)")
    if job["collected_at"]:
        facts.append(f"collected {text(job['collected_at'])}")
    lines.append(" · ".join(facts))
    return [line + "  " if i > 1 and line else line for i, line in enumerate(lines)]


def _classes(data: JsonDict) -> list[str]:
    classes = data["stack_classes"]["classes"]
    if not classes:
        return []
    lines = [
        "",
        "### What the ranks were doing",
        "",
        "| Ranks | # | Doing |",
        "| --- | ---: | --- |",
    ]
    for c in classes[:_CLASSES]:
        doing = c["doing"] + (f" ({c['read_from_text']})" if c.get("read_from_text") else "")
        lines.append(f"| {code(c['ranks'])} | {c['count']} | {text(doing)} |")
    rest = data["stack_classes"]["total"] - min(len(classes), _CLASSES)
    if rest > 0:
        lines.append(f"| … | | {rest} more distinct stacks |")
    return lines


def _evidence(data: JsonDict) -> list[str]:
    if not data["findings"]:
        return []
    primary = data["findings"][0]
    rows = [
        f"{e['where']}  rank {e['rank'] if e['rank'] is not None else '-'}  {e['detail']}"
        for e in primary["evidence"][:_EVIDENCE]
    ]
    more = len(primary["evidence"]) + primary["more_evidence"] - len(rows)
    if more > 0:
        rows.append(f"… {more} more")
    if not rows:
        return []
    return ["", f"### Evidence ({code(primary['rule'])})", "", *_block(rows)]


def _other_findings(data: JsonDict) -> list[str]:
    others = data["findings"][1:]
    if not others:
        return []
    lines = ["", "### Also considered", ""]
    for f in others[:_OTHER_FINDINGS]:
        lines.append(
            f"- {code(f['rule'])} ({f['severity']}, {f['confidence_pct']}%): {text(f['title'])}"
            f" — ranked lower: {text(f['ranked_lower_because'])}"
        )
    if len(others) > _OTHER_FINDINGS:
        lines.append(f"- … {len(others) - _OTHER_FINDINGS} more findings")
    return lines


def _collectives(data: JsonDict) -> list[str]:
    """The wavefront picture in words: who is behind or odd in which groups, then the
    count of fully matched groups (the page's text equivalent, budgeted)."""
    wave = data["pictures"]["wavefront"]
    if wave is None:
        return []
    lines = ["", "### Where each rank stands", ""]
    # One line per map row (same order); rows where every rank is at the front say
    # nothing a reader needs here, the count of matched groups below stands for them.
    odd = [line for row, line in zip(wave["rows"], wave["lines"], strict=True) if row["problem"]]
    lines += [f"- {text(line)}" for line in odd[:_GROUPS]]
    rest = len(odd) - _GROUPS + wave["more_rows"]
    if rest > 0:
        lines.append(f"- … {rest} more groups in the HTML report")
    groups = data["groups"]
    if groups["healthy"]:
        lines.append(f"- {groups['healthy']} of {groups['total']} process groups fully matched")
    return lines


def _first_failure(data: JsonDict) -> list[str]:
    timeline = data["timeline"]
    if timeline["first_failure"] is None:
        return []
    row = timeline["rows"][timeline["first_failure"]]
    where = row["sources"][0] if row["sources"] else None
    at = f"{where['source']}:{where['line']}" if where and where["line"] is not None else ""
    who = f"ranks {row['rank_set']['ranks']}" if row["rank_set"] else "job"
    head = f"{row['time'] or 'no time'}  {row['kind']} x{row['count']}  {who}  {at}"
    return ["", "### First failure in the logs", "", *_block([head, row["text"]])]


def _inputs(data: JsonDict) -> list[str]:
    inputs = data["inputs"]
    line = f"**Inputs:** {len(inputs['files'])} files"
    if not inputs["errors"]:
        return ["", line + ", all read."]
    failed = [f for f in inputs["files"] if f["error"] is not None][:_FAILED_INPUTS]
    lines = ["", line + f", {inputs['errors']} not read:"]
    lines += [f"- {code(f['path'])}: {text(f['error'])}" for f in failed]
    if inputs["errors"] > len(failed):
        lines.append(f"- … {inputs['errors'] - len(failed)} more")
    return lines
