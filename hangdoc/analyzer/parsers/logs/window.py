"""The head and tail of a log as raw lines per rank: what the ranks' logs are compared on.

The log parser keeps only the lines it recognises (timeouts, errors, NCCL lines). Comparing
ranks' logs with each other needs the job's own lines too ("epoch 3: 1250 batches",
"saving checkpoint to …", "running validation"), in order. Only a window is kept: the
first HEAD_BYTES (world sizes, per-rank counts printed at start) and the last TAIL_BYTES
(where each rank stopped) of each file, so the cost per rank is bounded whatever the
log's size, and 1,024 ranks' logs stay within memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from hangdoc.analyzer.model import LogLine
from hangdoc.analyzer.parsers.base import decode_bytes
from hangdoc.analyzer.parsers.logs.benign import benign_warning
from hangdoc.analyzer.parsers.logs.literals import gate
from hangdoc.analyzer.parsers.logs.mentions import find_mention
from hangdoc.analyzer.parsers.logs.prefix import peel_line
from hangdoc.analyzer.parsers.logs.wrap_shape import (
    LIBRARY_ORIGIN,
    MAX_WRAP_SHAPE_LINE,
    wrap_facts,
)
from hangdoc.analyzer.parsers.stacks.markers import label_rank
from hangdoc.analyzer.parsers.stacks.pyspy_frames import FRAME
from hangdoc.analyzer.vocabulary import RankFrom

HEAD_BYTES = 32 * 1024
TAIL_BYTES = 160 * 1024
MAX_LINE_CHARS = 2000
MAX_LINES_PER_RANK = 3000
UNATTRIBUTED = -1  # the key of lines no rank claims
# The prefix torch's excepthook and torchrun's --tee put on nearly every line of a rank's
# output: peeled here without the general peeler (which tries every known layer, ~40 µs
# a line), as long as nothing else that needs peeling (a time stamp, a glog header) follows.
# Lines the libraries print (NCCL, the process-group watchdog, tracebacks, C++ frames):
# the log parser reads those as events; the comparison is about the job's own lines.
_LIBRARY_LINE = re.compile(
    r"NCCL (?:INFO|WARN|ERROR)|ProcessGroup|[Ww]atchdog|^Traceback |^File \"|^frame #\d"
    r"|^Exception raised from|^torch\.distributed|WorkNCCL|c10d|^\s*\^+\s*$"
    # a py-spy dump's own lines, pasted into a log (its frames: _STACK_FRAME)
    r"|^Process \d+: |^Python v\d|^Thread (?:0x[0-9a-fA-F]+|\d+) \("
    # a faulthandler dump's thread line (faulthandler.c: "Current thread 0x… (most
    # recent call first):"; "Thread 0x…" is above): every rank prints it when dumped
    r"|^Current thread 0x[0-9a-fA-F]+ \("
    # torchelastic's failure report names the failed rank, but the launcher printed it
    # (elastic/multiprocessing/errors/__init__.py _FAILURE_FORMAT_TEMPLATE)
    r"|^rank {2,}: \d+ \(local_rank: "
)
# _LIBRARY_LINE behind the literals each of its matches holds (parsers/logs/literals.py):
# a job's own line holds none of them, and is refused in a fifth of the search's time.
_LIBRARY_LINE_SEARCH = gate(_LIBRARY_LINE).search
# A stack frame (py-spy's "name (file.py:12)"), whoever printed it: what the rank was
# doing is the stacks' to say, not a line the job printed.
_STACK_FRAME = FRAME
_MAX_LABEL = 60  # a rank label line is short
_RANK_PREFIX = re.compile(r"\[(?:rank|default)(\d+)\]: ?(?=[A-Za-z(\"'])")


def _raw_lines(path: Path) -> Iterator[tuple[int | None, str]]:
    """(line number or None when unknown, text) of the file's head and tail."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        if size <= HEAD_BYTES + TAIL_BYTES:
            text = decode_bytes(handle.read())
            for number, line in enumerate(text.splitlines(), start=1):
                yield number, line
            return
        head = handle.read(HEAD_BYTES)
        head = head[: head.rfind(b"\n") + 1]  # whole lines only
        for number, line in enumerate(decode_bytes(head).splitlines(), start=1):
            yield number, line
        handle.seek(size - TAIL_BYTES)
        tail = handle.read(TAIL_BYTES)
        tail = tail[tail.find(b"\n") + 1 :]
        # Numbering the tail would mean reading the middle; its lines are cited by text.
        for line in decode_bytes(tail).splitlines():
            yield None, line


def _mentioned(text: str) -> int | None:
    """The global rank a line's words name as its own, where no map is needed to read it
    (a local rank, a device or a pipeline stage's coordinates need the log parser's)."""
    if text.startswith("# "):
        return None  # a comment (a fixture's header, a shell's echo): about the log, not in it
    mention = find_mention(text)
    if mention is None:
        return None
    if mention.how is RankFrom.MENTION:
        return mention.rank
    if mention.how is RankFrom.COORDINATES and mention.pipeline is None and mention.data is None:
        return mention.tensor
    return None


def read_line_window(
    path: Path, display: str, default_rank: int | None
) -> dict[int, list[LogLine]]:
    """The lines of each rank in the file's head and tail, launcher prefixes peeled.

    A line's rank is the one its prefix names (``[rank3]:``, ``[default3]:``, ``3:``),
    else, in a file no rank owns, the global rank its words name as its own (``Rank 3,
    world_size 8: …``, ``[rank: 3]``: parsers/logs/mentions.py), else the one of the
    section it is in (a paste of several ranks, each under a line
    that is nothing but a label: ``rank 3:``, ``=== Rank 3 ===``, ``Rank 3 py-spy dump``),
    else ``default_rank`` (the rank whose own file this is), else it is kept under
    ``UNATTRIBUTED``: it cannot be compared across ranks, but says what the job did.
    Stack frames and a traceback's source lines are the stacks' to read, not the job's.
    """
    out: dict[int, list[LogLine]] = {}
    said: int | None
    section: int | None = None
    # Whose last line was a traceback frame: its indented next line is the frame's source.
    after_frame: set[int | None] = set()
    for number, raw in _raw_lines(path):
        fast = _RANK_PREFIX.match(raw)
        if fast is not None and "\x1b" not in raw and "\r" not in raw:
            text, said = raw[fast.end() :].strip(), int(fast.group(1))
            indented = False
        elif (
            len(raw) <= MAX_WRAP_SHAPE_LINE
            and (facts := wrap_facts(raw)).text_from >= 0
            and not facts.ranked
            and not facts.tagged
        ):
            # an untagged line (a logging header's, the bench's step lines): what its
            # peeling says, remembered by its shape (parsers/logs/wrap_shape.py)
            if facts.library:
                continue  # a glog/c10/torch logger line: the library's words, not the job's
            text, said, indented = raw[facts.text_from :].strip(), None, facts.indented
        else:
            tag = peel_line(raw[: MAX_LINE_CHARS * 2])
            if tag.origin is not None and LIBRARY_ORIGIN.search(tag.origin):
                continue  # a glog/c10/torch logger line: the library's words, not the job's
            text, said = tag.text.strip(), tag.rank
            indented = tag.text[:1] in (" ", "\t")
        if said is None and len(text) < _MAX_LABEL and (label := label_rank(text)) is not None:
            section = label
            continue
        if said in after_frame:
            after_frame.discard(said)
            if indented:
                continue  # the source line under a traceback frame
        if not text or _LIBRARY_LINE_SEARCH(text):
            if text.startswith('File "'):
                after_frame.add(said)
            continue
        if text[-1] == ")" and _STACK_FRAME.match(text):
            continue
        if said is None and default_rank is None:
            said = _mentioned(text)
        rank = said if said is not None else section if section is not None else default_rank
        if rank is None:
            rank = UNATTRIBUTED  # kept apart: what the console said, by no known rank
        kept = text[:MAX_LINE_CHARS]
        line = LogLine(kept, display, number or 0, benign_warning(kept))
        out.setdefault(rank, []).append(line)
    for rank, lines in out.items():
        if len(lines) > MAX_LINES_PER_RANK:
            out[rank] = lines[-MAX_LINES_PER_RANK:]
    return out
