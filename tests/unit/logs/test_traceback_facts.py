"""What a Python traceback tells about the error before or at its end: the stage a store
error was raised in (tb_stage, StoreTimeout.stage), and a file write as its innermost
source line (process.WRITE_CALL, ExceptionRaised.writing).

The inputs are written from the documented formats: c10d's socket.cpp warning
("waitForInput: socket {} timed out after {}ms") and CPython's traceback (frames
'File "…", line N, in func', each with its source line, then "Type: message").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.logs.tb_stage import line_stage
from hangdoc.analyzer.payloads.launch import CodeStage, ExceptionRaised
from hangdoc.analyzer.payloads.torch_pg import StoreTimeout
from hangdoc.analyzer.vocabulary import Phase
from tests.unit.logs.helpers import events, parse

_STORE = (
    "[rank1]:[W1125 11:02:10.000000001 socket.cpp:487] [c10d] waitForInput: socket "
    "SocketImpl(fd=31, addr=[node1]:40112, remote=[node0]:29500) timed out after 600000ms"
)


@pytest.mark.parametrize(
    ("line", "stage"),
    [
        ('  File "/t/distributed_c10d.py", line 1, in init_process_group', Phase.INIT),
        ('  File "/t/distributed_c10d.py", line 1, in new_group', Phase.INIT),
        ('  File "/t/rendezvous.py", line 1, in _create_c10d_store', Phase.INIT),
        ('  File "/t/runner.py", line 1, in init_torch_distributed', Phase.INIT),
        ('  File "/t/loop.py", line 1, in train_one_step', Phase.TRAIN),
        ('  File "/t/trainer.py", line 1, in _inner_training_loop', Phase.TRAIN),
        ("    result = trainer.train(resume_from_checkpoint=ckpt)", Phase.TRAIN),
        ("    group = dist.new_group(ranks)", Phase.INIT),
        ('  File "/t/run.py", line 1, in main', None),
        ("    batch = next(loader)", None),
        ('  File "/t/x.py", line 1, in constrain', None),
    ],
)
def test_line_stage(line: str, stage: Phase | None) -> None:
    assert line_stage(line) == stage


def _store_stage(tmp_path: Path, text: str) -> Phase | None:
    path = tmp_path / "rank1.log"
    path.write_text(text, encoding="utf-8")
    found = sorted((e for _, e in events(parse(path), "store_timeout")), key=lambda e: e.line)
    store = found[0].payload  # the socket's warning (an exception line may be another)
    assert isinstance(store, StoreTimeout)
    return store.stage


def test_store_stage_from_a_cut_traceback(tmp_path: Path) -> None:
    """The frames count though the paste ends before the exception line; the innermost
    frame naming a stage decides."""
    text = "\n".join(
        [
            _STORE,
            "[rank1]: Traceback (most recent call last):",
            '[rank1]:   File "/job/run.py", line 40, in <module>',
            "[rank1]:     fit_model(cfg)",
            '[rank1]:   File "/job/loop.py", line 12, in train_epoch',
            "[rank1]:     shared = exchange_metadata(store)",
            "",
        ]
    )
    assert _store_stage(tmp_path, text) == Phase.TRAIN


def test_store_stage_innermost_wins(tmp_path: Path) -> None:
    text = "\n".join(
        [
            _STORE,
            "Traceback (most recent call last):",
            '  File "/job/loop.py", line 50, in train_step',
            "    group = dist.new_group(ranks)",
            '  File "/t/distributed_c10d.py", line 4125, in new_group',
            "    return _new_group_with_tag(",
            "torch.distributed.DistStoreError: timed out",
            "",
        ]
    )
    assert _store_stage(tmp_path, text) == Phase.INIT


def _store_code_stages(tmp_path: Path, text: str) -> dict[int | None, CodeStage | None]:
    path = tmp_path / "console.log"
    path.write_text(text, encoding="utf-8")
    out: dict[int | None, CodeStage | None] = {}
    for rank, event in events(parse(path), "store_timeout"):
        assert isinstance(event.payload, StoreTimeout)
        out[rank] = event.payload.code_stage
    return out


# MedicalGPT #425's shape (torch 2.4): two ranks' store warnings, interleaved, then rank 3's
# traceback through transformers' main_process_first, cut before its exception line.
_GATE = [
    "[rank3]:[W1001 13:40:02.778279096 socket.cpp:428] [c10d] While waitForInput, poolFD "
    "failed with (errno: 0 - Success).",
    "[rank1]:[W1001 13:40:02.817983009 socket.cpp:428] [c10d] While waitForInput, poolFD "
    "failed with (errno: 0 - Success).",
    "[rank3]: Traceback (most recent call last):",
    '[rank3]:   File "/job/pretraining.py", line 541, in main',
    '[rank3]:     with training_args.main_process_first(desc="Dataset tokenization"):',
    '[rank3]:   File "/env/lib/python3.11/contextlib.py", line 137, in __enter__',
    "[rank3]:     return next(self.gen)",
    '[rank3]:   File "/env/lib/python3.11/site-packages/transformers/training_args.py", '
    "line 2410, in main_process_first",
    "[rank3]:     dist.barrier()",
    "",
]


def test_a_store_wait_takes_the_code_stage_of_its_own_ranks_cut_traceback(
    tmp_path: Path,
) -> None:
    # rank 1's warning sits right above rank 3's traceback, but is not the one it raised for
    stages = _store_code_stages(tmp_path, "\n".join(_GATE))
    assert stages == {3: CodeStage.RANK_ZERO_FIRST, 1: None}


def test_a_store_wait_without_a_rank_takes_the_traceback_below(tmp_path: Path) -> None:
    lines = [line.removeprefix("[rank3]:").removeprefix("[rank1]:") for line in _GATE]
    stages = _store_code_stages(tmp_path, "\n".join([lines[0], *lines[2:]]))
    assert list(stages.values()) == [CodeStage.RANK_ZERO_FIRST]


def test_store_without_traceback_has_no_stage(tmp_path: Path) -> None:
    text = "\n".join([_STORE, "something else", "", "", "Traceback (most recent call last):"])
    assert _store_stage(tmp_path, text + "\n") is None


def _exception(tmp_path: Path, text: str) -> ExceptionRaised:
    path = tmp_path / "rank0.log"
    path.write_text(text, encoding="utf-8")
    found = events(parse(path), "exception")
    assert len(found) == 1
    raised = found[0][1].payload
    assert isinstance(raised, ExceptionRaised)
    return raised


def test_write_call_as_innermost_source_line(tmp_path: Path) -> None:
    raised = _exception(
        tmp_path,
        "Traceback (most recent call last):\n"
        '  File "/job/io.py", line 9, in dump\n'
        "    fh.write(blob)\n"
        "    ^^^^^^^^^^^^^^\n"
        "OSError: [Errno 22] Invalid argument\n",
    )
    assert raised.writing == "fh.write(blob)"
    assert raised.storage is not None


def test_write_call_above_a_bare_exception_line(tmp_path: Path) -> None:
    raised = _exception(tmp_path, "    handle.flush()\nOSError: [Errno 22] Invalid argument\n")
    assert raised.bare
    assert raised.writing == "handle.flush()"
    assert raised.storage is not None


def test_other_call_is_no_write(tmp_path: Path) -> None:
    raised = _exception(
        tmp_path,
        "Traceback (most recent call last):\n"
        '  File "/job/dev.py", line 9, in setup\n'
        "    fcntl.ioctl(fd, REQUEST, buf)\n"
        "OSError: [Errno 22] Invalid argument\n",
    )
    assert raised.writing is None
    assert raised.storage is None


def test_network_errno_in_a_write_is_not_storage(tmp_path: Path) -> None:
    """ECONNRESET (104) from a socket file's write is the network's (vocabulary's
    _NOT_FILE_SYSTEM), whatever the call."""
    raised = _exception(
        tmp_path,
        "Traceback (most recent call last):\n"
        '  File "/job/net.py", line 9, in push\n'
        "    conn.write(frame)\n"
        "ConnectionResetError: [Errno 104] Connection reset by peer\n",
    )
    assert raised.storage is None
