"""Paste layers undone before the recognisers read a text (analyzer/parsers/unmangle.py).

Inputs are hand-written in documented formats: py-spy's dump text (shared/FORMATS.md §4,
the sample there), NCCL debug lines (§1: ``host:pid:tid [dev] file:line NCCL WARN …``),
CPython's traceback; the layers are what hangdoc/paste_mangling.py does to them.
"""

from __future__ import annotations

from hangdoc.analyzer.parsers.unmangle import unmangle, wrap_width
from hangdoc.paste_mangling import (
    cloudwatch,
    crlf,
    emphasis,
    fence,
    hard_wrap,
    indent,
    kubectl,
    quote,
    timestamps,
    word_wrap,
)

PYSPY = """\
Process 9106: /opt/venv/bin/python sleeper.py
Python v3.11.7 (/usr/local/bin/python3.11)

Thread 9106 (idle): "MainThread"
    save_checkpoint (sleeper.py:5)
    main (sleeper.py:20)
    <module> (sleeper.py:23)
"""
NCCL = (
    "node7:4827:6900 [4] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes "
    "instead of 4\n"
    "node7:4827:6900 [4] NCCL INFO bootstrap.cc:554 -> 3\n"
    "node7:4827:6900 [4] NCCL INFO transport.cc:204 -> 3\n"
)
TRACEBACK = """\
Traceback (most recent call last):
  File "train.py", line 12, in <module>
    dist.all_reduce(t)
RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error, NCCL version 2.20.5
"""


def _undone(text: str) -> str:
    fixed = unmangle(text)
    return fixed.text if fixed is not None else text


def test_quote_indent_and_fence_are_undone() -> None:
    for mangled in (quote(PYSPY), quote(PYSPY, depth=2), quote(PYSPY, space=False),
                    indent(PYSPY), indent(PYSPY, "\t"), fence(PYSPY, "text"),
                    quote(indent(PYSPY))):  # fmt: skip
        assert _undone(mangled).strip("\n") == PYSPY.strip("\n"), mangled


def test_the_formats_own_indentation_is_kept() -> None:
    # py-spy's four spaces and a traceback's two are the format's, not a code block's
    assert unmangle(PYSPY) is None
    assert unmangle(TRACEBACK) is None


def test_a_repl_session_is_not_a_quote() -> None:
    text = ">>> import torch\n>>> torch.__version__\n'2.4.0'\n"
    assert _undone(text) == text


def test_hard_wraps_are_joined_and_records_are_not() -> None:
    # GIVEN NCCL lines wrapped at 40 columns
    wrapped = hard_wrap(NCCL, 40)
    assert wrapped != NCCL and wrap_width(wrapped.splitlines()) == 40
    # THEN they are joined back, and the line map points at each record's first piece
    fixed = unmangle(wrapped)
    assert fixed is not None and fixed.text == NCCL
    assert fixed.line_map[1] == 4  # the second record starts on the wrapped text's line 4


def test_rows_of_one_width_are_no_wrap() -> None:
    # nvidia-smi's CSV rows (FORMATS.md §6) all one length, hex ids differing
    rows = "".join(
        f"{i}, GPU-{i}f1c2a9e-7b4d-4e21-9c0a-5d8e6f7a1b2{i}, NVIDIA H100 80GB HBM3, 100 %\n"
        for i in range(4)
    )
    assert unmangle(rows) is None


def test_shipper_tags_and_stream_columns_are_undone_but_stamps_stay() -> None:
    assert _undone(kubectl(NCCL)) == NCCL
    undone = _undone(cloudwatch(NCCL))
    assert "train-job-7/algo" not in undone
    assert undone.splitlines()[0].startswith("2024-05-01T10:00:00.271828+00:00 node7:4827")


def test_emphasis_and_colours_are_undone_outside_fences() -> None:
    assert _undone(emphasis(TRACEBACK)) == TRACEBACK
    assert _undone("\x1b[31mnode7:1:2 [0] NCCL WARN x\x1b[0m\n") == "node7:1:2 [0] NCCL WARN x\n"
    literal = "```\n**kept** as printed\n```\n"
    assert "**kept**" in _undone(literal)
    assert (
        _undone("f(*args, **kwargs)\nx = a**2 + b**2\n") == "f(*args, **kwargs)\nx = a**2 + b**2\n"
    )


def test_crlf_alone_is_left_to_the_line_readers() -> None:
    assert unmangle(crlf(NCCL)) is None


def test_a_header_cut_by_the_selection_is_restored_from_its_process() -> None:
    # the first line starts inside its host:pid:tid
    cut = "27:6900 [4]" + NCCL.split("[4]", 1)[1]
    fixed = unmangle(cut)
    assert fixed is not None and fixed.text.splitlines()[0] == NCCL.splitlines()[0]
    # a token too short to carry a process's identity is left as it was
    assert unmangle("]: RuntimeError: x\n[rank3]: RuntimeError: x\n") is None


# os.rename's failure as CPython prints it (OSError.__str__ with both file names).
RENAME = (
    "FileNotFoundError: [Errno 2] No such file or directory: 'output/run_7/tmp.pth.tar' "
    "-> 'output/run_7/last.pth.tar'\n"
)


def test_a_line_wrapped_once_is_joined_where_the_column_cut_it() -> None:
    # GIVEN one long line wrapped once: one piece at the edge shows no width
    for width in (60, 80, 100):
        wrapped = hard_wrap(RENAME, width)
        assert wrap_width(wrapped.splitlines()) is None
        # THEN the cut inside a word, a path or before a lower-case word joins it back
        assert _undone(wrapped) == RENAME, wrapped


def test_lines_that_end_where_a_line_ends_are_not_joined() -> None:
    # torch's NCCL error, the next line NCCL's own explanation; libstdc++'s terminate
    # handler after a watchdog line: each the longest line of its text, each whole
    natural = (
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1691, "
        "invalid usage, NCCL version 2.19.3\n"
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
    )
    assert unmangle(natural) is None
    terminate = (
        "[E ProcessGroupNCCL.cpp:455] To avoid data inconsistency, we are taking the entire "
        "process down at 2.19.3\nterminate called after throwing an instance of "
        "'std::runtime_error'\n"
    )
    assert unmangle(terminate) is None
    # a rule of dashes, then a word: the rule ended there
    assert unmangle("-" * 60 + "\ndistributed_backend=nccl\n") is None


def test_a_wrap_inside_a_wrap_and_a_wrap_under_emphasis_are_joined() -> None:
    # GIVEN NCCL lines copied from a 70-column terminal, then from a 30-column one
    nested = hard_wrap(hard_wrap(NCCL, 70), 30)
    assert _undone(nested) == NCCL
    # GIVEN wrapped NCCL lines whose reporter bolded the warning afterwards
    decorated = emphasis(hard_wrap(NCCL, 40))
    assert wrap_width(decorated.splitlines()) is None
    assert _undone(decorated) == NCCL


def test_a_cut_source_location_restores_no_process() -> None:
    # torchrun's "[rankN]:" before c10's "[E file:line]" header: the cut left the
    # source location, which every rank's line holds; rank 0's start is not rank 1's
    cut = (
        "rocessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout\n"
        "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation "
        "timeout\n"
    )
    assert unmangle(cut) is None


def test_an_nccl_source_location_cut_by_the_selection_is_restored_from_the_catalog() -> None:
    # NCCL's debug line (FORMATS.md §1) "… graph/xml.h:77 NCCL WARN Attribute arch of node
    # cpu not found", cut inside its source location; the catalog row is xml.h's
    for cut in ("77 NCCL WARN", "ml.h:77 NCCL WARN", "/xml.h:77 NCCL WARN"):
        fixed = unmangle(f"{cut} Attribute arch of node cpu not found\n")
        assert fixed is not None, cut
        assert fixed.text == "graph/xml.h:77 NCCL WARN Attribute arch of node cpu not found\n"
    # uncut, or another file's end: left as it is
    assert unmangle("graph/xml.h:77 NCCL WARN Attribute arch of node cpu not found\n") is None
    assert unmangle("init.cc:77 NCCL WARN Attribute arch of node cpu not found\n") is None


def test_an_os_error_class_cut_by_the_selection_is_restored_from_its_errno() -> None:
    # CPython's OSError str: "[Errno N] strerror: 'file'" after the class PEP 3151 maps
    # the errno to (ENOENT 2: FileNotFoundError, EACCES 13: PermissionError)
    assert _undone("Error: [Errno 2] No such file or directory: 'a.pt'\n") == (
        "FileNotFoundError: [Errno 2] No such file or directory: 'a.pt'\n"
    )
    assert _undone("ssionError: [Errno 13] Permission denied: '/ckpt'\n") == (
        "PermissionError: [Errno 13] Permission denied: '/ckpt'\n"
    )
    # whole, or another class's end than the errno's: left as printed
    assert unmangle("FileNotFoundError: [Errno 2] No such file or directory: 'a.pt'\n") is None
    assert unmangle("KeyError: [Errno 2] No such file or directory: 'a.pt'\n") is None


def test_an_os_error_whose_whole_class_was_cut_is_restored_from_its_errno() -> None:
    # the name cut away with or without its ": " (OSError_str's "%R -> %R" of a rename)
    assert _undone(": [Errno 39] Directory not empty: 'out/checkpoint-9'\n") == (
        "OSError: [Errno 39] Directory not empty: 'out/checkpoint-9'\n"
    )
    assert _undone("[Errno 18] Invalid cross-device link: 'a/tmp-ckpt' -> 'b/ckpt'\n") == (
        "OSError: [Errno 18] Invalid cross-device link: 'a/tmp-ckpt' -> 'b/ckpt'\n"
    )
    assert _undone("rror: [Errno 17] File exists: 'out/ckpt'\n") == (
        "FileExistsError: [Errno 17] File exists: 'out/ckpt'\n"
    )
    # with no separator, only the file-name form is surely an OSError's own message
    assert unmangle("[Errno 5] Input/output error\n") is None


def test_a_paste_pasted_twice_is_read_once() -> None:
    assert _undone(PYSPY + PYSPY) == PYSPY
    assert _undone(NCCL + "\n" + NCCL) == NCCL
    # one line twice, or two samples that differ in a thread's state, are the text's own
    assert unmangle("node7:1:2 [0] NCCL WARN x\n" * 4) is None
    assert unmangle(PYSPY + PYSPY.replace("(idle)", "(active)")) is None


def test_a_stream_column_on_a_short_paste_is_undone() -> None:
    # aws logs tail's "TIME STREAM MESSAGE" on a one- and a two-line paste
    one = "node7:4827:6900 [4] NCCL INFO transport.cc:204 -> 3\n"
    assert _undone(cloudwatch(one)) == "2024-05-01T10:00:00.271828+00:00 " + one
    two = NCCL.split("\n", 1)[1]
    assert "train-job-7/algo" not in _undone(cloudwatch(two))


def test_a_whole_first_line_gets_no_other_process_header() -> None:
    # Ray's "(Worker pid=N, ip=…)" prefix on later lines of Python logging's records
    # (asctime "2022-03-11 01:47:20,988"): the first line starts like the records, uncut
    text = (
        "2022-03-11 01:47:20,988\tINFO trainer.py:199 -- Trainer logs will be logged\n"
        "(BaseWorkerMixin pid=20102, ip=10.0.0.15) 2022-03-11 01:47:25,905\tINFO torch.py:66 "
        "-- Setting up process group for: env:// [rank=0, world_size=5]\n"
        "2022-03-11 01:47:26,132\tINFO trainer.py:205 -- Run results will be logged\n"
    )
    assert unmangle(text) is None


def test_a_key_or_a_value_cut_by_the_column_is_joined() -> None:
    # torch's TCPStore client (socket.cpp) "… failed to connect to HOST:PORT (errno: 110 -
    # Connection timed out)." and c10d's store barrier "… (world_size=2048, …)", each
    # wrapped once, the column falling inside a key or before its "="
    for line in (
        "[W socket.cpp:601] The client socket has failed to connect to [::ffff:10.0.0.1]:29500 "
        "(errno: 110 - Connection timed out).\n",
        "Timed out initializing process group in store based barrier on rank: 0, for key: "
        "store_based_barrier_key:1 (world_size=2048, worker_count=1792, timeout=0:30:00)\n",
    ):
        at = line.index("no:") if "errno" in line else line.index("=2048")
        wrapped = line[:at] + "\n" + line[at:]
        assert _undone(wrapped) == line, wrapped


def test_a_path_after_a_kubectl_stamp_is_the_jobs_own_text() -> None:
    # kubectl logs --timestamps ("…Z") before Horovod's stall warning lines, whose tensor
    # names hold a "/": no log stream (aws logs tail stamps with "+00:00")
    line = "MetricAverageCallback/HorovodAllreduce_acc_0 [missing ranks: 0, 1]\n"
    assert unmangle(timestamps(line * 4)) is None


def test_rows_of_a_template_after_the_longest_line_are_no_lone_wrap() -> None:
    # a job's own per-rank lines: the longest ends in a word, the next starts with one,
    # but the next starts as other lines of the text do
    text = "".join(
        f"rank={r} loaded shard with {4000 if r == 3 else 4096} records\n" for r in range(4)
    )
    text += "".join(f"rank={r} starting epoch 0\n" for r in range(4))
    assert unmangle(text) is None


# tqdm's meter as format_meter prints it (tqdm/std.py: "{desc}: {percentage:3.0f}%|{bar}|
# {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]", the bar padded to its width
# with blanks), with the watchdog line another rank printed glued after it (tqdm ends a
# bar's state with no newline), and NCCL's lines under it.
TQDM_AT_TIMEOUT = (
    "Running tokenizer on dataset:   9%|"
    + "\u2588" * 7
    + "\u258a"
    + " " * 75
    + "| 280000/2969526 [29:55<4:48:08, 155.57 examples/s][E ProcessGroupNCCL.cpp:475] "
    "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800328 "
    "milliseconds before timing out.\n" + NCCL
)


def test_a_tqdm_bar_cut_inside_its_padding_is_joined() -> None:
    # GIVEN the bar wrapped where the column fell in its blanks: the rest starts with spaces,
    # which elsewhere are a format's own indentation
    for width in (40, 100):
        wrapped = hard_wrap(TQDM_AT_TIMEOUT, width)
        assert any(line.startswith("  ") for line in wrapped.splitlines())
        # THEN the bar, its meter and the line glued to it are one line again
        assert _undone(wrapped) == TQDM_AT_TIMEOUT


def test_an_open_bar_is_not_joined_to_an_indented_record() -> None:
    # GIVEN a bar printed without its counts (bar_format "{l_bar}{bar}") at the wrap's edge,
    # then a traceback's indented frame: the frame is a record of its own
    bar = "Loading checkpoint shards:  50%|" + "\u2588" * 5 + " " * 5
    text = f'{bar}\n{bar}\n  File "train.py", line 12, in <module>\n'
    assert wrap_width(text.splitlines()) == len(bar)
    assert _undone(text) == text


def test_whole_only_answers_as_the_whole_reading_does() -> None:
    """``whole_only`` (a big file's head) gives None where the reading is not whole, and
    the reading itself where it is: the catalog's first-line restorations, skipped when
    the rest leaves the text short of whole, never change that. A first line cut inside
    an NCCL WARN's body (restored from the catalog), with and without other layers."""
    cut = NCCL[NCCL.index("Message") + 4 :]  # "age truncated : received …": a cut body
    plain = [PYSPY, NCCL, TRACEBACK, cut, cut + PYSPY * 3, cut + "\n" * 40]
    mangled = [
        layer(text)
        for text in plain
        for layer in (quote, indent, fence, emphasis, kubectl, timestamps, cloudwatch)
    ]
    mangled += [hard_wrap(text, 40) for text in plain] + [quote(cut) + PYSPY * 20]
    assert unmangle(cut) is not None  # the cut body is restored in a reading of it alone
    for text in plain + mangled:
        read = unmangle(text)
        expected = read if read is not None and read.whole else None
        assert unmangle(text, whole_only=True) == expected, text


# A web console's log viewer copied into an issue as a Markdown table, as in
# fixtures/cases/qwen3vl-1756-vllm-batch-infer-ima-rank1 (Qwen3-VL#1756): an empty column,
# then the viewer's time, the source host, ">>" and the line; a blank line is a row too.
VIEWER = (
    "  |   | 2025-11-04 10:07:58.273395 master-0 >> Traceback (most recent call last): |  \n"
    '  |   | 2025-11-04 10:07:58.273399 master-0 >>   File "train.py", line 12, in <module> |  \n'
    "  |   | 2025-11-04 10:07:58.273402 master-0 >>     dist.all_reduce(t) |  \n"
    "  |   | 2025-11-04 10:07:58.273403 master-0 >> |  \n"
    "  |   | 2025-11-04 10:07:58.273404 worker-1 >> RuntimeError: NCCL error | a b |  \n"
)


def test_a_log_viewers_table_and_source_column_are_undone() -> None:
    assert _undone(VIEWER) == (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 12, in <module>\n'
        "    dist.all_reduce(t)\n"
        "\n"
        "RuntimeError: NCCL error | a b\n"
    )
    # Row numbers, a rule under a header row, a zoned stamp (a shipper's: kept, the line
    # readers peel it) and "|" as the separator.
    numbered = (
        "| # | line |\n|---|---|\n"
        "| 1 | 2024-05-01T10:00:00.5+00:00 node-a | Traceback (most recent call last): |\n"
        "| 2 | 2024-05-01T10:00:00.6+00:00 node-a | RuntimeError: boom |\n"
    )
    assert _undone(numbered).splitlines()[2:] == [
        "2024-05-01T10:00:00.5+00:00 Traceback (most recent call last):",
        "2024-05-01T10:00:00.6+00:00 RuntimeError: boom",
    ]


def test_the_jobs_own_tables_and_level_columns_are_kept() -> None:
    # nvidia-smi's table (shared/samples: its rows start with no time) and a model summary
    smi = (
        "|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |"
        "                    0 |\n"
        "| N/A   33C    P0              61W / 400W |  75012MiB / 81920MiB |"
        "    100%      Default |\n"
    )
    assert _undone(smi) == smi
    summary = "  | Name  | Type   | Params\n---------------------------\n0 | model | Linear | 10\n"
    assert _undone(summary) == summary
    # "TIME LEVEL | message": the level is the line's own word, not a source
    levels = (
        "2024-05-01 10:00:00.123 INFO | step 1\n"
        "2024-05-01 10:00:01.123 INFO | step 2\n"
        "2024-05-01 10:00:02.123 WARNING | slow\n"
    )
    assert _undone(levels) == levels


def test_a_loggers_header_repeated_on_each_line_of_a_record_is_removed() -> None:
    # vLLM's logger (vllm/logger.py: "%(levelname)s %(asctime)s %(filename)s:%(lineno)d]
    # %(message)s", date "%m-%d %H:%M:%S"; NewLineFormatter repeats the header on every line
    # of a multi-line record), a traceback logged through it by a Ray worker
    head = "(RayWorkerWrapper pid=4009) ERROR 04-15 00:31:11 worker_base.py:574] "
    logged = (
        head
        + "Error executing method 'start_worker_execution_loop'.\n"
        + "".join(head + line + "\n" for line in TRACEBACK.splitlines())
    )
    assert _undone(logged) == (
        head + "Error executing method 'start_worker_execution_loop'.\n" + TRACEBACK
    )
    # two lines of one header without a traceback are two records: left alone
    plain = "INFO 04-15 00:31:11 [engine.py:300] started\nINFO 04-15 00:31:11 [engine.py:300] ok\n"
    assert _undone(plain) == plain


def test_a_frame_line_cut_inside_its_function_name_is_joined() -> None:
    # CPython's frame line, wrapped once inside the function's name; its source line, four
    # spaces in, follows the name's end
    frame = (
        '  File "/opt/venv/lib/python3.10/site-packages/torch/distributed/utils.py", '
        "line 118, in _verify_param_shape_across_processes\n"
    )
    text = TRACEBACK.replace("  File", frame + "    return dist._verify(pg)\n  File", 1)
    at = frame.index("_acro") + len("_acro")
    wrapped = text.replace(frame, frame[:at] + "\n" + frame[at:])
    assert _undone(wrapped) == text
    # a frame whose source line lost its indentation: the next line may be that line
    bare = 'File "train.py", line 12, in main_loop_with_a_long_name_here\nraise\nRuntimeError: x\n'
    assert unmangle(bare) is None


def test_an_nccl_header_wrapped_before_its_level_is_joined() -> None:
    # debug.cc prints "NCCL WARN" / "NCCL INFO" together: the column fell between them
    stamped = timestamps(NCCL)
    for width in (len(stamped.splitlines()[0].split("NCCL ")[0]) + len("NCCL "),):
        wrapped = hard_wrap(stamped, width)
        assert "\nWARN " in wrapped
        assert _undone(wrapped) == stamped


# Prose and messages a wrap at word boundaries breaks (an exception's message, NCCL lines).
SOFT = (
    "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running "
    "collective: CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[4096], "
    "TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float, device=cuda)), but Rank 0 "
    "is running collective: CollectiveFingerPrint(SequenceNumber=12, OpType=ALLGATHER).\n" + NCCL
)


def test_a_wrap_at_word_boundaries_is_joined_with_its_spaces() -> None:
    for width in (72, 80, 120):
        wrapped = word_wrap(SOFT, width)
        assert wrapped != SOFT
        fixed = unmangle(wrapped)
        assert fixed is not None and fixed.text == SOFT, width
        assert any("word boundaries" in note for note in fixed.undone)


def test_lines_of_their_own_are_no_wrap_at_word_boundaries() -> None:
    # a short log's lines, each about as long as the next, none broken
    short = "".join(f"LOCAL_RANK: {r} - CUDA_VISIBLE_DEVICES: [0,1,2,3]\n" for r in range(4))
    assert unmangle(short) is None
    # nvidia-smi's drawn table: rows as long as one another, each closed by its border
    table = "".join(
        f"|   {g}  NVIDIA A100-SXM4-80GB          On  |   00000000:0{g}:00.0 Off |"
        f"                    0 |\n| N/A   33C    P0             64W /  400W |"
        f"   61322MiB /  81920MiB |      0%      Default |\n"
        for g in range(4)
    )
    assert unmangle("+" + "-" * 90 + "+\n" + table) is None
    # a traceback that lost its indentation: frame lines are long, their source is no rest
    bare = "\n".join(line.strip() for line in TRACEBACK.splitlines() * 3) + "\n"
    assert unmangle(bare) is None
    # a terminal's wrap, wrapped again by a narrower one: most pieces at the edge, the
    # cuts kept as they were (no space put into a word)
    rows = "".join(f"x{r}=" + "abcdefgh " * 17 + "\n" for r in range(3))
    again = hard_wrap(hard_wrap(rows, 150), 80)
    fixed = unmangle(again)
    assert fixed is None or not any("word boundaries" in note for note in fixed.undone)
