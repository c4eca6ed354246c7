"""Warnings their own library documents as harmless are read by the parser, not searched
for by the view (parsers/logs/benign.py, LogLine.benign).

Formats: huggingface/tokenizers' child_after_fork message (bindings/python/src/utils/
parallelism.rs) and Open MPI vader's ``"Read %ld, expected %lu, errno = %d\\n"``
(opal/mca/btl/vader/btl_vader_get.c) under opal_output's ``[host:pid]`` tag.
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.parsers.logs.benign import benign_warning
from hangdoc.analyzer.parsers.logs.window import read_line_window
from hangdoc.analyzer.vocabulary import BenignWarning

_TOKENIZERS = (
    "huggingface/tokenizers: The current process just got forked, after parallelism has "
    "already been used. Disabling parallelism to avoid deadlocks..."
)


def test_the_documented_warnings_are_recognised() -> None:
    assert benign_warning(_TOKENIZERS) is BenignWarning.TOKENIZERS_FORK
    eperm = "[node1:01234] Read -1, expected 65536, errno = 1"
    assert benign_warning(eperm) is BenignWarning.OPENMPI_CMA_EPERM


def test_other_errnos_and_ordinary_lines_are_not() -> None:
    # errno 22 (open-mpi/ompi#3821) is a real vader bug, not the container's EPERM
    assert benign_warning("[node1:01234] Read -1, expected 65536, errno = 22") is None
    assert benign_warning("epoch 3: loss 1.25") is None


def test_the_line_window_carries_the_tag(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_text(f"step 1\n{_TOKENIZERS}\nstep 2\n", encoding="utf-8")
    [lines] = read_line_window(log, "rank0.log", 0).values()
    assert [line.benign for line in lines] == [None, BenignWarning.TOKENIZERS_FORK, None]
