"""Paste layers nested in the order a person adds them (parsers/unmangle.py).

A reporter quotes a log ("> " on each line) and the quote then lands in an indented code
block (a list item, a reply that indents what it cites): the block's margin hides the
quote's markers until it is gone, so the quote is looked for again after the margin.
The lines are NCCL's documented formats (FORMATS.md §1: WARN and the "-> rc" chain).
"""

from __future__ import annotations

from hangdoc.analyzer.parsers.unmangle import unmangle
from hangdoc.paste_mangling import hard_wrap, quote, word_wrap

LOG = (
    "host-a:101:202 [0] misc/ibvwrap.cc:182 NCCL WARN Call to ibv_reg_mr_iova2 failed with "
    "error Invalid argument\n"
    "host-a:101:202 [0] NCCL INFO transport/net_ib.cc:1872 -> 2\n"
    "host-a:101:202 [0] NCCL INFO transport/net.cc:853 -> 2\n"
)


def test_a_quote_inside_a_code_block_is_undone_whole() -> None:
    mangled = "".join("    > " + line + "\n" for line in LOG.splitlines())
    fixed = unmangle(mangled)
    assert fixed is not None
    assert fixed.text == LOG
    assert fixed.undone.count("a block quote's '>' markers") == 1


def test_a_code_block_inside_a_quote_is_undone_whole() -> None:
    mangled = "".join(">     " + line + "\n" for line in LOG.splitlines())
    fixed = unmangle(mangled)
    assert fixed is not None
    assert fixed.text == LOG


def test_a_quoted_paste_hard_wrapped_is_unquoted_once_rejoined() -> None:
    # A terminal wraps the quoted lines: the markers are on each line's first piece only,
    # so no run of quoted lines shows until the pieces are joined.
    mangled = hard_wrap(quote(LOG * 3), 40)
    fixed = unmangle(mangled)
    assert fixed is not None
    assert not [line for line in fixed.text.splitlines() if line.startswith(">")]
    assert "host-a:101:202 [0] NCCL INFO transport/net.cc:853 -> 2" in fixed.text.splitlines()


# vLLM V1's worker prefix and logger header (multiproc_executor.py's _add_prefix, vllm/
# logger.py's _FORMAT): 77 columns before the message, so a terminal 80 wide cuts a
# traceback line right after the header and the line's indentation.
_VLLM = "(VllmWorker rank=3 pid=4665) ERROR 08-05 14:13:44 [multiproc_executor.py:487] "
_WORKER_LOG = "".join(
    f"{_VLLM}{line}\n"
    for line in (
        '    self.NCCL_CHECK(self._funcs["ncclCommInitRank"](ctypes.byref(comm),',
        '  File "/usr/lib/python3/dist-packages/vllm/distributed/device_communicators/'
        'pynccl_wrapper.py", line 257, in NCCL_CHECK',
        '    raise RuntimeError(f"NCCL error: {error_str}")',
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "WorkerProc failed to start.",
    )
)


def test_a_header_alone_at_the_edge_is_joined_to_its_body() -> None:
    """A piece that is a line's header alone (and its body's indentation) is no line of
    its own: the next piece is its body, though it starts like a record (a frame, an
    indented source line), and an exception's type cut inside its name goes on too."""
    fixed = unmangle(hard_wrap(_WORKER_LOG, 80))
    assert fixed is not None
    assert fixed.text == _WORKER_LOG


def test_a_header_alone_at_a_word_wrap_is_joined_to_its_body() -> None:
    fixed = unmangle(word_wrap(_WORKER_LOG, 80))
    assert fixed is not None
    lines = fixed.text.splitlines()
    assert lines[-2] == (
        f"{_VLLM}RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO "
        "for details)"
    )
    assert lines[-1] == f"{_VLLM}WorkerProc failed to start."


def test_a_type_name_that_starts_upper_case_after_the_edge_starts_a_record() -> None:
    """Only what is left of a name cut inside (lower-case, no module path) goes on: after
    a line at the edge, "ValueError: …" is an exception line of its own."""
    text = "".join(f"{'w' * 39}x\nValueError: bad input {k}\n" for k in range(3))
    fixed = unmangle(text)
    assert fixed is None or "ValueError" in fixed.text.splitlines()[1]
    cut = "".join(f"{'w' * 39}x\nntimeError: bad input {k}\n" for k in range(3))
    rejoined = unmangle(cut)
    assert rejoined is not None
    assert rejoined.text.splitlines()[0].endswith("xntimeError: bad input 0")


def test_a_line_cut_by_another_ranks_tagged_line_is_put_back_together() -> None:
    # GIVEN rank 0's line cut by rank 1's whole "[rank1]:" line written into it, rank 0's
    # rest on the next line (untagged: the tag came with the start of the line)
    zero = (
        "[rank0]: RuntimeError: NCCL communicator was aborted on rank 0. Original reason "
        "for failure was: [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600001 milliseconds before timing out."
    )
    one = (
        "[rank1]:[E1128 10:00:00.000000 123 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for "
        "600005 milliseconds before timing out."
    )
    at = zero.index("operation timeout")
    pasted = "[rank0]: Traceback (most recent call last):\n" + zero[:at] + one + "\n"
    pasted += zero[at:] + "\n[rank1]: Traceback (most recent call last):\n"
    # WHEN the paste is unmangled
    fixed = unmangle(pasted)
    # THEN each rank's line is whole again, on a line of its own, each citing the line
    # the cut started on
    assert fixed is not None
    assert fixed.text.splitlines() == [
        "[rank0]: Traceback (most recent call last):",
        zero,
        one,
        "[rank1]: Traceback (most recent call last):",
    ]
    assert fixed.line_map == (1, 2, 2, 4)


def test_a_tag_inside_a_message_of_a_text_without_such_tags_is_left_alone() -> None:
    # GIVEN one "[rank1]:" inside a line of a log whose lines carry no such tag
    text = "INFO step 3: waiting on peers [rank1]: not ready\nINFO step 4: done\n"
    # THEN nothing is taken apart
    assert unmangle(text) is None
