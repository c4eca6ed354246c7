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
from hangdoc.analyzer.payloads.launch import ExceptionRaised
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
