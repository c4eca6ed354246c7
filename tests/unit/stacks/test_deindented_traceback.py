"""A traceback pasted without its indentation (Markdown or HTML rendering strips leading
spaces, and eats "<module>"): each frame's source line sits at the header's indent right
under its frame line, and is read as that frame's source, as when indented."""

from __future__ import annotations

from hangdoc.analyzer.parsers.stacks.parser import extract_stacks

_INDENTED = (
    "Traceback (most recent call last):\n"
    '  File "/job/train.py", line 94, in <module>\n'
    "    main()\n"
    '  File "/job/train.py", line 25, in main\n'
    "    dist.barrier()\n"
    '  File "/site-packages/torch/distributed/distributed_c10d.py", line 3328, in barrier\n'
    "    work.wait()\n"
    "RuntimeError: boom\n"
)


def _read(text: str) -> list[tuple[list[str], str | None]]:
    return [
        ([f.function for f in t.frames], t.exception)
        for p in extract_stacks(text, "x.log")
        for s in p.text_stacks
        for t in s.threads
    ]


def test_deindented_reads_as_indented() -> None:
    # GIVEN the same traceback with every leading space stripped, "<module>" eaten
    flat = "\n".join(line.strip() for line in _INDENTED.splitlines()).replace(
        ", in <module>", ", in"
    )
    # THEN its frames and exception are the indented one's
    assert _read(flat) == _read(_INDENTED)
    assert _read(flat) == [(["barrier", "main", "<module>"], "RuntimeError: boom")]


def test_exception_line_still_ends_it() -> None:
    # GIVEN a de-indented traceback whose last frame has no source line shown
    flat = (
        'Traceback (most recent call last):\nFile "/job/train.py", line 9, in main\nValueError: x\n'
    )
    # THEN the exception line is not taken for a source line
    assert _read(flat) == [(["main"], "ValueError: x")]
