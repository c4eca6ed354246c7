"""What happens to machine output between the job and hangdoc: a paste's manglings.

A person rarely hands hangdoc the bytes the job wrote. A GitHub comment quotes them
("> "), Markdown indents them four spaces or fences them, a terminal or an editor
hard-wraps them, a log shipper stamps every line (kubectl, docker, journald, CloudWatch),
a selection starts in the middle of the first line, a shared console interleaves the
ranks' lines, a reporter bolds the line that matters, a TTY colours it, a careless copy
pastes it twice. The evidence is the same, so the diagnosis must be the same
(DESIGN.md, "mangling a paste never changes the answer").

Each mangling here is a pure function of the text, deterministic (the metamorphic test
must fail the same way twice), written from what the tools print:

* kubectl ``logs --prefix`` ("[pod/NAME/CONTAINER] ", kubectl's logs.go
  addPrefixIfNeeded) and ``--timestamps`` (RFC 3339 with nanoseconds and "Z");
* docker compose ("SERVICE-1  | ", the service and replica padded, then "| ");
* journald's short format ("May 01 10:00:00 HOST IDENT[PID]: ", systemd's
  output_short);
* CloudWatch Logs as ``aws logs tail`` prints it ("TIME STREAM MESSAGE", the time in
  ISO 8601 with "+00:00": awscli v2's default "detailed" format);
* a web console's log viewer copied as a Markdown table ("  |   | TIME SOURCE >> LINE |");
* a terminal's hard wrap (a line longer than the width continues on the next line,
  cut at the column, whatever it cuts);
* a soft wrap at word boundaries copied as line breaks (an issue tracker's or a mail
  client's reflow, an editor's fill, Python's ``textwrap``): the line breaks at the last
  space before the width, and the space is gone.

``MANGLINGS`` lists each alone, ``WORD_WRAPS`` the soft wraps at word boundaries, and
``COMBINED`` a few that happen together (a wrapped
terminal capture then quoted; an indented code block with CRLF).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Mangle = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class Mangling:
    """A named way a paste gets changed; ``apply`` maps the text to the mangled text."""

    name: str
    apply: Mangle
    # Stamps lines with a made-up clock: applied to one-file cases only. Across a case's
    # files, that clock would stand beside the files' own clocks (glog, Python logging)
    # as if it were the same one, and order their events by accident of the mangling.
    adds_clock: bool = False


def _lines(text: str) -> tuple[list[str], bool]:
    """The text's lines without their ends, and whether it ended with one."""
    ends = text.endswith("\n")
    body = text[:-1] if ends else text
    return body.split("\n"), ends


def _join(lines: Sequence[str], ends: bool) -> str:
    return "\n".join(lines) + ("\n" if ends else "")


def _each_line(text: str, change: Callable[[int, str], str]) -> str:
    lines, ends = _lines(text)
    return _join([change(i, line) for i, line in enumerate(lines)], ends)


# --- Markdown ------------------------------------------------------------------------
def quote(text: str, depth: int = 1, space: bool = True) -> str:
    """A Markdown block quote: every line, blank ones too, under ``>`` (nested ``depth``
    times); GitHub's "Quote reply" writes "> " and a bare ">" on blank lines."""
    marker = "> " if space else ">"

    def change(_: int, line: str) -> str:
        if not line.strip():
            return (">" * depth) if not space else " ".join(">" * depth)
        return marker * depth + line

    return _each_line(text, change)


def indent(text: str, margin: str = "    ") -> str:
    """A Markdown code block by indentation: each non-blank line shifted by ``margin``."""
    return _each_line(text, lambda _, line: margin + line if line.strip() else line)


def fence(text: str, info: str = "") -> str:
    """A fenced Markdown code block."""
    body = text if text.endswith("\n") else text + "\n"
    return f"```{info}\n{body}```\n"


_WORD_TO_BOLD = re.compile(r"(?i)error|warn|timed? ?out|fail|exception|killed|abort")
_IDENTIFIER = re.compile(r"(?<![\w`*])([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+|[A-Z]+_[A-Z_]+)(?![\w`])")


def emphasis(text: str) -> str:
    """Markdown emphasis as a reporter adds it: the lines that matter in bold (after
    their indentation), dotted names and SHOUTING_NAMES in backticks."""

    def change(_: int, line: str) -> str:
        stripped = line.lstrip(" \t")
        if not stripped.strip():
            return line
        margin = line[: len(line) - len(stripped)]
        if _WORD_TO_BOLD.search(stripped):
            core = stripped.rstrip()
            return f"{margin}**{core}**{stripped[len(core) :]}"
        return margin + _IDENTIFIER.sub(r"`\1`", stripped, count=2)

    return _each_line(text, change)


# --- terminals ---------------------------------------------------------------------------
def crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def hard_wrap(text: str, width: int) -> str:
    """A terminal's wrap, copied: a line longer than ``width`` continues on the next
    line, cut at the column whatever it cuts."""
    if width < 1:
        raise ValueError("width must be positive")
    out: list[str] = []
    lines, ends = _lines(text)
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        out.extend(line[k : k + width] for k in range(0, len(line), width))
    return _join(out, ends)


def word_wrap(text: str, width: int) -> str:
    """A soft wrap at word boundaries, copied as line breaks (an issue tracker's or a mail
    client's reflow, an editor's fill, ``textwrap``): a line longer than ``width`` breaks
    at the last space at or before the column, the space dropped; a word longer than the
    width, with no space before it on the line, is cut at the column."""
    if width < 1:
        raise ValueError("width must be positive")
    out: list[str] = []
    lines, ends = _lines(text)
    for line in lines:
        while len(line) > width:
            margin = len(line) - len(line.lstrip(" "))
            at = line.rfind(" ", margin + 1, width + 1)
            if at <= margin:
                out.append(line[:width])
                line = line[width:]
                continue
            out.append(line[:at])
            line = line[at + 1 :]
        out.append(line)
    return _join(out, ends)


_COLOURS = ("\x1b[31m", "\x1b[33m", "\x1b[36m", "\x1b[1m", "\x1b[32m")
_LEVEL_WORD = re.compile(r"\b(ERROR|WARN(?:ING)?|INFO|Error|Warning)\b")


def ansi_colours(text: str) -> str:
    """A TTY's colours: each line coloured whole, and level words coloured again
    inside it (colorlog, rich, py-spy on a terminal)."""

    def change(i: int, line: str) -> str:
        if not line.strip():
            return line
        line = _LEVEL_WORD.sub(lambda m: f"\x1b[1;31m{m.group(1)}\x1b[0m", line)
        return f"{_COLOURS[i % len(_COLOURS)]}{line}\x1b[0m"

    return _each_line(text, change)


# --- log shippers ------------------------------------------------------------------------
# A shipper stamps when each line reached it. A made-up clock that advanced line by line
# would assert an order of events the paste does not show (a reporter's paste is not
# always in time order), and across a case's files an order by accident of the mangling;
# so every line gets one instant, as a burst of output that arrived within a second.
_DAY, _TIME = "2024-05-01", "10:00:00"


def timestamps(text: str) -> str:
    """``kubectl logs --timestamps`` / ``docker logs -t``: RFC 3339, nanoseconds, "Z"."""
    return _each_line(text, lambda _, line: f"{_DAY}T{_TIME}.271828123Z {line}")


def kubectl(text: str) -> str:
    """``kubectl logs --prefix``: "[pod/POD/CONTAINER] " on every line."""
    return _each_line(text, lambda _, line: f"[pod/trainer-worker-0/pytorch] {line}")


def docker_compose(text: str) -> str:
    """``docker compose logs``: the service and replica, padded, then "| "."""
    return _each_line(text, lambda _, line: f"trainer-1  | {line}")


def journald(text: str) -> str:
    """journalctl's short format: time, host, identifier[pid]."""
    return _each_line(text, lambda _, line: f"May 01 {_TIME} gpu-node-07 python[48213]: {line}")


def cloudwatch(text: str) -> str:
    """CloudWatch Logs through ``aws logs tail``: time, log stream, message."""
    stream = "train-job-7/algo-1-1714557600"
    return _each_line(text, lambda _, line: f"{_DAY}T{_TIME}.271828+00:00 {stream} {line}")


def log_viewer_table(text: str) -> str:
    """A web console's log viewer copied into an issue as a Markdown table: an empty
    column, then time, source and line in one cell (Qwen3-VL#1756, casebook
    qwen3vl-1756: "  |   | TIME HOST >> LINE |  ")."""
    return _each_line(
        text, lambda _, line: f"  |   | {_DAY} {_TIME}.271828 trainer-master-0 >> {line} |  "
    )


# --- selections and consoles -------------------------------------------------------------
def cut_first_line(text: str, fraction: float = 0.5, chars: int | None = None) -> str:
    """A selection that starts inside the first non-blank line: ``chars`` characters in
    (a header's worth, when given), else at ``fraction`` of its length."""
    lines, ends = _lines(text)
    for i, line in enumerate(lines):
        if line.strip():
            at = chars if chars is not None else int(len(line) * fraction)
            lines[i] = line[min(at, len(line) - 1) :]
            return _join(lines[i:], ends)
    return text


def twice(text: str) -> str:
    """The same paste pasted again below itself."""
    body = text if text.endswith("\n") else text + "\n"
    return body + body


_OWNER = re.compile(
    r"(?:\[(?:rank|default)(\d+)\]:|\[1,(\d+)\]<std(?:out|err)>:| {0,4}(\d{1,5}): )"
)


def interleave(text: str) -> str:
    """A console the ranks shared: each rank's records (a prefixed line and the
    unprefixed lines under it) taken in turn, one from each rank, each rank's own order
    kept. A text with fewer than two ranks' prefixes is left as it is."""
    lines, ends = _lines(text)
    head: list[str] = []
    records: dict[str, list[list[str]]] = {}
    current: list[str] | None = None
    for line in lines:
        m = _OWNER.match(line)
        if m is not None:
            current = [line]
            records.setdefault(next(g for g in m.groups() if g is not None), []).append(current)
        elif current is None:
            head.append(line)
        else:
            current.append(line)
    if len(records) < 2:
        return text
    out = head[:]
    queues = list(records.values())
    turn = 0
    while any(queues):
        queue = queues[turn % len(queues)]
        if queue:
            out.extend(queue.pop(0))
        turn += 1
    return _join(out, ends)


def compose(*steps: Mangle) -> Mangle:
    """The manglings applied in order (the first one to the original text)."""

    def apply(text: str) -> str:
        for step in steps:
            text = step(text)
        return text

    return apply


def _wrap(width: int) -> Mangle:
    return lambda text: hard_wrap(text, width)


def _word_wrap(width: int) -> Mangle:
    return lambda text: word_wrap(text, width)


MANGLINGS: tuple[Mangling, ...] = (
    Mangling("quote", quote),
    Mangling("quote nested", lambda t: quote(t, depth=2)),
    Mangling("quote tight (>)", lambda t: quote(t, space=False)),
    Mangling("indent 4 spaces", indent),
    Mangling("indent tab", lambda t: indent(t, "\t")),
    Mangling("fence", lambda t: fence(t, "text")),
    Mangling("CRLF", crlf),
    Mangling("wrap 40", _wrap(40)),
    Mangling("wrap 80", _wrap(80)),
    Mangling("wrap 100", _wrap(100)),
    Mangling("wrap 137", _wrap(137)),
    Mangling("wrap 200", _wrap(200)),
    Mangling("timestamps", timestamps, adds_clock=True),
    Mangling("kubectl", kubectl),
    Mangling("docker compose", docker_compose),
    Mangling("journald", journald, adds_clock=True),
    Mangling("CloudWatch", cloudwatch, adds_clock=True),
    Mangling("log viewer table", log_viewer_table, adds_clock=True),
    Mangling("cut first line (12 chars)", lambda t: cut_first_line(t, chars=12)),
    Mangling("cut first line (middle)", cut_first_line),
    Mangling("interleave ranks", interleave),
    Mangling("Markdown emphasis", emphasis),
    Mangling("ANSI colours", ansi_colours),
    Mangling("pasted twice", twice),
)

# Soft wraps at word boundaries, at a mail client's or an editor's width and at a page's:
# measured apart from the rest (tests/casebook/test_paste_manglings.py), since some of
# their answers still change (docs/pastes.md).
WORD_WRAPS: tuple[Mangling, ...] = (
    Mangling("word wrap 80", _word_wrap(80)),
    Mangling("word wrap 120", _word_wrap(120)),
)

COMBINED: tuple[Mangling, ...] = (
    Mangling("wrap 100 + quote", compose(_wrap(100), quote)),
    Mangling("indent + CRLF", compose(indent, crlf)),
    Mangling("timestamps + wrap 120", compose(timestamps, _wrap(120)), adds_clock=True),
    Mangling("cut 12 + quote", compose(lambda t: cut_first_line(t, chars=12), quote)),
    Mangling("ANSI + kubectl", compose(ansi_colours, kubectl)),
    Mangling("emphasis + indent", compose(emphasis, indent)),
    Mangling("wrap 80 + fence + CRLF", compose(_wrap(80), lambda t: fence(t), crlf)),
)
