"""The matcher: every row's own sample is recognised, headers may be cut or mangled,
ordinary training-log lines are not taken for anything."""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.catalog import default_catalog, default_matcher, to_event
from hangdoc.analyzer.parsers.catalog.adapter import payload_of
from hangdoc.analyzer.parsers.catalog.loader import CatalogRow
from hangdoc.analyzer.parsers.catalog.template import sample
from hangdoc.analyzer.payloads import PAYLOAD_OF
from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.analyzer.payloads.host import GpuXid, HungTask
from hangdoc.analyzer.payloads.launch import LauncherReport
from hangdoc.analyzer.payloads.nccl import CudaFailure, NcclInit, NcclTransportError
from hangdoc.analyzer.payloads.torch_pg import CollectiveTimeout
from hangdoc.analyzer.vocabulary import EventKind

# Rows whose template cannot be told from its own sample: a literal word glued to a
# slot on both sides prints as another word ("nvmlInit%s() failed" → "nvmlInit_v2()"), so
# no keyword of theirs survives printing. Counted, kept as rows, not matched by keyword.
# Two more are ROCR's GPU memory fault (runtime.cpp VMFaultHandler, "on address %p%s.
# Reason: %s."): its %s is a ternary of literals, "" or "(may not be exact address)", which
# the sample fills with words glued to the address; the real lines match. One more is
# slurmstepd's "task %d (%d) exited. Killed by signal %d%s." (mgr.c), whose last argument is
# an #ifdef WCOREDUMP inside the call: the sample glues a word to the signal number.
# Two more are torch_npu's ("<logPrefix()>dumpPythonTraceback error: %s" and "Invalid
# ranks" << ranks in ProcessGroupHCCL.cpp): a word glued to a slot, each the row's only
# keyword; neither says anything about a hang.
_MAX_UNRECOGNISABLE = 20


def _matchable() -> list[CatalogRow]:
    return [r for r in default_catalog().rows if r.matchable]


def test_every_row_matches_its_own_sample_or_a_more_specific_row() -> None:
    matcher = default_matcher()
    missed: list[str] = []
    for row in _matchable():
        got = matcher.match(sample(row.parts))
        if got is None or (got.row is not row and got.row.specificity < row.specificity):
            missed.append(f"{row.id} {row.template[:80]}")
    assert len(missed) <= _MAX_UNRECOGNISABLE, missed


# NCCL's header ("host:pid:tid [dev] file.cc:line NCCL WARN "), then the ways pastes
# mangle it: cut anywhere in it, a timestamp or a rank prefix before it, quoted, indented.
_NCCL_HEADER = "gpu-node-17:2718281:2718399 [3] transport/net_ib.cc:1295 NCCL WARN "


def _mangled(header: str, body: str) -> list[str]:
    cuts = [header[i:] + body for i in range(0, len(header), 7)]
    return [
        *cuts,
        body,
        "2024-03-02T10:00:00.123456Z " + header + body,
        "[rank3]:" + header + body,
        "> " + header + body,
        "    " + header + body,
        "\x1b[31m" + header + body + "\x1b[0m",
    ]


@pytest.mark.parametrize("project", ["nccl", "torch", "gloo", "kernel", "cuda"])
def test_cut_and_mangled_headers_lose_nothing(project: str) -> None:
    matcher = default_matcher()
    rows = [r for r in _matchable() if r.project == project and r.meaning and r.meaning.kind]
    step = max(1, len(rows) // 40)
    for row in rows[::step]:
        body = sample(row.parts)
        want = matcher.match(body)
        if want is None:
            continue  # an unrecognisable row (see above)
        for line in _mangled(_NCCL_HEADER, body):
            got = matcher.match(line)
            assert got is not None, line
            assert got.row.specificity >= want.row.specificity, (line, got.row.template)


# Ordinary lines of training runs (hand-written in the shapes of tqdm, the HF Trainer,
# Lightning, DeepSpeed's log_dist, torchrun's launch banner, pip, wandb, plain prints).
_ORDINARY = [
    "Epoch 3: 100%|██████████| 1250/1250 [10:00<00:00,  2.08it/s, loss=0.123, v_num=7]",
    "{'loss': 1.2345, 'grad_norm': 0.98, 'learning_rate': 4.9e-05, 'epoch': 0.12}",
    "[2024-03-02 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=100, skipped=0, "
    "lr=[0.0001], mom=[(0.9, 0.999)]",
    "Train Epoch: 1 [12800/60000 (21%)]\tLoss: 0.301245",
    "INFO:__main__:***** Running training *****",
    "  Num examples = 120000",
    "wandb: Tracking run with wandb version 0.16.3",
    "Downloading shards: 100%|██████████| 2/2 [00:12<00:00,  6.01s/it]",
    "Loading checkpoint shards: 100%|██████████| 3/3 [00:05<00:00,  1.70s/it]",
    "Saving model checkpoint to ./output/checkpoint-500",
    "torch.Size([4, 1024, 4096]) torch.float16 cuda:0",
    "Requirement already satisfied: numpy>=1.17 in /usr/lib/python3/dist-packages (1.26.4)",
    "GPU available: True (cuda), used: True",
    "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1,2,3]",
    "iteration      100/   10000 | consumed samples:        12800 | elapsed time per "
    "iteration (ms): 512.3",
]


@pytest.mark.parametrize("line", _ORDINARY)
def test_ordinary_training_lines_mean_nothing(line: str) -> None:
    got = default_matcher().match(line)
    if got is not None:
        assert got.row.meaning is None or got.row.meaning.strength == "none", got.row.template


# Lines in the documented formats of their sources (the format string of each row, filled
# with plausible values): what each means, and the values it carries.
_KNOWN = [
    (
        "node1:12345:12399 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion "
        "from peer 10.0.1.23<34696> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
        EventKind.NCCL_TRANSPORT_ERROR,
        {"peer": "10.0.1.23", "peer_port": 34696},
    ),
    (
        "[rank3]:[E1127 10:00:00.123 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600021 milliseconds before timing out.",
        EventKind.COLLECTIVE_TIMEOUT,
        {"rank": 3, "seq": 5, "op": "ALLREDUCE"},
    ),
    (
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. "
        "1/2 clients joined.",
        EventKind.STORE_TIMEOUT,
        {},
    ),
    (
        "[ 1234.5678] INFO: task python:4242 blocked for more than 120 seconds.",
        EventKind.KERNEL_HUNG_TASK,
        {"pid": 4242},
    ),
    (
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
        EventKind.GPU_XID,
        {"xid": 79, "pid": 1234},
    ),
    (
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        EventKind.CUDA_ERROR,
        {},
    ),
    (
        "h:1:2 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-WU8 to "
        "9637892 bytes",
        EventKind.NCCL_RESOURCE_ERROR,
        {},
    ),
]


@pytest.mark.parametrize(("line", "kind", "values"), _KNOWN)
def test_known_lines(line: str, kind: EventKind, values: dict[str, object]) -> None:
    matcher = default_matcher()
    got = matcher.match(line)
    assert got is not None
    draft = to_event(got, matcher)
    assert draft.kind is kind
    assert draft.source.startswith(got.row.project)
    for key, value in values.items():
        assert draft.values.get(key) == value, draft.values


def test_a_row_without_meaning_strength_none_has_no_category() -> None:
    matcher = default_matcher()
    got = matcher.match("h:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>")
    assert got is not None
    draft = to_event(got)
    assert draft.strength == "none"


# The same lines: the payload of their kind (analyzer/payloads/), filled from the values
# by the field each names, as the hand-written recognisers fill it.
_PAYLOADS = [
    (_KNOWN[0][0], NcclTransportError(peer="10.0.1.23", port=34696)),
    (_KNOWN[1][0], CollectiveTimeout(group_rank=3, seq=5, op="ALLREDUCE")),
    (_KNOWN[3][0], HungTask(name="python")),
    (_KNOWN[4][0], GpuXid(message="GPU has fallen off the bus.", xid=79, name="python")),
]


@pytest.mark.parametrize(("line", "payload"), _PAYLOADS)
def test_a_match_carries_its_kinds_payload(line: str, payload: EventPayload) -> None:
    matcher = default_matcher()
    got = matcher.match(line)
    assert got is not None
    draft = to_event(got, matcher)
    assert draft.kind is not None and type(draft.payload) is PAYLOAD_OF[draft.kind]
    assert draft.payload == payload


def test_a_value_fills_a_field_only_when_it_has_the_fields_type() -> None:
    # GIVEN values as a catalog row reads them, one not a number where the field is one
    values: dict[str, int | float | str] = {"device": "1b000", "rank": 3, "signal": "Killed"}
    # WHEN made an NCCL init's and a launcher report's payload
    init = payload_of(EventKind.NCCL_INIT, values)
    report = payload_of(EventKind.WORKER_FAILED, values)
    # THEN the bus id takes what is no device number, and no enum gets a word it lacks
    assert isinstance(init, NcclInit) and init.device is None and init.bus_id == "1b000"
    assert isinstance(report, LauncherReport) and report.rank == 3 and report.signal is None


def test_a_bare_number_is_not_an_errors_words() -> None:
    # NCCL 2.27's "CUDA error %d '%s'" prints the CUresult's number and its words: the
    # number is a code (as is a count or a return value), the words are the error.
    payload = payload_of(EventKind.CUDA_ERROR, {"error": 1, "errno_text": "invalid argument"})
    assert isinstance(payload, CudaFailure) and payload.error == "invalid argument"
    coded = payload_of(EventKind.CUDA_ERROR, {"error": "801"})
    assert isinstance(coded, CudaFailure) and coded.error is None
    worded = payload_of(EventKind.CUDA_ERROR, {"error": "operation not supported"})
    assert isinstance(worded, CudaFailure) and worded.error == "operation not supported"
