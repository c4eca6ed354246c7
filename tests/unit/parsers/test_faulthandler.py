"""faulthandler tracebacks (FORMATS.md §4 "faulthandler"), real samples and variants."""

from __future__ import annotations

import pytest

from hangdoc.analyzer.model import InputKind, ProcessEvidence
from hangdoc.analyzer.parsers.faulthandler import parse_faulthandler_text
from hangdoc.analyzer.payloads.launch import FatalSignal, SignalName
from tests.unit.parsers.helpers import SAMPLES, Writer, kind_of, parse_sample, stack_sniffed

SIGUSR1 = (SAMPLES / "faulthandler_sigusr1.txt").read_text()


def _one(text: str) -> ProcessEvidence:
    [proc] = parse_faulthandler_text(text, "t").processes
    return proc


@pytest.mark.parametrize(
    ("name", "fatal", "worker_file"),
    [
        ("faulthandler_segv.txt", True, "fh.py"),
        ("faulthandler_segv_py313.txt", True, "fh.py"),
        ("faulthandler_segv_torch.txt", True, "fh_torch.py"),
        ("faulthandler_sigusr1.txt", False, "fh.py"),
        ("faulthandler_sigusr1_py313.txt", False, "fh.py"),
        ("faulthandler_timeout.txt", False, "fh.py"),
    ],
)
def test_samples_two_threads_main_last(name: str, fatal: bool, worker_file: str) -> None:
    result = parse_sample(SAMPLES / name)
    assert result.kind is InputKind.FAULTHANDLER and result.error is None
    [proc] = result.processes
    assert proc.pid is None and proc.rank is None
    [sample] = proc.text_stacks
    worker, main = sample.threads
    # thread ids are pthread ids, never TIDs
    assert worker.thread_id is not None and worker.thread_id > 0xFFFFFFFF
    assert worker.os_thread_id is None
    assert main.is_main and not worker.is_main
    assert worker.frames[0].function == "allreduce_wait"
    assert worker.frames[0].short_file == worker_file
    assert worker.frames[-1].function == "_bootstrap"
    assert [f.function for f in main.frames][-1] == "<module>"
    assert proc.exited is fatal
    # the fatal error is the log side's event (a file that names no rank: the job's)
    events = [*proc.log_events, *result.job_log_events]
    assert ("fatal_signal" in [e.kind for e in events]) is fatal
    if fatal:
        [event] = [e for e in events if e.kind == "fatal_signal"]
        assert event.text == "Fatal Python error: Segmentation fault"
        payload = event.payload
        assert isinstance(payload, FatalSignal) and payload.signal is SignalName.SIGSEGV


def test_timeout_dump_has_no_current_thread_last_is_main() -> None:
    proc = parse_sample(SAMPLES / "faulthandler_timeout.txt").processes[0]
    assert [e.kind for e in proc.log_events] == ["faulthandler_timeout"]
    main = proc.text_stacks[0].main_thread()
    assert main is not None and main.thread_id == 0x00007F3D018B5B80


def test_torch_debug_dump_traceback_current_is_not_main() -> None:
    # "Current thread" is the debug server's handler thread; main is listed last
    [sample] = parse_sample(SAMPLES / "torch_debug_dump_traceback.txt").processes[0].text_stacks
    server, waiter, main = sample.threads
    assert server.frames == () and not server.is_main  # "<no Python frame>"
    assert waiter.frames[0].function == "all_reduce_wait"
    assert main.is_main and main.frames[-1].function == "<module>"
    assert main.frames[0].function == "readinto" and main.frames[0].line == 706


def test_prefixed_rank_and_crlf(write: Writer) -> None:
    # Hand-made (FORMATS.md §3/§8.1-2): torchrun --tee output, CRLF line ends
    text = "".join(f"[default3]:[rank11]:{line}\r\n" for line in SIGUSR1.splitlines())
    path = write("worker.log", text)
    assert kind_of(path) is InputKind.FAULTHANDLER
    [proc] = parse_sample(path).processes
    assert (proc.rank, proc.local_rank) == (11, 3)
    assert len(proc.text_stacks[0].threads) == 2


def test_repeated_dumps_are_samples() -> None:
    # Hand-made: the SIGUSR1 handler fired twice into the same stderr
    proc = _one(SIGUSR1 + "\n" + SIGUSR1)
    assert [s.index for s in proc.text_stacks] == [0, 1]
    assert all(len(s.threads) == 2 for s in proc.text_stacks)


def test_caps_and_odd_lines() -> None:
    # Hand-made from CPython's traceback.c: frame cap "  ...", thread cap "...",
    # "???" for unknown lines, GC marker, "Stack" header of a single-thread dump
    text = (
        "Fatal Python error: Aborted\n\n"
        "Current thread 0x00007f0000000001 (most recent call first):\n"
        "  Garbage-collecting\n"
        '  File "/a.py", line ??? in f\n'
        "  ...\n\n"
        "Thread 0x00007f0000000002 (most recent call first):\n"
        '  File "/b.py", line 2 in g\n\n'
        "...\n"
    )
    result = parse_faulthandler_text(text, "t")
    [proc] = result.processes
    first, second = proc.text_stacks[0].threads
    assert first.frames[0].line is None and first.frames[0].function == "f"
    assert not first.is_main and not second.is_main  # main was cut by the thread cap
    assert any("100 frames" in n for n in result.notes)
    assert any("100 threads" in n for n in result.notes)
    single = _one('Stack (most recent call first):\n  File "/c.py", line 3 in h\n')
    assert single.text_stacks[0].threads[0].thread_id is None


def test_python314_c_stack_section_is_skipped() -> None:
    # Hand-made from FORMATS.md §4: 3.14 may add the C stack after the Python one
    text = SIGUSR1 + (
        "\nCurrent thread's C stack trace (most recent call first):\n"
        '  Binary file "/usr/bin/python3.14", at _Py_DumpStack+0x4c [0x55d0]\n'
    )
    proc = _one(text)
    assert len(proc.text_stacks[0].threads) == 2


def test_torch_debug_sections(write: Writer) -> None:
    # Hand-made (FORMATS.md §4): periodic stacks_<ts>.txt with one section per rank
    text = (
        "=== Rank 0: 10.0.0.1:25999 ===\n" + SIGUSR1
        + "=== Rank 1: 10.0.0.1:25998 ===\n" + SIGUSR1
        + "=== Rank 2: 10.0.0.2:25999 ===\nError: Connection refused\n"
    )  # fmt: skip
    path = write("stacks_20250101_120000.txt", text)
    assert kind_of(path) is InputKind.FAULTHANDLER
    result = parse_sample(path)
    assert [p.rank for p in result.processes] == [0, 1]
    assert any("rank 2" in n and "Connection refused" in n for n in result.notes)


def test_python_traceback_is_not_faulthandler(write: Writer) -> None:
    tb = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nKeyError\n'
    assert stack_sniffed(write("tb.txt", tb)) is None


def test_file_ending_without_newline() -> None:
    proc = _one(SIGUSR1.rstrip("\n"))
    assert proc.text_stacks[0].threads[-1].frames[-1].function == "<module>"
