"""py-spy ``dump --json`` (FORMATS.md §4 "JSON"), on the real samples and variants."""

from __future__ import annotations

import json
from pathlib import Path

from hangdoc.analyzer.model import InputKind
from hangdoc.analyzer.parsers.pyspy_json import (
    PyspyJsonParser,
    is_native,
    parse_pyspy_json_text,
    traces_to_sample,
)
from tests.builders import C10D, main_trace, pyspy_json, pyspy_trace
from tests.unit.parsers.helpers import SAMPLES, Writer, parse_sample, sniffed, stack_sniffed


def test_sample_dump_json_threads_names_and_main() -> None:
    # GIVEN the real `py-spy dump --json` of the sleeper (3 threads, main listed last)
    result = parse_sample(SAMPLES / "pyspy" / "dump.json")
    # THEN one process, one sample, threads in file order with their attributes
    assert result.kind is InputKind.PYSPY_JSON and result.error is None
    [proc] = result.processes
    assert proc.pid == 9106 and proc.rank is None
    [sample] = proc.stack_samples
    assert [t.name for t in sample.threads] == ["waiter", "busy", "MainThread"]
    assert [t.os_thread_id for t in sample.threads] == [9109, 9108, 9106]
    assert sample.threads[0].thread_id == 140016024512192  # pthread id kept apart
    main = sample.main_thread()
    assert main is not None and main.name == "MainThread" and main.is_main
    assert sum(t.is_main for t in sample.threads) == 1
    busy = sample.threads[1]
    assert busy.active is True and busy.owns_gil is True
    # innermost first, full file names, lines
    assert [f.function for f in main.frames] == ["save_checkpoint", "main", "<module>"]
    assert main.frames[0].file == "/srv/job/sleeper.py" and main.frames[0].line == 5
    assert not any(f.native for t in sample.threads for f in t.frames)


def test_sample_locals_become_name_repr_pairs() -> None:
    result = parse_sample(SAMPLES / "pyspy" / "dump_locals.json")
    main = result.processes[0].stack_samples[0].main_thread()
    assert main is not None
    assert main.frames[0].locals == (
        ("step", "3"),
        ("path", '"/ckpt/step"'),
        ("buf", "<bytearray at 0x7f5805f032f0>"),
    )
    assert main.frames[2].locals == ()  # "<module>" had an empty list


def test_line_zero_is_none_and_native_frames_are_marked() -> None:
    traces = [
        {
            "pid": 7,
            "os_thread_id": 7,
            "thread_name": "MainThread",
            "frames": [
                {"name": "clock_nanosleep", "filename": "libc.so.6", "line": 0},
                {"name": "0x7f580623c24a", "filename": "libc.so.6", "line": 0},
                {"name": "time_sleep", "filename": "Modules/timemodule.c", "line": 2157},
                {"name": "<module>", "filename": "/job/x.py", "line": 0},
                {"name": "<module>", "filename": "<frozen runpy>", "line": 88},
            ],
        }
    ]
    sample = traces_to_sample(traces, source="t").sample
    frames = sample.threads[0].frames
    assert [f.native for f in frames] == [True, True, True, False, False]
    assert frames[0].line is None and frames[3].line is None and frames[2].line == 2157


def test_is_native_heuristic() -> None:
    assert is_native("PyThread_acquire_lock_timed", "libpython3.11.so.1.0")
    assert is_native("ext_fn", "/site-packages/mod.cpython-311-x86_64-linux-gnu.so")
    assert not is_native("run", "/usr/lib/python3.11/threading.py")
    assert not is_native("cy_fn", "pkg/fast.pyx")
    assert not is_native("<module>", "<string>")


def test_keys_are_optional() -> None:
    # Minimal traces (older py-spy / wrappers): no os_thread_id, no names, no active
    traces = [{"pid": 5, "thread_id": 1, "frames": [{"name": "f", "filename": "/a.py"}]}]
    sample = traces_to_sample(traces, source="t").sample
    [thread] = sample.threads
    assert thread.name is None and thread.os_thread_id is None and thread.active is None
    assert thread.frames[0].line is None and not thread.is_main


def test_subprocess_traces_become_children_expected_pid_wins() -> None:
    # GIVEN a --subprocesses style list: rank pid 100 (2 threads), a worker 200 (3 threads)
    traces = [
        main_trace(100),
        pyspy_trace(100, 101, "pin_memory", [("_pin", "/t/pin.py", 1)]),
        *[pyspy_trace(200, 200 + i, f"w{i}", [("loop", "/t/worker.py", 9)]) for i in range(3)],
    ]
    # WHEN the caller (the dump reader) says the rank is pid 100
    ts = traces_to_sample(traces, source="t", expected_pid=100)
    # THEN pid 100 is the rank even though 200 has more threads
    assert ts.pid == 100 and len(ts.sample.threads) == 2
    [child] = ts.sample.children
    assert child.pid == 200 and len(child.threads) == 3
    # WITHOUT an expected pid, the pid with most threads is the rank
    assert traces_to_sample(traces, source="t").pid == 200


def test_subprocess_ties_pick_lowest_pid_and_process_info_names_the_root() -> None:
    traces = [main_trace(300), main_trace(200)]
    assert traces_to_sample(traces, source="t").pid == 200
    # process_info's parent links point at the root
    child = pyspy_trace(150, 150, "MainThread", [("loop", "/w.py", 1)])
    child["process_info"] = {"pid": 150, "command_line": "worker", "parent": {"pid": 300}}
    ts = traces_to_sample([main_trace(300), child], source="t")
    assert ts.pid == 300 and ts.sample.children[0].cmdline == "worker"


def test_concatenated_documents_are_samples_of_one_process(write: Writer) -> None:
    # Hand-made: two `py-spy dump --json` outputs appended to one file (>>)
    text = pyspy_json([main_trace(42)]) + pyspy_json([main_trace(42, [("x", C10D, 1)])])
    result = PyspyJsonParser().parse(write("two.json", text), "two.json")
    [proc] = result.processes
    assert [s.index for s in proc.stack_samples] == [0, 1]
    assert proc.stack_samples[1].threads[0].frames[0].function == "x"


def test_truncated_json_keeps_complete_threads_and_reports_error(write: Writer) -> None:
    # Hand-made (FORMATS.md §8.6): a dump cut mid-write by a killed collector
    full = pyspy_json([pyspy_trace(9, 10, "t1", [("a", "/a.py", 1)]), main_trace(9)])
    cut = full[: full.rindex('"frames"')]  # stops inside the second trace
    path = write("cut.json", cut)
    assert sniffed(path) is not None
    result = PyspyJsonParser().parse(path, "cut.json")
    assert result.error is not None and "truncated JSON" in result.error
    [proc] = result.processes
    assert [t.name for t in proc.stack_samples[0].threads] == ["t1"]


def test_invalid_json_without_any_trace_is_an_error(write: Writer) -> None:
    result = PyspyJsonParser().parse(write("bad.json", '[{"frames": [ oops'), "bad.json")
    assert result.error is not None and result.processes == []


def test_prefixed_json_from_torchrun_tee(write: Writer) -> None:
    # Hand-made (FORMATS.md §3 "Prefixes"): py-spy JSON printed by a worker under --tee 3
    body = pyspy_json([main_trace(77)])
    text = "".join(f"[default2]:[rank5]:{line}\n" for line in body.splitlines())
    path = write("tee.txt", text)
    parser = sniffed(path)
    assert isinstance(parser, PyspyJsonParser)
    [proc] = parser.parse(path, "tee.txt").processes
    assert proc.rank == 5 and proc.pid == 77


def test_wrapper_object_with_stack_traces(write: Writer) -> None:
    text = json.dumps({"pid": 3, "command_line": "x", "stack_traces": [main_trace(3)]})
    path = write("w.json", text)
    assert isinstance(sniffed(path), PyspyJsonParser)
    assert parse_pyspy_json_text(text, "w").processes[0].pid == 3


def test_flight_recorder_json_is_not_pyspy(write: Writer) -> None:
    # FR entries carry "frames" and "thread_id" too; the sniffer must not take them
    fr = {"version": "2.10", "entries": [{"frames": [], "thread_id": 1, "thread_name": "p"}]}
    assert stack_sniffed(write("fr.json", json.dumps(fr))) is None
    fr_list = [{"record_id": 1, "frames": [{"name": "x"}], "thread_id": 3}]
    assert stack_sniffed(write("fr_list.json", json.dumps(fr_list))) is None


def test_utf16_with_bom(write: Writer) -> None:
    # Hand-made: a dump saved by a Windows editor (UTF-16 LE with BOM)
    data = pyspy_json([main_trace(8)]).encode("utf-16")
    path = write("u16.json", data)
    assert isinstance(sniffed(path), PyspyJsonParser)
    assert PyspyJsonParser().parse(path, "u16.json").processes[0].pid == 8


def test_json_samples_equal_text_samples(tmp_path: Path) -> None:
    # The JSON and text dumps of the same moment agree on every thread's frames
    js = parse_sample(SAMPLES / "pyspy" / "dump.json").processes[0].stack_samples[0]
    tx = parse_sample(SAMPLES / "pyspy" / "dump.txt").processes[0].text_stacks[0]
    by_tid = {t.os_thread_id: t for t in tx.threads}
    for thread in js.threads:
        other = by_tid[thread.os_thread_id]
        assert [(f.function, f.line) for f in thread.frames] == [
            (f.function, f.line) for f in other.frames
        ]
        assert thread.is_main == other.is_main
