"""fairseq's trainer (fairseq/trainer.py, read at its release tags by
scripts/catalog/others.py) logs the CUDA out-of-memory it catches before it tries to go on
without the batch: a line of its logger says the rank ran out of GPU memory (HD031), where
no exception of its own follows until the ranks part."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.parsers.logs.catalog_lines import catalog_hit
from hangdoc.analyzer.vocabulary import EventKind


@pytest.mark.parametrize(
    "message",
    [
        "attempting to recover from OOM in forward/backward pass",
        "ran out of memory in validation step, retrying batch",
        "OOM during optimization, irrecoverable",
    ],
)
def test_the_trainers_oom_lines_are_out_of_memory(message: str) -> None:
    hit = catalog_hit(f"2020-11-05 19:30:05 | WARNING | fairseq.trainer | {message}")
    assert hit is not None and hit.kind is EventKind.CUDA_OOM


def test_an_oom_the_trainer_recovered_from_is_the_cause(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(
        "2020-11-05 19:30:01 | INFO | train_inner | epoch 001:    100 / 2000 loss=9.1\n"
        "2020-11-05 19:30:05 | WARNING | fairseq.trainer | attempting to recover from OOM in "
        "forward/backward pass\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 8, in main\n'
        "    cli_main()\n"
        "Exception: \n"
    )
    assert analyze(load_paths([log])).primary.category.value == "cuda_oom"
