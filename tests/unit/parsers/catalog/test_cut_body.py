"""A paste's first line cut inside a library message's body (issue 21 item 3): the catalog
row whose body the line ends claims it, and the cut-away start of its literal text is put
back before any reader sees the line (parsers/catalog/cut_body.py, parsers/unmangle.py
step 8), so its words are never read as the job's own.

Inputs are hand-written from the messages' sources, as the catalog holds them:
NCCL's ``Net : Call to recv from %s failed : %s`` (src/misc/socket.cc, a WARN behind
NCCL's ``host:pid:tid [dev] file:line NCCL WARN`` header), torch's ProcessGroupNCCL
watchdog ``[Rank %d] Watchdog caught collective operation timeout: %s ran for %d
milliseconds before timing out.`` (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp,
behind c10's ``[E… file:line]`` header); the cuts are what
hangdoc/paste_mangling.py's ``cut_first_line`` does to them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.catalog.cut_body import cut_body
from hangdoc.analyzer.parsers.unmangle import unmangle
from hangdoc.paste_mangling import cut_first_line, hard_wrap

NCCL_RECV = (
    "[15]node-23:83:2526 [0] misc/socket.cc:503 NCCL WARN Net : Call to recv from "
    "10.0.3.7<41468> failed : Connection timed out\n"
    "[15]node-23:83:2526 [0] NCCL INFO misc/socket.cc:520 -> 2\n"
)
WATCHDOG = (
    "[rank{r}]:[E513 13:25:57.714781669 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=513, "
    "NumelOut=2052, Timeout(ms)=1800000) ran for 1800036 milliseconds before timing out.\n"
)


def test_a_recv_failure_cut_after_its_first_words_is_restored() -> None:
    cut = cut_first_line(NCCL_RECV, chars=NCCL_RECV.index(" to recv"))
    found = cut_body(cut.split("\n", 1)[0])
    assert found is not None
    assert found.row.project == "nccl"
    assert found.missing == "Net : Call"
    assert found.restored.startswith("Net : Call to recv from 10.0.3.7<41468> failed")


def test_a_cut_inside_a_word_is_restored_to_the_literal_run() -> None:
    line = "ll to recv from 10.0.3.7<41468> failed : Connection timed out"
    found = cut_body(line)
    assert found is not None and found.missing == "Net : Ca"


@pytest.mark.parametrize(
    "line",
    [
        "Saving checkpoint to /ckpt/step_100 (model, optimizer state)",  # the job's own
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1333",
        "rom 10.0.3.7<41468> failed : Connection timed out",  # too little of the row left
        # a header's punctuation cut, no body: "] " is all that a restore would add
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST)"
        " ran for 1800036 milliseconds before timing out.",
    ],
)
def test_lines_that_start_no_library_body_are_not_claimed(line: str) -> None:
    assert cut_body(line) is None


def test_a_first_line_that_starts_as_a_record_is_left_as_it_is() -> None:
    # c10's header after a blank: the line is whole; "[Rank " + a text slot would take it
    text = " " + WATCHDOG.format(r=3, seq=5, op="BROADCAST").split("]:", 1)[1]
    assert unmangle(text) is None


def test_unmangle_restores_the_body_and_joins_the_wrap_the_cut_left_short() -> None:
    lines = "".join(
        WATCHDOG.format(r=r, seq=seq, op=op)
        for r, seq, op in ((2, 532339, "BROADCAST"), (1, 532339, "BROADCAST"), (0, 532341, "X"))
    )
    wrapped = hard_wrap(lines, 150)
    cut = cut_first_line(wrapped)
    fixed = unmangle(cut)
    assert fixed is not None
    first = fixed.text.split("\n", 1)[0]
    assert first.startswith("] Watchdog caught collective operation timeout: WorkNCCL(")
    assert first.endswith("milliseconds before timing out.")
    assert fixed.original_line(2) == 3  # the cut line and its wrapped rest are one line now


def test_a_cut_watchdog_line_still_counts_as_a_rank_stuck_at_its_seqnum(tmp_path: Path) -> None:
    """Two ranks of three wait in #532339 and one is two collectives ahead: nobody is
    behind. A cut takes the first line's rank prefix; its timeout still votes, so the one
    named rank at #532339 is not taken for a laggard."""
    lines = "".join(
        WATCHDOG.format(r=r, seq=seq, op=op)
        for r, seq, op in ((2, 532339, "BROADCAST"), (1, 532339, "BROADCAST"), (0, 532341, "X"))
    )
    whole, cut = tmp_path / "whole.txt", tmp_path / "cut.txt"
    whole.write_text(lines, encoding="utf-8")
    # (a cut inside the WorkNCCL(…) takes the SeqNum with the rank: nothing left to vote)
    cut.write_text(cut_first_line(lines, chars=lines.index("ive operation")), "utf-8")
    before = analyze(load_paths([whole])).primary
    after = analyze(load_paths([cut])).primary
    assert before.category is not Category.RANK_DIVERGENCE
    assert after.category is before.category, after.title


def test_a_cut_recv_failure_names_the_same_peer(tmp_path: Path) -> None:
    whole, cut = tmp_path / "whole.log", tmp_path / "cut.log"
    whole.write_text(NCCL_RECV, encoding="utf-8")
    cut.write_text(cut_first_line(NCCL_RECV, chars=NCCL_RECV.index(" to recv")), "utf-8")
    before = analyze(load_paths([whole])).primary
    after = analyze(load_paths([cut])).primary
    assert before.category is Category.NCCL_NETWORK
    assert (after.category, after.culprit_ranks) == (before.category, before.culprit_ranks)
    assert "10.0.3.7" in after.title


# torch's ProcessGroupNCCL: "[PG %s Rank %d] Process group watchdog thread terminated with
# exception: %s" (torch >= 2.2) and its older "NCCL watchdog thread terminated with
# exception: %s": a line cut inside "thread" shares only three common words with either
# row, and more than the candidates' old cap of rows share as many with the CUDA error
# after it.
WATCHDOG_DIED_CUT = (
    "d terminated with exception: CUDA error: the launch timed out and was terminated"
)


def test_a_line_is_restored_whatever_the_process_string_hashing() -> None:
    # GIVEN the same cut line read in processes with different string hashing
    code = (
        "from hangdoc.analyzer.parsers.catalog.cut_body import cut_body; "
        f"found = cut_body({WATCHDOG_DIED_CUT!r}); "
        "print(found.restored if found else None)"
    )
    said = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in (0, 4, 6)
    }
    # THEN every process restores it alike, to the watchdog thread's message
    assert len(said) == 1
    restored = said.pop()
    assert restored.endswith(
        "watchdog thread terminated with exception: CUDA error: the "
        "launch timed out and was terminated"
    )


def test_a_cut_inside_the_watchdogs_work_description_is_read_from_the_end_after_it() -> None:
    # Half of the line: the cut falls inside the WorkNCCL(…) the message prints in a slot
    # (as torch 1.x prints it, no NumelIn: no row of its own ends so).
    line = (
        "[E ProcessGroupNCCL.cpp:828] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800013 "
        "milliseconds before timing out."
    )
    half = line[line.index("qNum=") :]
    found = cut_body(half)
    assert found is not None and found.row.project == "torch"
    assert found.restored.endswith(half)
    assert "Watchdog caught collective operation timeout: " in found.restored


def test_a_whole_message_without_its_header_is_not_claimed_from_a_slot() -> None:
    line = WATCHDOG.format(r=3, seq=7, op="ALLREDUCE").rstrip("\n")
    headless = line[line.index("Watchdog") :]
    assert cut_body(headless) is None
