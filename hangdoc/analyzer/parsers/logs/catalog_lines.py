"""The message catalog as one of the scanner's recognisers (issue 21 item 2).

Every line the scanner reads is offered to the catalog's matcher (one keyword prefilter
over all rows, ``parsers/catalog/matcher.py``). A row whose meaning says something about a
hang (a strength other than ``none``) makes the line an event of the row's kind, with the
payload its values fill (``parsers/catalog/adapter.py``); who printed it is read from the
line's headers as for every other event: NCCL's ``host:pid:tid [dev] file:line`` (whole or
cut) and torch's process-group prefix (``[PG ID 0 PG GUID 0(default_pg) Rank 3]``), which
sit before the message body that the row matched. A new message is a row with its source
(``meanings.toml`` gives it a meaning), not a branch here.

NCCL's own lines say more than their words: the WARN header names the file that printed
the message (a row of another file with the same words is not it), and the NCCL reader
(``nccl.py``) reads more of a body than a row's values say (how a link failed, that a
connect is retried), so its typed event of the body is taken where it has one; a short
body with no trace of NCCL's header left is not taken for NCCL's. The scanner asks the
catalog only about lines its hand-written recognisers left without a typed event
(``scanner.Scanner._recognise``).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping

from hangdoc.analyzer.parsers.catalog import CatalogMatch, default_matcher, to_event
from hangdoc.analyzer.parsers.catalog.loader import CatalogRow
from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.nccl import NcclHeader, nccl_header, read_body, warn_at_setup
from hangdoc.analyzer.parsers.logs.process import match_exception_line
from hangdoc.analyzer.parsers.logs.tb_stage import called_stage
from hangdoc.analyzer.parsers.logs.torch_pg import pg_prefix
from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.analyzer.payloads.launch import ExceptionRaised, LauncherReport, read_exit
from hangdoc.analyzer.payloads.nccl import CudaFailure, NcclWarn
from hangdoc.analyzer.payloads.torch_pg import InGroup
from hangdoc.analyzer.vocabulary import EventKind

_MESSAGE_LIMIT = 300
# NCCL prints its messages behind its header (host:pid:tid [dev] file:line NCCL WARN). With
# no trace of that header left on the line, a row needs more literal text than the
# matcher's least (12 letters or digits) to be taken for NCCL's: "Call to %s failed" is
# also the end of torch's "ncclUnhandledCudaError: Call to CUDA function failed." wrapped
# mid-word.
_HEADLESS_MIN = 15
_LEVEL_WORDS = ("NCCL INFO", "NCCL WARN")
_LEVEL_END_MIN = 2  # "FO", "RN": fewer letters are any word's end
# The NCCL reader's kinds that say where processes, ranks and links are, not that
# anything failed.
_PLACES = frozenset(
    {
        EventKind.NCCL_INIT,
        EventKind.NCCL_TRANSPORT,
        EventKind.NCCL_NETWORK,
        EventKind.NCCL_COLL,
        EventKind.NCCL_VERSION,
    }
)


def catalog_match(text: str) -> CatalogMatch | None:
    """The most specific catalog row that recognises the line (the matcher's prefilter
    first: most lines hold no keyword of any row); else, for an error manager's line, the
    rows of its code (``coded_match``)."""
    return default_matcher().match(text) or coded_match(text)


# CANN's error manager prints each error code's message as "<code>: [PID: n] <date>
# <message>" (HCCL's codes and their messages: hicann/hcomm src/common/error_code/
# error_code.cc, the catalog's hccl rows of level "errcode", whose function is the code).
# The wording of a code's message changed between CANN releases ("Transport init error.
# Reason: %s" became "Device %s transport init error. Reason: %s") while the code stayed,
# and CANN releases before the library's sources were published are not held: a line whose
# words no row holds is recognised by its code, and means what that code's rows mean.
_ERROR_CODE_LINE = re.compile(
    r"(?:^|[\s\]:])(?P<code>E[A-Z]\d{4}): (?:\[PID: ?\d+\] )?"
    r"\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d[.\d]* (?P<body>\S.*)"
)


@functools.cache
def _rows_by_code() -> dict[str, CatalogRow]:
    """The first catalog row of each error code (rows of level ``errcode``)."""
    found: dict[str, CatalogRow] = {}
    for row in default_matcher().catalog.rows:
        if row.level == "errcode" and row.sources and row.meaning is not None:
            found.setdefault(row.sources[0].function, row)
    return found


def coded_match(text: str) -> CatalogMatch | None:
    """An error manager's line whose code the catalog holds, as a match of that code's row
    (its slots uncaptured: the wording is another release's)."""
    if "E" not in text:
        return None
    m = _ERROR_CODE_LINE.search(text[: _MESSAGE_LIMIT * 4])
    if m is None:
        return None
    row = _rows_by_code().get(m.group("code"))
    if row is None:
        return None
    return CatalogMatch(row, (), m.start("body"), len(text), text[m.start("body") :])


def catalog_hit(text: str, found: CatalogMatch | None = None) -> Hit | None:
    """The event a catalog row makes of one line (prefixes already peeled), or None when
    no row with a meaning about a hang recognises it."""
    if found is None:
        found = catalog_match(text)
        if found is None:
            return None
    head = text[: found.start]
    header = nccl_header(head) if head else None
    if (
        header is None
        and found.row.project == "nccl"
        and found.row.specificity < _HEADLESS_MIN
        and not _level_end(head)
    ):
        return None  # a few words another program may say too ("Call to %s failed")
    if header is not None and header.where and not _printed_at(found.row, header.where):
        # another file's message that this line's words fit as well: the row of the file
        # the header names, if one fits
        found = _printed_instead(found, text, header.where)
        if found is None:
            return None
        head = text[: found.start]
    level = printed_level(head)
    if found.row.project == "nccl" and level is not None and found.row.level != level:
        # NCCL prints a message at the level of its call: the same words at the other level
        # are another call's, and the level is the meaning (ibvwrap.cc's optional verbs
        # calls say "Call to %s failed with error %s errno %d" at INFO and go on, at WARN
        # and fail; mlx5dvsymbols.cc's "dlvsym failed on …" is INFO where ibvsymbols.cc's is
        # a WARN). An INFO line whose words fit no INFO row is an informational line of a
        # release the catalog does not hold: no error's meaning.
        instead = at_level(found, text, level)
        if instead is None and level == "INFO":
            typed = _nccl_body(found, text, header)
            return typed if typed is not None and typed.kind in _PLACES else None
        found = instead or found
        head = text[: found.start]
    draft = to_event(found, default_matcher())
    says_nothing = draft.kind is None or draft.strength == "none"
    if found.row.project == "nccl":
        # What the NCCL reader makes of the body. Of a row that says nothing about a hang
        # (teardown's "Failed to execute operation Close"), only what places processes
        # and ranks (an init, a transport, an interface), never an error.
        typed = _nccl_body(found, text, header)
        if typed is not None and (not says_nothing or typed.kind in _PLACES):
            return typed
    if says_nothing or draft.kind is None:
        return None
    payload = _with_place(draft.payload, head, found.text)
    if found.row.project == "nccl" and isinstance(payload, CudaFailure):
        payload = dataclasses.replace(payload, by_nccl=True)  # its CUDACHECK's, as nccl.py's
    if draft.kind is EventKind.EXCEPTION and (exc := match_exception_line(text)) is not None:
        payload = dataclasses.replace(payload, exc_type=exc[0], message=exc[1][:400])
    method = draft.values.get("method")
    if isinstance(payload, ExceptionRaised) and payload.stage is None and isinstance(method, str):
        # A worker method the framework names as the one that raised (vLLM's "Error
        # executing method init_device"): the stage that call shows, as its frame would.
        payload = dataclasses.replace(payload, stage=called_stage(method))
    values = tuple(sorted((k, str(v)) for k, v in draft.values.items()))
    hit = Hit(draft.kind, payload=payload, key=("row", draft.row_id, values))
    own = draft.values.get("own_rank")
    if isinstance(own, int) and not isinstance(own, bool) and own >= 0:
        # the message names the rank that printed it (meanings.toml value own_rank: DDP's
        # reducer, "… did not receive grad for rank R"): the line is that rank's
        hit.rank = own
    if isinstance(payload, LauncherReport):
        _read_report(hit, payload, draft.values)
    if header is not None:
        _from_header(hit, header)
        if isinstance(hit.payload, NcclWarn) and hit.payload.where is None and header.where:
            hit.payload = dataclasses.replace(hit.payload, where=header.where, func=header.func)
            if hit.kind in (EventKind.NCCL_WARN, EventKind.CUDA_ERROR):  # as nccl.py says it
                setup = warn_at_setup(header.where, hit.payload.message or "")
                hit.payload = dataclasses.replace(hit.payload, setup=setup)
    return hit


def _read_report(hit: Hit, report: LauncherReport, values: Mapping[str, object]) -> None:
    """A launcher's report of a worker that ended, as its printer means it: the number it
    printed read by the row's convention (meanings.toml ``exit_convention``: vLLM's
    ``Process.exitcode`` -6 is SIGABRT, SGLang's waitpid status 256 is exit status 1), and
    the worker it names by its rank, pid or local rank (the line's own words, never a
    guess)."""
    if report.exit_code is not None and report.signal is None and report.exit_convention:
        status = read_exit(report.exit_code, report.exit_convention)
        hit.payload = dataclasses.replace(
            report,
            exit_code=status.exit_code,
            signal=status.signal,
            core_dumped=status.core_dumped,
        )
    if report.rank is not None and report.rank >= 0 and hit.rank is None:
        hit.rank = report.rank  # the worker's rank, as its name carries it (VllmWorker-2)
    pid, local_rank = values.get("pid"), values.get("local_rank")
    if isinstance(pid, int) and pid > 0:
        hit.named_pid = pid
    if isinstance(local_rank, int) and local_rank >= 0:
        hit.named_local_rank = local_rank


def printed_level(head: str) -> str | None:
    """``INFO`` or ``WARN`` where the text before the body ends with NCCL's level word
    (``… [0] NCCL INFO ``, ``… misc/ibvwrap.cc:206 NCCL WARN ``), else None."""
    left = head.rstrip()
    for word in _LEVEL_WORDS:
        if left.endswith(word):
            return word.rsplit(" ", 1)[1]
    return None


def at_level(found: CatalogMatch, text: str, level: str) -> CatalogMatch | None:
    """The most specific of the other NCCL rows that matched the line and are printed at
    ``level``, or None."""
    for row in sorted(found.others, key=lambda r: -r.specificity):
        if row.project == found.row.project and row.level == level:
            m = row.pattern.search(text)
            if m is not None:
                return CatalogMatch(row, m.groups(), m.start(), m.end(), m.group(0))
    return None


def _level_end(head: str) -> bool:
    """The text before the body is all a selection left of NCCL's header: the end of its
    ``NCCL INFO`` / ``NCCL WARN`` (``NFO ``, ``WARN ``), a trace of NCCL's header."""
    left = head.strip()
    return len(left) >= _LEVEL_END_MIN and any(w.endswith(left) for w in _LEVEL_WORDS)


def _nccl_body(found: CatalogMatch, text: str, header: NcclHeader | None) -> Hit | None:
    """The hand-written NCCL reader's typed event of the message body the row found,
    where it has one: it reads more of its messages than a row's values say (how a
    connection failed, that a connect is retried), and a cut or wrapped header must not
    change what a line means. None where it has no typed kind for the body."""
    hit = read_body(
        found.row.level,
        text[found.start :],
        header.where if header is not None else None,
        header.func if header is not None else None,
    )
    if hit is None or hit.kind in (EventKind.NCCL_WARN, EventKind.NCCL_RETURN):
        return None
    if header is not None:
        _from_header(hit, header)
    return hit


_HEADER_FILES = (".h", ".hh", ".hpp", ".cuh")


def _printed_at(row: CatalogRow, where: str) -> bool:
    """Whether the row's message can be the one NCCL printed at ``where``: its WARN
    header names the file of the call (``__FILE__``), so a row read from source files
    only (``.cc``, ``.cu``) is printed from those; a row of a header may be a macro's,
    printed from any file that uses it. Files are compared by name without extension
    (a file moved between ``.cc`` and ``.cu`` across releases)."""
    files = [source.file for source in row.sources]
    if row.project != "nccl" or not files or any(file.endswith(_HEADER_FILES) for file in files):
        return True
    printed = _stem(where.rsplit(":", 1)[0])
    return any(_stem(file) == printed for file in files)


def _printed_instead(found: CatalogMatch, text: str, where: str) -> CatalogMatch | None:
    """The most specific of the other rows that matched the line whose message is printed
    at ``where``, or None."""
    for row in sorted(found.others, key=lambda r: -r.specificity):
        if row.project == found.row.project and _printed_at(row, where):
            m = row.pattern.search(text)
            if m is not None:
                return CatalogMatch(row, m.groups(), m.start(), m.end(), m.group(0))
    return None


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].split(".", 1)[0]


def _from_header(hit: Hit, header: NcclHeader) -> None:
    hit.host, hit.pid, hit.tid = header.host, header.pid, header.tid
    hit.cuda_dev, hit.partial_header = header.device, header.partial


def _with_place(payload: EventPayload, head: str, body: str) -> EventPayload:
    """The payload with what the line says around the row's message: torch's process
    group prefix (its group rank), and the message as printed where the kind keeps one."""
    changes: dict[str, object] = {}
    if isinstance(payload, InGroup) and "[" in head:
        for name, value in pg_prefix(head).items():
            if getattr(payload, name) is None:
                changes[name] = value
    if payload.message is None:
        changes["message"] = body.strip()[:_MESSAGE_LIMIT]
    return dataclasses.replace(payload, **changes) if changes else payload  # type: ignore[arg-type]
