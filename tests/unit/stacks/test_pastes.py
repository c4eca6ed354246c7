"""One test per stack format, each on a real paste (fixtures/pastes/README.md names
where each was pasted). They pin what the stack rules will read: threads, frames
innermost first, native flags, ranks, exceptions."""

from __future__ import annotations

from hangdoc.analyzer.views.activity import classify_thread, is_user_frame
from hangdoc.analyzer.views.activity_table import Activity
from tests.unit.parsers.helpers import SAMPLES
from tests.unit.stacks.helpers import only_process, paste, scan, threads


def test_gdb_thread_apply_all_bt_with_rank_header() -> None:
    # GIVEN gdb's "thread apply all bt" under a "========rank0=====" header, cut mid-frame
    proc = only_process(paste("gdb/nccl_901_rank0.txt"))
    # THEN one process of rank 0 with both threads, LWP and pthread ids, native frames
    assert proc.rank == 0
    proxy, service = threads(proc)
    assert (proxy.os_thread_id, proxy.thread_id) == (496156, 0x7F322E3FA000)
    assert [f.function for f in proxy.frames][:4] == [
        "futex_wait_cancelable",
        "__pthread_cond_wait_common",
        "__pthread_cond_wait",
        "ncclProxyGetPostedOps",
    ]
    assert proxy.frames[3].file == "proxy.cc" and proxy.frames[3].line == 713
    assert all(f.native for f in proxy.frames + service.frames)
    # the truncated last frame is kept with what the paste had of it
    assert [f.function for f in service.frames] == [
        "__GI___poll",
        "poll",
        "ncclProxyService",
        "st",
    ]


def test_gdb_main_thread_and_libraries() -> None:
    proc = only_process(paste("gdb/pytorch_4679.txt"))
    t3, t2, t1 = threads(proc)
    assert [t.is_main for t in (t3, t2, t1)] == [False, False, True]
    assert proc.pid == 3511  # the LWP of gdb's thread 1 is the process id
    assert t3.frames[1].function == "??" and t3.frames[1].file == "/usr/lib64/libcuda.so.1"
    assert t1.frames[0].function == "__lll_lock_wait"


def test_gdb_thread_names_and_cxx_signatures() -> None:
    proc = only_process(paste("gdb/tensorrt_llm_2560.txt"))
    named = threads(proc)
    assert [t.name for t in named] == ["executor_server", "executor_server"]
    # "ncclIbAsyncThreadMain(void*) ()" keeps the name, not the signature
    assert named[0].frames[3].function == "ncclIbAsyncThreadMain"
    assert named[0].frames[3].file == "/home/askhoroshev/wmcore/lib/libnccl.so.2"


def test_pstack() -> None:
    proc = only_process(paste("pstack/mod_h2_234.txt"))
    assert proc.pid == 3560  # "pstack 3560"
    stacks = threads(proc)
    assert [t.os_thread_id for t in stacks] == [3576, 3577, 3578, 3581]
    assert stacks[0].frames[0].function == "pthread_cond_wait@@GLIBC_2.3.2"
    assert stacks[0].frames[1].file == "h2_workers.c" and stacks[0].frames[1].line == 329


def test_py_bt_python_frames_with_paths() -> None:
    proc = only_process(paste("pybt/voltron_232.txt"))
    [thread] = threads(proc)
    builtin, wait, get = thread.frames[:3]
    assert (builtin.function, builtin.native) == ("acquire", True)
    assert (wait.function, wait.file, wait.line, wait.native) == (
        "wait",
        "/usr/lib/python3.6/threading.py",
        295,
        False,
    )
    assert get.function == "get"
    assert classify_thread(thread).has(Activity.LOCK_WAIT)
    # library frames (the standard library, site-packages) are told from job code
    assert not is_user_frame(wait) and not is_user_frame(thread.frames[3])


def test_py_bt_old_format_two_processes() -> None:
    # "$ gdb python -p 15661" then an old-style py-bt, twice: two processes by pid
    first, second = scan(paste("pybt/cylc_1823.txt")).processes
    assert (first.pid, second.pid) == (15661, 15662)
    [t1] = threads(first)
    assert t1.owns_gil is False  # "Waiting for a lock (e.g. GIL)"
    assert [f.function for f in t1.frames] == ["acquire", "wait", "join", "_exitfunc"]
    [t2] = threads(second)
    assert t2.frames[-1].function == "Pool"


def test_pystack_remote() -> None:
    proc = only_process(paste("pystack/pystack_readme.txt"))
    assert proc.pid == 112  # "$ pystack remote 112"
    [thread] = threads(proc)
    assert thread.is_main and thread.os_thread_id == 112
    assert [f.function for f in thread.frames] == [
        "third_func",
        "second_func",
        "first_func",
        "<module>",
    ]
    assert thread.frames[0].file == "/test.py" and thread.frames[0].line == 14
    assert is_user_frame(thread.frames[0])


def test_pystack_native_frames_without_header() -> None:
    [thread] = threads(only_process(paste("pystack/pystack_native_docs.txt")))
    assert all(f.native for f in thread.frames)
    assert thread.frames[0].function == "__select"
    assert thread.frames[-1].function == "_PyFunction_Vectorcall"
    assert thread.frames[-1].file == "Objects/call.c"


def test_torch_cpp_watchdog_stack() -> None:
    [head, proc] = scan(paste("cpp/sglang_1693.txt")).processes
    # the frames cut off above the first header are a stack of their own, rank unknown
    assert head.rank is None
    assert proc.rank == 5  # "[PG 3 Rank 5] … [Rank 5] Watchdog caught …" over the header
    [thread] = threads(proc)
    assert thread.exception is not None
    assert thread.exception.startswith("c10::DistBackendError: [PG 3 Rank 5]")
    assert [f.function for f in thread.frames] == [
        "c10::Error::Error",
        "c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout",
        "c10d::ProcessGroupNCCL::watchdogHandler",
    ]
    assert thread.frames[0].file.endswith("/torch/lib/libc10.so")
    assert all(f.native for f in thread.frames) and not thread.is_main
    assert classify_thread(thread).has(Activity.COLLECTIVE)  # native c10d frames


def test_torch_cpp_prefixed_log_line_names_the_rank() -> None:
    # "[rank1]:[E318 …] …" is prefixed, the stack below it is not: the rank still holds
    proc = only_process(paste("cpp/diffsynth_458.txt"))
    assert proc.rank == 1
    [thread] = threads(proc)
    assert thread.exception is not None and "Watchdog caught collective" in thread.exception
    assert "[E318" not in thread.exception
    assert len(thread.frames) == 6


def test_torch_cpp_wrapped_by_terminal() -> None:
    proc = only_process(paste("cpp/open_r1_620.txt"))
    assert proc.rank == 3
    [thread] = threads(proc)
    assert thread.exception is not None
    assert thread.exception.startswith("c10::DistBackendError: [PG ID 0")
    assert "collective operation timeout" in thread.exception  # "colle\nctive" joined
    assert thread.frames[0].file.endswith("python3.11/site-packages/torch/lib/libc10.so")


def test_torch_cpp_frames_without_header_and_rank_prefix() -> None:
    proc = only_process(paste("cpp/pytorch_131781.txt"))
    assert proc.rank == 10
    [thread] = threads(proc)
    assert thread.frames[0].function == "c10d::ProcessGroupNCCL::broadcastUniqueNCCLID"
    assert thread.frames[4].function == "c10d::ProcessGroupNCCL::allreduce"
    assert thread.frames[-1].function == "<unknown function>"  # cut mid-path


def test_python_traceback() -> None:
    proc = only_process(paste("traceback/mtr_99.txt"))
    [thread] = threads(proc)
    assert thread.exception == (
        "ValueError: num_samples should be a positive integer value, but got num_samples=0"
    )
    assert [f.function for f in thread.frames] == [
        "__init__",
        "__init__",
        "build_dataloader",
        "main",
        "<module>",
    ]
    assert thread.frames[-1].file == "train.py" and thread.frames[-1].line == 283
    assert thread.is_main and proc.exited  # an uncaught error that is no consequence
    assert is_user_frame(thread.frames[2]) and not is_user_frame(thread.frames[0])


def test_python_traceback_ranked_collective() -> None:
    result = scan(paste("traceback/vllm_10453.txt"))
    [proc] = result.processes
    assert proc.rank == 1
    [thread] = threads(proc)
    assert thread.exception is not None
    assert thread.exception.startswith("torch.distributed.DistBackendError: NCCL error")
    assert [f.function for f in thread.frames] == ["all_reduce", "wrapper", "<module>"]
    activity = classify_thread(thread)
    assert activity.collective is not None and activity.collective.op == "all_reduce"
    # a consequence (NCCL error): not marked dead by its traceback (HD003 would say so)
    assert not proc.exited


def test_launcher_traceback_has_no_rank() -> None:
    # torchrun's own traceback: "local_rank: 0" over it names a local rank, not a rank
    proc = only_process(paste("traceback/smt_18.txt"))
    assert proc.rank is None
    [thread] = threads(proc)
    assert thread.exception == "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"
    assert not proc.exited


def test_pyspy_dumps_with_stack_dump_headers() -> None:
    # two py-spy dumps (tab-indented, hex thread ids) under "Stack dump for … PID …"
    first, second = scan(paste("pyspy/ray_3187.txt")).processes
    assert (first.pid, second.pid) == (20768, 20769)
    assert len(threads(first)) == 3 and len(threads(second)) == 2
    assert threads(first)[2].frames[-1].function == "<module>"


def test_pyspy_text_in_scan_matches_its_parser() -> None:
    # the project's own recorded py-spy dump reads the same inside the scanner
    proc = only_process((SAMPLES / "pyspy" / "dump.txt").read_text())
    assert proc.pid == 9106 and proc.cmdline == "/opt/venv/bin/python sleeper.py"
    stacks = threads(proc)
    assert [t.name for t in stacks] == ["MainThread", "busy", "waiter"]
    assert [t.is_main for t in stacks] == [True, False, False]
    assert classify_thread(stacks[0]).has(Activity.CHECKPOINT_SAVE)


def test_chained_traceback_under_ray_and_rank_prefixes() -> None:
    proc = only_process(paste("traceback/ray_47759.txt"))
    assert (proc.rank, proc.pid) == (1, 43515)  # "[rank1]:" and "(RayTrainWorker pid=…)"
    [thread] = threads(proc)
    assert [f.function for f in thread.frames] == [
        "push_error_to_driver",
        "ray._raylet.task_execution_handler",
    ]
    assert thread.exception == (
        "AttributeError: 'Worker' object has no attribute 'core_worker' "
        "(while handling AttributeError: 'Worker' object has no attribute 'core_worker')"
    )
