"""The data behind the report: goldens for whole scenarios, and targeted behaviours.

Goldens are regenerated with ``pytest tests/unit/report --update-golden`` and reviewed as
a diff; the targeted tests pin what must hold whatever the wording (caps, aggregation,
ordering, determinism).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from hangdoc.analyzer.diagnosis import Diagnosis
from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.model import (
    CollectiveRecord,
    Evidence,
    EvidenceRef,
    Finding,
    LogEvent,
    OpState,
    Severity,
    Verdict,
)
from hangdoc.analyzer.ranges import parse_ranks
from hangdoc.analyzer.render import report_stacks
from hangdoc.analyzer.render.report_data import build_report_data
from hangdoc.rules import get_rule
from tests.report_builders import (
    FAKE_RULES,
    checkpoint_job,
    diagnose,
    empty_job,
    frames,
    hostile_job,
    process,
    waiting_stack,
)

Golden = Callable[[str, object], None]


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("checkpoint_8", lambda: checkpoint_job(8)),
        ("checkpoint_missing_rank", lambda: checkpoint_job(12, saver=5, missing=[9])),
        ("empty", empty_job),
        ("hostile", hostile_job),
    ],
)
def test_report_data_matches_golden(
    golden: Golden, name: str, build: Callable[[], Diagnosis]
) -> None:
    # GIVEN a hand-built diagnosis WHEN turned into report data THEN it matches the golden
    golden(name, build_report_data(build(), rules=FAKE_RULES))


def test_data_is_plain_json_and_deterministic() -> None:
    # GIVEN the same job built twice
    first = build_report_data(checkpoint_job(64), rules=FAKE_RULES)
    second = build_report_data(checkpoint_job(64), rules=FAKE_RULES)
    # THEN the data round-trips through JSON unchanged and is identical
    assert json.loads(json.dumps(first)) == first
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_headline_names_culprit_cause_confidence_and_fix() -> None:
    head = build_report_data(checkpoint_job(8, saver=2), rules=FAKE_RULES)["headline"]
    assert head["sentence"].startswith("Hung: rank 2 is writing a checkpoint")
    assert head["culprit"]["ranks"] == "2"
    assert head["waiting"]["ranks"] == "0-1,3-7"
    assert head["category"] == "checkpoint_save_hang"
    assert head["confidence_pct"] == 90
    assert head["fix"].startswith("Call the checkpoint save")
    assert head["culprit_doing"][0]["doing"].startswith("saving a checkpoint at save_checkpoint")


def test_rank_sets_hold_every_rank_even_when_the_display_is_shortened() -> None:
    # GIVEN a rank set with more than 12 runs and no stride (the primes below 64)
    ranks = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61)
    diagnosis = checkpoint_job(64)
    diagnosis.findings[0] = Finding(
        rule="HD901", category=diagnosis.findings[0].category, severity=Severity.CRITICAL,
        title="t", explanation="e", fix="f", culprit_ranks=ranks,
    )  # fmt: skip
    data = build_report_data(diagnosis, rules=FAKE_RULES)
    culprit = data["headline"]["culprit"]
    # THEN the text is cut but the page's filter set is complete
    assert "more" in culprit["ranks"]
    assert parse_ranks(data["rank_sets"][culprit["rset"]]) == list(ranks)


def test_stack_tree_folds_shared_frames_and_forks_where_ranks_part() -> None:
    tree = build_report_data(checkpoint_job(8, saver=2), rules=FAKE_RULES)["stack_tree"]
    (trunk,) = tree["children"]
    assert trunk["ranks"] == "0-7"
    assert [f["function"] for f in trunk["frames"]] == ["<module>", "main"]
    waiting, saving = trunk["children"]
    assert (waiting["ranks"], saving["ranks"]) == ("0-1,3-7", "2")
    assert waiting["user_head"] == "train_step (train.py:42)"
    assert saving["doing"].startswith("saving a checkpoint")
    # user frames are marked, library frames are not
    assert [f["user"] for f in saving["frames"]] == [True, False, False]


def test_stack_tree_caps_children_and_names_the_ranks_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN 40 ranks each stopped on a different line, and a cap of 24 children
    monkeypatch.setattr(report_stacks, "MAX_CHILDREN", 24)
    procs = [process(r, frames(("main", "/job/t.py", 1), ("f", "/job/t.py", 100 + r)), world=40)
             for r in range(40)]  # fmt: skip
    data = build_report_data(diagnose(Evidence(processes=procs), [], Verdict.HANG))
    trunk = data["stack_tree"]["children"][0]
    # THEN 24 paths are shown and the other 16 ranks are named, not dropped silently
    assert len(trunk["children"]) == 24
    assert trunk["omitted"]["count"] == 16
    assert trunk["omitted"]["paths"] == 16


def test_wavefront_puts_lagging_ranks_first_and_names_silent_members() -> None:
    data = build_report_data(checkpoint_job(12, saver=5, missing=[9]), rules=FAKE_RULES)
    (group,) = data["wavefront"]
    assert group["desc"] == "default_pg"
    assert [row["completed"] for row in group["rows"]] == [40, 41]
    assert group["rows"][0]["ranks"] == "5"
    assert group["rows"][1]["next_op"] == "all_reduce"
    assert group["behind"]["ranks"] == "5"
    assert group["silent"]["ranks"] == "9"


def test_wavefront_bins_when_ranks_are_spread_over_many_positions() -> None:
    # GIVEN 200 ranks each at a different last completed seq
    procs = [process(r, waiting_stack(), world=200, completed=r + 1) for r in range(200)]
    data = build_report_data(diagnose(Evidence(processes=procs), [], Verdict.HANG))
    rows = data["wavefront"][0]["rows"]
    # THEN at most MAX_WAVEFRONT_ROWS rows, covering every rank once
    assert len(rows) <= report_stacks.MAX_WAVEFRONT_ROWS
    assert sum(row["count"] for row in rows) == 200
    assert rows[0]["completed"] == 1 and rows[0]["completed_to"] is not None


def test_wavefront_ignores_p2p_and_counts_them() -> None:
    proc = process(0, waiting_stack(), world=1)
    proc.collectives.append(CollectiveRecord("0", 7, "send", OpState.STARTED, is_p2p=True, peer=1))
    data = build_report_data(diagnose(Evidence(processes=[proc]), [], Verdict.HANG))
    assert data["wavefront"][0]["p2p_records"] == 1


def test_timeline_groups_same_message_across_ranks_and_marks_first_failure() -> None:
    timeline = build_report_data(checkpoint_job(16), rules=FAKE_RULES)["timeline"]
    first = timeline["rows"][0]
    assert first["kind"] == "nccl_watchdog_timeout"
    assert first["count"] == 15
    assert first["rank_set"]["ranks"] == "0-1,3-15"
    assert first["first_failure"] is True and timeline["first_failure"] == 0
    assert timeline["rows"][1]["kind"] == "torchrun_exit"
    assert timeline["rows"][1]["offset_s"] == 695.0


def test_timeline_puts_events_without_time_last() -> None:
    proc = process(0, waiting_stack(), world=1)
    proc.log_events += [
        LogEvent("note", "no time", source="a.log", line=1),
        LogEvent("nccl_error", "NCCL WARN net", source="a.log", line=2, time=5.0),
    ]
    rows = build_report_data(diagnose(Evidence(processes=[proc]), [], Verdict.HANG))["timeline"]
    assert [r["kind"] for r in rows["rows"]] == ["nccl_error", "note"]


def test_rank_groups_collapse_alike_ranks_and_flag_the_culprit() -> None:
    ranks = build_report_data(checkpoint_job(4096, saver=3), rules=FAKE_RULES)["ranks"]
    assert [(r["ranks"], r["culprit"]) for r in ranks["rows"]] == [
        ("0-2,4-4095", False),
        ("3", True),
    ]
    saver = ranks["rows"][1]
    assert (saver["state"], saver["wchan"]) == ("D", "nfs_wait_bit_killable")
    assert saver["host_count"] == 1
    assert [t["name"] for t in saver["example_threads"]] == ["MainThread", "pt_watchdog"]
    assert saver["example_threads"][0]["state"] == "D"


def test_rank_index_maps_every_rank_to_host_pid_and_row() -> None:
    data = build_report_data(checkpoint_job(8, saver=2), rules=FAKE_RULES)
    assert data["rank_index"][2] == [2, "node0", 4002, 1]
    assert len(data["rank_index"]) == 8


def test_environment_shows_only_keys_that_differ() -> None:
    env = build_report_data(checkpoint_job(8), rules=FAKE_RULES)["environment"]
    assert [v["key"] for v in env["variables"]] == ["NCCL_IB_DISABLE"]
    assert [(b["value"], b["ranks"]) for b in env["variables"][0]["by_value"]] == [
        (None, "0-2,4-7"),
        ("1", "3"),
    ]
    # RANK/LOCAL_RANK are left out; a value unique to every rank is named, not listed
    assert env["unique_per_rank"] == ["TORCHELASTIC_ERROR_FILE"]


def test_environment_masks_secret_looking_keys() -> None:
    procs = [process(r, waiting_stack(), world=2, env={"HF_TOKEN": f"hf_{r}x"}) for r in range(2)]
    env = build_report_data(diagnose(Evidence(processes=procs), [], Verdict.HANG))["environment"]
    values = [b["value"] for b in env["variables"][0]["by_value"]]
    assert values == ["‹redacted›", "‹redacted›"]


def test_findings_say_why_lower_ones_rank_lower() -> None:
    findings = build_report_data(checkpoint_job(8), rules=FAKE_RULES)["findings"]
    assert findings[0]["primary"] and findings[0]["ranked_lower_because"] is None
    assert findings[1]["ranked_lower_because"] == "lower severity (warning vs critical)"
    assert findings[0]["evidence"][0]["where"] == "node0/rank2/pyspy.json:12"


def test_evidence_per_finding_is_capped_and_counted() -> None:
    diagnosis = checkpoint_job(8)
    refs = tuple(EvidenceRef(f"r{i}.json", "d", i) for i in range(250))
    old = diagnosis.findings[0]
    diagnosis.findings[0] = Finding(old.rule, old.category, old.severity, old.title,
                                    old.explanation, old.fix, evidence=refs)  # fmt: skip
    finding = build_report_data(diagnosis, rules=FAKE_RULES)["findings"][0]
    assert len(finding["evidence"]) == 200 and finding["more_evidence"] == 50


def test_inputs_list_failures_first() -> None:
    inputs = build_report_data(checkpoint_job(8), rules=FAKE_RULES)["inputs"]
    assert inputs["files"][0] == {
        "path": "node0/core.1234", "kind": "unreadable", "ranks": None, "size": None,
        "error": "binary file",
    }  # fmt: skip
    assert inputs["errors"] == 1 and len(inputs["files"]) == 9


def test_appendix_renders_docs_of_fired_rules_and_names_unknown_ones() -> None:
    appendix = build_report_data(checkpoint_job(8), rules=FAKE_RULES)["appendix"]
    (doc,) = appendix["rules"]
    assert doc["rule"] == "HD901"
    assert [s["heading"] for s in doc["sections"]] == [
        "What it means", "Why it hangs", "Evidence used", "How to confirm", "How to fix",
    ]  # fmt: skip
    assert appendix["unavailable"] == ["HD003: no such rule in this version of hangdoc"]


def test_appendix_reads_the_docs_the_engine_put_in_the_diagnosis() -> None:
    # GIVEN a finding of a real registered rule, and its docs in the Diagnosis (the
    # renderers import no rule: the engine hands them the docs of the rules that fired)
    diagnosis = checkpoint_job(8)
    old = diagnosis.findings[0]
    diagnosis.findings = [Finding("HD001", old.category, old.severity, old.title,
                                  old.explanation, old.fix)]  # fmt: skip
    rule = get_rule("HD001")
    assert rule is not None
    diagnosis.rule_docs = (rule.rule_doc(),)
    appendix = build_report_data(diagnosis)["appendix"]
    assert [d["rule"] for d in appendix["rules"]] == ["HD001"]
    assert all(s["paragraphs"] for s in appendix["rules"][0]["sections"])


def test_the_engine_hands_over_the_docs_of_the_rules_that_fired() -> None:
    result = analyze(checkpoint_job(8).evidence)
    assert result.findings
    assert {d.id for d in result.rule_docs} == {f.rule for f in result.findings}
    assert all(d.get("How to fix") for d in result.rule_docs)


def test_not_hung_without_findings_says_so() -> None:
    diagnosis = diagnose(Evidence(), [], Verdict.NOT_HUNG)
    assert build_report_data(diagnosis)["headline"]["sentence"].startswith("Not hung")
