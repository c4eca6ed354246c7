"""Pastes as tickets hold them: several formats and ranks in one file, lines of ranks
interleaved, chained and C++-carrying tracebacks, cut-off and hostile text."""

from __future__ import annotations

import random

import pytest

from hangdoc.analyzer.parsers.stacks import extract_stacks
from tests.unit.parsers.helpers import SAMPLES
from tests.unit.stacks.helpers import PASTES, only_process, paste, scan, threads

MTR = paste("traceback/mtr_99.txt")
DUMPS = PASTES.parent / "dumps"
VLLM = paste("traceback/vllm_10453.txt")


def _unprefixed(text: str, prefix: str) -> str:
    return "\n".join(line.removeprefix(prefix) for line in text.splitlines())


def test_concatenated_formats_each_take_the_marker_above_them() -> None:
    # GIVEN one file: pystack, py-spy, gdb, a traceback and faulthandler, each under a
    # different kind of rank marker
    fault = (SAMPLES / "faulthandler_sigusr1.txt").read_text()
    text = "\n".join(
        [
            "RANK=0",
            paste("pystack/pystack_readme.txt"),
            "GLOBAL_RANK: 1",
            (SAMPLES / "pyspy" / "dump.txt").read_text(),
            "=== rank 2 ===",
            paste("gdb/pytorch_4679.txt"),
            "------ Rank 3 ------",
            MTR,
            "rank4:",
            fault,
        ]
    )
    result = scan(text)
    by_rank = {p.rank: p for p in result.processes}
    # THEN each stack lands on its own rank, in its own format
    assert sorted(by_rank) == [0, 1, 2, 3, 4]
    assert result.kinds == {"pystack", "pyspy", "gdb", "traceback", "faulthandler"}
    assert threads(by_rank[0])[0].frames[0].function == "third_func"
    assert threads(by_rank[1])[0].name == "MainThread"
    assert threads(by_rank[2])[-1].is_main and threads(by_rank[2])[-1].frames[0].native
    assert threads(by_rank[3])[0].exception is not None
    assert by_rank[3].exited and not by_rank[2].exited
    assert any(t.is_main for t in threads(by_rank[4]))


def test_marker_far_above_does_not_count() -> None:
    # a line naming a rank counts only right above a block; a header line holds on
    text = "rank 7 joined\n" + "unrelated\n" * 10 + MTR
    assert only_process(text).rank is None
    assert only_process("Rank 7\n" + "unrelated\n" * 10 + MTR).rank == 7


def test_line_naming_two_ranks_names_none() -> None:
    assert only_process("rank 0 is waiting for rank 3\n" + MTR).rank is None


@pytest.mark.parametrize(
    "prefixes",
    [
        ("[rank0]: ", "[rank1]: "),
        ("[default0]:", "[default1]:"),
        ("0: ", "1: "),  # srun --label
    ],
)
def test_interleaved_tracebacks_split_by_prefix(prefixes: tuple[str, str]) -> None:
    # GIVEN two ranks' tracebacks interleaved line by line, as one console shows them
    a = MTR.splitlines()
    b = [x for x in _unprefixed(VLLM, "[rank1]: ").splitlines()[8:] if "[rank2]" not in x]
    lines: list[str] = []
    for i in range(max(len(a), len(b))):
        if i < len(a):
            lines.append(prefixes[0] + a[i])
        if i < len(b):
            lines.append(prefixes[1] + b[i])
    procs = scan("\n".join(lines)).processes
    # THEN each rank keeps its own traceback and exception
    excs = {}
    for proc in procs:
        [thread] = threads(proc)
        key = proc.rank if proc.rank is not None else proc.local_rank
        excs[key] = thread.exception
    assert excs[0] is not None and excs[0].startswith("ValueError: num_samples")
    assert excs[1] is not None and excs[1].startswith("torch.distributed.DistBackendError")


def test_ray_worker_prefix_gives_the_pid() -> None:
    text = "\n".join(f"(RayWorker pid=4242) {line}" for line in MTR.splitlines())
    proc = only_process(text)
    assert proc.pid == 4242 and threads(proc)[0].exception is not None


def test_chained_traceback_keeps_the_last_stack_and_its_causes() -> None:
    chained = (
        MTR
        + "\n\nDuring handling of the above exception, another exception occurred:\n\n"
        + _unprefixed(VLLM, "[rank1]: ").split("\n", 8)[8]
    )
    [thread] = threads(only_process(chained))
    assert [f.function for f in thread.frames] == ["all_reduce", "wrapper", "<module>"]
    assert thread.exception is not None
    assert thread.exception.startswith("torch.distributed.DistBackendError")
    assert "(while handling ValueError: num_samples" in thread.exception


def test_traceback_message_with_cpp_stack_puts_native_frames_innermost() -> None:
    python = _unprefixed(VLLM, "[rank1]: ").splitlines()[8:18]
    cpp = paste("cpp/sglang_1693.txt").splitlines()[7:]
    [thread] = threads(only_process("\n".join(python + cpp)))
    functions = [f.function for f in thread.frames]
    assert functions[0] == "c10::Error::Error"
    assert functions[3:] == ["all_reduce", "wrapper", "<module>"]
    assert [f.native for f in thread.frames] == [True] * 3 + [False] * 3


def test_gdb_bt_then_py_bt_of_one_process_is_one_sample() -> None:
    text = paste("gdb/pytorch_4679.txt") + "\n(gdb) py-bt\n" + paste("pybt/voltron_232.txt")
    proc = only_process(text)
    assert len(proc.text_stacks) == 1
    assert len(threads(proc)) == 4


def test_two_dumps_of_one_rank_are_two_samples() -> None:
    text = "=== rank 5 ===\n" + paste("gdb/pytorch_4679.txt") * 2
    proc = only_process(text)
    assert proc.rank == 5 and len(proc.text_stacks) == 2


def test_a_thread_traceback_then_a_faulthandler_dump_keep_every_thread() -> None:
    # A real rank's stderr (fixtures/dumps/thread-died): threading.excepthook's traceback
    # of a dead thread, and right under its exception line (no blank line) a faulthandler
    # dump of the live threads, "Current thread" first. The dump is no exception message.
    log = DUMPS / "thread-died" / "rank3" / "logs" / "stderr.rank3.err"
    [proc] = scan(log.read_text()).processes
    [text] = proc.text_stacks
    assert [k.value for k in text.kinds] == ["traceback", "faulthandler"] and text.line == 2
    died, detector, main = threads(proc)
    assert died.name == "shard-prefetcher" and not died.is_main
    assert died.exception is not None and died.exception.startswith("FileNotFoundError")
    assert detector.frames[0].function == "watch" and not detector.is_main
    assert main.is_main and [f.function for f in main.frames[:2]] == ["wait", "get"]


def test_pyspy_dumps_under_rank_markers_get_ranks() -> None:
    dump = (SAMPLES / "pyspy" / "dump.txt").read_text()
    procs = scan(f"=== rank 0 ===\n{dump}\n=== rank 1 ===\n{dump}").processes
    assert sorted(p.rank for p in procs if p.rank is not None) == [0, 1]


def test_pyspy_native_frames_flagged() -> None:
    proc = only_process((SAMPLES / "pyspy" / "dump_native.txt").read_text())
    frames = [f for t in threads(proc) for f in t.frames]
    assert any(f.native for f in frames) and any(not f.native for f in frames)


@pytest.mark.parametrize(
    "name",
    [
        "gdb/nccl_901_rank0.txt",
        "pstack/mod_h2_234.txt",
        "pybt/voltron_232.txt",
        "pystack/pystack_readme.txt",
        "cpp/open_r1_620.txt",
        "traceback/vllm_10453.txt",
        "pyspy/ray_3187.txt",
    ],
)
def test_every_cut_of_a_paste_parses(name: str) -> None:
    text = paste(name)
    for cut in range(0, len(text), max(1, len(text) // 97)):
        for proc in extract_stacks(text[:cut], "t"):
            assert all(s.threads for s in proc.text_stacks)


def test_garbage_never_raises() -> None:
    rng = random.Random(7)
    alphabet = '#0 Thread (LWP) "File", line in frame #: Traceback\n\t\x00\x1b[31m\r[rank]:=é'
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        extract_stacks(text, "t")
    extract_stacks("Traceback (most recent call last):\n" * 500, "t")
    extract_stacks("Thread 1 (Thread 0x1 (LWP 1)):\n" * 300, "t")
    extract_stacks("#0 " + "(" * 5000 + ")" * 10, "t")
    extract_stacks("frame #0: " + "x" * 100000, "t")
    extract_stacks(bytes(range(256)).decode("latin-1") * 50, "t")


def test_traceback_cut_before_its_exception_is_not_a_stack() -> None:
    # the innermost frames of a cut traceback are missing: its last frame left (here
    # c10d_logger's wrapper) would pass for where the rank was, so it is kept marked cut,
    # a position as far as it goes, never the rank's latest stack or its exception
    cut = "\n".join(VLLM.splitlines()[:13])
    [proc] = scan(cut).processes
    assert proc.latest_stacks() is None and not proc.has_stacks()
    assert [s.cut for s in proc.text_stacks] == [True]
    assert proc.text_stacks[0].threads[0].exception is None and not proc.exited
    # the same lines with their exception are a stack
    assert len(scan(VLLM).processes) == 1


def test_local_rank_header_is_a_local_rank_only() -> None:
    proc = only_process("LOCAL_RANK=2\n" + MTR)
    assert (proc.rank, proc.local_rank) == (None, 2)


def test_thread_apply_all_py_bt_gives_python_frames_per_thread() -> None:
    # "thread apply all py-bt": gdb thread headers (real) over py-bt output (real)
    headers = [
        line for line in paste("gdb/pytorch_4679.txt").splitlines() if line.startswith("Thread")
    ]
    py_bt = paste("pybt/voltron_232.txt").split("(gdb) py-bt\n", 1)[1]
    proc = only_process("\n\n".join(f"{header}\n{py_bt}" for header in headers))
    stacks = threads(proc)
    assert [t.os_thread_id for t in stacks] == [3514, 3515, 3511]
    assert [t.is_main for t in stacks] == [False, False, True]
    for thread in stacks:
        assert thread.frames[1].function == "wait" and not thread.frames[1].native


# A real rank's py-spy text and the tail of its log (fixtures/dumps/reducer-thread, rank
# 3): its main thread died of a KeyError and sits in threading's _shutdown.
_PYSPY_RANK3 = """\
Process 487: /usr/bin/python train.py reducer-thread
Python v3.11 (/usr/bin/python)

Thread 487 (idle): "MainThread"
    _shutdown (threading.py:1590)
Thread 516 (idle): "grad-reducer"
    Condition.wait (threading.py:327)
    Queue.get (queue.py:171)
    BackgroundReducer._reduction_loop (train.py:1363)
    Thread.run (threading.py:982)
    Thread._bootstrap_inner (threading.py:1045)
    Thread._bootstrap (threading.py:1002)
"""
_TRACEBACK_RANK3 = """\
[rank3]: Traceback (most recent call last):
[rank3]:   File "/tmp/train.py", line 1487, in <module>
[rank3]:     raise SystemExit(main(sys.argv[1:]))
[rank3]:   File "/tmp/train.py", line 1482, in main
[rank3]:     known[argv[0]]()
[rank3]:   File "/tmp/train.py", line 1386, in scenario_reducer_thread
[rank3]:     loss = (model(sample["features"]) - sample["labels"]).pow(2).sum()
[rank3]: KeyError: 'labels'
"""


def test_a_traceback_after_a_pyspy_dump_is_a_record_of_its_own() -> None:
    # GIVEN a rank's py-spy text under its label, and its log's traceback under it
    proc = only_process("rank 3:\n" + _PYSPY_RANK3 + "\n" + _TRACEBACK_RANK3)
    # THEN two moments: the dump's two threads (one main), then the traceback, the last
    # thing the process did (it died of it)
    dump, record = proc.text_stacks
    assert [k.value for k in dump.kinds] == ["pyspy"] and len(dump.threads) == 2
    assert [t.name for t in dump.threads if t.is_main] == ["MainThread"]
    assert [k.value for k in record.kinds] == ["traceback"]
    [raised] = record.threads
    assert raised.exception is not None and raised.exception.startswith("KeyError")
    assert proc.rank == 3 and proc.exited and proc.latest_stacks() is record


def test_a_main_threads_traceback_before_a_pyspy_dump_is_another_moment() -> None:
    # GIVEN the same records the other way round, in one stream (no launcher prefix): a
    # moment has one main thread
    traceback = _unprefixed(_TRACEBACK_RANK3, "[rank3]: ")
    proc = only_process("rank 3:\n" + traceback + "\n" + _PYSPY_RANK3)
    record, dump = proc.text_stacks
    assert [k.value for k in record.kinds] == ["traceback"]
    assert [k.value for k in dump.kinds] == ["pyspy"]
    assert sum(t.is_main for t in dump.threads) == 1 and len(dump.threads) == 2
