"""The stage NCCL's own source lines show (parsers/catalog/stages.py over the table that
scripts/catalog/stages.py generates from every NCCL release).

The places below are real: each chain is copied from a casebook artifact (named on each
test), and the functions named in the comments are those of the NVIDIA/nccl release tags
the table was read from.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hangdoc.analyzer.parsers.catalog.stages import chain_stage, table
from hangdoc.analyzer.parsers.logs.nccl_stage import mark_stages, printed_version
from hangdoc.analyzer.payloads.nccl import NcclTransportError, NcclVersion, NcclWarn, SourceStage

SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"

# fixtures/cases/msswift-6107-megatron-ibv-reg-mr-invalid/console.txt
IBV_REG_MR = (
    "misc/ibvwrap.cc:182",
    "transport/net_ib.cc:1872",
    "transport/net_ib.cc:1920",
    "transport/net.cc:853",
)
# fixtures/cases/nccl-928-h100-ib-error4-acs-gdr: a work completion with an error status
# found while the proxy progressed a collective.
IB_COMPLETION = (
    "transport/net_ib.cc:1295",
    "transport/net.cc:1008",
    "proxy.cc:679",
    "proxy.cc:858",
)


def test_a_chain_narrows_the_releases_to_those_with_calls_at_all_its_lines() -> None:
    # net.cc:853 alone: recvProxyFree in 2.17.1, sendProxyFree in 2.18, sendProxyConnect in
    # 2.27: the releases disagree, so the line shows nothing.
    assert chain_stage(("transport/net.cc:853",)) is None
    # With the IB lines under it only 2.27.3 has calls at all four (ncclIbRegMrDmaBufInternal,
    # ncclIbRegMrDmaBuf: registration, either stage), and there 853 is sendProxyConnect.
    assert chain_stage(IBV_REG_MR) is SourceStage.SETUP


def test_the_data_path_is_shown_where_every_release_agrees() -> None:
    assert chain_stage(IB_COMPLETION) is SourceStage.DATA


def test_the_innermost_line_with_a_stage_decides() -> None:
    # fixtures/cases/llamafactory-8036-wsl2-nccl-shm-cuda-oom: the shared-memory transport's
    # set-up, reached from a group's launch (group.cc) on a first collective.
    chain = ("transport/shm.cc:153", "transport.cc:35", "transport.cc:147", "group.cc:148")
    assert chain_stage(chain) is SourceStage.SETUP


def test_a_printed_version_narrows_and_an_unknown_one_shows_nothing() -> None:
    assert chain_stage(IBV_REG_MR, "2.27.3") is SourceStage.SETUP
    # 2.18.x has no calls at the IB lines: no release is left.
    assert chain_stage(IBV_REG_MR, "2.18.3") is None
    # A version the table does not hold: its lines are not known.
    assert chain_stage(("init.cc:1350",), "9.9.9") is None
    # "NCCL version 2.21.5+cuda12.4": the build suffix is not the release.
    assert chain_stage(IBV_REG_MR, "2.27.3+cuda12.9") is SourceStage.SETUP


def test_places_are_read_as_nccl_and_builds_print_them() -> None:
    held = table()
    site = held.resolve("transport/net.cc:853")
    assert site is not None
    assert held.resolve("/tmp/build/nccl/src/transport/net.cc:853") == site
    assert held.resolve("not a place") is None
    assert held.resolve("transport/net.cc:999999") is None


def test_lines_outside_the_table_show_nothing() -> None:
    assert chain_stage(("ib_plugin.c:1615",)) is None  # a network plugin's own source
    assert chain_stage(()) is None


def test_the_scanner_marks_a_warn_with_its_chain_stage() -> None:
    class Event:
        def __init__(self, payload: object) -> None:
            self.payload = payload

    warn = NcclTransportError(
        message="Call to ibv_reg_mr_iova2 failed with error Invalid argument",
        where=IBV_REG_MR[0],
        rc_chain=IBV_REG_MR[1:],
    )
    other = NcclWarn(
        message="NET/IB : Got completion", where=IB_COMPLETION[0], rc_chain=IB_COMPLETION[1:]
    )
    events = [Event(warn), Event(other)]
    mark_stages(events)  # type: ignore[arg-type]
    assert events[0].payload.stage is SourceStage.SETUP  # type: ignore[attr-defined]
    assert events[1].payload.stage is SourceStage.DATA  # type: ignore[attr-defined]
    # A transport error keeps its kind: HD200 reads the stage; a plain WARN in the data
    # path is not marked set-up.
    assert not events[0].payload.setup  # type: ignore[attr-defined]
    assert not events[1].payload.setup  # type: ignore[attr-defined]
    # A chain whose WARN the paste lost (its first "-> rc" line stands for it) is set-up's
    # when its lines show set-up, as one from a set-up file is.
    headless = [Event(NcclWarn(where=IBV_REG_MR[1], rc_chain=IBV_REG_MR[2:]))]
    mark_stages(headless)  # type: ignore[arg-type]
    assert headless[0].payload.stage is SourceStage.SETUP  # type: ignore[attr-defined]
    assert headless[0].payload.setup  # type: ignore[attr-defined]
    # Two jobs' versions in one text narrow nothing.
    assert printed_version([Event(NcclVersion(version="2.27.3"))]) == "2.27.3"  # type: ignore[list-item]
    two = [Event(NcclVersion(version="2.27.3")), Event(NcclVersion(version="2.18.3"))]
    assert printed_version(two) is None  # type: ignore[arg-type]


def test_the_generator_gives_functions_their_stage_by_family() -> None:
    sys.path.insert(0, str(SCRIPTS))
    try:
        from catalog.stages import stage_of
    finally:
        sys.path.remove(str(SCRIPTS))
    assert stage_of("transport/net.cc", "sendProxyConnect") == "setup"
    assert stage_of("transport/net.cc", "recvProxyProgress") == "data"
    assert stage_of("transport/net_ib.cc", "ncclIbRegMrDmaBuf") == ""  # both stages register
    assert stage_of("init.cc", "ncclCommInitRankFunc") == "setup"
    assert stage_of("init.cc", "commFree") == ""  # teardown
    assert stage_of("group.cc", "ncclCollPreconnectFunc") == "setup"  # a first collective connects
    assert stage_of("enqueue.cc", "ncclEnqueueCheck") == "data"
    assert stage_of("misc/socket.cc", "socketProgress") == ""  # the bootstrap's I/O too


def test_function_stage_reads_the_table_by_function() -> None:
    # src/graph/xml.h xmlGetAttrStr (WARN "Attribute %s of node %s not found"): the
    # topology reader, set-up in every release that has it.
    from hangdoc.analyzer.parsers.catalog.stages import function_stage

    assert function_stage("src/graph/xml.h", "xmlGetAttrStr") is SourceStage.SETUP
    assert function_stage("graph/xml.h", "xmlGetAttrStr") is SourceStage.SETUP
    # A file the table does not hold, or a function it does not know: nothing shown.
    assert function_stage("src/misc/nvmlwrap.cc", "ncclNvmlEnsureInitialized") is None
    assert function_stage("graph/xml.h", "noSuchFunction") is None


def test_message_stage_of_a_last_error_without_a_place() -> None:
    # torch's "Last error:" is NCCL's last WARN without its header: its stage is that of
    # the functions the catalog holds the message from.
    from hangdoc.analyzer.parsers.logs.nccl_stage import message_stage

    # graph/xml.h xmlGetAttrStr: topology detection.
    assert message_stage("Attribute busid of node nic not found") is SourceStage.SETUP
    # misc/nvmlwrap.cc (.cu before 2.8): loading NVML, which only set-up does.
    assert message_stage("Failed to open libnvidia-ml.so.1") is SourceStage.SETUP
    # A CUDA failure any CUDACHECK prints, in any stage; no NCCL message at all.
    assert message_stage("Cuda failure 1 'invalid argument'") is None
    assert message_stage("Segmentation fault") is None


def test_a_transport_warn_without_a_place_takes_its_message_stage() -> None:
    class Event:
        def __init__(self, payload: object) -> None:
            self.payload = payload

    # src/misc/socket.cc ncclSocketInit (2.16.2-2.30.7): its callers are the bootstrap,
    # the transports' connect/listen/accept and the proxies' connect: set-up.
    init = NcclTransportError(
        message="ncclSocketInit: connecting to address  with family 0 is neither AF_INET(2) "
        "nor AF_INET6(10)",
        from_last_error=True,
    )
    # socketProgress: the socket I/O of every stage (no stage in the table).
    closed = NcclTransportError(
        message="socketProgress: Connection closed by remote peer node-b<51234>",
        from_last_error=True,
    )
    # A plain WARN without a place is left as the parser typed it.
    plain = NcclWarn(message="Attribute busid of node nic not found")
    events = [Event(init), Event(closed), Event(plain)]
    mark_stages(events)  # type: ignore[arg-type]
    assert events[0].payload.stage is SourceStage.SETUP  # type: ignore[attr-defined]
    assert not events[0].payload.setup  # type: ignore[attr-defined]  # HD200 reads the stage
    assert events[1].payload.stage is None  # type: ignore[attr-defined]
    assert events[2].payload is plain


def test_a_creation_call_named_by_the_error_is_set_up() -> None:
    # Horovod's nccl_operations.cc: op_name + " failed: " + ncclGetErrorString.
    from hangdoc.analyzer.parsers.logs import recognise_line
    from hangdoc.analyzer.payloads.nccl import NcclError

    class _Ev:
        def __init__(self, payload: object) -> None:
            self.payload = payload

    hit = recognise_line("UnknownError:  ncclCommInitRank failed: unhandled system error")
    assert hit is not None and isinstance(hit.payload, NcclError)
    events = [_Ev(hit.payload)]
    mark_stages(events)  # type: ignore[arg-type]
    assert isinstance(events[0].payload, NcclError)
    assert events[0].payload.stage is SourceStage.SETUP


# fixtures/cases/cpm2-finetune-2-nccl-shm-transport-setup: the shared-memory transport's
# set-up failing inside communicator creation, unwound up to NCCL 2.8's async init thread
# (group.cc ncclAsyncThreadMain's NCCLCHECKTHREAD, "-> 2 [Async thread]").
SHM_SETUP_ASYNC = (
    "transport/shm.cc:101",
    "transport.cc:30",
    "transport.cc:76",
    "init.cc:813",
    "init.cc:878",
    "group.cc:72",
)


def test_a_chain_through_the_async_init_thread_keeps_its_set_up_stage() -> None:
    # group.cc:72 is ncclAsyncThreadMain's check in 2.8.3 and 2.8.4, the only releases with
    # calls at every line of the chain: shm.cc:101 (shmRecvSetup) decides.
    assert chain_stage(SHM_SETUP_ASYNC) is SourceStage.SETUP
    assert chain_stage(SHM_SETUP_ASYNC, "2.8.4") is SourceStage.SETUP


def test_a_multi_line_macro_does_not_hide_the_function_after_it() -> None:
    # NCCL 2.8's src/group.cc: NCCLCHECKTHREAD and CUDACHECKTHREAD are "do { … } while(0)"
    # macros continued over lines with "\", then ncclAsyncThreadMain, a function returning
    # a pointer, calls NCCLCHECKTHREAD.
    sys.path.insert(0, str(SCRIPTS))
    try:
        from catalog import csource
    finally:
        sys.path.remove(str(SCRIPTS))
    code = (
        "#define NCCLCHECKTHREAD(a) do { \\\n"
        "  if ((args->ret = (a)) != ncclSuccess) { \\\n"
        '    INFO(NCCL_INIT,"%s:%d -> %d [Async thread]", __FILE__, __LINE__, args->ret); \\\n'
        "    return args; \\\n"
        "  } \\\n"
        "} while(0)\n"
        "\n"
        "void* ncclAsyncThreadMain(void* args_) {\n"
        "  struct ncclAsyncArgs* args = (struct ncclAsyncArgs*)args_;\n"
        "  NCCLCHECKTHREAD(args->init.func(args->init.newcomm));\n"
        "  return args;\n"
        "}\n"
    )
    spans = csource.function_spans(code)
    at = code.index("NCCLCHECKTHREAD(args->init")
    assert csource.enclosing(spans, at) == "ncclAsyncThreadMain"
    assert csource.enclosing(spans, code.index("INFO(")) == "#define NCCLCHECKTHREAD"


def test_a_function_only_set_up_calls_is_set_up_though_it_sits_in_enqueue() -> None:
    # src/enqueue.cc ncclInitKernelsForDevice reads every kernel's attributes
    # (CUDACHECKGOTO around cudaFuncGetAttributes: enqueue.cc:42 in 2.27.5, "Cuda failure
    # 'named symbol not found'" where the build has no kernel the GPU can load); init.cc's
    # ncclCommInitRankFunc is its only caller in every release, so the line is set-up's.
    assert chain_stage(("enqueue.cc:42",), "2.27.5") is SourceStage.SETUP
    assert chain_stage(("src/enqueue.cc:42",)) is SourceStage.SETUP
    # 2.18.1's enqueue.cc:115, the same check (a "no kernel image is available" there); in
    # 2.3's and 2.4's releases the line is ncclCpuBarrierIn's, a collective's: without the
    # printed version the line shows nothing.
    assert chain_stage(("enqueue.cc:115",), "2.18.1") is SourceStage.SETUP
    assert chain_stage(("enqueue.cc:115",)) is None
    sys.path.insert(0, str(SCRIPTS))
    try:
        from catalog.stages import stage_of
    finally:
        sys.path.remove(str(SCRIPTS))
    # By name alone the enqueue files' "Init" functions are neither stage (a work element's
    # registration, initCollWorkElemReg, runs as a collective is enqueued): only the
    # callers found in the sources make one set-up.
    assert stage_of("enqueue.cc", "ncclInitKernelsForDevice") == ""
    callees = frozenset({"ncclInitKernelsForDevice"})
    assert stage_of("enqueue.cc", "ncclInitKernelsForDevice", callees) == "setup"
    assert stage_of("enqueue.cc", "initCollWorkElemReg", callees) == ""
    assert stage_of("enqueue.cc", "ncclEnqueueCheck", callees) == "data"


MIRROR = Path("/work/.mirror/NVIDIA+nccl/repo")


def test_the_callers_found_in_the_sources_decide() -> None:
    import pytest

    if not MIRROR.is_dir():
        pytest.skip("no NVIDIA/nccl mirror here")
    sys.path.insert(0, str(SCRIPTS))
    try:
        from catalog.nccl import release_tags
        from catalog.stages import setup_only_callees
    finally:
        sys.path.remove(str(SCRIPTS))
    tags = [t for t in release_tags(MIRROR) if t[0] in ("2.19.3", "2.21.5", "2.27.5")]
    found = setup_only_callees(MIRROR, tags, {"ncclInitKernelsForDevice", "initCollWorkElemReg"})
    # initCollWorkElemReg is called while a collective is enqueued (2.21's enqueue.cc)
    assert found == frozenset({"ncclInitKernelsForDevice"})


_KERNELS_WARN = "node7:2866:3081 [1] enqueue.cc:42 NCCL WARN Cuda failure 'named symbol not found'"


def test_a_kernel_lookup_failing_as_the_communicator_comes_up_is_set_up(tmp_path: Path) -> None:
    """NCCL's own lines (debug.c's "host:pid:tid [dev] file:line NCCL WARN …" header, its
    INFO version line): the kernels' attributes read while the communicator is created."""
    from hangdoc.analyzer.engine import analyze
    from hangdoc.analyzer.loading.loader import load_paths

    path = tmp_path / "worker.log"
    path.write_text(
        "node7:2866:2866 [1] NCCL INFO NCCL version 2.27.5+cuda12.9\n"
        "node7:2866:2866 [1] NCCL INFO Comm config Blocking set to 1\n"
        f"{_KERNELS_WARN}\n"
    )
    primary = analyze(load_paths([path])).primary
    assert primary.rule == "HD206"
    assert primary.category.value == "nccl_init_or_bootstrap_hang"


def test_the_same_warn_after_collectives_ran_is_not_read_as_set_up(tmp_path: Path) -> None:
    from hangdoc.analyzer.engine import analyze
    from hangdoc.analyzer.loading.loader import load_paths

    path = tmp_path / "worker.log"
    path.write_text(
        "node7:2866:2866 [1] NCCL INFO NCCL version 2.27.5+cuda12.9\n"
        "node7:2866:2866 [1] NCCL INFO AllReduce: opCount 3 sendbuff 0x7f00 recvbuff 0x7f00 "
        "count 1024 datatype 7 op 0 root 0 comm 0x55aa [nranks=2] stream 0x55bb\n"
        f"{_KERNELS_WARN}\n"
    )
    assert all(f.rule != "HD206" for f in analyze(load_paths([path])).findings)
