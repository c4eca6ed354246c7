"""A credential in a rank's log line never reaches a finding.

The Evidence is redacted once after loading, except the ranks' log windows (millions of
lines at scale); the views quote those lines into findings (HD060: the line a rank's log
stopped on), so the engine redacts the findings. The logs below are hand-written in the
formats they imitate: torch's ``[rankN]:`` prefix (torchrun ``--tee``/``local_ranks_filter``)
and ProcessGroupNCCL's watchdog timeout line (torch 2.4+, ProcessGroupNCCL.cpp).
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.api import diagnose

_TIMEOUT = (
    "[rank{r}]:[E1127 10:00:00.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=600, OpType=ALLREDUCE, NumelIn=4096, "
    "NumelOut=4096, Timeout(ms)=1800000) ran for 1800068 milliseconds before timing out."
)
_SECRET_LINE = (
    "[rank3]: uploading checkpoint to https://admin:hunter2pw@store.example.com/x "
    "with HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCD ..."
)


def _job(folder: Path) -> list[Path]:
    paths = []
    for rank in range(4):
        steps = 40 if rank < 3 else 30
        lines = [f"[rank{rank}]: step {i} loss 0.{i}" for i in range(1, steps + 1)]
        lines.append(_TIMEOUT.format(r=rank) if rank < 3 else _SECRET_LINE)
        path = folder / f"rank{rank}.log"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def _words(diagnosis_findings: object) -> str:
    return repr(diagnosis_findings)


def test_a_quoted_log_line_is_redacted_in_every_finding(tmp_path: Path) -> None:
    diagnosis = diagnose(_job(tmp_path))
    quoted = [f for f in diagnosis.findings if "uploading checkpoint" in f.title]
    assert quoted, "the rule that quotes the line must still fire (else the test proves nothing)"
    words = _words(diagnosis.findings)
    assert "hunter2pw" not in words
    assert "hf_abcdefghijklmnop" not in words


def test_without_redaction_the_line_is_quoted_as_it_was(tmp_path: Path) -> None:
    diagnosis = diagnose(_job(tmp_path), redact=False)
    assert "hunter2pw" in _words(diagnosis.findings)
