"""Recognisers for hangs that live in one process: a traceback or stack print with no
``Traceback`` header (parsers/stacks/headless.py), log lines next to a faulthandler dump
(parsers/fault_logs.py), a native thread waiting for the GIL told by the address it waits
on (views/gil_native.py), and a native thread taking a C mutex (views/locks.py). Real
pastes: fixtures/pastes/README.md."""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.model import Category, ProcessEvidence, StackTextKind
from hangdoc.analyzer.parsers.faulthandler import parse_faulthandler_text
from hangdoc.analyzer.parsers.stacks.native import gdb_frame
from hangdoc.analyzer.payloads.launch import LoaderWorkerDied
from hangdoc.analyzer.views.activity import classify_thread
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.gil_native import waits_for_gil
from hangdoc.analyzer.views.kernel import thread_tracks
from hangdoc.analyzer.views.locks import c_mutex_frame, lock_wait
from hangdoc.analyzer.vocabulary import EventKind
from tests.unit.stacks.helpers import PASTES, only_process, paste, scan, threads


def _primary(*files: Path) -> tuple[Category, str, float]:
    diagnosis = analyze(load_paths(list(files)), calibrate=False)
    primary = diagnosis.primary
    assert primary is not None
    return primary.category, primary.rule, primary.confidence


# --- stack prints: traceback-format frames under a thread line ---------------------------


def test_a_thread_dump_in_traceback_format_is_read_under_its_thread_line() -> None:
    proc = only_process(paste("traceback/pytorch_24927_stack_print.txt"))
    [thread] = threads(proc)
    assert thread.name == "MainThread" and thread.is_main and thread.exception is None
    assert thread.frames[0].function == "_worker_loop"  # innermost first
    assert classify_thread(thread).has(Activity.DATALOADER_WORKER)


def test_a_stack_print_of_the_dataloader_gives_the_dataloader_category() -> None:
    category, rule, confidence = _primary(PASTES / "traceback" / "pytorch_24927_stack_print.txt")
    assert (category, rule) == (Category.DATALOADER, "HD108")
    assert confidence <= 0.6  # one process, one sample


def test_logging_stack_info_is_a_stack_print_of_the_calling_thread() -> None:
    text = (
        "Stack (most recent call last):\n"
        '  File "train.py", line 9, in <module>\n'
        "    main()\n"
        '  File "train.py", line 5, in main\n'
        '    log.info("x", stack_info=True)\n'
    )
    [thread] = threads(only_process(text))
    assert [f.function for f in thread.frames] == ["main", "<module>"] and thread.is_main


def test_a_traceback_without_its_exception_line_is_only_a_cut_position() -> None:
    # The header is there but the paste stops at the innermost frame: parse_traceback
    # reads it marked cut (a position as far as its frames go, never the process's latest
    # stack), and the frames under its header are not taken as a stack print.
    [proc] = scan(paste("traceback/pytorch_26072_cut.txt")).processes
    assert [(s.cut, s.kinds) for s in proc.text_stacks] == [(True, (StackTextKind.TRACEBACK,))]
    assert proc.latest_stacks() is None and not proc.exited


def test_frames_with_neither_a_thread_line_nor_an_exception_are_left_alone() -> None:
    lines = paste("traceback/pytorch_24927_stack_print.txt").splitlines()
    assert lines[0] == "Thread MainThread"
    assert scan("\n".join(lines[1:])).processes == []


# --- log lines next to a faulthandler dump ------------------------------------------------


def test_torch_worker_message_above_a_faulthandler_dump_becomes_an_event() -> None:
    parsed = parse_faulthandler_text(paste("faulthandler/returnn_1648.txt"), "c")
    [proc] = parsed.processes
    kinds = [e.kind for e in proc.log_events]
    assert EventKind.DATALOADER_WORKER_DIED.value in kinds
    died = next(e for e in proc.log_events if e.kind == EventKind.DATALOADER_WORKER_DIED.value)
    assert isinstance(died.payload, LoaderWorkerDied) and died.payload.shm and died.line == 1
    assert proc.text_stacks  # the dump itself is read as before


def test_a_prefixed_console_gives_the_worker_message_to_its_rank() -> None:
    text = paste("faulthandler/returnn_1648.txt")
    prefixed = "\n".join("[rank3]:" + line for line in text.splitlines())
    [proc] = parse_faulthandler_text(prefixed, "c").processes
    assert proc.rank == 3
    assert [e.kind for e in proc.log_events][:1] == [EventKind.DATALOADER_WORKER_DIED.value]


def test_the_dataloader_worker_death_beats_the_bus_error_it_caused() -> None:
    category, rule, _ = _primary(PASTES / "faulthandler" / "returnn_1648.txt")
    assert (category, rule) == (Category.DATALOADER, "HD109")


def test_a_plain_faulthandler_dump_gets_no_extra_events() -> None:
    text = (
        "Fatal Python error: Segmentation fault\n\n"
        "Current thread 0x00007f952805bb80 (most recent call first):\n"
        '  File "/srv/job/fh.py", line 11 in main\n'
    )
    [proc] = parse_faulthandler_text(text, "c").processes
    assert [e.kind for e in proc.log_events] == [EventKind.FATAL_SIGNAL.value]  # its own


# --- the GIL, told by the address a native wait is on --------------------------------------


def test_gdb_keeps_the_symbol_a_pointer_argument_resolves_to() -> None:
    frame = gdb_frame(
        "__pthread_cond_timedwait (cond=0x7f749da78f90 <_PyRuntime+1296>, "
        "mutex=0x7f749da78fc0 <_PyRuntime+1344>, abstime=0x7f748266a690) at "
        "pthread_cond_wait.c:656"
    )
    assert frame.function == "__pthread_cond_timedwait" and frame.line == 656
    assert dict(frame.locals) == {
        "cond": "0x7f749da78f90 <_PyRuntime+1296>",
        "mutex": "0x7f749da78fc0 <_PyRuntime+1344>",
    }
    assert gdb_frame("pthread_mutex_lock () from /lib64/libpthread.so.0").locals == ()


def test_a_cond_wait_on_the_gil_is_a_gil_wait_even_when_cut_above_it() -> None:
    lines = paste("gdb/xbmc_17718.txt").splitlines()
    [whole] = threads(only_process("\n".join(lines)))
    assert all(waits_for_gil(f) for f in whole.frames[:3])
    cut = "\n".join(lines[1:4])  # frames #0-#2 only: no PyEval_RestoreThread to name it
    [thread] = threads(only_process(cut))
    assert classify_thread(thread).has(Activity.GIL_WAIT)


def test_a_cond_wait_on_another_condition_is_no_gil_wait() -> None:
    frame = gdb_frame(
        "__pthread_cond_wait (cond=cond@entry=0x555557421e60 <qemu_work_cond>, "
        "mutex=mutex@entry=0x5555574259e0 <bql>) at ./nptl/pthread_cond_wait.c:627"
    )
    assert not waits_for_gil(frame)
    assert not classify_thread(threads(only_process("#0  " + "x ()"))[0]).has(Activity.GIL_WAIT)


# --- a native thread taking a C mutex -------------------------------------------------------


def _process(text: str) -> ProcessEvidence:
    return only_process(text)


def test_a_thread_inside_pthread_mutex_lock_waits_on_a_lock() -> None:
    proc = _process(paste("gdb/deadlock_detector_1.txt"))
    [thread] = threads(proc)
    frame = c_mutex_frame(thread)
    assert frame is not None and frame.function == "__lll_lock_wait"
    [track] = thread_tracks(proc)
    wait = lock_wait(track, samples=1)
    assert wait is not None and wait.kind == "native" and wait.c_mutex


def test_a_mutex_frame_under_python_frames_or_deep_in_the_stack_does_not_count() -> None:
    text = "\n".join(
        [
            "#0  0x00007f in epoll_wait () from /lib64/libc.so.6",
            "#1  0x00007f in poll_loop () from /lib/libx.so",
            "#2  0x00007f in a () from /lib/libx.so",
            "#3  0x00007f in b () from /lib/libx.so",
            "#4  0x00007f in c () from /lib/libx.so",
            "#5  0x00007f in d () from /lib/libx.so",
            "#6  0x00007f in pthread_mutex_lock () from /lib64/libpthread.so.0",
        ]
    )
    [thread] = threads(_process(text))
    assert c_mutex_frame(thread) is None


def test_a_main_thread_on_a_cpp_mutex_alone_is_a_deadlock_with_low_confidence(
    tmp_path: Path,
) -> None:
    text = paste("gdb/deadlock_detector_1.txt").replace("Thread 3 (", "Thread 1 (")
    target = tmp_path / "gdb_bt.txt"
    target.write_text(text)
    category, rule, confidence = _primary(target)
    assert category is Category.PYTHON_DEADLOCK and rule == "HD108"
    assert confidence <= 0.6


# --- torch's shared-memory files of the data workers ----------------------------------------


def test_torch_shared_memory_file_errors_are_dataloader_worker_events() -> None:
    from hangdoc.analyzer.parsers.logs import recognise_line

    full = recognise_line(
        "RuntimeError: unable to write to file </torch_8289_606636967_0>: "
        "No space left on device (28)"
    )
    assert full is not None and full.kind is EventKind.DATALOADER_WORKER_DIED
    assert isinstance(full.payload, LoaderWorkerDied) and full.payload.shm
    assert full.payload.shm_error == "No space left on device"
    old = recognise_line(
        "RuntimeError: unable to write to file </torch_76_3625483894> at "
        "/pytorch/aten/src/TH/THAllocator.c:383"
    )
    assert old is not None and old.kind is EventKind.DATALOADER_WORKER_DIED
    fds = recognise_line(
        "RuntimeError: unable to open shared memory object </torch_2193_1318224931> in "
        "read-write mode: Too many open files (24)"
    )
    assert fds is not None and isinstance(fds.payload, LoaderWorkerDied)
    assert not fds.payload.shm  # the fd limit, not /dev/shm
    assert recognise_line("Unable to write to file <out.txt>: Permission denied") is None


def test_an_unwritable_torch_shared_memory_file_names_the_data_workers() -> None:
    category, rule, _ = _primary(PASTES / "traceback" / "nnunet_294_shm.txt")
    assert (category, rule) == (Category.DATALOADER, "HD109")


def test_a_mutex_taken_inside_the_cuda_driver_is_not_a_lock_deadlock() -> None:
    text = "\n".join(
        [
            "#0  0x00007f in __lll_lock_wait () from /lib64/libpthread.so.0",
            "#1  0x00007f in pthread_mutex_lock () from /lib64/libpthread.so.0",
            "#2  0x00007f in ?? () from /usr/lib64/libcuda.so.1",
            "#3  0x00007f in cudaMemcpyAsync () from /usr/local/cuda/lib64/libcudart.so.12",
        ]
    )
    [thread] = threads(_process(text))
    assert c_mutex_frame(thread) is None
