"""The message catalog as one of the scanner's recognisers (issue 21 item 2).

Every line the scanner reads is offered to the catalog's matcher (one keyword prefilter
over all rows, ``parsers/catalog/matcher.py``). A row whose meaning says something about a
hang (a strength other than ``none``) makes the line an event of the row's kind, with the
payload its values fill (``parsers/catalog/adapter.py``); who printed it is read from the
line's headers as for every other event: NCCL's ``host:pid:tid [dev] file:line`` (whole or
cut) and torch's process-group prefix (``[PG ID 0 PG GUID 0(default_pg) Rank 3]``), which
sit before the message body that the row matched. A new message is a row with its source
(``meanings.toml`` gives it a meaning), not a branch here.
"""

from __future__ import annotations

import dataclasses

from hangdoc.analyzer.parsers.catalog import CatalogMatch, default_matcher, to_event
from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.nccl import nccl_header, warn_at_setup
from hangdoc.analyzer.parsers.logs.process import match_exception_line
from hangdoc.analyzer.parsers.logs.torch_pg import pg_prefix
from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.analyzer.payloads.nccl import NcclWarn
from hangdoc.analyzer.payloads.torch_pg import InGroup
from hangdoc.analyzer.vocabulary import EventKind

_MESSAGE_LIMIT = 300


def catalog_match(text: str) -> CatalogMatch | None:
    """The most specific catalog row that recognises the line (the matcher's prefilter
    first: most lines hold no keyword of any row)."""
    return default_matcher().match(text)


def catalog_hit(text: str, found: CatalogMatch | None = None) -> Hit | None:
    """The event a catalog row makes of one line (prefixes already peeled), or None when
    no row with a meaning about a hang recognises it."""
    if found is None:
        found = catalog_match(text)
        if found is None:
            return None
    draft = to_event(found, default_matcher())
    if draft.kind is None or draft.strength == "none":
        return None
    head = text[: found.start]
    payload = _with_place(draft.payload, head, found.text)
    if draft.kind is EventKind.EXCEPTION and (exc := match_exception_line(text)) is not None:
        payload = dataclasses.replace(payload, exc_type=exc[0], message=exc[1][:400])
    values = tuple(sorted((k, str(v)) for k, v in draft.values.items()))
    hit = Hit(draft.kind, payload=payload, key=("row", draft.row_id, values))
    header = nccl_header(head) if head else None
    if header is not None:
        hit.host, hit.pid, hit.tid = header.host, header.pid, header.tid
        hit.cuda_dev, hit.partial_header = header.device, header.partial
        if isinstance(hit.payload, NcclWarn) and hit.payload.where is None and header.where:
            hit.payload = dataclasses.replace(hit.payload, where=header.where, func=header.func)
            if hit.kind is EventKind.NCCL_WARN:  # as the hand-written WARN reader says it
                setup = warn_at_setup(header.where, hit.payload.message or "")
                hit.payload = dataclasses.replace(hit.payload, setup=setup)
    return hit


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
