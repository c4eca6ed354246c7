"""py-spy ``dump`` text (FORMATS.md §4), on the real samples and hand-made variants."""

from __future__ import annotations

import pytest

from hangdoc.analyzer.model import InputKind, TextStack
from hangdoc.analyzer.parsers.pyspy_text import parse_pyspy_text
from tests.unit.parsers.helpers import SAMPLES, Writer, kind_of, parse_sample, stack_sniffed

DUMP_TXT = (SAMPLES / "pyspy" / "dump.txt").read_text()


def _only_sample(text: str) -> TextStack:
    result = parse_pyspy_text(text, "t")
    [proc] = result.processes
    [sample] = proc.text_stacks
    return sample


@pytest.mark.parametrize(
    "name", ["dump.txt", "dump_nonblocking.txt", "dump_locals.txt", "dump_native.txt"]
)
def test_samples_threads_and_main(name: str) -> None:
    result = parse_sample(SAMPLES / "pyspy" / name)
    assert result.kind is InputKind.PYSPY_TEXT and result.error is None
    [proc] = result.processes
    assert proc.pid == 9106 and proc.cmdline == "/opt/venv/bin/python sleeper.py"
    [sample] = proc.text_stacks
    assert [t.name for t in sample.threads] == ["MainThread", "busy", "waiter"]
    assert [t.os_thread_id for t in sample.threads] == [9106, 9108, 9109]
    assert [t.is_main for t in sample.threads] == [True, False, False]
    busy, waiter = sample.threads[1], sample.threads[2]
    assert (busy.active, busy.owns_gil) == (True, True)
    assert (waiter.active, waiter.owns_gil) == (False, False)
    python = [f.function for f in sample.threads[0].python_frames()]
    assert python == ["save_checkpoint", "main", "<module>"]
    assert sample.threads[0].python_frames()[0].line == 5
    assert waiter.python_frames()[0].label() == "wait_lock (sleeper.py:13)"


def test_locals_blocks() -> None:
    sample = parse_sample(SAMPLES / "pyspy" / "dump_locals.txt").processes[0].text_stacks[0]
    main, busy = sample.threads[0], sample.threads[1]
    assert main.frames[0].locals == (
        ("step", "3"),
        ("path", '"/ckpt/step"'),
        ("buf", "<bytearray at 0x7f5805f032f0>"),
    )
    assert main.frames[1].locals == (("lock", "<_thread.lock at 0x7f5805eafd00>"),)
    assert main.frames[2].locals == ()
    assert busy.frames[0].locals == (("n", "3"), ("x", "382309701"))
    assert len(main.frames) == 3  # the locals lines did not become frames


def test_native_frames() -> None:
    sample = parse_sample(SAMPLES / "pyspy" / "dump_native.txt").processes[0].text_stacks[0]
    main = sample.threads[0]
    assert [(f.function, f.native) for f in main.frames[:3]] == [
        ("clock_nanosleep", True),
        ("time_sleep", True),
        ("save_checkpoint", False),
    ]
    assert main.frames[0].file == "libc.so.6" and main.frames[0].line is None
    waiter = sample.threads[2]
    assert waiter.frames[0].function == "0x7f580629af16" and waiter.frames[0].native
    assert waiter.python_frames()[0].function == "wait_lock"


def test_tty_ansi_and_crlf_sample() -> None:
    # The real dump under a pseudo-TTY: colour codes around every field, CRLF endings
    result = parse_sample(SAMPLES / "pyspy" / "dump_tty_ansi.raw")
    [proc] = result.processes
    assert proc.pid == 13458 and proc.cmdline == "/opt/venv/bin/python sleeper.py"
    sample = proc.text_stacks[0]
    assert [t.name for t in sample.threads] == ["MainThread", "busy", "waiter"]
    frame = sample.threads[0].frames[0]
    assert (frame.function, frame.file, frame.line) == ("save_checkpoint", "sleeper.py", 5)
    assert "\x1b" not in proc.cmdline


def test_torch_debug_pyspy_sample() -> None:
    result = parse_sample(SAMPLES / "torch_debug_pyspy_dump.txt")
    sample = result.processes[0].text_stacks[0]
    assert [t.name for t in sample.threads] == ["MainThread", "pg_wait"]
    assert sample.threads[0].frames[0].function == "SocketIO.readinto"
    assert sample.threads[1].frames[0].label() == "all_reduce_wait (ws2.py:5)"


def test_crlf_variant() -> None:
    # Hand-made (FORMATS.md §8.2): the plain sample saved with Windows line ends
    sample = _only_sample(DUMP_TXT.replace("\n", "\r\n"))
    assert sample.threads[0].frames[0].file == "sleeper.py"
    assert len(sample.threads) == 3


def test_bare_sgr_codes_from_a_paste() -> None:
    # Hand-made (FORMATS.md §8.2): ESC lost in a copy-paste, "[32m" left behind
    text = DUMP_TXT.replace("save_checkpoint", "[32msave_checkpoint[0m")
    assert _only_sample(text).threads[0].frames[0].function == "save_checkpoint"


def test_rank_prefixed_lines(write: Writer) -> None:
    # Hand-made (FORMATS.md §3/§8.1): every line carries "[rank2]: " (even blank ones)
    text = "".join(f"[rank2]: {line}\n" for line in DUMP_TXT.splitlines())
    path = write("stacks.log", text)
    assert kind_of(path) is InputKind.PYSPY_TEXT
    [proc] = parse_sample(path).processes
    assert proc.rank == 2 and proc.pid == 9106
    assert len(proc.text_stacks[0].threads) == 3
    assert proc.text_stacks[0].threads[0].frames[0].function == "save_checkpoint"


def test_stacked_launcher_prefixes() -> None:
    # Hand-made (FORMATS.md §8.1): k8s time + torchrun tee + rank prefix, stacked
    stamp = "2025-11-24T03:20:21.001125857Z "
    text = "".join(f"{stamp}[default1]:[rank9]:{line}\n" for line in DUMP_TXT.splitlines())
    [proc] = parse_pyspy_text(text, "t").processes
    assert (proc.rank, proc.local_rank) == (9, 1)
    assert proc.text_stacks[0].threads[1].name == "busy"


def test_interleaved_ranks_in_one_console() -> None:
    # Hand-made (FORMATS.md §8.3): two ranks' dumps interleaved line by line
    a = [f"[rank0]:{line}" for line in DUMP_TXT.splitlines()]
    b = [f"[rank1]:{line.replace('9106', '7000')}" for line in DUMP_TXT.splitlines()]
    mixed = [x for pair in zip(a, b, strict=True) for x in pair]
    procs = parse_pyspy_text("\n".join(mixed), "t").processes
    assert sorted((p.rank, p.pid) for p in procs) == [(0, 9106), (1, 7000)]
    for proc in procs:
        assert len(proc.text_stacks[0].threads) == 3


def test_concatenated_dumps_same_pid_are_samples_other_pid_is_process() -> None:
    # Hand-made: `py-spy dump` run three times into one file, the last on another pid
    other = DUMP_TXT.replace("9106", "9200")
    result = parse_pyspy_text(DUMP_TXT + DUMP_TXT + other, "t")
    by_pid = {p.pid: p for p in result.processes if p.pid is not None}
    assert sorted(by_pid) == [9106, 9200]
    assert [s.index for s in by_pid[9106].text_stacks] == [0, 1]
    assert len(by_pid[9200].text_stacks) == 1


def test_subprocess_sections_become_children() -> None:
    # Hand-made from py-spy's dump.rs: `-s` prints each child after a dashed line with a
    # "Parent Process" header (FORMATS.md §4)
    text = (
        DUMP_TXT
        + "\n" + "-" * 80 + "\n"
        + "Process 9300: /opt/venv/bin/python -c from multiprocessing.spawn import spawn_main\n"
        + "Python v3.11.7 (/usr/local/bin/python3.11)\n"
        + "Parent Process 9106: /opt/venv/bin/python sleeper.py\n\n"
        + 'Thread 9300 (idle): "MainThread"\n'
        + "    _worker_loop (torch/utils/data/_utils/worker.py:309)\n"
        + "\n" + "-" * 80 + "\n"
        + "Process 9301: grandchild\nParent Process 9300: x\n\n"
        + 'Thread 9301 (idle): "MainThread"\n    poll (selectors.py:415)\n'
    )  # fmt: skip
    [proc] = parse_pyspy_text(text, "t").processes
    sample = proc.text_stacks[0]
    assert len(sample.threads) == 3
    assert [c.pid for c in sample.children] == [9300, 9301]
    assert sample.children[0].threads[0].frames[0].function == "_worker_loop"
    assert sample.children[0].cmdline is not None and "spawn_main" in sample.children[0].cmdline


def test_hex_thread_ids_and_missing_names() -> None:
    # Hand-made from dump.rs format_threadid: "{:#X}" when no OS thread id; no name
    text = (
        "Process 5: x\n\nThread 0x7F3C00001000 (active)\n    f (a.py:1)\n"
        "Thread 5 (gil)\n    g (b.py)\n"
    )
    sample = _only_sample(text)
    first, second = sample.threads
    assert first.thread_id == 0x7F3C00001000 and first.os_thread_id is None
    assert first.name is None and first.active is True and first.owns_gil is False
    assert second.is_main and second.owns_gil is True and second.active is None
    assert second.frames[0].line is None and second.frames[0].file == "b.py"


def test_torch_debug_sections_give_ranks() -> None:
    # Hand-made (FORMATS.md §4 torch.distributed.debug): periodic pyspy_dump file
    text = (
        "=== Rank 0: node1:25999 ===\n" + DUMP_TXT
        + "=== Rank 1: node1:25998 ===\n" + DUMP_TXT.replace("9106", "9107")
        + "=== Rank 2: node2:25999 ===\nError: 503 Service Unavailable\n"
    )  # fmt: skip
    result = parse_pyspy_text(text, "pyspy_dump_20250101_000000.txt")
    assert sorted((p.rank, p.pid) for p in result.processes) == [(0, 9106), (1, 9107)]
    assert any("Error: 503" in n for n in result.notes)


def test_text_without_threads_is_an_error() -> None:
    result = parse_pyspy_text("Process 1: x\nPython v3.11\n", "t")
    assert result.error is not None


def test_sniff_rejects_python_traceback_and_logs(write: Writer) -> None:
    tb = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nValueError\n'
    assert stack_sniffed(write("tb.txt", tb)) is None
    log = "[rank0]:[E709 17:05:38.16 ProcessGroupNCCL.cpp:632] Watchdog caught\n" * 5
    assert stack_sniffed(write("log.txt", log)) is None


def test_sniff_tolerates_a_shell_prompt_first(write: Writer) -> None:
    path = write("paste.txt", "$ sudo py-spy dump --pid 9106\n" + DUMP_TXT)
    assert kind_of(path) is InputKind.PYSPY_TEXT


# Hand-made from py-spy's dump.rs: "Thread {tid} ({status}): \"{name}\"" with the OS thread
# id in decimal (Linux), pasted without the "Process" and "Python" lines, one per rank.
_HEADLESS = """\
Thread 33550 (active): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2924)
    step (deepspeed/runtime/zero/stage3.py:2120)
Thread 33551 (idle): "Thread-1"
    wait (threading.py:327)
    _bootstrap (threading.py:1002)
Thread 33549 (active): "MainThread"
    reduce_scatter_tensor (torch/distributed/distributed_c10d.py:4450)
    reduce_scatter_coalesced (deepspeed/runtime/comm/coalesced_collectives.py:205)
"""


def test_a_second_main_thread_without_process_lines_is_another_process() -> None:
    procs = parse_pyspy_text(_HEADLESS, "t").processes
    # THEN two processes, each named by its main thread's OS id (the pid on Linux)
    assert [p.pid for p in procs] == [33550, 33549]
    assert [[t.name for s in p.text_stacks for t in s.threads] for p in procs] == [
        ["MainThread", "Thread-1"],
        ["MainThread"],
    ]


def test_frames_a_gap_parts_from_a_thread_are_a_thread_or_another_process() -> None:
    # GIVEN one rank's dump with its header, a blank line, then a worker's frames and
    # another rank's frames, each without a Thread line
    worker = "    wait (threading.py:327)\n    _bootstrap (threading.py:1002)\n"
    other = _HEADLESS.split('"MainThread"\n')[2]
    text = _HEADLESS.split("Thread 33551")[0] + "\n" + worker + "\n" + other
    first, second = parse_pyspy_text(text, "t").processes
    # THEN the worker is a thread of the dump above, the other rank's main thread its own
    assert [(t.name, t.is_main) for s in first.text_stacks for t in s.threads] == [
        ("MainThread", True),
        (None, False),
    ]
    [[main]] = [s.threads for s in second.text_stacks]
    assert main.is_main and main.frames[0].function == "reduce_scatter_tensor"
