"""The Markdown ticket summary: short whatever the job's size, and inert text."""

from __future__ import annotations

import re

from hangdoc.analyzer.model import (
    CollectiveRecord,
    EvidenceRef,
    Finding,
    Frame,
    OpState,
    Severity,
    StackSample,
    ThreadStack,
)
from hangdoc.analyzer.render.markdown import MAX_LINES, code, render_markdown, text
from tests.report_builders import FAKE_RULES, checkpoint_job, empty_job, hostile_job


def _outside_code(md: str) -> str:
    """The Markdown with fenced blocks and code spans removed: what renders as markup."""
    out: list[str] = []
    fence: str | None = None
    for line in md.splitlines():
        marker = re.match(r"^(`{3,})", line)
        if fence is None and marker:
            fence = marker.group(1)
            continue
        if fence is not None:
            if line.strip() == fence:
                fence = None
            continue
        out.append(re.sub(r"(`+).*?\1", "", line))
    return "\n".join(out)


def test_summary_names_verdict_culprit_evidence_and_fix() -> None:
    md = render_markdown(checkpoint_job(16, saver=2), rules=FAKE_RULES)
    assert md.startswith("## hangdoc: Hung: rank 2 is writing a checkpoint")
    assert "**Culprit:** rank `2` — saving a checkpoint" in md
    assert "**Waiting:** ranks `0-1,3-15` (15)" in md
    assert "**Fix:** Call the checkpoint save on every rank" in md
    assert "node0/rank2/pyspy.json:12" in md
    assert "ranked lower: lower severity (warning vs critical)" in md


def test_summary_stays_under_the_line_budget_for_a_huge_messy_job() -> None:
    # GIVEN 4,096 ranks on 300 distinct stacks, 3 process groups, 40 findings
    diagnosis = checkpoint_job(4096, saver=3, missing=[7, 4000])
    for proc in diagnosis.evidence.processes[:300]:
        assert proc.rank is not None
        frames = (Frame(f"f{proc.rank}", "/job/t.py", proc.rank), Frame("main", "/job/t.py", 1))
        thread = ThreadStack(frames=frames, is_main=True)
        proc.stack_samples = [StackSample(index=0, time=None, threads=(thread,))]
        proc.collectives += [CollectiveRecord(g, 1, "broadcast", OpState.COMPLETED) for g in "123"]
    base = diagnosis.findings[0]
    diagnosis.findings += [
        Finding(f"HD{n:03d}", base.category, Severity.WARNING, f"finding {n}", "e", "f",
                evidence=tuple(EvidenceRef(f"s{i}", "d", i) for i in range(30)))
        for n in range(40)
    ]  # fmt: skip
    # WHEN summarised
    md = render_markdown(diagnosis, rules=FAKE_RULES)
    # THEN it fits a ticket
    assert len(md.splitlines()) < MAX_LINES
    assert "more distinct stacks" in md and "more findings" in md
    # AND the matched groups are counted, not listed; the odd one is in words
    assert "3 of 4 process groups fully matched" in md
    assert "ranks 7,4000 left no record; rank 3 behind by 2" in md


def test_hostile_text_is_escaped_or_fenced() -> None:
    md = render_markdown(hostile_job(), rules=FAKE_RULES)
    rendered = _outside_code(md)
    # outside code, every markup character from the dump is backslash-escaped
    assert not re.search(r"(?<!\\)<", rendered)
    assert "\\<script\\>" in rendered
    assert len(md.splitlines()) < MAX_LINES


def test_code_spans_and_fences_cannot_be_closed_by_their_content() -> None:
    assert code("a`b") == "``a`b``"
    assert code("`x`") == "`` `x` ``"
    diagnosis = checkpoint_job(8)
    old = diagnosis.findings[0]
    fence = EvidenceRef("x.log", "```\n# not a heading", 1)
    diagnosis.findings[0] = Finding(old.rule, old.category, old.severity, old.title,
                                    old.explanation, old.fix, evidence=(fence,))  # fmt: skip
    md = render_markdown(diagnosis, rules=FAKE_RULES)
    assert "````text" in md and "# not a heading" not in _outside_code(md)


def test_text_is_one_line_and_bounded() -> None:
    assert text("a\nb\r\nc") == "a b c"
    assert len(text("x" * 5000)) == 300


def test_empty_diagnosis_still_gives_a_summary() -> None:
    md = render_markdown(empty_job())
    assert md.startswith("## hangdoc: Inconclusive")
    assert "**Inputs:** 0 files, all read." in md


def test_strided_sets_and_the_wavefront_in_words() -> None:
    # GIVEN 1,024 ranks where rank 1019 issued broadcast and its dp group all_reduce
    from tests.browser.scale_job import grid_job

    md = render_markdown(grid_job(1024))
    # THEN the waiting ranks are one stride, and the legend explains the form once
    assert "**Waiting:** ranks `3-1011:8` (127)" in md
    assert md.count("every 8th rank from 3 to 1019") == 1
    # AND the wavefront picture's words stand in for it
    assert "- dp (8 groups): rank 1019 issued a different collective" in md
    assert "- 136 of 137 process groups fully matched" in md
    assert len(md.splitlines()) < MAX_LINES


def test_no_legend_without_strides() -> None:
    assert "every 8th rank" not in render_markdown(checkpoint_job(16), rules=FAKE_RULES)


def test_redaction_warning_follows_the_typed_flag_not_the_note() -> None:
    # GIVEN the same job redacted (the default) and loaded with --no-redact
    diagnosis = checkpoint_job(4, saver=1)
    assert diagnosis.evidence.redacted
    assert "redaction is OFF" not in render_markdown(diagnosis, rules=FAKE_RULES)
    # WHEN only the typed flag says it is not redacted (no note in the notes)
    diagnosis.evidence.redacted = False
    md = render_markdown(diagnosis, rules=FAKE_RULES)
    # THEN the summary warns anyway, with the note's text for people
    assert md.splitlines()[2].startswith("> **Warning:** redaction is OFF")
