# ruff: noqa: E501
"""Recognisers for pipeline (send/recv) and size-mismatch evidence, on verbatim pastes.

The pastes are casebook artifacts (train split), each the reporter's output verbatim;
their threads are in the cases' ``case.toml``:

* xdit-284 (https://github.com/xdit-project/xDiT/issues/284): watchdog SEND/COALESCED timeouts
* torchtitan-1492 (https://github.com/pytorch/torchtitan/issues/1492): pipelining shape-inference lines
* torchtitan-1681 (https://github.com/pytorch/torchtitan/issues/1681): NCCL "message truncated"
* jotr-4 (https://github.com/xljh0520/JOTR/issues/4): two hard-wrapped one-sided DETAIL messages
* transformers-20366 (https://github.com/huggingface/transformers/issues/20366): a pretty-printed fingerprint
* deepspeed-4890 (https://github.com/deepspeedai/DeepSpeed/issues/4890): ProcessGroupWrapper "Running collective" lines

and fixtures/pastes/logs/prime-diloco-68_gloo_enforce_preamble_length.txt (gloo's size check).
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.parsers.logs.nccl import match_nccl
from hangdoc.analyzer.parsers.logs.pg_wrapper import match_wrapper
from hangdoc.analyzer.parsers.logs.pipelining import match_pipelining
from hangdoc.analyzer.parsers.logs.size_checks import match_size_check
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.vocabulary import EventKind
from tests.unit.logs.helpers import ROOT, diagnose, events, fields, findings_of, parse

CASES = ROOT / "fixtures" / "cases"


def _case(case: str, name: str) -> Path:
    return CASES / case / name


def test_pipelining_shape_inference_recv_lines_per_rank() -> None:
    parsed = parse(_case("torchtitan-1492-pp-shape-inference-hang", "console.txt"))
    found = events(parsed, EventKind.PHASE.value)
    recv = {r: fields(e) for r, e in found if r is not None and fields(e).get("p2p") == "recv"}
    assert sorted(recv) == [4, 5, 6, 7]
    assert recv[4]["stage"] == 2 and recv[4]["peer_stage"] == 1
    assert recv[7]["peer_stage"] == 2


def test_pipelining_send_line_and_non_p2p_lines() -> None:
    line = "V0731 00:56:28.929000 3080918 torch/distributed/pipelining/stage.py:1380] Shape inference: stage 0 sending to stage 1"
    hit = match_pipelining(line)
    assert hit is not None and fields(hit)["p2p"] == "send" and fields(hit)["peer_stage"] == 1
    # the first stage skips its recv: no transfer to wait in
    assert (
        match_pipelining(
            "Shape inference: stage 0 skipping recv, because shape info passed in via `args`"
        )
        is None
    )
    assert (
        match_pipelining("Finished pipeline stage init, self.stage_index=3, self.is_first=False")
        is None
    )


def test_nccl_socket_message_truncated_is_a_size_mismatch() -> None:
    parsed = parse(_case("torchtitan-1681-pp-message-truncated", "nccl_warn.txt"))
    (_, event), *_ = events(parsed, EventKind.COLLECTIVE_MISMATCH.value)
    f = fields(event)
    assert f["error"] == "size_mismatch"
    assert (f["bytes_received"], f["bytes_expected"], f["peer"]) == (8, 4, "10.249.23.66")


def test_nccl_ib_collective_mismatch_error_and_other_warns() -> None:
    # net_ib.cc's WARN format ("req %d/%d tag %x peer %s collective mismatch error, local
    # size %d remote size %d"); the header as NCCL prints it.
    ib = "node1:2018:2090 [2] transport/net_ib.cc:788 NCCL WARN NET/IB : req 0/1 tag 7 peer 10.0.0.2<5343> collective mismatch error, local size 4096 remote size 2048"
    hit = match_nccl(ib)
    assert hit is not None and hit.kind is EventKind.COLLECTIVE_MISMATCH
    assert fields(hit)["error"] == "size_mismatch" and fields(hit)["bytes_received"] == 4096
    closed = "node1:2018:2090 [2] misc/socket.cc:49 NCCL WARN NET/Socket : peer 10.0.0.2<5343> connection closed by remote peer"
    other = match_nccl(closed)
    assert other is None or other.kind is not EventKind.COLLECTIVE_MISMATCH


def test_two_hard_wrapped_detail_messages_stay_two_records() -> None:
    parsed = parse(_case("jotr-4-collate-drops-samples-allgather-shape", "error.txt"))
    found = [fields(e) for _, e in events(parsed, EventKind.COLLECTIVE_MISMATCH.value)]
    shapes = {f["side_a.rank"]: f["side_a.shape"] for f in found}
    assert shapes == {0: "[41, 256, 8, 8, 8]", 1: "[40, 256, 8, 8, 8]"}


def test_pretty_printed_fingerprint_is_joined() -> None:
    parsed = parse(_case("transformers-20366-evaluate-allgather-mismatch", "traceback.txt"))
    (_, event), *_ = events(parsed, EventKind.COLLECTIVE_MISMATCH.value)
    f = fields(event)
    assert (f["side_a.rank"], f["side_a.op"], f["side_a.shape"]) == (
        1,
        "ALLGATHER",
        "[1, 279, 44, 72]",
    )


def test_one_sided_gather_reads_as_size_mismatch_with_low_confidence() -> None:
    diagnosis = diagnose(_case("transformers-20366-evaluate-allgather-mismatch", "traceback.txt"))
    (finding,) = findings_of(diagnosis, "HD035")
    assert finding.category.value == "collective_size_or_dtype_mismatch"
    assert "Only the reporting rank's fingerprint" in finding.explanation  # a presumption


def test_wrapper_running_collective_lines_keep_the_last_per_rank() -> None:
    parsed = parse(_case("deepspeed-4890-moe-collective-fingerprint", "console.txt"))
    issued = events(parsed, EventKind.COLLECTIVE_ISSUED.value)
    last = {r: fields(e)["fingerprint.seq"] for r, e in issued}
    assert last == {0: 1277, 1: 1277, 2: 1276}
    diagnosis = diagnose(_case("deepspeed-4890-moe-collective-fingerprint", "console.txt"))
    (finding,) = findings_of(diagnosis, "HD035")
    assert finding.culprit_ranks == (2,)
    assert finding.category.value == "rank_divergence_collective_vs_noncollective"


def test_wrapper_lines_in_step_give_no_finding(tmp_path: Path) -> None:
    text = "".join(
        f"[I ProcessGroupWrapper.cpp:562] [Rank {r}] Running collective: CollectiveFingerPrint(SequenceNumber=1277, OpType=ALLREDUCE, TensorShape=[], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt)))\n"
        for r in range(3)
    )
    path = tmp_path / "console.txt"
    path.write_text(text)
    assert findings_of(diagnose(path), "HD035") == []
    assert match_wrapper("[Rank 0] Running collective: ALLREDUCE") is None


def test_send_and_recv_at_one_seqnum_are_a_pair_not_a_mismatch(tmp_path: Path) -> None:
    # The watchdog's line (FORMATS.md §2) on the two ends of one transfer of a P2P group.
    lines = [
        "[rank0]:[E923 14:05:28.953176853 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=SEND, NumelIn=7208960, NumelOut=7208960, Timeout(ms)=600000) ran for 600003 milliseconds before timing out.",
        "[rank1]:[E923 14:05:28.953176853 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=RECV, NumelIn=7208960, NumelOut=7208960, Timeout(ms)=600000) ran for 600003 milliseconds before timing out.",
    ]
    path = tmp_path / "console.txt"
    path.write_text("\n".join(lines) + "\n")
    diagnosis = diagnose(path)
    assert findings_of(diagnosis, "HD033") == []


def test_p2p_frames_are_told_from_collective_frames() -> None:
    from hangdoc.analyzer.model import Frame
    from hangdoc.rules.hd048_p2p_wait_evidence import _classify

    c10d = "/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py"
    assert _classify(Frame("all_reduce", c10d)) is None
    assert _classify(Frame("recv", c10d)) is True
    assert _classify(Frame("_coalescing_manager", c10d)) is False
    assert (
        _classify(Frame("_step_microbatches", "/x/torch/distributed/pipelining/schedules.py"))
        is True
    )
    assert (
        _classify(Frame("c10d::ProcessGroupNCCL::endCoalescing", "libtorch_cuda.so", native=True))
        is False
    )
    assert (
        _classify(Frame("c10d::ProcessGroupNCCL::allreduce", "libtorch_cuda.so", native=True))
        is None
    )
    assert (
        _classify(Frame("recv_backward", "/x/megatron/core/pipeline_parallel/schedules.py")) is True
    )


def test_a_stage_computing_inside_the_schedule_is_not_in_a_transfer() -> None:
    from hangdoc.analyzer.model import Frame, ProcessEvidence, StackSample, ThreadStack
    from hangdoc.rules.hd048_p2p_wait_evidence import _stack_hit

    stage = "/x/torch/distributed/pipelining/stage.py"
    computing = (
        Frame("forward", "/x/torch/nn/modules/linear.py", 125),
        Frame("forward_one_chunk", stage, 600),
        Frame("_step_microbatches", "/x/torch/distributed/pipelining/schedules.py", 700),
    )
    waiting = (Frame("recv", "/x/torch/distributed/distributed_c10d.py", 2000), *computing[1:])

    def process(frames: tuple[Frame, ...]) -> ProcessEvidence:
        thread = ThreadStack(frames=frames, is_main=True)
        return ProcessEvidence(rank=1, stack_samples=[StackSample(0, None, (thread,))])

    assert _stack_hit(process(computing)) is None
    hit = _stack_hit(process(waiting))
    assert hit is not None and hit.strong and hit.frame.function == "recv"


def test_gloo_preamble_length_enforce_is_a_size_mismatch() -> None:
    # fixtures/pastes/logs/prime-diloco-68_gloo_enforce_preamble_length.txt: verbatim from
    # https://github.com/PrimeIntellect-ai/prime-diloco/issues/68; the check is gloo's
    # GLOO_ENFORCE_LE(op.preamble.length, op.nbytes) in tcp/pair.cc (gh:pytorch/gloo/pull/456
    # words it "Is there a distributed collective mismatch in your code?").
    paste = (
        ROOT / "fixtures" / "pastes" / "logs" / "prime-diloco-68_gloo_enforce_preamble_length.txt"
    )
    parsed = parse(paste)
    (_, event), *_ = events(parsed, EventKind.COLLECTIVE_MISMATCH.value)
    f = fields(event)
    assert (f["error"], f["bytes_received"], f["bytes_expected"]) == (
        "size_mismatch",
        1046204,
        1040256,
    )
    (finding,) = findings_of(diagnose(paste), "HD035")
    assert finding.category.value == "collective_size_or_dtype_mismatch"
    assert finding.title.startswith("gloo received")
    # another enforce of the same transport says nothing about sizes
    other = "  what():  [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:598] buf. Cannot lock pointer to unbound buffer"
    assert match_size_check(other) is None


# net_socket.cc 2.10-2.11: WARN("NET/Socket : peer %s message truncated : receiving %d bytes
# instead of %d", …); a paste that broke the line after "truncated :" (nccl issue 626's form)
_BROKEN_TRUNCATED = (
    "h1:300:310 [0] transport/net_socket.cc:424 NCCL WARN NET/Socket : peer 10.0.0.9<40112> message truncated :\n"
    "receiving 4096 bytes instead of 1024\n"
)


def test_nccl_warn_broken_after_its_separator_is_read_with_the_next_line(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text(_BROKEN_TRUNCATED)
    (_, event), *_ = events(parse(log), EventKind.COLLECTIVE_MISMATCH.value)
    f = fields(event)
    assert f["error"] == "size_mismatch" and f["peer"] == "10.0.0.9"
    assert (f["bytes_received"], f["bytes_expected"]) == (4096, 1024)


def test_next_line_that_does_not_complete_the_warn_is_read_on_its_own(tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text(
        _BROKEN_TRUNCATED.splitlines()[0]
        + "\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    parsed = parse(log)
    assert not events(parsed, EventKind.COLLECTIVE_MISMATCH.value)
    assert events(parsed, EventKind.CUDA_OOM.value)


def test_cuda_refusing_peer_access_is_a_typed_sign_in_each_form(tmp_path: Path) -> None:
    """libcudart's string for cudaErrorPeerAccessUnsupported (217), as torch prints it
    ("CUDA error: %s", c10/cuda) and NCCL (cudawrap.h "Cuda failure %d '%s'", alone on its
    line after torch's "Last error:"); another CUDA error has no such sign."""
    log = tmp_path / "err.log"
    log.write_text(
        "RuntimeError: CUDA error: peer access is not supported between these two devices\n"
        "\n"
        "Cuda failure 217 'peer access is not supported between these two devices'\n"
        "\n"
        "Cuda failure 1 'invalid argument'\n"
    )
    found = [e for _, e in events(parse(log), EventKind.CUDA_ERROR.value)]
    refused = [e for e in found if Sign.PEER_ACCESS_UNSUPPORTED in e.payload.signs]
    assert len(refused) == 2 and len(found) == 3


# torch/csrc/distributed/c10d/reducer.cpp verify_params_across_processes, DDP's check at
# construction that every rank holds the same parameters: the count (all-gathered; the
# first rank i in order whose count differs from the reporter's is named) and the shapes
# (rank 0's, broadcast). Lines written from its c10::str calls; the casebook holds the
# count message twice (streamofsearch-5, transformers-30702).
def test_other_parameter_words_are_not_the_ddp_check() -> None:
    assert match_size_check("Rank 1 has 212 params in its optimizer state") is None
    assert match_size_check("the shapes appear not to match any checkpoint key") is None


def test_ddp_param_check_is_a_size_mismatch_with_the_named_rank() -> None:
    diagnosis = diagnose(_case("streamofsearch-5-ddp-rank0-zero-params", "console.txt"))
    found = findings_of(diagnosis, "HD035")
    assert [f.category.value for f in found] == ["collective_size_or_dtype_mismatch"]
    assert found[0].culprit_ranks == (0,)
