"""A wrap at word boundaries that looks like a terminal's, or like no wrap at all
(parsers/unmangle.py): the pieces go back together with the spaces the wrap dropped.

* A traceback of long paths: the paths, longer than the line, are cut at the column as a
  terminal cuts them, so the lengths spike at the edge; the lines that break short of it
  because the next word (a path) would not fit are no terminal's.
* One line wrapped once shows no width: where the boundary falls between two words of a
  library's message (gloo's pair.cc "Connection closed by peer", which the catalog holds),
  the message decides that a space was there.
* A time stamp alone is a header a line was cut after; a tqdm bar's line closed by its
  counts is a whole line, and its padding cut at the edge goes on.
"""

from __future__ import annotations

from hangdoc.analyzer.parsers.unmangle import unmangle
from hangdoc.paste_mangling import hard_wrap, word_wrap

_SITE = "/opt/conda/envs/train/lib/python3.10/site-packages"
_TRACEBACK = (
    "Traceback (most recent call last):\n"
    f'  File "{_SITE}/torch/distributed/distributed_c10d.py", line 3491, in barrier\n'
    "    work.wait()\n"
    f'  File "{_SITE}/torch/serialization.py", line 652, in save\n'
    "    _save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)\n"
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
    "waiting 1800000ms for recv operation to complete\n"
)


def test_a_word_wrap_of_long_paths_is_no_terminals() -> None:
    mangled = word_wrap(_TRACEBACK, 80)
    assert max(map(len, mangled.splitlines())) == 80  # the cut paths pile up at the edge
    fixed = unmangle(mangled)
    assert fixed is not None
    assert fixed.text == _TRACEBACK
    assert any("word boundaries" in what for what in fixed.undone)


def test_a_terminals_wrap_of_the_same_lines_stays_a_terminals() -> None:
    fixed = unmangle(hard_wrap(_TRACEBACK, 80))
    assert fixed is not None
    assert fixed.text == _TRACEBACK
    assert any("hard wrap" in what for what in fixed.undone)


_GLOO = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by "
    "peer [10.0.0.2]:38032\n"
)


def test_a_lone_break_inside_a_librarys_message_gets_its_space_back() -> None:
    mangled = word_wrap(_GLOO, 80)
    assert len(mangled.splitlines()) == 2
    fixed = unmangle(mangled)
    assert fixed is not None
    assert fixed.text == _GLOO


def test_a_lone_cut_inside_a_word_of_a_message_stays_glued() -> None:
    # a terminal's cut inside "Connection": "Connec tion" is no row's, "Connection" is
    at = _GLOO.index("Connection") + len("Connec")
    mangled = _GLOO[:at] + "\n" + _GLOO[at:]
    fixed = unmangle(mangled)
    assert fixed is None or fixed.text == _GLOO


def test_a_time_stamp_alone_is_joined_to_its_line() -> None:
    line = (
        "[1,12]<stdout>:container-e275-1553839402050-12124-01-000057:815:864 [0] "
        "transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error"
    )
    text = "".join(f"2019-06-02T16:13:4{k}.884Z: {line}\n" for k in range(4))
    fixed = unmangle(word_wrap(text, 80))
    assert fixed is not None
    assert fixed.text == text


def test_tqdm_lines_closed_by_their_counts_are_whole() -> None:
    bars = "".join(
        f"Loading safetensors checkpoint shards: {k * 25}% Completed | {k}/4 [00:0{k}<?, ?it/s]\n"
        f"Capturing batches (avail_mem={6 - k}.28 GB): {k * 4}%| | {k}/23 [00:0{k}<00:12, "
        "1.81it/s]\n"
        for k in range(4)
    )
    wrapped = "".join(
        f"RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:8{k}] Timed "
        f"out waiting 180000{k}ms for recv operation to complete on the group of the rollout "
        "workers\n"
        for k in range(3)
    ) + ("Traceback (most recent call last): see the rollout worker's log for its frames:\n")
    fixed = unmangle(word_wrap(bars + wrapped, 80))
    assert fixed is not None
    assert fixed.text.splitlines() == (bars + wrapped).splitlines()


def test_a_bars_padding_cut_at_the_edge_goes_on() -> None:
    line = "Running tokenizer on dataset:   0%|" + " " * 100 + "| 0/2969526 [00:00<?, ? examples/s]"
    text = f"{line}\n" + "".join(
        f"[E ProcessGroupNCCL.cpp:475] [Rank {k}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran "
        "for 1800655 milliseconds before timing out.\n"
        for k in range(3)
    )
    fixed = unmangle(word_wrap(text, 120))
    assert fixed is not None
    first = fixed.text.splitlines()[0]
    assert first.startswith("Running tokenizer") and first.endswith("? examples/s]")


def test_a_progress_bar_redrawn_at_column_zero_starts_a_line_of_its_own() -> None:
    # mmcv's ProgressBar (mmcv/utils/progressbar.py) prints "\r[{bar}] {n}/{N}, {fps} task/s,
    # elapsed: …" from column 0, so a bar after a log line that ends short of the edge
    # starts a line of its own, however little room the line left for its first word;
    # the bar's own pieces still go back together.
    iterations = "".join(
        f"2020-08-13 15:1{k}:04,379 - mmseg - INFO - Iter [19{k}0/20000]      lr: 9.12{k}e-03, "
        f"eta: 11:1{k}:39, time: 2.09{k}, data_time: 0.00{k}, memory: 2511{k}, "
        f"decode.loss_seg: 0.000{k}, decode.acc_seg: 0.845{k}, aux.loss_seg: 0.000{k}, "
        f"loss: 0.000{k}\n"
        for k in range(3)
    )
    log = (
        iterations
        + "2020-08-13 15:20:50,742 - mmseg - INFO - Saving checkpoint at 2000 iterations\n"
    )
    bar = "[" + ">" * 11 + " " * 39 + "] 1873/7811, 1.8 task/s, elapsed: 1069s, ETA:  3313s\n"
    fixed = unmangle(word_wrap(log + bar, 80))
    assert fixed is not None
    lines = fixed.text.splitlines()
    assert lines[3].endswith("Saving checkpoint at 2000 iterations")
    assert lines[4].startswith("[>>>") and lines[4].endswith("ETA:  3313s")
