"""Warnings that their own library documents as harmless, recognised on the job's lines
(LogLine.benign): users paste them as "the hang" (views/benign.py, HD046).

* huggingface/tokenizers, ``bindings/python/src/utils/parallelism.rs`` /
  ``lib.rs`` (``child_after_fork``): after ``fork()`` in a process whose Rust thread pool
  was used, the child prints ``huggingface/tokenizers: The current process just got
  forked, after parallelism has already been used. Disabling parallelism to avoid
  deadlocks...`` and runs single-threaded.
* Open MPI's shared-memory BTL (vader, ``opal/mca/btl/vader/btl_vader_get.c``:
  ``opal_output(0, "Read %ld, expected %lu, errno = %d\n", …)``, printed under opal_output's
  ``[host:pid]`` tag): its single-copy read (CMA, ``process_vm_readv``) refused with errno
  1 (EPERM). Only errno 1: another errno (22 in open-mpi/ompi#3821) is a real vader bug.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.vocabulary import BenignWarning

# (a plain substring every match holds: most lines are skipped on it, the pattern)
_WARNINGS: tuple[tuple[BenignWarning, str, re.Pattern[str]], ...] = (
    (
        BenignWarning.TOKENIZERS_FORK,
        "huggingface/tokenizers",
        re.compile(r"huggingface/tokenizers: The current process just got forked"),
    ),
    (
        BenignWarning.OPENMPI_CMA_EPERM,
        "Read -1, expected ",
        re.compile(r"Read -1, expected \d+, errno ?= ?1\b"),
    ),
)


def benign_warning(text: str) -> BenignWarning | None:
    """The documented-harmless warning ``text`` is, if any."""
    for warning, needle, pattern in _WARNINGS:
        if needle in text and pattern.search(text):
            return warning
    return None


# Each warning's needle, which any text that is the warning holds.
BENIGN_NEEDLES = tuple(needle for _, needle, _ in _WARNINGS)


def may_be_benign(text: str) -> bool:
    """False only when no part of ``text`` is a documented-harmless warning (it holds no
    warning's needle): a window's lines are asked this a chunk at once, joined."""
    return any(needle in text for _, needle, _ in _WARNINGS)
