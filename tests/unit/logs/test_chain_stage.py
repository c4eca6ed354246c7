# ruff: noqa: E501  (log lines read better unwrapped)
"""A WARN's "-> rc" chain, and the stage its lines show, read through a text as pastes
leave it (parsers/logs/scanner.py chains, parsers/logs/nccl_stage.py).

The lines are NCCL's documented formats (FORMATS.md §1: the WARN of src/include/debug.h
and the "file:line -> rc" of src/include/checks.h) at places of NCCL v2.27.3-1's sources
(misc/ibvwrap.cc wrap_ibv_reg_mr_iova2, transport/net_ib.cc ncclIbRegMrDmaBufInternal
and ncclIbRegMrDmaBuf, transport/net.cc sendProxyConnect), with made-up hosts and ids.
"""

from __future__ import annotations

from pathlib import Path

from hangdoc.analyzer.payloads.nccl import NcclWarn, SourceStage
from tests.unit.logs.helpers import events, parse

CHAIN = (
    "node-a1b2c3:4100:4177 [0] NCCL INFO transport/net_ib.cc:1872 -> 2\n"
    "node-a1b2c3:4100:4177 [0] NCCL INFO transport/net_ib.cc:1920 -> 2\n"
    "node-a1b2c3:4100:4177 [0] NCCL INFO transport/net.cc:853 -> 2\n"
)
WARN = "[0] misc/ibvwrap.cc:182 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Invalid argument\n"


def _warns(tmp_path: Path, text: str) -> list[NcclWarn]:
    log = tmp_path / "nccl_debug.log"
    log.write_text(text)
    parsed = parse(log)
    return [
        e.payload
        for _, e in events(parsed, "nccl_transport_error")
        if isinstance(e.payload, NcclWarn)
    ]


def test_a_chain_in_connection_setup_shows_setup(tmp_path: Path) -> None:
    (warn,) = _warns(tmp_path, "node-a1b2c3:4100:4177 " + WARN + CHAIN)
    assert warn.rc_chain == (
        "transport/net_ib.cc:1872",
        "transport/net_ib.cc:1920",
        "transport/net.cc:853",
    )
    assert warn.stage is SourceStage.SETUP


def test_a_warn_whose_host_a_cut_shortened_keeps_its_chain(tmp_path: Path) -> None:
    # A hard wrap (or a selection) took the start of the WARN's header: "node-a1" ended the
    # line above, and the WARN reads as host "b2c3". Same process, same thread, the host
    # the other's tail: the chain below is the WARN's.
    (warn,) = _warns(tmp_path, "b2c3:4100:4177 " + WARN + CHAIN)
    assert len(warn.rc_chain) == 3
    assert warn.stage is SourceStage.SETUP


def test_another_thread_or_host_keeps_its_own_chain(tmp_path: Path) -> None:
    (warn,) = _warns(tmp_path, "other:4100:4177 " + WARN + CHAIN)
    assert warn.rc_chain == ()
    (warn,) = _warns(tmp_path, "b2c3:4100:4188 " + WARN + CHAIN)
    assert warn.rc_chain == ()


def test_a_chain_follows_its_warn_under_a_stamp_and_a_quote(tmp_path: Path) -> None:
    # A shipper's stamp before a reporter's quote before NCCL's own line: no paste layer is
    # undone around the quote, and the WARN is read by its body. The chain on the next
    # lines, of the WARN's process and thread, is still its chain.
    stamp = "2024-05-01T10:00:00.271828123Z > "
    text = stamp + "[2025-10-13 10:12:54] node-a1b2c3:4100:4177 " + WARN
    text += "".join(stamp + line + "\n" for line in CHAIN.splitlines())
    (warn,) = _warns(tmp_path, text)
    assert len(warn.rc_chain) == 3
    assert warn.stage is SourceStage.SETUP
