"""Warnings that users paste as "the hang" but that report a problem already avoided.

Some libraries print a warning whose words sound like a hang ("… to avoid deadlocks")
while the warning itself says the library took the step that prevents it. When such a
line is all the inputs hold (no timeout, no crash, no stack of a blocked rank), it is the
thing the reporter noticed, and it is benign. The catalog is small on purpose: a line
belongs here only if its own library documents it as harmless.

* huggingface/tokenizers, ``bindings/python/src/utils/parallelism.rs`` /
  ``lib.rs`` (``child_after_fork``): after ``fork()`` in a process whose Rust thread pool
  was used, the child prints ``huggingface/tokenizers: The current process just got
  forked, after parallelism has already been used. Disabling parallelism to avoid
  deadlocks...`` and runs single-threaded. Reported as "stuck"/"error" and answered as
  safe to ignore in many threads (vllm-project/vllm#15056,
  huggingface/text-generation-inference#1035, NVIDIA/garak#750 where the progress bar
  goes on after it, sillsdev/silnlp#316).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoc.analyzer.model import Evidence, LogLine


@dataclass(frozen=True, slots=True)
class BenignKind:
    name: str
    needle: str  # a plain substring every match holds: most lines are skipped on it
    pattern: re.Pattern[str]
    what: str  # what the line reports, in plain words
    why: str  # why it is not a hang


CATALOG: tuple[BenignKind, ...] = (
    BenignKind(
        "tokenizers_fork",
        "huggingface/tokenizers",
        re.compile(r"huggingface/tokenizers: The current process just got forked"),
        "the huggingface/tokenizers fork warning",
        "tokenizers saw a fork after its thread pool had run and switched the child to "
        "single-threaded mode so that it cannot deadlock; the process goes on",
    ),
)


@dataclass(frozen=True, slots=True)
class BenignLine:
    kind: BenignKind
    line: LogLine


def benign_lines(evidence: Evidence) -> list[BenignLine]:
    """Every line of the inputs that a catalogued benign warning starts, in file order."""
    lines = [*evidence.job_log_lines, *(line for p in evidence.processes for line in p.log_lines)]
    found: list[BenignLine] = []
    for line in lines:
        for kind in CATALOG:
            if kind.needle in line.text and kind.pattern.search(line.text):
                found.append(BenignLine(kind, line))
                break
    found.sort(key=lambda b: (b.line.source, b.line.line))
    return found
