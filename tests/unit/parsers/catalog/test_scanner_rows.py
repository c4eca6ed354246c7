"""The catalog as one of the log scanner's recognisers (parsers/logs/catalog_lines.py):
every row's own sample line, printed under a header and pasted the ways pastes are
mangled (hangdoc/paste_mangling.py, the metamorphic test's manglings), becomes an event
of the row's kind; a line the hand-written recognisers type keeps their event alone; a
line no row and no recogniser knows becomes nothing.

The sample lines are the rows' own templates with each slot filled by a value of its type
(``template.sample``); the headers are the ones NCCL and c10d print (NCCL's
``host:pid:tid [dev] file:line NCCL WARN`` with the row's own file and line, from its
debug.cc; c10d's glog-style
``[E0603 11:00:00.880376776 ProcessGroupNCCL.cpp:632]`` behind torchrun's ``[rank3]:``).
"""

from __future__ import annotations

import functools

import pytest

from hangdoc.analyzer.parsers.catalog import (
    CatalogMatch,
    default_catalog,
    default_matcher,
    to_event,
)
from hangdoc.analyzer.parsers.catalog.loader import CatalogRow
from hangdoc.analyzer.parsers.catalog.template import sample
from hangdoc.analyzer.parsers.logs.catalog_lines import at_level, catalog_hit, printed_level
from hangdoc.analyzer.parsers.logs.prefix import peel_line
from hangdoc.analyzer.parsers.logs.scanner import RawEvent, Scanner, match_any
from hangdoc.analyzer.parsers.unmangle import unmangle
from hangdoc.analyzer.payloads.nccl import NcclResource, NcclResourceError, NcclWarn
from hangdoc.analyzer.payloads.torch_pg import StoreError, StoreTimeout
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.paste_mangling import COMBINED, MANGLINGS, Mangling

_NCCL_HOST = "gpu-node-17:2718281:2718399 [3] "
_C10D = "[rank3]:[E0603 11:00:00.880376776 ProcessGroupNCCL.cpp:632] "
_CATCH_ALL = {EventKind.EXCEPTION, EventKind.NCCL_WARN}
# A cut in the middle of the line cuts the message itself, not its header: what is left
# may be another message or none (the casebook's test treats it apart too).
_CUTS_THE_BODY = "cut first line (middle)"
# The paste un-mangler's rejoining of hard-wrapped lines decides piece by piece whether a
# line continues the one before (unmangle._continues); a piece that starts like a record
# of its own is left apart. Of the rows, this share must survive each wrap.
_WRAP_FLOOR = 0.95
_EVERY_NTH_ROW = 20  # the mangled rows: every 20th (about 280 rows, 30 manglings each)
# Rows whose printed sample the scanner reads as something else before any recogniser
# sees it.
_READ_AS_OTHER = {
    "horovod.42c60204fb": "the first line of Horovod's exit report: a block it follows",
    "torch.9ba26f7da3": "starts with '# ' once its header is peeled: a comment line",
}


def _scan(text: str) -> list[RawEvent]:
    """The events of a pasted text, read as the loader reads one: un-mangled, then
    scanned line by line."""
    fixed = unmangle(text)
    if fixed is not None:
        text = fixed.text
    scanner = Scanner()
    for number, line in enumerate(text.split("\n"), 1):
        scanner.feed(number, line)
    return scanner.finish()


def _kinds(text: str) -> set[EventKind]:
    return {event.kind for event in _scan(text)}


def _printed(row: CatalogRow) -> str:
    """The row's sample as its program prints it, header and all."""
    body = sample(row.parts)
    if row.project == "nccl" and row.level == "WARN" and row.sources:
        # the header names the file and line of the WARN (debug.cc prints __FILE__ without
        # NCCL's src/)
        site = row.sources[0]
        return f"{_NCCL_HOST}{site.file.removeprefix('src/')}:{site.line} NCCL WARN {body}"
    if row.project == "nccl":
        return f"{_NCCL_HOST}NCCL INFO {body}"
    return _C10D + body


def _expected(row: CatalogRow, line: str) -> frozenset[EventKind]:
    """The kinds the scanner may make of a printed sample (one of them): the hand-written
    recognisers' typed kind where they take the line (theirs wins), else the most
    specific row's; for an NCCL WARN also the row's own (its header names the row's file,
    and a message of the same words printed by another file is not the one printed).
    Empty for a row that says nothing about a hang."""
    matcher = default_matcher()
    text = peel_line(line).text
    found = matcher.match(text)
    if found is None:
        return frozenset()
    by_hand = match_any(text, [])
    if by_hand is not None and by_hand.kind not in _CATCH_ALL:
        return frozenset({by_hand.kind})
    level = printed_level(text[: found.start]) if found.row.project == "nccl" else None
    if level is not None and found.row.level != level:
        # NCCL prints some messages at INFO in one place (and goes on) and at WARN in
        # another: the level the line prints picks the row
        found = at_level(found, text, level) or found
    matches = [found]
    if row.project == "nccl" and row.level == "WARN" and found.row is not row:
        own = row.pattern.search(text)
        if own is not None:
            mine = CatalogMatch(row, own.groups(), own.start(), own.end(), own.group(0))
            matches = [mine] if _files(found.row).isdisjoint(_files(row)) else [found, mine]
    drafts = [to_event(m, matcher) for m in matches]
    return frozenset(d.kind for d in drafts if d.kind is not None and d.strength != "none")


def _files(row: CatalogRow) -> set[str]:
    """The names of the files a row was read from, without folder and extension."""
    return {source.file.rsplit("/", 1)[-1].split(".", 1)[0] for source in row.sources}


@functools.cache
def _rows() -> tuple[tuple[CatalogRow, str, frozenset[EventKind]], ...]:
    """Each row about a hang whose sample is one line that the matcher recognises, printed,
    with the kind the scanner must make of it."""
    out = []
    for row in default_catalog().rows:
        if not row.matchable or row.meaning is None or row.id in _READ_AS_OTHER:
            continue
        if "\n" in sample(row.parts):
            continue
        line = _printed(row)
        kinds = _expected(row, line)
        if kinds:
            out.append((row, line, kinds))
    return tuple(out)


def test_every_rows_sample_becomes_an_event_of_its_kind() -> None:
    rows = _rows()
    assert len(rows) > 5000  # the catalog's rows about a hang, not a handful
    missed = [
        f"{row.id} {sorted(kinds)}: {line}"
        for row, line, kinds in rows
        if kinds.isdisjoint(_kinds(line))
    ]
    assert missed == []


_TEXTS = [m for m in (*MANGLINGS, *COMBINED) if m.name != _CUTS_THE_BODY]


@pytest.mark.parametrize("mangling", _TEXTS, ids=[m.name for m in _TEXTS])
def test_a_mangled_sample_keeps_its_kind(mangling: Mangling) -> None:
    rows = _rows()[::_EVERY_NTH_ROW]
    wraps = "wrap" in mangling.name
    lost = []
    for row, line, kinds in rows:
        # two lines, so that a wrap shows its width (one line cut at the width does not)
        text = (line + "\n") * (2 if wraps else 1)
        if kinds.isdisjoint(_kinds(mangling.apply(text))):
            lost.append(f"{row.id} {sorted(kinds)}: {line}")
    if wraps:
        assert len(lost) <= (1 - _WRAP_FLOOR) * len(rows), lost
    else:
        assert lost == []


def test_a_line_the_hand_written_recognisers_type_keeps_their_event_alone() -> None:
    # GIVEN the store's client error: the hand-written reader types it a store timeout,
    # its catalog row (c10d's socket.cpp) a lost connection
    line = (
        "[rank3]:[W0603 11:00:00.880376776 socket.cpp:464] Failed to recv, got 0 bytes. "
        "Connection was likely closed. Did the remote server shutdown or crash?"
    )
    found = default_matcher().match(line)
    assert found is not None and to_event(found).kind is EventKind.CONNECTION_LOST
    # WHEN scanned
    kinds = [event.kind for event in _scan(line)]
    # THEN the typed event stands alone
    assert kinds == [EventKind.STORE_TIMEOUT]


def test_the_level_nccl_prints_picks_the_row_of_the_same_words() -> None:
    # GIVEN NCCL's "Call to %s failed with error %s errno %d": ibvwrap.cc prints it at
    # INFO for an optional verbs call that is not supported (IBV_INT_CHECK_RET_ERRNO_OPTIONAL,
    # 2.19-2.23, which returns ncclSuccess) and at WARN for a call that failed
    # (IBV_INT_CHECK_RET_ERRNO, ncclSystemError)
    body = "Call to ibv_set_ece failed with error Operation not supported errno 95"
    info = f"{_NCCL_HOST}NCCL INFO {body}"
    warn = f"{_NCCL_HOST}misc/ibvwrap.cc:206 NCCL WARN {body}"
    # WHEN scanned
    # THEN the INFO line is no error, the WARN line a transport error
    assert _kinds(info) == set()
    assert EventKind.NCCL_TRANSPORT_ERROR in _kinds(warn)


def test_a_setup_warn_no_branch_knows_becomes_the_rows_typed_event() -> None:
    # GIVEN NCCL's shared-memory WARN (shmutils.cc), its header cut by the paste
    line = (
        "18:2718281:2718399 [3] misc/shmutils.cc:88 NCCL WARN Error: failed to extend "
        "/dev/shm/nccl-WU88O to 9637892 bytes"
    )
    # WHEN scanned
    events = _scan(line)
    # THEN beside the hand-written reader's "a WARN of NCCL", a resource error of the
    # host's shared memory, its process read from what is left of the header
    assert [e.kind for e in events] == [EventKind.NCCL_WARN, EventKind.NCCL_RESOURCE_ERROR]
    event = events[1]
    assert isinstance(event.payload, NcclResourceError)
    assert event.payload.resource is NcclResource.SHARED_MEMORY
    assert event.payload.where == "misc/shmutils.cc:88"
    assert event.pid == 2718281


def test_a_userbuffers_setup_failure_is_an_nccl_setup_warn() -> None:
    # GIVEN TransformerEngine's NCCLCHECK line (userbuffers-host.cpp, release 1.6-1.8:
    # printf("Failed, NCCL error %s:%d ''\n", __FILE__, __LINE__)), printed from the
    # IPC-socket exchange of a userbuffers communicator's creation, its path as built
    line = (
        "Failed, NCCL error "
        "/opt/te/transformer_engine/pytorch/csrc/userbuffers/userbuffers-host.cpp:247 ''"
    )
    # WHEN scanned
    events = _scan(line)
    # THEN a WARN of communicator setup (views/nccl_setup.py reads it for HD206)
    assert [e.kind for e in events] == [EventKind.NCCL_WARN]
    assert isinstance(events[0].payload, NcclWarn)
    assert events[0].payload.setup


def test_userbuffers_progress_lines_become_nothing() -> None:
    # GIVEN userbuffers' own progress prints of a communicator that came up (the printf
    # calls of userbuffers-host.cpp: its timeout setting, the multicast window)
    text = (
        "UB_TIMEOUT is set to 110 sec, 217800000000 cycles, freq: 1980000khz\n"
        "MC initialized succesfully, window size = 549755813888\n"
    )
    # THEN no event: they say the setup went on
    assert _scan(text) == []


def test_detectron2s_init_url_line_is_a_failed_rendezvous() -> None:
    # GIVEN the line detectron2's launcher logs in the except clause around
    # dist.init_process_group (detectron2/engine/launch.py, _distributed_worker), in
    # detectron2's logger format ("ERROR [mm/dd hh:mm:ss d2.engine.launch]: ")
    line = "ERROR [03/02 09:15:01 d2.engine.launch]: Process group URL: tcp://10.0.0.3:29500"
    # WHEN scanned
    events = _scan(line)
    # THEN the process group's setup failed in its rendezvous
    assert [e.kind for e in events] == [EventKind.STORE_TIMEOUT]
    assert isinstance(events[0].payload, StoreTimeout)
    assert events[0].payload.error is StoreError.RENDEZVOUS


# Lines of training runs and tools that say nothing about a hang (hand-written in the
# shapes of HF's model loading, pip, wandb, Python prints, a shell prompt).
_UNKNOWN = [
    "Some weights of LlamaForCausalLM were not used when initializing from the model",
    "Successfully installed accelerate-0.30.1 transformers-4.41.2",
    "wandb: Syncing run dainty-sun-12",
    "hello from the data pipeline, 4096 samples in this shard",
    "(venv) user@host:~/project$ python train.py --config configs/base.yaml",
]


@pytest.mark.parametrize("line", _UNKNOWN)
def test_an_unknown_line_becomes_nothing(line: str) -> None:
    assert catalog_hit(line) is None
    assert _scan(line) == []


def test_an_info_line_takes_no_warning_rows_meaning() -> None:
    """NCCL prints a message at the level of its call: mlx5dvsymbols.cc says "dlvsym
    failed on …" at INFO where ibvsymbols.cc says the same words at WARN (NCCL 2.27's
    src/misc). The INFO line is informational; the WARN line is the transport's error."""
    body = (
        "dlvsym failed on mlx5dv_reg_dmabuf_mr - /lib/x86_64-linux-gnu/libmlx5.so.1: "
        "undefined symbol: mlx5dv_reg_dmabuf_mr, version MLX5_1.25 version MLX5_1.25"
    )
    info = catalog_hit(f"{_NCCL_HOST}NCCL INFO {body}")
    assert info is None or info.kind not in _CATCH_ALL | {EventKind.NCCL_TRANSPORT_ERROR}
    warn = catalog_hit(f"{_NCCL_HOST}misc/ibvsymbols.cc:95 NCCL WARN {body}")
    assert warn is not None and warn.kind is EventKind.NCCL_TRANSPORT_ERROR
