"""Warnings that users paste as "the hang" but that report a problem already avoided.

Some libraries print a warning whose words sound like a hang ("… to avoid deadlocks")
while the warning itself says the library took the step that prevents it. When such a
line is all the inputs hold (no timeout, no crash, no stack of a blocked rank), it is the
thing the reporter noticed, and it is benign. The catalog is small on purpose: a line
belongs here only if its own library documents it as harmless.

The log parser recognises the lines (parsers/logs/benign.py: LogLine.benign); this view
holds what each one means:

* huggingface/tokenizers' fork warning: reported as "stuck"/"error" and answered as
  safe to ignore in many threads (vllm-project/vllm#15056,
  huggingface/text-generation-inference#1035, NVIDIA/garak#750 where the progress bar
  goes on after it, sillsdev/silnlp#316).
* Open MPI's vader CMA read refused with EPERM, because the container lacks
  CAP_SYS_PTRACE; the job goes on and its results are right (horovod/horovod#300, where a
  maintainer calls the lines expected in docker and harmless; radiasoft/devops#132, "the
  results of the simulation seem to be correct", the lines gone with
  ``--cap-add=SYS_PTRACE``).
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.model import Evidence, LogLine, LogWindow
from hangdoc.analyzer.vocabulary import BenignWarning


@dataclass(frozen=True, slots=True)
class BenignKind:
    name: BenignWarning
    what: str  # what the line reports, in plain words
    why: str  # why it is not a hang
    fix: str = ""  # how to silence it
    # The line is printed by every run of the library in that setting, hung or not: it is
    # the answer only when nothing else was recognised around it (horovod/horovod#1167
    # shows it beside an NCCL setup that never finished).
    alone: bool = False


CATALOG: tuple[BenignKind, ...] = (
    BenignKind(
        BenignWarning.TOKENIZERS_FORK,
        "the huggingface/tokenizers fork warning",
        "tokenizers saw a fork after its thread pool had run and switched the child to "
        "single-threaded mode so that it cannot deadlock; the process goes on",
        "set TOKENIZERS_PARALLELISM=false before the tokenizer is first used",
    ),
    BenignKind(
        BenignWarning.OPENMPI_CMA_EPERM,
        "Open MPI's shared-memory single-copy (CMA) read refused by the container",
        "Open MPI's vader transport could not read the peer's memory directly "
        "(process_vm_readv needs CAP_SYS_PTRACE, which docker drops) and the job goes on",
        "run the container with --cap-add=SYS_PTRACE, or set "
        "OMPI_MCA_btl_vader_single_copy_mechanism=none",
        alone=True,
    ),
)


@dataclass(frozen=True, slots=True)
class BenignLine:
    kind: BenignKind
    line: LogLine


def benign_lines(evidence: Evidence) -> list[BenignLine]:
    """Every line of the inputs that a catalogued benign warning starts, in file order."""
    # (a summary's window gives its marked lines without building the others)
    lines = [
        *evidence.job_log_lines,
        *(
            line
            for p in evidence.processes
            for line in (
                p.log_lines.benign_marks() if isinstance(p.log_lines, LogWindow) else p.log_lines
            )
        ),
    ]
    catalog = {kind.name: kind for kind in CATALOG}
    found = [
        BenignLine(catalog[line.benign], line)
        for line in lines
        if line.benign is not None and line.benign in catalog
    ]
    found.sort(key=lambda b: (b.line.source, b.line.line))
    return found
