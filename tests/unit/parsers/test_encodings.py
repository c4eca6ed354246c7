"""Bytes that are not clean UTF-8 text (FORMATS.md §8.12 "read with errors=replace").

All variants are hand-made from the real py-spy/faulthandler samples.
"""

from __future__ import annotations

from hangdoc.analyzer.model import InputKind
from hangdoc.analyzer.parsers.faulthandler import parse_faulthandler_text
from hangdoc.analyzer.parsers.pyspy_text import parse_pyspy_text
from tests.unit.parsers.helpers import SAMPLES, Writer, kind_of, parse_sample, stack_sniffed

DUMP_TXT = (SAMPLES / "pyspy" / "dump.txt").read_text()
SIGUSR1 = (SAMPLES / "faulthandler_sigusr1.txt").read_text()


def test_latin1_bytes_are_replaced_not_fatal(write: Writer) -> None:
    # A cmdline and a file name in latin-1 (a job launched from a latin-1 locale)
    data = DUMP_TXT.replace("sleeper.py", "sl\u00e9eper.py").encode("latin-1")
    path = write("latin1.txt", data)
    assert kind_of(path) is InputKind.PYSPY_TEXT
    [proc] = parse_sample(path).processes
    frame = proc.text_stacks[0].threads[0].frames[0]
    assert frame.file == "sl\ufffdeper.py" and frame.line == 5


def test_utf16_with_bom_text(write: Writer) -> None:
    path = write("u16.txt", SIGUSR1.encode("utf-16"))
    assert kind_of(path) is InputKind.FAULTHANDLER
    [proc] = parse_sample(path).processes
    assert len(proc.text_stacks[0].threads) == 2


def test_utf8_bom_text(write: Writer) -> None:
    path = write("bom.txt", b"\xef\xbb\xbf" + DUMP_TXT.encode())
    assert kind_of(path) is InputKind.PYSPY_TEXT


def test_five_megabyte_single_line_is_fast_and_harmless(write: Writer) -> None:
    # A log with no newline at all (a binary-ish blob or a minified JSON)
    blob = ("Thread (x) " * 500_000)[: 5 * 1024 * 1024]
    path = write("one_line.txt", blob)
    # (a regex with catastrophic backtracking would hang here rather than fail)
    assert stack_sniffed(path) is None
    assert parse_pyspy_text(blob, "t").error is not None
    assert parse_faulthandler_text(blob, "t").error is not None


def test_five_megabyte_local_repr_inside_a_dump() -> None:
    # py-spy --locals with one enormous repr line inside a real dump
    huge = "x" * (5 * 1024 * 1024)
    text = DUMP_TXT.replace(
        "    main (sleeper.py:20)\n",
        f"        Locals:\n            big: {huge}\n    main (sleeper.py:20)\n",
    )
    [proc] = parse_pyspy_text(text, "t").processes
    frames = proc.text_stacks[0].threads[0].frames
    assert [f.function for f in frames] == ["save_checkpoint", "main", "<module>"]
    assert frames[0].locals[0][0] == "big" and len(frames[0].locals[0][1]) == len(huge)


def test_nul_bytes_inside_text_do_not_crash() -> None:
    proc = parse_faulthandler_text(SIGUSR1.replace("allreduce_wait", "allreduce\x00wait"), "t")
    assert proc.processes[0].text_stacks[0].threads[0].frames[0].function == "allreduce\x00wait"
