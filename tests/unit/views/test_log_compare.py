"""The ranks' logs compared line by line (analyzer/views/log_compare.py).

Inputs are built by hand: each rank's lines as the job would print them. The recorded
live scenarios (fixtures/dumps/own-*) test the same view end to end.
"""

from __future__ import annotations

from hangdoc.analyzer.model import Evidence, LogLine, ProcessEvidence
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.log_compare import compare_logs, same_progress
from tests.unit.views.conftest import log_evidence


def _steps(rank: int, last: int) -> list[str]:
    return [f"rank {rank}: step {s} loss {1.0 / (s + 1):.4f}" for s in range(last + 1)]


def test_a_rank_that_stops_on_an_unfinished_action_is_named() -> None:
    logs = {r: _steps(r, 20) for r in range(4)}
    logs[2].append("Saving checkpoint shard 2 to /ckpt/step_20 ...")
    found = compare_logs(log_evidence(logs)).divergences
    unfinished = [d for d in found if d.kind == "unfinished"]
    assert [(d.ranks, d.meaning) for d in unfinished] == [((2,), Activity.CHECKPOINT_SAVE)]
    assert unfinished[0].lines[0].line.text.startswith("Saving checkpoint")


def test_a_finished_action_or_one_all_ranks_stopped_on_is_no_divergence() -> None:
    logs = {r: [*_steps(r, 5), "saving checkpoint ...", "checkpoint saved"] for r in range(4)}
    assert not [d for d in compare_logs(log_evidence(logs)).divergences if d.kind == "unfinished"]
    logs = {r: [*_steps(r, 5), "running validation ..."] for r in range(4)}
    assert not [d for d in compare_logs(log_evidence(logs)).divergences if d.kind == "unfinished"]


def test_counts_that_differ_on_a_minority_of_ranks() -> None:
    logs = {r: [f"rank {r}: dataset has {1248 if r == 5 else 1250} batches"] for r in range(8)}
    found = compare_logs(log_evidence(logs)).divergences
    assert [(d.kind, d.ranks) for d in found] == [("counter", (5,))]


def test_sizes_that_differ_are_a_size_divergence() -> None:
    logs = {r: [f"[{r}] class histogram: {9 if r == 0 else 10} bins"] for r in range(4)}
    found = compare_logs(log_evidence(logs)).divergences
    assert [(d.kind, d.ranks) for d in found] == [("size", (0,))]


def test_the_rank_number_itself_and_varying_values_are_not_counts() -> None:
    # each rank prints its own rank and its own loss: nothing to compare there
    logs = {r: [f"rank {r}: step 3 of 10 samples, loss {0.1 * r:.3f}"] for r in range(4)}
    assert compare_logs(log_evidence(logs)).divergences == []


def test_progress_behind_and_progress_that_agrees() -> None:
    logs = {r: _steps(r, 17 if r == 1 else 20) for r in range(4)}
    result = compare_logs(log_evidence(logs))
    assert [(d.kind, d.ranks) for d in result.divergences] == [("behind", (1,))]
    assert not result.progress_agrees
    same = compare_logs(log_evidence({r: _steps(r, 20) for r in range(4)}))
    assert same.divergences == [] and same.progress_agrees


def test_one_rank_or_none_compares_nothing() -> None:
    assert compare_logs(log_evidence({0: _steps(0, 3)})).divergences == []
    assert compare_logs(Evidence()).divergences == []


def test_a_template_only_a_minority_prints_at_the_end_is_where_they_parted() -> None:
    logs = {r: _steps(r, 20) for r in range(4)}
    logs[0] += ["running validation on 200 images", "validation accuracy 0.81 (done)"]
    logs[1].append("epoch 2 starting")
    logs[2].append("epoch 2 starting")
    logs[3].append("epoch 2 starting")
    found = [d for d in compare_logs(log_evidence(logs)).divergences if d.kind == "only_some"]
    assert [(d.ranks, d.meaning) for d in found] == [((0,), Activity.EVAL)]


def test_a_rank_that_comes_back_to_the_others_line_is_marked_rejoined() -> None:
    # rank 0 validates alone, then prints the line every rank prints: it went on with them
    # (HD060 names it only where the stacks set rank 0 apart)
    logs = {r: _steps(r, 20) for r in range(4)}
    logs[0] += ["running validation on 200 images", "validation accuracy 0.81"]
    for r in range(4):
        logs[r].append("epoch 2 starting")
    found = [d for d in compare_logs(log_evidence(logs)).divergences if d.kind == "only_some"]
    assert [(d.ranks, d.rejoined) for d in found] == [((0,), True)]


def test_work_one_rank_reports_done_is_no_parting_a_loop_it_left_early_is() -> None:
    logs = {r: _steps(r, 20) for r in range(4)}
    logs[0].append("Saved model to /ckpt/step_20/model.pt")
    found = [d for d in compare_logs(log_evidence(logs)).divergences if d.kind == "only_some"]
    assert found == []
    logs = {r: _steps(r, 20) for r in range(4)}
    logs[3].append("epoch 0 finished")
    found = [d for d in compare_logs(log_evidence(logs)).divergences if d.kind == "only_some"]
    assert [d.ranks for d in found] == [(3,)]


def test_routine_logging_of_one_rank_is_not_a_parting() -> None:
    logs = {r: _steps(r, 30) for r in range(4)}
    for i in range(0, 31, 5):  # rank 0 logs the learning rate all along, as usual
        logs[0].insert(i, f"lr schedule: {0.1 / (i + 1):.5f}")
    logs[0].append("lr schedule: 0.00100")
    found = [d for d in compare_logs(log_evidence(logs)).divergences if d.kind == "only_some"]
    assert found == []


def _console(lines: list[tuple[int, int, str]]) -> Evidence:
    """One shared console: (rank, line number, text) of each attributed line."""
    by_rank: dict[int, list[LogLine]] = {}
    for rank, number, text in lines:
        by_rank.setdefault(rank, []).append(LogLine(text, "console.txt", number))
    return Evidence(processes=[ProcessEvidence(rank=r, log_lines=v) for r, v in by_rank.items()])


def test_a_console_cut_in_a_burst_of_ends_shows_no_unfinished_action() -> None:
    # GIVEN eight ranks' "begin" lines, then a paste that ends in four ranks' "end" lines,
    # one after another (the others' ends were cut away with the rest of the paste);
    # step 3 leaves the numbers of the lines a hard-wrapping paste moved to a line of its own
    for step in (1, 3):
        begins = [(r, 1 + r, f"TP{r}] Load weight begin. avail mem=78.38 GB") for r in range(8)]
        ends = [(r, 9 + i * step, f"TP{r}] Load weight end.") for i, r in enumerate((0, 2, 4, 6))]
        found = compare_logs(_console(begins + ends)).divergences
        # THEN the ranks whose end is not shown are not said to be stuck in their load
        assert not [d for d in found if d.kind == "unfinished"], step


def test_a_burst_another_ranks_line_interrupts_is_no_cut() -> None:
    begins = [(r, 1 + r, f"TP{r}] Load weight begin. avail mem=78.38 GB") for r in range(4)]
    ends = [(0, 5, "TP0] Load weight end."), (1, 6, "TP1] Load weight end.")]
    between = [(2, 7, "TP2] the weights server answered slowly")]
    last = [(0, 8, "TP0] Load weight end."), (1, 9, "TP1] Load weight end.")]
    found = compare_logs(_console(begins + ends + between + last)).divergences
    assert [(d.kind, d.ranks) for d in found if d.kind == "unfinished"] == [("unfinished", (3,))]


def test_same_progress_is_one_template_at_the_same_counts() -> None:
    def line(rank: int, step: int, loss: float) -> tuple[int, LogLine]:
        return rank, LogLine(f"epoch 3 step {step} loss {loss} rank {rank}", "console.txt", 1)

    # Losses and each rank's own id differ; the step is the same.
    assert same_progress([line(1, 120, 0.51), line(0, 120, 0.47)])
    assert not same_progress([line(1, 119, 0.51), line(0, 120, 0.47)])  # one behind
    other = (0, LogLine("saving checkpoint 120", "console.txt", 1))
    assert not same_progress([line(1, 120, 0.51), other])  # another template
    # Words that count no work, or no number but the rank's own: nothing to compare.
    done = [(r, LogLine(f"rank {r} ready", "console.txt", 1)) for r in (0, 1)]
    assert not same_progress(done)
    assert not same_progress([line(1, 120, 0.51)])


def test_a_rank_that_printed_the_progress_line_fewer_times_stopped_behind() -> None:
    # Ranks 0, 1, 3 print "iter 1000", "iter 1010", "iter 1020"; rank 2 only "iter 1000".
    logs = {r: [f"iter {i} loss 2.{r}{i % 7}" for i in (1000, 1010, 1020)] for r in (0, 1, 3)}
    logs[2] = ["iter 1000 loss 2.30"]
    found = compare_logs(log_evidence(logs)).divergences
    assert [(d.kind, d.ranks, d.others) for d in found if d.kind == "behind"] == [
        ("behind", (2,), (0, 1, 3))
    ]
    # The others printed it twice only: too few to say that they went on and it stopped.
    logs = {r: [f"iter {i} loss 2.{r}" for i in (1000, 1010)] for r in (0, 1, 3)}
    logs[2] = ["iter 1000 loss 2.30"]
    assert not [d for d in compare_logs(log_evidence(logs)).divergences if d.kind == "behind"]
    # Half the ranks behind: which half stopped, the counts do not say.
    logs = {r: [f"iter {i} loss 2.{r}" for i in (1000, 1010, 1020)] for r in (0, 1)}
    logs |= {r: ["iter 1000 loss 2.30"] for r in (2, 3)}
    assert not [d for d in compare_logs(log_evidence(logs)).divergences if d.kind == "behind"]


# Appended for issue 21 (live-2026-11-28e, sharded-reader): amounts of data that part the
# ranks into halves, no minority among them.
def test_a_length_that_parts_the_ranks_in_halves_is_a_length_split() -> None:
    shards = {0: 3, 1: 3, 2: 2, 3: 2}
    logs = {r: [f"rank {r}: {n} of 10 shards", *_steps(r, 4)] for r, n in shards.items()}
    comparison = compare_logs(log_evidence(logs))
    assert [(s.groups, [c.rank for c in s.lines]) for s in comparison.lengths] == [
        (((2, 3), (0, 1)), [2, 0])
    ]
    # a tie is no minority: the counters that name odd ranks stay silent
    assert not [d for d in comparison.divergences if d.kind == "counter"]


def test_numbers_of_each_rank_its_own_progress_and_sizes_split_nothing() -> None:
    # a file index differs on every rank: not an amount of data
    files = {r: [f"rank {r}: reading shard {r + 4} of the corpus files"] for r in range(4)}
    assert compare_logs(log_evidence(files)).lengths == []
    # "step" is how far a rank got, not how much data it has
    progress = {r: [f"rank {r}: epoch 0 step {5 if r < 2 else 4}"] for r in range(4)}
    assert compare_logs(log_evidence(progress)).lengths == []
    # a size is no amount of data (a tensor's width), even on a line that names a loader
    sizes = {r: [f"rank {r}: loader ready, hidden size {100 if r < 2 else 90}"] for r in range(4)}
    assert compare_logs(log_evidence(sizes)).lengths == []
    # the same length everywhere
    even = {r: [f"rank {r}: 24 samples"] for r in range(4)}
    assert compare_logs(log_evidence(even)).lengths == []


def test_counts_on_a_line_that_names_a_collectives_operand_are_sizes() -> None:
    # "reducing … {'a': 6, 'b': 0}": the numbers are the sizes handed to the reduction
    logs = {
        r: [f"rank {r}: all_reduce histograms {{'a': 6, 'b': {0 if r == 3 else 6}}}"]
        for r in range(4)
    }
    found = compare_logs(log_evidence(logs)).divergences
    assert [(d.kind, d.ranks, d.empty) for d in found] == [("size", (3,), True)]
    logs[3] = ["rank 3: all_reduce histograms {'a': 6, 'b': 5}"]
    found = compare_logs(log_evidence(logs)).divergences
    assert [(d.kind, d.empty) for d in found] == [("size", False)]


def test_a_collective_line_that_counts_batches_is_still_an_amount_of_data() -> None:
    # the length word says what the number counts: batches the rank will run
    logs = {r: [f"rank {r}: gathering count of {2 if r == 1 else 3} batches"] for r in range(4)}
    found = compare_logs(log_evidence(logs)).divergences
    assert [(d.kind, d.ranks) for d in found] == [("counter", (1,))]


def test_hd060_says_an_empty_operand_lets_the_rank_run_ahead() -> None:
    from hangdoc.analyzer.engine import analyze
    from hangdoc.analyzer.model import Category

    logs = {r: [f"rank {r}: reducing count histories {{'a': 6, 'b': {0 if r == 2 else 6}}}"]
            for r in range(4)}  # fmt: skip
    hd060 = [f for f in analyze(log_evidence(logs)).findings if f.rule == "HD060"]
    assert [(f.category, f.culprit_ranks) for f in hd060] == [
        (Category.COLLECTIVE_SIZE_OR_DTYPE_MISMATCH, (2,))
    ]
    assert "0 elements returns at once" in hd060[0].explanation
