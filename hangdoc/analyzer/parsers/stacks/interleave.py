"""Tracebacks of several processes interleaved line by line in one unprefixed stream.

torchrun's children share one terminal: when several ranks raise at once, CPython's
printer writes each traceback a piece at a time (a frame line, a source line, its newline
apart), so their lines arrive shuffled (fixtures/logs/interleaved/raw-*.log, recorded by
fixtures/logs/record_interleaved.py): a second ``Traceback (most recent call last):``
before the first has ended, frames of one rank between frames of another, a source line
cut by another rank's frame line and finished by a lone newline. Read in order they make
one traceback with another rank's exception, or frames given to the wrong rank.

``split_interleaved`` deals the lines of such a stretch back to their tracebacks by the
traceback grammar (after a frame line comes its source line, after a source line another
frame or the exception; a frame of a file and line has the source any other traceback
showed for it) and returns them one after the other, each whole, for the traceback parser.
A stream with a prefix per line (``[rank3]:``, ``[default3]:``) is split by the prefixes
before this (parsers/prefixes.py); a text with no overlapping tracebacks is returned as it
is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.stacks.blocks import Lines

_HEADER = re.compile(r"\s*Traceback \(most recent call last\):\s*$")
_FRAME = re.compile(r'(\s*)File "([^"\n]+)", line (\d+), in \S.*$')
# A source line cut by another rank's frame line: the source, then the frame on one line.
_FUSED = re.compile(r'^(\s{4,}\S.*?)(\s{2}File "[^"\n]+", line \d+, in \S.*)$')
_RAISE = re.compile(r"raise\s+\w")
_EXCEPTION = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?::\s?.*)?$")
# Lines that follow a source line: CPython 3.11's carets, the repeat count.
_AFTER_SOURCE = re.compile(r"\s*(?:[~^]+\s*$|\[Previous line repeated \d+ more times?\])")

# How well a line of each kind follows a traceback's last line of each kind.
_FITS = {
    ("frame", "head"): 3,
    ("frame", "source"): 3,
    ("frame", "frame"): 1,  # a frame whose source was not shown
    ("source", "frame"): 3,
    ("exception", "source"): 3,
    ("exception", "frame"): 2,
}


@dataclass(slots=True)
class _Open:
    lines: Lines = field(default_factory=list)
    last: str = "head"
    frames: list[tuple[str, str]] = field(default_factory=list)  # (file, line) of each frame
    source: str = ""  # its last source line
    written: int = 0  # when it last took a line


def _kind(text: str) -> str | None:
    if _HEADER.match(text):
        return "head"
    if _FRAME.match(text):
        return "frame"
    if _AFTER_SOURCE.match(text):
        return "after-source"
    if text.startswith("    ") and text.strip():
        return "source"
    if text and not text[0].isspace() and _EXCEPTION.match(text):
        return "exception"
    return None


def _pieces(lines: Lines) -> list[tuple[int, str, bool]]:
    """The lines with a cut source line and the frame written into it taken apart (the
    frame marked as another rank's: it interrupted the source line), the lone newline
    that ended the cut line dropped. Two cuts: the source, then the frame on one line
    (then a blank line), or a source line's indent, then the frame, then the source
    line's text alone at the start of the next line."""
    out: list[tuple[int, str, bool]] = []
    drop_blank = False
    i = 0
    while i < len(lines):
        number, text = lines[i]
        i += 1
        if drop_blank and not text.strip():
            drop_blank = False
            continue
        drop_blank = False
        frame = _FRAME.match(text)
        fused = _FUSED.match(text) if frame is None else None
        if fused is not None:
            out.extend([(number, fused.group(1), False), (number, fused.group(2), True)])
            drop_blank = True
            continue
        indent = len(frame.group(1)) if frame is not None else 0
        if indent >= 6 and i < len(lines) and lines[i][1].strip():
            rest = lines[i][1]
            if not rest[0].isspace() and _kind(rest) is None:
                source = " " * (indent - 2) + rest
                out.extend([(lines[i][0], source, False), (number, text[indent - 2 :], True)])
                i += 1
                continue
        out.append((number, text, False))
    return out


def _overlaps(lines: list[tuple[int, str, bool]]) -> bool:
    """Does a traceback header come while another traceback is still open?"""
    open_ = False
    for _, text, _ in lines:
        kind = _kind(text)
        if kind == "head":
            if open_:
                return True
            open_ = True
        elif kind == "exception" or kind is None:
            open_ = False
    return False


def split_interleaved(lines: Lines) -> Lines:
    """The lines with each stretch of interleaved tracebacks dealt back to its tracebacks,
    each then given whole in the order their headers came; other lines as they are."""
    if sum(1 for _, text in lines if "Traceback (most recent" in text) < 2:
        return lines
    pieces = _pieces(lines)
    if not _overlaps(pieces):
        return lines
    dealer = _Dealer()
    for number, text, interrupts in pieces:
        dealer.take(number, text, interrupts)
    dealer.flush()
    return dealer.out


class _Dealer:
    """Deals each line to the open traceback it fits best (``_score``)."""

    def __init__(self) -> None:
        self.out: Lines = []
        self.opened: list[_Open] = []
        self.done: list[_Open] = []
        self.sources: dict[tuple[str, str], str] = {}  # (file, line) -> its source line
        self.previous: _Open | None = None
        self.clock = 0

    def flush(self) -> None:
        for tb in sorted(self.done + self.opened, key=lambda t: t.lines[0][0]):
            self.out.extend(tb.lines)
        self.done.clear()
        self.opened.clear()
        self.previous = None

    def take(self, number: int, text: str, interrupts: bool) -> None:
        kind = _kind(text)
        self.clock += 1
        if kind == "head":
            self.opened.append(_Open(lines=[(number, text)], written=self.clock))
            self.previous = self.opened[-1]
            return
        # A frame written into another's source line is not that traceback's.
        candidates = [tb for tb in self.opened if not (interrupts and tb is self.previous)]
        pool = candidates or self.opened
        best = self._best(pool, kind, text) if pool and kind is not None else None
        if best is None:
            self.flush()
            self.out.append((number, text))
            return
        best.lines.append((number, text))
        best.written = self.clock
        self.previous = best
        if kind == "frame" and (m := _FRAME.match(text)) is not None:
            best.frames.append((m.group(2), m.group(3)))
            best.last = "frame"
        elif kind == "source":
            if best.frames:
                self.sources.setdefault(best.frames[-1], text.strip())
            best.source = text.strip()
            best.last = "source"
        elif kind == "exception":
            self.opened.remove(best)
            self.done.append(best)
            if not self.opened:
                self.flush()

    def _best(self, opened: list[_Open], kind: str, text: str) -> _Open | None:
        """The open traceback the line fits best. Ties go to the one written least
        recently: processes writing at once alternate, piece by piece."""
        scores = [(self._score(tb, kind, text), -tb.written) for tb in opened]
        top = max(scores)
        if top[0] <= 0:
            return None
        return opened[scores.index(top)]

    def _score(self, tb: _Open, kind: str, text: str) -> int:
        """How well the line continues ``tb``, by the grammar of CPython's printer."""
        if kind == "after-source":
            if text.strip().startswith("[Previous line repeated"):
                # printed after the third identical entry, never after another
                frames = tb.frames[-3:]
                same = len(frames) == 3 and len(set(frames)) == 1
                return (3 if same else -3) if tb.last == "source" else -3
            return 3 if tb.last == "source" else 1  # 3.11's carets
        score = _FITS.get((kind, tb.last), 0)
        if kind == "source" and tb.frames:
            known = self.sources.get(tb.frames[-1])
            if known is not None:  # the same file and line show the same source
                score += 2 if known == text.strip() else -2
        if kind == "frame" and tb.last == "source" and _RAISE.match(tb.source):
            score -= 2  # a raise statement's frame is the innermost
        if kind == "exception" and tb.last == "source":
            name = text.split(":", 1)[0].strip().rsplit(".", 1)[-1]
            if re.search(rf"\b{re.escape(name)}\b", tb.source):
                score += 1  # the raise statement names it
        return score


def traceback_body(lines: Lines) -> set[int]:
    """The numbers of the lines that are a traceback's code or end by CPython's printing
    grammar: a source line under a frame line (with 3.11's carets and a statement's
    further lines), the exception line right under a source line or a frame. What such a
    line says is the program's code or its raise, never a marker over the next block."""
    out: set[int] = set()
    last: str | None = None
    for number, text in lines:
        kind = _kind(text)
        if kind == "frame":
            last = "frame"
        elif kind in ("source", "after-source") and last in ("frame", "source"):
            out.add(number)
            last = "source"
        elif kind == "exception" and last in ("frame", "source"):
            out.add(number)
            last = None
        elif text.strip():
            last = None
    return out
