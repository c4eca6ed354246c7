"""A timeout whose rank a paste's cut took is still some rank's timeout (issue 21 items 3
and 6): an inference from silence ("rank N never timed out", "rank N is the one gap",
"nothing came of rank N") does not name a rank that timeout may belong to
(views/silence.py ``Silence.unattributed``), and a first line cut inside the watchdog's
work description is read back as the watchdog's timeout (parsers/catalog/cut_body.py,
``_slot_tail_at``).

The lines are torch's ProcessGroupNCCL watchdog message as its source prints it
(``[Rank %d] Watchdog caught collective operation timeout: %s ran for %d milliseconds
before timing out.`` behind c10's ``[E file:line]`` header), with invented values; the
cut is what hangdoc/paste_mangling.py's ``cut_first_line`` does.
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.views.silence import silence
from hangdoc.analyzer.views.timeline import Timeline
from hangdoc.paste_mangling import cut_first_line

_WATCHDOG = (
    "[E ProcessGroupNCCL.cpp:828] [Rank {rank}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for {ms} "
    "milliseconds before timing out."
)
# Rank 3 goes on printing after the others' timeouts: its silence is covered.
_RANK3 = [f"[default3]:Saving checkpoint shard {n} of 8" for n in (4, 5, 6)]


def _console(tmp_path: Path, ranks: tuple[int, ...], *, first: str | None = None) -> Path:
    lines = [_WATCHDOG.format(rank=r, ms=1800010 + r) for r in ranks] + _RANK3
    text = "\n".join(lines) + "\n"
    if first is not None:
        text = first + "\n" + text
    path = tmp_path / "console.txt"
    path.write_text(text)
    return path


def _answer(path: Path) -> tuple[str | None, tuple[int, ...]]:
    primary = analyze(load_paths([path])).primary
    return (primary.rule, primary.culprit_ranks) if primary else (None, ())


def test_a_silent_rank_is_named_when_every_timeout_has_its_rank(tmp_path: Path) -> None:
    # The rule the cut must not fool: ranks 0-2 timed out, rank 3 printed on.
    assert _answer(_console(tmp_path, (0, 1, 2))) == ("HD032", (3,))


def test_a_timeout_whose_rank_was_cut_may_be_the_silent_ranks_own(tmp_path: Path) -> None:
    # Rank 3's own timeout is the paste's first line, cut in half: "[Rank 3]" is gone.
    own = _WATCHDOG.format(rank=3, ms=1800013)
    path = _console(tmp_path, (0, 1, 2), first=cut_first_line(own))
    rule, culprits = _answer(path)
    assert 3 not in culprits and rule != "HD032"
    evidence = load_paths([path])
    view = silence(evidence, Timeline(evidence))
    assert len(view.unattributed) == 1 and not view.silence_sure
    assert view.gap is None  # the one rank that did not time out may be the one cut


def test_a_named_ranks_timeout_printed_again_without_its_rank_is_no_other_rank(
    tmp_path: Path,
) -> None:
    # The same timeout (sequence number, operation, time run) as rank 2's: its repeat.
    again = cut_first_line(_WATCHDOG.format(rank=2, ms=1800012))
    path = _console(tmp_path, (0, 1, 2), first=again)
    evidence = load_paths([path])
    view = silence(evidence, Timeline(evidence))
    assert view.unattributed == () and view.silence_sure
    assert _answer(path) == ("HD032", (3,))
