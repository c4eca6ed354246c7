"""A message template: the literal text a program prints and the slots its values fill.

The catalog's rows are templates read from the sources that print them (a printf format,
an f-string, a ``c10::str`` chain). One representation serves them all, so the extraction
script and the runtime matcher agree on what a row's pattern is: a tuple of parts, each a
literal ``str`` or a :class:`Slot`. The pattern is anchored on the body of the message,
never on a header, and searched anywhere in a line, so a cut or mangled header (NCCL's
``host:pid:tid [dev]``, a timestamp, a rank prefix) costs the header only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What a slot's value looks like in the printed line. The extraction script types a slot
# from its printf conversion, a Python format spec, or leaves it "text".
_SLOT_PATTERN = {
    "int": r"-?\d+",
    "uint": r"\d+",
    "hex": r"(?:0x)?[0-9a-fA-F]+",
    "float": r"-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|inf|nan)",
    "ptr": r"(?:0x[0-9a-fA-F]+|\(nil\)|0)",
    "char": r".",
    "word": r"\S+?",
}
SLOT_TYPES = frozenset({*_SLOT_PATTERN, "text"})
# A literal run worth a keyword: letters first, then word characters.
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
# NCCL's network transports tag their messages with the transport's name and a colon
# (src/transport/net_ib.cc "NET/IB : " ≤ 2.21 and "NET/IB: " from 2.22, "NET/IB/GIN: " in
# 2.28; net_socket.cc "NET/Socket : "; the plugin loader "NET/Plugin: "). A network plugin
# is built from that code and prints the same bodies under the name it gives itself
# (ncclNet_t.name, e.g. nccl-rdma-sharp-plugins' "IBext", vendor forks' "IBP"), sometimes
# with the blank after the colon dropped ("NET/IBP:Got completion …"). A row that opens with
# such a tag matches it as any transport's tag, where the body alone is specific enough
# (TAGGED_BODY_MIN): the body is what the message says; the tag only who said it. (A row
# whose prefilter keyword is its tag's word, "NET/MLX5: Call to %s failed", still needs
# that word in the line: its tag is loose only in form.)
_ANY_NET_TAG = r"NET/[A-Za-z][A-Za-z0-9_]*(?:/[A-Za-z0-9_]+)*[ \t]*:[ \t]*"
_NET_TAG = re.compile(_ANY_NET_TAG)
# Letters or digits of literal text a tagged row's body needs for its tag to be loose (the
# matcher's floor for a row, scripts/catalog/rows.py MIN_LITERAL): "NET/Socket : Using%s"
# says too little without its own tag.
TAGGED_BODY_MIN = 12


@dataclass(frozen=True, slots=True)
class Slot:
    """A value the program fills in: its name (the source's expression, trimmed) and type."""

    name: str
    type: str = "text"


Part = str | Slot


def parts_from_json(raw: list[object]) -> tuple[Part, ...]:
    """Parts as the data files store them: a literal string, or ``[type, name]``."""
    parts: list[Part] = []
    for item in raw:
        if isinstance(item, str):
            parts.append(item)
        elif isinstance(item, list) and len(item) == 2:
            kind, name = item
            parts.append(Slot(str(name), str(kind) if kind in SLOT_TYPES else "text"))
        else:
            raise ValueError(f"bad template part {item!r}")
    return tuple(parts)


def parts_to_json(parts: tuple[Part, ...]) -> list[object]:
    return [p if isinstance(p, str) else [p.type, p.name] for p in parts]


def normalise(parts: list[Part] | tuple[Part, ...]) -> tuple[Part, ...]:
    """Adjacent literals joined, empty ones dropped, the first line only (a message printed
    over several lines is matched on its first line that says something), outer blanks
    stripped."""
    joined: list[Part] = []
    for part in parts:
        if isinstance(part, str):
            if not part:
                continue
            if joined and isinstance(joined[-1], str):
                joined[-1] += part
                continue
        joined.append(part)
    # keep the first line with enough literal text
    lines: list[list[Part]] = [[]]
    for part in joined:
        if isinstance(part, str) and "\n" in part:
            pieces = part.split("\n")
            lines[-1].append(pieces[0])
            for piece in pieces[1:]:
                lines.append([piece])
        else:
            lines[-1].append(part)
    chosen = next((line for line in lines if literal_length(line) >= 8), lines[0])
    out = [p for p in chosen if p != ""]
    if out and isinstance(out[0], str):
        out[0] = out[0].lstrip()
    if out and isinstance(out[-1], str):
        out[-1] = out[-1].rstrip()
    return tuple(p for p in out if p != "")


def net_tag(parts: tuple[Part, ...]) -> str:
    """The transport tag the row's message opens with ("NET/IB : "), where any
    transport's tag may stand for it (see _NET_TAG); "" where the row has none, or where
    its body without the tag is too short to say what the message is."""
    if not parts or not isinstance(parts[0], str):
        return ""
    m = _NET_TAG.match(parts[0])
    if m is None:
        return ""
    body = (parts[0][m.end() :], *parts[1:])
    if literal_length(body) < TAGGED_BODY_MIN or not keywords_of(body):
        return ""
    return m.group(0)


def untagged(parts: tuple[Part, ...]) -> tuple[Part, ...]:
    """The row's parts without its loose transport tag (net_tag): what is specific to it."""
    tag = net_tag(parts)
    if not tag:
        return parts
    first = parts[0]
    assert isinstance(first, str)
    rest = first[len(tag) :]
    return ((rest,) if rest else ()) + parts[1:]


def literal_length(parts: list[Part] | tuple[Part, ...]) -> int:
    """Characters of literal text other than blanks and punctuation: what makes a row
    specific. Rows under a floor are kept in the catalog but not matched (a bare
    ``"%s"`` would match everything)."""
    return sum(len(re.sub(r"[^A-Za-z0-9]", "", p)) for p in parts if isinstance(p, str))


def display(parts: tuple[Part, ...]) -> str:
    """The template as people read it: slots as ``<name>``."""
    return "".join(p if isinstance(p, str) else f"<{p.name}>" for p in parts)


def regex_source(parts: tuple[Part, ...]) -> str:
    """The row's pattern: literals escaped (runs of blanks loose, since pastes re-flow
    them; a backtick or a bold's ``**`` optional, since a paste's Markdown loses them
    when undone), slots as named-less groups in order. A leading text slot takes one token
    (the header before it is not the value), a trailing one the rest of the line. A leading
    text slot followed by a blank may be cut away with the header before it ("mpirun
    noticed that process rank …" pasted from "noticed"): the token is then optional."""
    out: list[str] = []
    last = len(parts) - 1
    tag = net_tag(parts)
    optional_lead = (
        len(parts) > 1
        and isinstance(parts[0], Slot)
        and parts[0].type == "text"
        and isinstance(parts[1], str)
        and parts[1][:1].isspace()
    )
    for index, part in enumerate(parts):
        if isinstance(part, str):
            if index == 0 and tag:
                out.append(_ANY_NET_TAG)  # any transport's tag (see _NET_TAG)
                part = part[len(tag) :]
            if index == 1 and optional_lead:
                part = part.lstrip()
            pieces = re.split(r"(\s+)", part)
            out.append("".join(r"\s+" if p[:1].isspace() else _literal(p) for p in pieces))
            continue
        if part.type == "text" and index > 0 and isinstance(parts[index - 1], Slot):
            # two slots with nothing between them print as one run of text: the first
            # takes it, the second stays empty (two lazy groups side by side backtrack
            # without end on a line that almost matches)
            out.append("()")
        elif part.type != "text":
            out.append(f"({_SLOT_PATTERN[part.type]})")
        elif index == 0 and optional_lead:
            out.append(r"(?:(\S+)\s+|(?<!\S))")
        elif index == 0:
            out.append(r"(\S+)")
        elif index == last:
            out.append(r"(.*)")
        else:
            out.append(r"(.*?)")
    return "".join(out)


def _literal(text: str) -> str:
    """One run of a template's literal text as a pattern (see regex_source)."""
    return re.escape(text).replace("`", "`?").replace(r"\*\*", r"(?:\*\*)?")


def keywords_of(parts: tuple[Part, ...]) -> list[str]:
    """The literal words of a template, in order (candidates for its prefilter keyword)."""
    words: list[str] = []
    for part in parts:
        if isinstance(part, str):
            words.extend(_WORD.findall(part))
    return words


_WORD_RUN = re.compile(r"[A-Za-z0-9_]+")


def safe_words(parts: tuple[Part, ...]) -> list[str]:
    """Literal words that print as words of their own: a non-word character (or the
    line's edge) on both sides. A word glued to a slot ("layer_%s", "%sms") prints as
    another word, so only these can be looked for in a line."""
    out: list[str] = []
    for index, part in enumerate(parts):
        if not isinstance(part, str):
            continue
        for m in _WORD_RUN.finditer(part):
            glued_left = m.start() == 0 and index > 0 and isinstance(parts[index - 1], Slot)
            glued_right = (
                m.end() == len(part)
                and index + 1 < len(parts)
                and isinstance(parts[index + 1], Slot)
            )
            word = m.group(0)
            if not glued_left and not glued_right and word[:1].isalpha() and len(word) >= 3:
                out.append(word)
    return out


def sample(parts: tuple[Part, ...]) -> str:
    """A line the program could print: each slot filled with a value of its type."""
    values = {
        "int": "3",
        "uint": "42",
        "hex": "0x7f3a",
        "float": "1.5",
        "ptr": "0x55d0c0ffee00",
        "char": "x",
        "word": "value7",
        "text": "some value",
    }
    return "".join(p if isinstance(p, str) else values[p.type] for p in parts)
