"""An exception raised by an object already shut down, or a framework's relay of a failure
told above (Sign.SHUT_DOWN, parsers/logs/errors.py ``_SHUT_DOWN``), is the evidence of a
shutdown, not a rank's death that the others waited for: HD030 does not name it, and
still names the crash that came first beside it.

Every input is hand-written in a documented format, cited at each test: CPython's asyncio
(base_events.py ``_check_closed``), multiprocessing (queues.py ``_check_closed``) and
concurrent.futures (thread.py ``submit``); vLLM v1's EngineDeadError
(vllm/v1/engine/exceptions.py) and MultiprocExecutor.collective_rpc; vllm-omni's engine
(diffusion_engine.py ``collective_rpc``); Horovod's SHUT_DOWN_ERROR and elastic driver;
openai-python's status errors (``_make_status_error_from_response``: "Error code: N -
<body>"); torch's ProcessGroupNCCL watchdog and CPython's traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.logs.errors import signs_of
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.api import diagnose
from tests.unit.recognition_kit import MANGLINGS, Mangle
from tests.unit.recognition_kit import answer as _answer


@pytest.mark.parametrize(
    ("exc_type", "message"),
    [
        ("RuntimeError", "Event loop is closed"),  # asyncio base_events._check_closed
        ("ValueError", "Queue <multiprocessing.queues.Queue object at 0x7f> is closed"),
        ("RuntimeError", "cannot schedule new futures after shutdown"),  # concurrent.futures
        ("RuntimeError", "cannot schedule new futures after interpreter shutdown"),
        ("RuntimeError", "DiffusionEngine is closed."),  # vllm-omni collective_rpc
        ("RuntimeError", "Pipe is closed"),  # horovod runner/util/streams.py
        ("ValueError", "Horovod is shutting down."),  # horovod common/basics.py
        (
            "tensorflow.python.framework.errors_impl.UnknownError",
            "Horovod has been shut down. This was caused by an exception on one of the ranks "
            "or an attempt to allreduce, allgather or broadcast a tensor after one of the "
            "ranks finished execution.",
        ),
        ("RuntimeError", "Job has been shutdown, see above error messages for details."),
        (
            "vllm.v1.engine.exceptions.EngineDeadError",
            "EngineCore encountered an issue. See stack trace (above) for the root cause.",
        ),
        (
            "RuntimeError",
            "Worker failed with error 'boom', please check the stack trace above for the root "
            "cause",
        ),
        ("RuntimeError", "Executor failed."),  # vLLM EngineCoreProc
        # a client's HTTP 500 carrying the server's EngineDeadError (openai-python)
        ("openai.InternalServerError", "Error code: 500 - EngineCore encountered an issue"),
        (
            "openai.InternalServerError",
            "Error code: 500 - {'error': {'message': 'EngineCore encountered an issue. See "
            "stack trace (above) for the root cause.', 'type': 'InternalServerError'}}",
        ),
    ],
)
def test_words_of_a_shutdown_are_read_so(exc_type: str, message: str) -> None:
    assert Sign.SHUT_DOWN in signs_of(exc_type, message)


@pytest.mark.parametrize(
    ("exc_type", "message"),
    [
        ("ValueError", "I/O operation on closed file."),  # the caller's own file
        ("RuntimeError", "CUDA error: an illegal memory access was encountered"),
        ("KeyError", "'input_ids'"),
        # a client's 500 whose body names nothing: the server's failure, words unread
        ("openai.InternalServerError", "Error code: 500 - {'detail': 'Internal Server Error'}"),
        ("RuntimeError", "Executor failed to run the step: bad shape"),
    ],
)
def test_other_words_are_not(exc_type: str, message: str) -> None:
    assert Sign.SHUT_DOWN not in signs_of(exc_type, message)


# torch's ProcessGroupNCCL watchdog (WorkNCCL::checkTimeout), torch >= 2.3's [rankN]: prefix.
_TIMEOUT = (
    "[rank{rank}]:[E1125 10:00:03.551208113 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=115, OpType=ALLREDUCE, "
    "NumelIn=71680, NumelOut=71680, Timeout(ms)=600000) ran for 600035 milliseconds before "
    "timing out.\n"
)
# the same without the glog header (as a server's log prints it, untimed)
_BARE_TIMEOUT = (
    "[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=115, "
    "OpType=ALLREDUCE, NumelIn=71680, NumelOut=71680, Timeout(ms)=600000) ran for 600035 "
    "milliseconds before timing out.\n"
)
_CRASH = (
    "[rank1]: Traceback (most recent call last):\n"
    '[rank1]:   File "/app/train.py", line 88, in <module>\n'
    "[rank1]:     loss = step(batch)\n"
    '[rank1]:   File "/app/train.py", line 61, in step\n'
    "[rank1]:     ids = batch['input_ids']\n"
    "[rank1]: KeyError: 'input_ids'\n"
)
_LOOP_CLOSED = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.10/asyncio/base_events.py", line 515, in _check_closed\n'
    "    raise RuntimeError('Event loop is closed')\n"
    "RuntimeError: Event loop is closed\n"
)
# what a test's client prints when the server answers 500 with vLLM's EngineDeadError
_CLIENT = (
    "FAILED tests/e2e/test_serving.py::test_generate[tp2]\n"
    "openai.InternalServerError: Error code: 500 - EngineCore encountered an issue\n"
)


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_a_shutdown_error_after_a_timeout_is_not_named_a_death(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    text = _TIMEOUT.format(rank=1) + "RuntimeError: DiffusionEngine is closed.\n"
    _, rule, _ = _answer(tmp_path, mangle(text))
    assert rule != "HD030", how


def test_a_shutdown_error_before_the_timeout_is_not_named_either(tmp_path: Path) -> None:
    # the paste's order does not make it a cause: its words say it came after a shutdown
    _, rule, _ = _answer(tmp_path, _LOOP_CLOSED + _TIMEOUT.format(rank=0))
    assert rule != "HD030"


def test_the_crash_that_came_first_is_still_named(tmp_path: Path) -> None:
    text = _CRASH + _TIMEOUT.format(rank=0) + _LOOP_CLOSED
    category, rule, culprits = _answer(tmp_path, text)
    assert (category, rule, culprits) == (Category.RANK_DEAD, "HD030", (1,))


def _files(tmp_path: Path, files: dict[str, str]) -> list[Path]:
    paths = []
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def test_a_clients_engine_dead_error_beside_a_timeout_is_not_a_death(tmp_path: Path) -> None:
    # the client's file sorts before the server's, and nothing times them: its words decide
    paths = _files(tmp_path, {"client.txt": _CLIENT, "server.txt": _BARE_TIMEOUT.format(rank=1)})
    primary = diagnose(paths).primary
    assert primary is None or primary.rule != "HD030"


def test_the_servers_crash_is_named_beside_the_clients_relay(tmp_path: Path) -> None:
    paths = _files(
        tmp_path,
        {"client.txt": _CLIENT, "server.txt": _CRASH + _BARE_TIMEOUT.format(rank=0)},
    )
    primary = diagnose(paths).primary
    assert primary is not None
    assert (primary.category, primary.rule, primary.culprit_ranks) == (
        Category.RANK_DEAD,
        "HD030",
        (1,),
    )
