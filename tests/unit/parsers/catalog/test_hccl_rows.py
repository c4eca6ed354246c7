"""HCCL's and torch_npu's rows (scripts/catalog/ascend.py) and what the scanner makes of
their lines.

HCCL (github.com/hicann/hcomm) prints its errors through ``HCCL_ERROR(format, …)``
(src/legacy/ascend910/pub_inc/log.h), which CANN's plog writes as ``[ERROR]
HCCL(pid,proc):date [file.cc:line] [tid]<format>``; its error manager prints ``EIxxxx:
[PID: n] <date> <ErrMessage>`` from the table in src/common/error_code/error_code.cc.
The printed lines below are from a reporter's plog (the casebook's train case
vllm-ascend-9447-hccl-link-timeout) or, where said, written in the form of the named
source site.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

from hangdoc.analyzer.parsers.logs.scanner import Scanner
from hangdoc.analyzer.payloads.nccl import NcclTransportError, NcclWarn
from hangdoc.analyzer.vocabulary import EventKind

SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"


def _ascend() -> ModuleType:
    sys.path.insert(0, str(SCRIPTS))
    try:
        from catalog import ascend
    finally:
        sys.path.remove(str(SCRIPTS))
    return ascend


def _events(text: str) -> list[tuple[EventKind, object]]:
    scanner = Scanner()
    for number, line in enumerate(text.split("\n"), 1):
        scanner.feed(number, line)
    return [(e.kind, e.payload) for e in scanner.finish()]


def test_the_error_managers_table_gives_each_code_its_format_and_slot_names() -> None:
    from hangdoc.analyzer.parsers.catalog.template import display

    code = (
        'const std::string hcomm_g_msg = R"(\n{ "error_info_list": [\n  {\n'
        '    "errClass": "HCCL Errors",\n    "errTitle": "Communication_Error_Get_Socket",\n'
        '    "ErrCode": "EI0006",\n'
        '    "ErrMessage": "Getting socket times out. Reason: %s",\n'
        '    "Arglist": "reason",\n  }\n]}\n)";\n'
    )
    sites = _ascend().error_table_sites("src/common/error_code/error_code.cc", code, "9.0.0")
    assert [(s.function, display(tuple(s.parts))) for s in sites] == [
        ("EI0006", "Getting socket times out. Reason: <reason>")
    ]


def test_a_link_establishment_timeout_is_a_setup_failure() -> None:
    # hccl_socket_manager.cc (WaitLinkEstablish): HCCL_ERROR("[Wait][LinkEstablish]wait
    # socket establish timeout, role[%u] rank[%u] timeout[%lld s]", …)
    line = (
        "[ERROR] HCCL(106335,):2026-05-21-21:39:58.705.534 [hccl_socket_manager.cc:796] "
        "[128655][Wait][LinkEstablish]wait socket establish timeout, role[0] rank[0] "
        "timeout[120 s]"
    )
    warns = [p for k, p in _events(line) if k is EventKind.NCCL_WARN]
    assert len(warns) == 1
    assert isinstance(warns[0], NcclWarn) and warns[0].setup


def test_an_error_code_line_of_a_socket_timeout_is_a_setup_failure() -> None:
    # error_code.cc's EI0006 as the error manager prints it (EIxxxx: [PID: n] <date> …)
    line = (
        "EI0006: [PID: 4242] 2025-01-01-00:00:00.000.000 Getting socket times out. "
        "Reason: the peer did not connect."
    )
    warns = [p for k, p in _events(line) if k is EventKind.NCCL_WARN]
    assert len(warns) == 1 and isinstance(warns[0], NcclWarn) and warns[0].setup


def test_an_error_cqe_is_a_transport_error_not_a_setup_failure() -> None:
    # error_code.cc's EI0013, in the printed form
    line = (
        "EI0013: [PID: 7] 2025-01-01-00:00:00.000.000 An error CQE occurred during operator "
        "execution. Local information: server 10.0.0.1, device ID 0, device IP 192.168.1.1. "
        "Peer information: server 10.0.0.2, device ID 3, device IP 192.168.1.2."
    )
    kinds = [(k, p) for k, p in _events(line)]
    assert [k for k, _ in kinds] == [EventKind.NCCL_TRANSPORT_ERROR]
    assert isinstance(kinds[0][1], NcclTransportError) and not kinds[0][1].setup


def test_a_notify_wait_timeout_is_a_collective_timeout() -> None:
    # error_code.cc's EI0002 (v8.5.0 wording), in the printed form
    line = (
        "EI0002: [PID: 4242] 2025-01-01-00:00:00.000.000 The wait execution of the Notify "
        "register times out. Reason: The Notify register has not received the Notify record "
        "from remote rank: [3]. base information: [streamID:[1]]. task information: [x]. "
        "group information: [y]"
    )
    assert [k for k, _ in _events(line)] == [EventKind.COLLECTIVE_TIMEOUT]


def test_torch_npus_hccl_function_error_of_communicator_creation_is_set_up() -> None:
    # torch_npu/csrc/distributed/HCCLUtils.hpp HCCL_CHECK_ERROR: oss << " HCCL function
    # error: " << getErrorFunction(#err_code, …) << ", error code is " << Error << " " <<
    # DIST_ERROR(ErrCode::HCCL) + "."
    tail = (
        ", error code is 7 [ERROR] 2025 (PID:1, Device:0, RankID:0) ERR02200 DIST "
        "call hccl api failed."
    )
    made = " HCCL function error: HcclCommInitRootInfo(numRanks, &rootInfo, rank, &comm)" + tail
    used = " HCCL function error: HcclAllReduce(buf, buf, n, dt, op, comm, stream)" + tail
    made_warns = [p for k, p in _events(made) if k is EventKind.NCCL_WARN]
    used_warns = [p for k, p in _events(used) if k is EventKind.NCCL_WARN]
    assert made_warns and isinstance(made_warns[0], NcclWarn) and made_warns[0].setup
    assert used_warns and isinstance(used_warns[0], NcclWarn) and not used_warns[0].setup


def test_an_hccl_calls_failure_raised_by_torch_npu_is_no_death_of_its_own() -> None:
    # torch_npu/csrc/core/npu/NPUException.h NPU_CHECK_ERROR around an HCCL op
    # (OpParamMaker.cpp's ops): " OPS function error: " << getErrorFunction(…) << ", error
    # code is " << Error; the exception ends the rank, HCCL's own lines say why.
    from hangdoc.analyzer.parsers.logs.errors import signs_of
    from hangdoc.analyzer.payloads.base import Sign

    message = (
        "InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: "
        "HcclAllreduce, error code is 6"
    )
    assert Sign.CONSEQUENCE in signs_of("RuntimeError", message)
    assert Sign.CONSEQUENCE not in signs_of("RuntimeError", "shape mismatch in HcclAllreduce")


def test_hd206_names_hccl_when_the_set_up_lines_are_hccls() -> None:
    from hangdoc.analyzer.engine import analyze
    from hangdoc.analyzer.loading.loader import load_paths

    case = Path(__file__).resolve().parents[4] / "fixtures/cases/vllm-ascend-9447-hccl-link-timeout"
    diagnosis = analyze(load_paths([case / "plog.txt"]))
    top = diagnosis.findings[0]
    assert top.rule == "HD206"
    assert top.title.startswith("HCCL failed while setting up a communicator")
    assert "HCCL_CONNECT_TIMEOUT" in top.fix


def test_an_error_code_in_another_releases_wording_is_read_by_its_code() -> None:
    # EI0009 as an older CANN printed it: the form hicann/hccl's fault-diagnosis guide
    # shows (docs/zh/user_guide/fault_diagnosis/param_link_stage.md, "Transport init error.
    # Reason: …"); the error manager's table of the held releases words it "Device %s
    # transport init error. Reason: %s."
    from hangdoc.analyzer.parsers.logs.catalog_lines import coded_match

    line = (
        "EI0009: [PID: 4242] 2025-01-01-00:00:00.000.000 Transport init error. Reason: "
        "[Create][DestLink]Create Dest error!"
    )
    found = coded_match(line)
    assert found is not None and found.row.sources[0].function == "EI0009"
    warns = [p for k, p in _events(line) if k is EventKind.NCCL_WARN]
    assert len(warns) == 1 and isinstance(warns[0], NcclWarn) and warns[0].setup
    # a code the catalog does not hold (the runtime's EE codes) is not read
    assert coded_match("EE1002: 2025-01-01-00:00:00.000.000 Stream synchronize timeout.") is None
