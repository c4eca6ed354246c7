"""Paste layers nested in the order a person adds them (parsers/unmangle.py).

A reporter quotes a log ("> " on each line) and the quote then lands in an indented code
block (a list item, a reply that indents what it cites): the block's margin hides the
quote's markers until it is gone, so the quote is looked for again after the margin.
The lines are NCCL's documented formats (FORMATS.md §1: WARN and the "-> rc" chain).
"""

from __future__ import annotations

from hangdoc.analyzer.parsers.unmangle import unmangle
from hangdoc.paste_mangling import hard_wrap, quote

LOG = (
    "host-a:101:202 [0] misc/ibvwrap.cc:182 NCCL WARN Call to ibv_reg_mr_iova2 failed with "
    "error Invalid argument\n"
    "host-a:101:202 [0] NCCL INFO transport/net_ib.cc:1872 -> 2\n"
    "host-a:101:202 [0] NCCL INFO transport/net.cc:853 -> 2\n"
)


def test_a_quote_inside_a_code_block_is_undone_whole() -> None:
    mangled = "".join("    > " + line + "\n" for line in LOG.splitlines())
    fixed = unmangle(mangled)
    assert fixed is not None
    assert fixed.text == LOG
    assert fixed.undone.count("a block quote's '>' markers") == 1


def test_a_code_block_inside_a_quote_is_undone_whole() -> None:
    mangled = "".join(">     " + line + "\n" for line in LOG.splitlines())
    fixed = unmangle(mangled)
    assert fixed is not None
    assert fixed.text == LOG


def test_a_quoted_paste_hard_wrapped_is_unquoted_once_rejoined() -> None:
    # A terminal wraps the quoted lines: the markers are on each line's first piece only,
    # so no run of quoted lines shows until the pieces are joined.
    mangled = hard_wrap(quote(LOG * 3), 40)
    fixed = unmangle(mangled)
    assert fixed is not None
    assert not [line for line in fixed.text.splitlines() if line.startswith(">")]
    assert "host-a:101:202 [0] NCCL INFO transport/net.cc:853 -> 2" in fixed.text.splitlines()
