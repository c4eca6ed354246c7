"""Reading C and C++ sources for the messages they print: calls, literals, formats.

Not a C parser: enough of one to find a logging call (``WARN(...)``, ``TORCH_CHECK(...)``,
``LOG(ERROR) << …``), split its arguments at the top level, concatenate adjacent string
literals (with ``PRIu64``-style macros and ``#param`` stringification), turn a printf
format into template parts, and name the function or macro a call sits in.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

from hangdoc.analyzer.parsers.catalog.template import Part, Slot

_PRI = {"d": "int", "i": "int", "u": "uint", "x": "hex", "X": "hex", "o": "uint"}
_PRINTF = re.compile(
    r"%(?P<flags>[-+ #0']*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?"
    r"(?P<len>hh|h|ll|l|L|z|j|t|q)?(?P<conv>[diouxXeEfgGaAcspn%])"
)
_CONV_TYPE = {
    "d": "int",
    "i": "int",
    "u": "uint",
    "o": "uint",
    "x": "hex",
    "X": "hex",
    "e": "float",
    "E": "float",
    "f": "float",
    "g": "float",
    "G": "float",
    "a": "float",
    "A": "float",
    "c": "char",
    "s": "text",
    "p": "ptr",
}
_PRI_MACRO = re.compile(r"PRI([diouxX])(8|16|32|64|MAX|PTR|LEAST\d+|FAST\d+)?")
_IDENT = re.compile(r"[A-Za-z_]\w*")
# A backslash before a newline splices the lines (C's translation phase 2): the string goes on
# with the next line's text, its indentation included (NCCL 2.8-2.12 net_socket.cc's
# "… in healthy state, \<newline>          there may be a mismatch …").
_CHAR_ESC = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "0": "",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "a": "",
    "\n": "",
}


def blank_comments(code: str) -> str:
    """Comments replaced by blanks (newlines kept, so offsets and line numbers hold);
    strings and character literals untouched."""
    out: list[str] = []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == "/" and i + 1 < n and code[i + 1] == "/":
            j = code.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and i + 1 < n and code[i + 1] == "*":
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", code[i:j]))
            i = j
        elif c == "R" and code.startswith('R"', i) and (i == 0 or not code[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]{0,16})\(', code[i:])
            if m is None:
                out.append(c)
                i += 1
                continue
            end = code.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(code[i:j])
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            out.append(code[i : j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    args: list[str]
    offset: int
    line: int
    end: int


def _skip_string(code: str, i: int) -> int:
    quote = code[i]
    j = i + 1
    while j < len(code) and code[j] != quote:
        j += 2 if code[j] == "\\" else 1
    return j + 1


def statement_end(code: str, i: int) -> int:
    """Where the statement at ``i`` ends: its ``;`` outside string literals ("; capacity: "
    is text of a message, not its end), or -1."""
    while i < len(code):
        if code[i] in "\"'":
            i = _skip_string(code, i)
            continue
        if code[i] == ";":
            return i
        i += 1
    return -1


def balanced_args(code: str, open_at: int) -> tuple[list[str], int] | None:
    """The top-level comma-separated arguments of the parenthesis at ``open_at``."""
    depth, i, start = 0, open_at, open_at + 1
    args: list[str] = []
    n = len(code)
    while i < n:
        c = code[i]
        if c in "\"'":
            if c == "'" and i > 0 and code[i - 1].isalnum() and code[i - 2 : i] != "u8":
                i += 1  # a digit separator (1'000) is no char literal
                continue
            if code.startswith('R"', i - 1):
                m = re.match(r'"([^(\s]{0,16})\(', code[i:])
                if m is not None:
                    end = code.find(")" + m.group(1) + '"', i)
                    i = n if end < 0 else end + len(m.group(1)) + 2
                    continue
            i = _skip_string(code, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(code[start:i])
                return [a.strip() for a in args], i + 1
        elif c == "," and depth == 1:
            args.append(code[start:i])
            start = i + 1
        elif c == ";" and depth <= 1:
            return None
        i += 1
    return None


class LineIndex:
    def __init__(self, code: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer("\n", code)]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)


def find_calls(code: str, names: tuple[str, ...]) -> Iterator[Call]:
    """Calls of the named macros/functions in comment-free code."""
    pattern = re.compile(r"(?<![\w.>:])(" + "|".join(re.escape(n) for n in names) + r")\s*\(")
    lines = LineIndex(code)
    for m in pattern.finditer(code):
        got = balanced_args(code, m.end() - 1)
        if got is None:
            continue
        args, end = got
        yield Call(m.group(1), args, m.start(), lines.line(m.start()), end)


_LIT_TOKEN = re.compile(
    r'(?P<prefix>u8|[LuU])?R"(?P<delim>[^(\s]{0,16})\((?P<raw>.*?)\)(?P=delim)"'
    r'|(?P<sprefix>u8|[LuU])?"(?P<str>(?:[^"\\\n]|\\.)*)"'
    r"|#\s*(?P<stringify>[A-Za-z_]\w*)"
    r"|(?P<ident>[A-Za-z_][\w:]*(?:\(\))?)"
    r"|(?P<space>\s+)",
    re.S,
)


def decode(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "x":
                m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2 :])
                if m:
                    out.append(chr(int(m.group(0), 16)))
                    i += 2 + len(m.group(0))
                    continue
            out.append(_CHAR_ESC.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


@dataclass(slots=True)
class Literal:
    """A concatenation of literals: the text, and where a macro parameter or ``#x`` sits
    a slot (its text inserted as a NUL-delimited marker until the format is read)."""

    text: str
    markers: list[str]


def literal(arg: str) -> Literal | None:
    """The string an argument is, when it is made only of literals (and macro pieces)."""
    pos = 0
    text: list[str] = []
    markers: list[str] = []
    seen_string = False
    while pos < len(arg):
        m = _LIT_TOKEN.match(arg, pos)
        if m is None:
            return None
        pos = m.end()
        if m.group("space"):
            continue
        if m.group("raw") is not None:
            text.append(m.group("raw"))
            seen_string = True
        elif m.group("str") is not None:
            text.append(decode(m.group("str")))
            seen_string = True
        elif m.group("stringify"):
            markers.append(m.group("stringify"))
            text.append("\x00")
        elif m.group("ident"):
            ident = m.group("ident")
            pri = _PRI_MACRO.fullmatch(ident)
            if pri is not None:
                text.append(("l" if pri.group(2) == "64" else "") + pri.group(1))
            elif ident in {"__FILE__", "__func__", "__FUNCTION__"}:
                markers.append(ident)
                text.append("\x00")
            else:
                markers.append(ident)  # a macro parameter that holds a string
                text.append("\x00")
        else:
            return None
    if not seen_string:
        return None
    return Literal("".join(text), markers)


def printf_parts(lit: Literal, args: list[str]) -> list[Part]:
    """Template parts of a printf format: conversions become typed slots named by the
    arguments that fill them."""
    parts: list[Part] = []
    markers = iter(lit.markers)
    values = iter(args)
    text = lit.text
    pos = 0
    for m in _PRINTF.finditer(text):
        _literal_with_markers(text[pos : m.start()], markers, parts)
        pos = m.end()
        conv = m.group("conv")
        if conv == "%":
            parts.append("%")
            continue
        for star in (m.group("width"), m.group("prec")):
            if star == "*":
                next(values, None)
        if conv == "n":
            continue
        name = _short(next(values, "") or "")
        kind = _CONV_TYPE[conv]
        if conv == "s" and m.group("prec") not in (None, "*") and False:
            kind = "text"
        parts.append(Slot(name or "value", kind))
    _literal_with_markers(text[pos:], markers, parts)
    return parts


def _literal_with_markers(text: str, markers: Iterator[str], parts: list[Part]) -> None:
    pieces = text.split("\x00")
    for index, piece in enumerate(pieces):
        if index:
            parts.append(Slot(_short(next(markers, "param")), "text"))
        if piece:
            parts.append(piece)


def stream_parts(args: list[str]) -> list[Part] | None:
    """Template parts of a variadic message (``c10::str(a, b, …)``, ``TORCH_CHECK(cond,
    a, b, …)``, ``GLOO_ENFORCE(cond, …)``, ``LOG(X) << a << b``): literals as text, every
    other argument a slot named by its expression. None when no literal is in it."""
    parts: list[Part] = []
    any_literal = False
    flat: list[str] = []
    for arg in args:
        flat.extend(split_plus(arg) if '"' in arg and "+" in arg else [arg])
    for arg in flat:
        lit = literal(arg)
        if lit is not None and not lit.markers:
            parts.append(lit.text)
            any_literal = True
        elif arg:
            parts.append(Slot(_short(arg), _stream_type(arg)))
    return parts if any_literal else None


def split_plus(expr: str) -> list[str]:
    """The operands of a ``+`` concatenation at the top level (``"a" + x + "b"``)."""
    operands: list[str] = []
    depth, start, i = 0, 0, 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'":
            i = _skip_string(expr, i)
            continue
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif depth == 0 and c == "+" and expr[i : i + 2] != "++":
            operands.append(expr[start:i])
            start = i + 1
        i += 1
    operands.append(expr[start:])
    return [o.strip() for o in operands if o.strip()]


def _stream_type(arg: str) -> str:
    """An integer literal streamed into a message is an int; anything else prints as text
    (a variable's type is not known from the source text alone)."""
    return "int" if re.fullmatch(r"-?\d+", arg.strip()) else "text"


def _short(expr: str) -> str:
    expr = re.sub(r"\s+", " ", expr.strip())
    return expr if len(expr) <= 60 else expr[:57] + "..."


def split_stream(expr: str) -> list[str]:
    """The operands of a ``<<`` chain at the top level."""
    operands: list[str] = []
    depth, start, i = 0, 0, 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'":
            i = _skip_string(expr, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith("<<", i):
            operands.append(expr[start:i])
            start = i + 2
            i += 2
            continue
        i += 1
    operands.append(expr[start:])
    return [o.strip() for o in operands]


def function_spans(code: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of the top-level function bodies and ``#define`` macros, found by
    brace depth in comment-free code: the name before a body's ``{`` at depth 0 (or
    inside a namespace/class/extern block)."""
    spans: list[tuple[int, int, str]] = []
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(?:[^\n]*\\\n)*[^\n]*", code, re.M):
        spans.append((m.start(), m.end(), "#define " + m.group(1)))
    stack: list[tuple[int, str | None]] = []
    i, n = 0, len(code)
    # A preprocessor line with its continuations ("\\" at a line's end): a macro's body
    # may open and close braces across its lines (NCCL 2.8's group.cc NCCLCHECKTHREAD, "do {
    # … } while(0)"), which must not count as the file's. (A greedy "[^\n]*" before the
    # continuation took the backslash and masked the first line only.)
    masked = re.sub(r"^[ \t]*#(?:\\\n|[^\n])*", lambda m: " " * len(m.group(0)), code, flags=re.M)
    while i < n:
        c = masked[i]
        if c in "\"'":
            if c == "'" and i > 0 and masked[i - 1].isalnum():
                i += 1
                continue
            i = _skip_string(masked, i)
            continue
        if c == "{":
            head = masked[max(0, i - 400) : i]
            name = _body_name(head)
            container = all(s[1] in {"<ns>"} for s in stack)
            stack.append((i, name if container else None))
        elif c == "}" and stack:
            start, name = stack.pop()
            if name and name != "<ns>":
                spans.append((start, i, name))
        i += 1
    return spans


_HEAD_NS = re.compile(
    r"(?:namespace\s*[\w:]*|extern\s*\"C\"|(?:class|struct|union)\s+[\w:]+[^;{)]*)\s*$"
)
_HEAD_FUNC = re.compile(
    r"([~\w:]+)\s*\((?:[^;{}]|\n)*\)\s*"
    r"(?:const|noexcept|override|final|->\s*[\w:<>*& ]+|:\s*[^;{}]*)*\s*$"
)


def _body_name(head: str) -> str | None:
    tail = head.rsplit(";", 1)[-1].rsplit("}", 1)[-1]
    if _HEAD_NS.search(tail):
        return "<ns>"
    m = _HEAD_FUNC.search(tail)
    if m is None:
        return None
    name = m.group(1).split("::")[-1]
    if name in {"if", "for", "while", "switch", "catch", "return", "sizeof", "do"}:
        return None
    return name


def enclosing(spans: list[tuple[int, int, str]], offset: int) -> str:
    best: tuple[int, str] | None = None
    for start, end, name in spans:
        if start <= offset <= end and (best is None or start > best[0]):
            best = (start, name)
    return best[1] if best else ""


def identifier_like(text: str) -> bool:
    return bool(_IDENT.fullmatch(text))
