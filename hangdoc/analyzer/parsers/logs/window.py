"""The head and tail of a log as raw lines per rank: what the ranks' logs are compared on.

The log parser keeps only the lines it recognises (timeouts, errors, NCCL lines). Comparing
ranks' logs with each other needs the job's own lines too ("epoch 3: 1250 batches",
"saving checkpoint to …", "running validation"), in order. Only a window is kept: the
first HEAD_BYTES (world sizes, per-rank counts printed at start) and the last TAIL_BYTES
(where each rank stopped) of each file, so the cost per rank is bounded whatever the
log's size, and 1,024 ranks' logs stay within memory.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import operator
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hangdoc.analyzer.model import LogLine
from hangdoc.analyzer.parsers.base import decode_bytes
from hangdoc.analyzer.parsers.logs.benign import BENIGN_NEEDLES, benign_warning
from hangdoc.analyzer.parsers.logs.literals import any_of, gate
from hangdoc.analyzer.parsers.logs.mentions import find_mention
from hangdoc.analyzer.parsers.logs.prefilter import block_shapes
from hangdoc.analyzer.parsers.logs.prefix import peel_line
from hangdoc.analyzer.parsers.logs.wrap_shape import (
    LIBRARY_ORIGIN,
    MAX_WRAP_SHAPE_LINE,
    known_facts,
    wrap_facts,
)
from hangdoc.analyzer.parsers.stacks.markers import process_label
from hangdoc.analyzer.parsers.stacks.pyspy_frames import FRAME
from hangdoc.analyzer.vocabulary import BenignWarning, RankFrom

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
    # CPython ≥3.11's anchors under a traceback's source line (traceback.py
    # _extract_caret_anchors_from_line_segment: "~" under the expression, "^" under the
    # operation that failed): "~~~~~~~~~~~~~^^"
    r"|^\s*~+\^+~*\s*$"
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
_LIBRARY_LINE_GATE = gate(_LIBRARY_LINE)
_LIBRARY_LINE_SEARCH = _LIBRARY_LINE_GATE.search
# The literals one of which every match of _LIBRARY_LINE holds (None: no such set): a
# chunk holds none of them, each looked for by one find (a chunk's NCCL lines hold some).
_LIBRARY_FIRST = _LIBRARY_LINE_GATE.first_literals()
_TEXT_FROM = operator.attrgetter("text_from")
_STRIP = operator.methodcaller("strip")


_ENDS_CLOSED = operator.methodcaller("endswith", ")")


# A stack frame (py-spy's "name (file.py:12)"), whoever printed it: what the rank was
# doing is the stacks' to say, not a line the job printed.
_STACK_FRAME = FRAME
# A traceback's frame line ('File "<path>", line <n>, in <name>': CPython's traceback.py),
# which a source line follows; faulthandler's has no comma and no source line.
_TRACEBACK_FRAME = re.compile(r'File "[^"\n]*", line \d+, in ')
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


@dataclass(slots=True)
class WindowColumns:
    """One rank's window of one file as columns: each kept line's text and line number
    (0: not numbered), and the few lines with a benign mark by their index; every line's
    source is the file's. What a worker sends back instead of the ``LogLine`` records
    (pickling 1,567 frozen records a rank cost 2 ms each way, these 0.13 ms) and what
    ``lines`` builds them from, in C (0.3 ms)."""

    texts: list[str] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    marks: list[tuple[int, BenignWarning]] = field(default_factory=list)

    def lines(self, source: str) -> list[LogLine]:
        """``[LogLine(text, source, number, mark) ...]``, the records made bare and each
        field's slot filled by one ``map`` over its descriptor (what the frozen record's
        own __init__ does, line by line in Python)."""
        out: list[LogLine] = list(map(object.__new__, itertools.repeat(LogLine, len(self.texts))))
        _drain(map(_SET_TEXT, out, self.texts))
        _drain(map(_SET_SOURCE, out, itertools.repeat(source)))
        _drain(map(_SET_LINE, out, self.numbers))
        _drain(map(_SET_BENIGN, out, itertools.repeat(None)))
        for index, mark in self.marks:
            out[index] = LogLine(self.texts[index], source, self.numbers[index], mark)
        return out

    def keep_last(self, count: int) -> None:
        """Only the last ``count`` lines."""
        cut = len(self.texts) - count
        if cut > 0:
            del self.texts[:cut], self.numbers[:cut]
            self.marks = [(index - cut, mark) for index, mark in self.marks if index >= cut]


# Each field of a LogLine with the C function that fills its slot; checked here so that a
# new field (or a __post_init__, which records built bare would skip) stops it loudly.
_FIELDS = dataclasses.fields(LogLine)
if [f.name for f in _FIELDS] != ["text", "source", "line", "benign"] or hasattr(
    LogLine, "__post_init__"
):
    raise TypeError("WindowColumns builds LogLine(text, source, line, benign) records bare")
_SET_TEXT, _SET_SOURCE, _SET_LINE, _SET_BENIGN = (getattr(LogLine, f.name).__set__ for f in _FIELDS)
_drain = collections.deque[object](maxlen=0).extend


_CHUNK = 64
_SLICE_FROM = itertools.repeat(None)


# The words that make a chunk unsure, any line holding one (_plain_chunk): a launcher's
# rank prefix, a benign warning's needle, a library line's literals. Each is looked for
# in the lines' shapes, as it is in its own shape (its digits 0): a line that holds a
# word holds it in its shape, so a shape that holds none is of lines that hold none;
# asked once a shape (a rank window's chunks are a few shapes of step lines each), not
# in each chunk's text (17 literals, each a pass over it: a third of the window's cost).
_STR_ZEROS = str.maketrans("123456789", "000000000")  # (prefilter.line_shape's digits)
_UNSURE_WORDS = frozenset(
    word.translate(_STR_ZEROS)
    for word in ("[rank", "[default", *BENIGN_NEEDLES, *(_LIBRARY_FIRST or ()))
)
_HOLDS_UNSURE_WORD = any_of(_UNSURE_WORDS)
_holding_shapes: dict[bytes, bool] = {}
_MAX_HOLDING_SHAPES = 4096


def _plain_chunk(raws: list[str], shapes: list[bytes]) -> list[str] | None:
    """The texts read_window_columns keeps of a chunk of lines whose every line is an
    untagged job's line (a logging header's, the bench's step lines) that is kept as it
    is after its header, found for the chunk at once; None where that is not sure, and
    the lines are read one by one.

    Sure when: no line may start with a launcher's rank prefix (no "[rank", "[default"
    in the chunk); every line's wrap facts are known of its shape (known_facts: a
    plain line, whose text is the line from text_from on) and say untagged, no rank
    named, not the library's; and of the texts (each a part of its line, so of the
    chunk) none may be a library's line (the chunk holds none of the literals one of
    which its every match holds) or a benign warning (no needle), none is short enough
    for a rank label (_MAX_LABEL) or empty, and none ends with ")" (a stack frame's
    end). The caller makes sure no traceback frame of an unranked line is open and that
    the rank is known."""
    if max(map(len, raws)) > MAX_WRAP_SHAPE_LINE or _LIBRARY_FIRST is None:
        return None
    for shape in set(shapes):
        holds = _holding_shapes.get(shape)
        if holds is None:
            if len(_holding_shapes) >= _MAX_HOLDING_SHAPES:
                _holding_shapes.clear()
            holds = _holding_shapes[shape] = _HOLDS_UNSURE_WORD(
                shape.decode("utf-8", "surrogatepass")
            )
        if holds:
            return None
    known = known_facts(raws, shapes)
    if known is None or not all(
        facts.text_from >= 0 and not (facts.ranked or facts.tagged or facts.library)
        for facts in known.values()
    ):
        return None
    starts = map(slice, map(_TEXT_FROM, map(known.__getitem__, shapes)), _SLICE_FROM)
    texts: list[str] = list(map(_STRIP, map(operator.getitem, raws, starts)))
    if min(map(len, texts)) < _MAX_LABEL or any(map(_ENDS_CLOSED, texts)):
        return None
    return texts


def read_line_window(
    path: Path, display: str, default_rank: int | None
) -> dict[int, list[LogLine]]:
    """The lines of each rank in the file's head and tail, launcher prefixes peeled
    (``read_window_columns``, as records)."""
    return {
        rank: columns.lines(display)
        for rank, columns in read_window_columns(path, default_rank).items()
    }


def read_window_columns(
    path: Path, default_rank: int | None, pid_ranks: Mapping[int, int | None] | None = None
) -> dict[int, WindowColumns]:
    """The lines of each rank in the file's head and tail, launcher prefixes peeled.

    A line's rank is the one its prefix names (``[rank3]:``, ``[default3]:``, ``3:``),
    else, in a file no rank owns, the global rank its words name as its own (``Rank 3,
    world_size 8: …``, ``[rank: 3]``: parsers/logs/mentions.py), else the one of the
    section it is in (a paste of several ranks, each under a line
    that is nothing but a label: ``rank 3:``, ``=== Rank 3 ===``, ``Rank 3 py-spy dump``,
    or one that names the process by a pid of ``pid_ranks``, the dumped processes' pids
    with their ranks: ``node-1:24036 (rank 3)``, ``$ py-spy dump --pid 24036``), else
    ``default_rank`` (the rank whose own file this is), else it is kept under
    ``UNATTRIBUTED``: it cannot be compared across ranks, but says what the job did.
    Stack frames and a traceback's source lines are the stacks' to read, not the job's.
    """
    out: dict[int, WindowColumns] = {}
    said: int | None
    section: int | None = None
    # Whose last line was a traceback frame, and whether its source line must be indented
    # to be taken for one: the indented next line is the frame's source, and so is any
    # next line of a traceback frame whose indent the paste lost (CPython's traceback
    # prints a source line under every frame whose file it can read; a paste that drops
    # the indent drops it from both).
    after_frame: dict[int | None, bool] = {}
    # Whose last line was a traceback frame's source line: CPython ≥3.13 prints every line
    # of a statement that spans several (traceback.py FrameSummary's all_lines), each
    # indented under the frame like its first; they are the stack's too.
    in_source: set[int | None] = set()
    numbered = list(_raw_lines(path))
    raws = [raw for _, raw in numbered]
    # every line's shape (prefilter.line_shape) in one C-level pass: no line holds a "\n"
    shapes = block_shapes("\n".join(raws).encode("utf-8", "surrogatepass"))
    index, ahead = 0, 0  # ahead: the lines from index on are the chunk's, read already
    for (number, raw), shape in zip(numbered, shapes, strict=False):
        index += 1
        if ahead:
            ahead -= 1
            continue
        owner = section if section is not None else default_rank
        if (
            index % _CHUNK == 1
            and owner is not None
            and default_rank is not None
            and None not in after_frame
            and (
                chunk := _plain_chunk(
                    raws[index - 1 : index - 1 + _CHUNK], shapes[index - 1 : index - 1 + _CHUNK]
                )
            )
            is not None
        ):
            columns = out.get(owner)
            if columns is None:
                columns = out[owner] = WindowColumns()
            columns.texts.extend(chunk)
            columns.numbers.extend(n or 0 for n, _ in numbered[index - 1 : index - 1 + len(chunk)])
            ahead = len(chunk) - 1
            continue
        fast = _RANK_PREFIX.match(raw)
        if fast is not None and "\x1b" not in raw and "\r" not in raw:
            text, said = raw[fast.end() :].strip(), int(fast.group(1))
            indented = False
        elif (
            len(raw) <= MAX_WRAP_SHAPE_LINE
            and (facts := wrap_facts(raw, shape)).text_from >= 0
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
        # A traceback's source line is code, not output: read before any label, so that
        # "    rank = 0" under a frame opens no section of rank 0.
        if said in in_source:
            if indented:
                continue  # a further line of the statement, or its anchors
            in_source.discard(said)
        if said in after_frame:
            needs_indent = after_frame.pop(said)
            if indented or not (needs_indent or text.startswith('File "')):
                in_source.add(said)
                continue  # the source line under a traceback frame
        if said is None and len(text) < _MAX_LABEL and (label := process_label(text)) is not None:
            named, pid = label
            if pid is None:
                section = named
                continue
            if pid_ranks is not None and pid in pid_ranks:
                section = pid_ranks[pid]  # the dumped process's (None: it has no rank)
                continue
            # (a pid no dumped process has: no label, a line of the job's)
        if not text or _LIBRARY_LINE_SEARCH(text):
            if text.startswith('File "'):
                after_frame[said] = indented or _TRACEBACK_FRAME.match(text) is None
            continue
        if text[-1] == ")" and _STACK_FRAME.match(text):
            continue
        if said is None and default_rank is None:
            said = _mentioned(text)
        rank = said if said is not None else section if section is not None else default_rank
        if rank is None:
            rank = UNATTRIBUTED  # kept apart: what the console said, by no known rank
        kept = text[:MAX_LINE_CHARS]
        columns = out.get(rank)
        if columns is None:
            columns = out[rank] = WindowColumns()
        mark = benign_warning(kept)
        if mark is not None:
            columns.marks.append((len(columns.texts), mark))
        columns.texts.append(kept)
        columns.numbers.append(number or 0)
    for columns in out.values():
        columns.keep_last(MAX_LINES_PER_RANK)
    return out
