"""Tracebacks of several ranks in one stream (fixtures/logs/interleaved, recorded by
fixtures/logs/record_interleaved.py: 4 gloo ranks under torchrun raising at once, each from
its own line). Each exception must come with the frame that raised it, and where a prefix
names the process, with that process."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.stacks.interleave import split_interleaved
from hangdoc.analyzer.parsers.stacks.parser import extract_stacks

LOGS = Path(__file__).resolve().parents[3] / "fixtures" / "logs" / "interleaved"
# The recorder's _descend: which line raises what, and for which rank.
RAISED_AT = {"ValueError": 34, "KeyError": 36, "RuntimeError": 38, "FileNotFoundError": 39}
RANK_OF = {"ValueError": 0, "KeyError": 1, "RuntimeError": 2, "FileNotFoundError": 3}
# Runs the grammar deals wrongly, with why (strict: fixed means remove it).
_GAPS: dict[str, str] = {}


def _threads(name: str) -> list[tuple[int | None, int | None, str, int | None]]:
    """(rank, local rank, exception type, innermost line) of every job traceback."""
    found = []
    for proc in extract_stacks((LOGS / name).read_text(), name):
        for stack in proc.text_stacks:
            for t in stack.threads:
                kind = (t.exception or "").split(":")[0]
                if kind in RAISED_AT:
                    line = t.frames[0].line if t.frames else None
                    found.append((proc.rank, proc.local_rank, kind, line))
    return found


def _cases() -> list[object]:
    names = sorted(p.name for p in LOGS.glob("*.log"))
    return [
        pytest.param(
            n, id=n, marks=[pytest.mark.xfail(reason=_GAPS[n], strict=True)] if n in _GAPS else []
        )
        for n in names
    ]


@pytest.mark.parametrize("name", _cases())
def test_each_exception_keeps_the_frame_that_raised_it(name: str) -> None:
    # GIVEN four ranks' tracebacks in one stream WHEN the stacks are read
    found = _threads(name)
    # THEN there are four, one per exception, each innermost at its own raise
    assert sorted(kind for _, _, kind, _ in found) == sorted(RAISED_AT)
    assert all(line == RAISED_AT[kind] for _, _, kind, line in found), found
    if name.startswith("raw"):
        # and, with no prefix, no rank: not one another traceback's lines mention
        # ("{rank:05d}" in a source line, "rank 0: bad shard index" in an exception)
        assert all(rank is None for rank, _, _, _ in found), found


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("t*.log")))
def test_a_prefix_names_the_process_not_a_neighbours_line(name: str) -> None:
    # GIVEN each line prefixed [rankN]: (torch's hook) or [defaultN]: (--tee 3), the
    # tracebacks' own lines mentioning other ranks ("{rank:05d}", "rank 2: loss is nan")
    # WHEN read THEN each traceback is its own process's: its rank, or local rank, or none
    for rank, local, kind, _ in _threads(name):
        assert rank in (None, RANK_OF[kind])
        assert local in (None, RANK_OF[kind])
        assert rank is not None or local is not None


def test_a_source_line_cut_by_another_ranks_frame_is_put_back() -> None:
    # GIVEN rank A's source line cut by rank B's frame line (CPython writes the source,
    # then its newline apart), B's frame left in A's line and A's newline alone after it
    lines = list(
        enumerate(
            [
                "Traceback (most recent call last):",
                "Traceback (most recent call last):",
                '  File "a.py", line 1, in <module>',
                '  File "a.py", line 1, in <module>',
                "    main()",
                '    main()  File "a.py", line 5, in main',
                "",
                '  File "a.py", line 5, in main',
                "    raise KeyError(1)",
                "    raise ValueError(2)",
                "KeyError: 1",
                "ValueError: 2",
            ],
            1,
        )
    )
    # WHEN the lines are dealt back THEN two whole tracebacks, one after the other
    got = [text for _, text in split_interleaved(lines)]
    one = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "    main()",
        '  File "a.py", line 5, in main',
    ]
    assert got[:4] == one and got[6:10] == one
    assert {got[4], got[10]} == {"    raise KeyError(1)", "    raise ValueError(2)"}
    exceptions = {got[4].split()[1][:3]: got[5][:3], got[10].split()[1][:3]: got[11][:3]}
    assert exceptions == {"Key": "Key", "Val": "Val"}
    assert len(got) == 12


def test_tracebacks_one_after_the_other_are_left_as_they_are() -> None:
    lines = list(
        enumerate(
            [
                "Traceback (most recent call last):",
                '  File "a.py", line 1, in f',
                "    f()",
                "KeyError: 1",
                "Traceback (most recent call last):",
                '  File "a.py", line 2, in g',
                "    g()",
                "ValueError: 2",
            ],
            1,
        )
    )
    assert split_interleaved(lines) is lines


def test_an_indent_cut_from_its_source_line_goes_back_to_it() -> None:
    # GIVEN rank B's source line cut after its indent by rank A's frame line (the indent
    # written, then A's whole frame line, then B's source text at the start of a line),
    # A's traceback timing out in a barrier while B is in backward()
    text = """Traceback (most recent call last):
  File "main.py", line 156, in <module>
    main(args)
  File "trainer.py", line 263, in save_topk_models
Traceback (most recent call last):
  File "main.py", line 156, in <module>
      File "trainer.py", line 190, in save_model
main(args)
  File "main.py", line 134, in main
  File "torch/distributed/distributed_c10d.py", line 2791, in barrier
    trainer.fit(
  File "trainer.py", line 147, in fit
    work.wait()
RuntimeError: Timed out waiting 1800000ms for recv operation to complete
    loss.backward()
  File "torch/_tensor.py", line 396, in backward"""
    lines = list(enumerate(text.split("\n"), 1))
    # WHEN the lines are dealt back
    got = [t for _, t in split_interleaved(lines)]
    # THEN the first traceback goes from save_topk_models through save_model to the
    # barrier and its timeout; the second is <module>, main, fit, backward, whole
    first = got[: got.index("Traceback (most recent call last):", 1)]
    second = got[len(first) :]
    assert [t.split(", in ")[-1] for t in first if "File" in t] == [
        "<module>",
        "save_topk_models",
        "save_model",
        "barrier",
    ]
    assert first[-2:] == ["    work.wait()", lines[13][1]]
    assert [t.split(", in ")[-1] for t in second if "File" in t] == [
        "<module>",
        "main",
        "fit",
        "backward",
    ]
    assert second[2] == "    main(args)" and "    loss.backward()" in second
