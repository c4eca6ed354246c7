"""Set-up failures read from where their message is printed, and a store failure that is
not set-up.

* vLLM's csrc/custom_all_reduce.cuh checks the CUDA calls that share its buffers between
  the GPUs of a tensor-parallel group (cudaIpcOpenMemHandle, cudaIpcGetMemHandle) with
  the NCCL-example CUDACHECK macro, ``printf("Failed: Cuda error %s:%d '%s'\\n", __FILE__,
  __LINE__, cudaGetErrorString(e)); exit(EXIT_FAILURE)``: a failure there is the custom
  all-reduce's set-up failing (HD206), not a crash; an out-of-memory or a hardware error
  there keeps its own meaning, and the same macro in another file stays a CUDA failure.
* torch 1.x includes c10d's headers by a relative path, so a check in NCCLUtils.hpp prints
  ``…/torch/lib/c10d/../c10d/NCCLUtils.hpp:82``: the same file, whose line 82 sits in
  NCCLComm::create (ncclCommInitRank) in the releases with a check there. There an
  ncclInvalidArgument is the creation refusing its arguments, set-up; at a collective's
  launch it is a bad buffer and stays out of HD206.
* ProcessGroupNCCL's heartbeat monitor logs "Failed to check the \\"should dump\\" flag on
  TCPStore, (maybe TCPStore server has shut down too early), with error: …" when its poll
  of the store fails: only a constructed group runs that thread, so it is no evidence of
  a set-up that did not complete (HD201).

Paths, times and ranks are made up; the formats are the sources' named above.
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.analyzer.parsers.catalog.torch_stages import site_stage
from hangdoc.analyzer.parsers.logs.torch_pg import match_torch
from hangdoc.analyzer.payloads.nccl import SourceStage
from hangdoc.analyzer.payloads.torch_pg import StoreTimeout


def _primary(tmp_path: Path, text: str) -> tuple[str, str]:
    path = tmp_path / "worker.log"
    path.write_text(text, encoding="utf-8")
    primary = analyze(load_paths([path])).primary
    return primary.rule, str(primary.category)


def test_custom_all_reduce_ipc_failure_is_set_up(tmp_path: Path) -> None:
    rule, category = _primary(
        tmp_path, "Failed: Cuda error /src/vllm/csrc/custom_all_reduce.cuh:301 'invalid argument'\n"
    )
    assert (rule, category) == ("HD206", "nccl_init_or_bootstrap_hang")


def test_custom_all_reduce_out_of_memory_stays_out_of_memory(tmp_path: Path) -> None:
    rule, _ = _primary(
        tmp_path, "Failed: Cuda error /src/vllm/csrc/custom_all_reduce.cuh:301 'out of memory'\n"
    )
    assert rule != "HD206"


def test_the_macro_in_another_file_is_no_set_up(tmp_path: Path) -> None:
    rule, _ = _primary(tmp_path, "Failed: Cuda error /src/ext/kernels.cu:88 'invalid argument'\n")
    assert rule != "HD206"


def test_a_relative_include_prints_the_same_file() -> None:
    place = "/opt/conda/conda-bld/pytorch_1/work/torch/lib/c10d/../c10d/NCCLUtils.hpp:82"
    assert site_stage(place) is SourceStage.SETUP
    assert site_stage(place.replace("/../c10d/", "/")) is SourceStage.SETUP


_DDP = (
    "Traceback (most recent call last):\n"
    '  File "/opt/conda/lib/python3.7/site-packages/torch/nn/parallel/distributed.py", '
    "line 549, in _distributed_broadcast_coalesced\n"
    "    dist._broadcast_coalesced(self.process_group, tensors, buffer_size)\n"
    "RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1/work/torch/lib/c10d/"
    "../c10d/{place}, invalid argument, NCCL version 2.4.8\n"
)


def test_invalid_argument_at_communicator_creation_is_set_up(tmp_path: Path) -> None:
    rule, category = _primary(tmp_path, _DDP.format(place="NCCLUtils.hpp:82"))
    assert (rule, category) == ("HD206", "nccl_init_or_bootstrap_hang")


def test_invalid_argument_at_an_unknown_site_is_no_set_up(tmp_path: Path) -> None:
    # no held release has a check at this line: the site shows no stage
    rule, _ = _primary(tmp_path, _DDP.format(place="NCCLUtils.hpp:999"))
    assert rule != "HD206"


_MONITOR = (
    "[rank1]:[W1229 22:06:38.480071392 ProcessGroupNCCL.cpp:1662] [PG ID 0 PG GUID 0 Rank 1] "
    'Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server has shut '
    "down too early), with error: {why}"
)


def test_the_heartbeat_monitor_store_failure_is_marked() -> None:
    for why in ("Broken pipe", "Failed to recv, got 0 bytes. Connection was likely closed."):
        hit = match_torch(_MONITOR.format(why=why).split("] ", 1)[1])
        assert hit is not None and isinstance(hit.payload, StoreTimeout)
        assert hit.payload.by_monitor, why
    other = match_torch("DistNetworkError: Broken pipe")
    assert other is not None and isinstance(other.payload, StoreTimeout)
    assert not other.payload.by_monitor


def test_the_heartbeat_monitor_store_failure_is_no_incomplete_set_up(tmp_path: Path) -> None:
    rule, _ = _primary(tmp_path, _MONITOR.format(why="Broken pipe") + "\n")
    assert rule != "HD201"
    # the same lost connection without the monitor's words: the store was up and its host
    # went away (StoreTimeout.lost); nothing places it in set-up either
    rule, _ = _primary(
        tmp_path,
        "[rank1]:[W1229 22:06:38.558655037 TCPStore.cpp:106] [c10d] sendBytes failed on "
        "SocketImpl(fd=67, addr=[h]:36214, remote=[h]:43145): Broken pipe\n",
    )
    assert rule != "HD201"


def test_the_same_processs_later_store_failure_goes_with_the_monitor(tmp_path: Path) -> None:
    # the monitor's line with its rank prefix cut, then c10d's own line of the same lost
    # connection: both after the group was constructed
    text = (
        _MONITOR.format(why="Broken pipe").split("] ", 1)[1]
        + "\n[rank1]:[W1229 22:06:38.558655037 TCPStore.cpp:106] [c10d] sendBytes failed on "
        "SocketImpl(fd=67, addr=[h]:36214, remote=[h]:43145): Broken pipe\n"
    )
    rule, _ = _primary(tmp_path, text)
    assert rule != "HD201"
