"""What the job's own lines say at the end (views/last_words.py, views/meaning.py): a log
that stops in evaluation, a training report that is no data reading, and activation
checkpointing that is no save. Real pastes from the casebook's train split."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Evidence, LogLine
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.last_words import stopped_during
from hangdoc.analyzer.views.meaning import meaning_of, tokens

CASES = Path(__file__).resolve().parents[3] / "fixtures" / "cases"


def _log(*texts: str) -> Evidence:
    lines = [LogLine(text, "c", number) for number, text in enumerate(texts, start=1)]
    return Evidence(job_log_lines=lines)


def test_a_log_that_ends_in_the_evaluators_lines_stopped_in_evaluation() -> None:
    evidence = load_paths([CASES / "detectron2-3886-eval-stuck-after-inference" / "console.txt"])
    stop = stopped_during(evidence)
    assert stop is not None and stop.meaning is Activity.EVAL
    assert "Total inference pure compute time" in stop.lines[-1].text


def test_one_eval_line_or_a_training_report_at_the_end_is_not_enough() -> None:
    assert stopped_during(_log("epoch 3 step 10", "Running validation")) is None
    assert stopped_during(_log("Running validation", "val step 3 loss=0.25")) is None
    assert stopped_during(_log("saving checkpoint to /ckpt", "checkpoint shard 3 written")) is None


def test_activation_checkpointing_is_not_a_checkpoint_save() -> None:
    assert meaning_of(tokens("Activation Checkpointing Information")) is None
    assert meaning_of(tokens("enable gradient checkpointing")) is None
    assert meaning_of(tokens("Saving checkpoint to /ckpt/step_100")) is Activity.CHECKPOINT_SAVE
    evidence = load_paths([CASES / "gptneox-985-model-parallel-hang-after-pr958" / "console.txt"])
    assert stopped_during(evidence) is None
