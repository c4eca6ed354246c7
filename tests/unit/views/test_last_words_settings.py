"""HD061's look-back over the last job lines before a timeout skips configuration dumps:
frameworks print their settings at start (mmengine's config, HF TrainingArguments,
argparse Namespaces), and "eval_steps: 500" is a setting's name, not an activity."""

from __future__ import annotations

import pytest

from hangdoc.analyzer.views.last_words import _SETTING


@pytest.mark.parametrize(
    "line", ["xtuner_dataset_timeout = 1:00:00", "save_steps: 500", "eval_strategy=steps,"]
)
def test_settings_are_recognised(line: str) -> None:
    assert _SETTING.match(line)


@pytest.mark.parametrize(
    "line",
    ["Saving checkpoint to /ckpt/step_9", "Epoch 3: loss 0.2", "Validating:", "Evaluating 3/10"],
)
def test_activity_lines_are_not_settings(line: str) -> None:
    assert not _SETTING.match(line)
