"""Log shippers' layers: the same lines read the same with or without them.

``kubectl logs --timestamps`` / ``docker logs --timestamps`` (an RFC 3339 stamp with
nanoseconds and one space), CloudWatch (milliseconds), ``kubectl logs --prefix``
("[pod/<pod>/<container>] ", kubectl's logs.go addPrefixIfNeeded), docker compose
("<service>-1  | "), Akash Console's log view ("[<service>]: "), journald's short
format ("Feb 18 10:28:25 host python[1234]: "),
Ray's actor tag and SageMaker's MPI tag ("[1,mpirank:3,algo-1]<stdout>:",
aws-samples/sagemaker-distributed-training-workshop#6) wrap each line of a real paste
(fixtures/pastes/logs, sources in its README); the events the log parser reads must not
change, the rank prefix behind the shipper's layer included.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hangdoc.analyzer.model import LogEvent
from hangdoc.analyzer.parsers.logs.prefix import peel_line
from hangdoc.analyzer.parsers.prefixes import peel, split_streams
from tests.unit.logs.helpers import ROOT, parse

PASTES = ROOT / "fixtures" / "pastes" / "logs"
REAL = (
    "deepspeed-1825_log_dist_rank.txt",
    "megatron-deepspeed-338_store_barrier_two_ranks.txt",
    "glm-130b-132_comm_aborted_after_timeout.txt",
    "nccl-tests-166_warn_chains.txt",
    "colossalai-3514_torchrun_local_rank_sigkill.txt",
    "pytorch-64241_comm_aborted_wait_timeout.txt",
)
SHIPPERS = {
    "kubectl-timestamps": "2024-02-18T10:28:25.497123456Z ",
    "cloudwatch": "2024-02-18T10:28:25.497Z ",
    "offset": "2024-02-18T10:28:25.497+00:00 ",
    "kubectl-prefix": "[pod/trainer-worker-0/pytorch] ",
    "compose": "trainer-1  | ",
    "compose-v1": "algo-1-8gd7b_1  | ",
    # Akash Console's log view (akash-network/console logFormatters.ts formatLogMessage)
    "akash-console": "[vllm]: ",
}
# Ray's tag names the worker's pid and ip, syslog/journald's the host (kernel lines need it
# for their Xids): they may change attribution, on purpose; the line behind them may not.
LINE_SHIPPERS = {
    **SHIPPERS,
    "ray": "(RayTrainWorker pid=1234, ip=10.0.0.1) ",
    "journald": "Feb 18 10:28:25 gpu-node-7 python[1234]: ",
    "journald-padded-day": "Feb  8 10:28:25 gpu-node-7 python3.10[1234]: ",
}
# A stamp adds the event's clock and time; nothing else may change.


def _body(name: str) -> str:
    text = (PASTES / name).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("# source:"))


def _kept(e: LogEvent) -> tuple[object, ...]:
    """What the parser read from the line: its payload and the process it names (not the
    clock and time a stamp adds)."""
    who = (e.host, e.pid, e.tid, e.cuda_dev, e.local_rank, e.partial_header, e.rank_from)
    return (e.payload, who, e.repeats, e.folded_lines)


def _read(path: Path) -> Counter[tuple[int | None, str, tuple[object, ...]]]:
    parsed = parse(path)
    seen: Counter[tuple[int | None, str, tuple[object, ...]]] = Counter()
    for proc in parsed.processes:
        for e in proc.log_events:
            seen[(proc.rank, e.kind, _kept(e))] += 1
    for e in parsed.job_log_events:
        seen[(None, e.kind, _kept(e))] += 1
    return seen


@pytest.mark.parametrize("shipper", sorted(SHIPPERS))
@pytest.mark.parametrize("name", REAL)
def test_a_shipper_layer_changes_no_event(tmp_path: Path, name: str, shipper: str) -> None:
    body = _body(name)
    plain = tmp_path / "plain.log"
    plain.write_text(body + "\n", encoding="utf-8")
    shipped = tmp_path / "shipped.log"
    prefix = SHIPPERS[shipper]
    shipped.write_text("".join(prefix + line + "\n" for line in body.splitlines()), "utf-8")
    expected = _read(plain)
    assert expected, name  # the paste holds events at all
    assert _read(shipped) == expected


# Lines built exactly from the producing software's format strings (said so per line).
APP_LINES = (
    # ProcessGroupNCCL's watchdog through torchrun's tee and the excepthook's tag
    "[default3]:[rank3]:[E218 10:48:25.033 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.",
    # Python logging's "%(asctime)s - %(name)s - %(levelname)s - %(message)s"
    "2024-02-18 10:28:26,496 - root - INFO - Saving the checkpoint.",
    # DeepSpeed's logger "[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s]"
    "[2024-02-18 10:28:26,496] [INFO] [logging.py:96:log_dist] [Rank 0] [Torch] Checkpoint "
    "global_step10 is about to be saved!",
    # a traceback's indented line: its indentation is the line's own
    '  File "/opt/train.py", line 12, in main',
)


@pytest.mark.parametrize("shipper", sorted(LINE_SHIPPERS))
@pytest.mark.parametrize("line", APP_LINES)
def test_the_app_line_behind_a_shipper_is_unchanged(line: str, shipper: str) -> None:
    bare, shipped = peel_line(line), peel_line(LINE_SHIPPERS[shipper] + line)
    assert shipped.text == bare.text
    assert shipped.rank == bare.rank
    assert shipped.level == bare.level and shipped.origin == bare.origin
    # the application's own stamp wins; without one, the shipper's is the line's time
    if bare.stamp is not None:
        assert shipped.stamp == bare.stamp
    elif shipper.startswith(("kubectl-t", "cloudwatch", "offset", "journald")):
        assert shipped.stamp is not None


def test_shipper_layers_before_a_stack_dump() -> None:
    # the stacks' layer (prefixes.peel) peels them too; SageMaker's MPI tag names the rank
    # and the host
    for prefix in LINE_SHIPPERS.values():
        line = prefix + "Thread 0x00007f01 (most recent call first):"
        assert peel(line).text == "Thread 0x00007f01 (most recent call first):"
    tagged = peel("[1,mpirank:3,algo-1]<stdout>:[rank3]: x")
    assert (tagged.rank, tagged.host, tagged.text) == (3, "algo-1", "x")
    assert len(split_streams("[1,mpirank:0,algo-1]<stdout>:a\n[1,mpirank:1,algo-1]<stdout>:b")) == 2


def test_ordinary_lines_are_not_shipper_layers() -> None:
    # a model summary's table row, a "key | value" line, a torch log line: left alone
    for text in ("0 | model | GPT | 124 M", "epoch | 3 | loss 1.2", "layer | shape"):
        assert peel(text).text == text
        assert peel_line(text).text == text


def test_akash_console_layer_keeps_the_worker_tag_behind_it() -> None:
    # Akash Console's "[<service>]: " (logFormatters.ts formatLogMessage) over vLLM's worker
    # tag (multiproc_worker_utils.py's "(VllmWorkerProcess pid=N) " prefix) and its logger.
    line = (
        "[vllm]: (VllmWorkerProcess pid=91) ERROR 07-28 23:29:37 multiproc_worker_utils.py:226] "
        "RuntimeError: NCCL error: unhandled system error"
    )
    tag = peel_line(line)
    assert tag.pid == 91 and tag.text == "RuntimeError: NCCL error: unhandled system error"
    # only a lower-case service name with a letter first: not a bracketed number, not a
    # capitalised word a program prints itself
    for text in ("[1]: x", "[Warning]: x"):
        assert peel(text).text == text
