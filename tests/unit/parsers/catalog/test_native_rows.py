"""The native libraries' rows (scripts/catalog/native.py) and what the scanner makes of
their lines.

The extractor reads a printf format named by a macro of its file (UCX's
``UCS_DEBUG_BACKTRACE_LINE_FMT``, src/ucs/debug/debug.c), the prefix a logging macro
puts before every format (aws-ofi-nccl's ``NCCL_OFI_WARN``: ``"NET/OFI " fmt``,
include/nccl_ofi_log.h) and ``std::cerr <<`` chains (tvm-ffi's src/ffi/backtrace.cc).
The sources below are hand-written in those files' forms; the printed lines are the
forms those calls print (UCX's log.c puts ``[host:pid:tid]`` before a fatal error).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

from hangdoc.analyzer.parsers.logs.scanner import Scanner
from hangdoc.analyzer.payloads.launch import FatalReport, FatalSignal, SignalName
from hangdoc.analyzer.vocabulary import EventKind

SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"


def _native() -> ModuleType:
    sys.path.insert(0, str(SCRIPTS))
    try:
        from catalog import native
    finally:
        sys.path.remove(str(SCRIPTS))
    return native


def _templates(project: str, code: str, path: str) -> list[str]:
    native = _native()
    from hangdoc.analyzer.parsers.catalog.template import display

    sites = native.sites_of(code, project, native.NATIVE[project], path, "1.0.0")
    return [display(tuple(site.parts)) for site in sites]


def test_a_format_named_by_a_macro_of_the_file_is_read_through_its_define() -> None:
    code = (
        '#define UCS_DEBUG_BACKTRACE_LINE_FMT "%2d 0x%016lx %s()  %s:%u\\n"\n'
        "void ucs_debug_print_backtrace(FILE *stream, int strip)\n{\n"
        '    fprintf(stream, "==== backtrace (tid:%7d) ====\\n", ucs_get_tid());\n'
        "    fprintf(stream, UCS_DEBUG_BACKTRACE_LINE_FMT, i, addr, func, file, line);\n}\n"
    )
    templates = _templates("ucx", code, "src/ucs/debug/debug.c")
    assert "==== backtrace (tid:<ucs_get_tid()>) ====\n" in templates
    assert "<i> 0x<addr> <func>()  <file>:<line>\n" in templates


def test_a_logging_macros_prefix_is_part_of_the_message() -> None:
    code = (
        "static int process_err(void)\n{\n"
        '    NCCL_OFI_WARN("Request %p completed with error. RC: %d.", req, err);\n}\n'
    )
    assert _templates("aws_ofi_nccl", code, "src/nccl_ofi_rdma.cpp") == [
        "NET/OFI Request <req> completed with error. RC: <err>."
    ]


def test_a_stream_into_cerr_is_a_message() -> None:
    code = (
        "void TVMFFISegFaultHandler(int sig) {\n"
        '  std::cerr << "!!!!!!! Segfault encountered !!!!!!!\\n" << trace << std::endl;\n}\n'
    )
    assert _templates("tvm_ffi", code, "src/ffi/backtrace.cc") == [
        "!!!!!!! Segfault encountered !!!!!!!\n<trace><std::endl>"
    ]


def _events(text: str) -> list[tuple[EventKind, int | None, object]]:
    scanner = Scanner()
    for number, line in enumerate(text.split("\n"), 1):
        scanner.feed(number, line)
    return [(e.kind, e.prefix_rank, e.payload) for e in scanner.finish()]


def test_ucxs_caught_signal_is_a_fatal_signal_named_by_its_strsignal_text() -> None:
    line = "[node-7:2121 :0:7025] Caught signal 7 (Bus error: nonexistent physical address)"
    fatal = [p for k, _, p in _events(line) if k is EventKind.FATAL_SIGNAL]
    assert len(fatal) == 1 and isinstance(fatal[0], FatalSignal)
    assert fatal[0].signal is SignalName.SIGBUS
    assert fatal[0].reported_by is FatalReport.UCX


def test_tvm_ffis_banner_under_a_rank_label_is_that_ranks_segfault() -> None:
    text = ' 5: !!!!!!! Segfault encountered !!!!!!!\n 5:   File "<unknown>", line 0, in mz_crc32\n'
    fatal = [(r, p) for k, r, p in _events(text) if k is EventKind.FATAL_SIGNAL]
    assert len(fatal) == 1
    rank, payload = fatal[0]
    assert rank == 5
    assert isinstance(payload, FatalSignal) and payload.signal is SignalName.SIGSEGV
    assert payload.reported_by is FatalReport.TVM_FFI


def test_an_ofi_completion_error_is_a_transport_error_and_its_info_lines_nothing() -> None:
    warn = (
        "NET/OFI Request 0x7f14cc5b60c0 completed with error. RC: 113. Error: 2 "
        "(UNDELIVERABLE). Completed length: 0"
    )
    assert [k for k, _, _ in _events(warn)] == [EventKind.NCCL_TRANSPORT_ERROR]
    # a line that only resembles the message: no row's every word is in it
    assert _events("NET/OFI Request 0x7f14cc5b60c0 completed") == []
