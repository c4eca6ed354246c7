"""A loose text file is read without its paste layers, and evidence cites the user's file
(analyzer/loading/paste_view.py through load_paths)."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.paste_mangling import hard_wrap, quote

# torch's watchdog line (shared/FORMATS.md §2) under a launcher prefix, long enough to wrap
WATCHDOG = (
    "[rank1]:[E709 17:05:38.162555850 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600041 milliseconds before timing out.\n"
)
TEXT = (
    "[rank1]: epoch 3 step 10\n"
    + WATCHDOG
    + WATCHDOG.replace("rank1", "rank2").replace("Rank 1", "Rank 2")
)


def _timeouts(path: Path) -> dict[int | None, int | None]:
    evidence = load_paths([path])
    return {
        p.rank: e.line for p in evidence.processes for e in p.log_events if "Watchdog" in e.text
    }


def test_a_quoted_and_wrapped_paste_reads_like_the_log_with_its_own_line_numbers(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain.log"
    plain.write_text(TEXT)
    # GIVEN the log hard-wrapped at 60 columns, then quoted in a comment
    pasted = tmp_path / "pasted.log"
    pasted.write_text(quote(hard_wrap(TEXT, 60)))
    # WHEN both are read THEN the same timeouts are found, each cited at the line of the
    # user's file where it starts (the wrapped record's first piece)
    assert _timeouts(plain) == {1: 2, 2: 3}
    wrapped_lines = quote(hard_wrap(TEXT, 60)).splitlines()
    starts = [n for n, line in enumerate(wrapped_lines, 1) if line.startswith("> [rank")]
    assert _timeouts(pasted) == {1: starts[1], 2: starts[2]}
    notes = load_paths([pasted]).notes
    assert any("block quote" in n and "hard wrap at 60 columns" in n for n in notes), notes


def test_a_plain_log_is_read_as_it_is(tmp_path: Path) -> None:
    # Only what a person pasted is undone: a plain log stays byte for byte what it was.
    plain = tmp_path / "plain.log"
    plain.write_text(TEXT)
    assert not any("read as the tool printed it" in n for n in load_paths([plain]).notes)
