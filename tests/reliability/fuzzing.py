"""Hostile variants of real inputs, for the parser fuzz tests.

Seeds are the recorded fixtures (``fixtures/``), the parser samples
(``tests/unit/parsers/samples``) and, when present, the shared samples, each labelled
with the format the loader recognises it as. A variant is a seed put through one or
more mutations of the kinds tickets and dying processes produce: truncation, emptiness,
binary noise, re-encoding (Latin-1, UTF-16), CRLF line ends, ANSI colour codes,
megabyte lines, NUL bytes, interleaved ranks, byte flips, repetition, and compression.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

from hangdoc.analyzer.model import InputKind
from hangdoc.analyzer.parsers import PARSERS
from hangdoc.analyzer.parsers.base import SNIFF_BYTES

ROOT = Path(__file__).resolve().parents[2]
# The shared samples (real torch/py-spy/faulthandler output) join when this checkout
# sits where they are (/work/shared/samples); the repository's own copies always do.
SEED_DIRS = tuple(
    d
    for d in (
        ROOT / "fixtures",
        ROOT / "tests" / "unit" / "parsers" / "samples",
        ROOT.parent / "shared" / "samples",
    )
    if d.is_dir()
)
MAX_SEED_BYTES = 512 * 1024


@dataclass(frozen=True)
class Seed:
    path: Path
    kind: InputKind | None  # the first parser whose sniff accepts it, as the loader does
    data: bytes


def _kind(head: bytes) -> InputKind | None:
    for parser in PARSERS:
        try:
            if parser.sniff(head):
                return parser.kind
        except Exception:
            return None
    return None


def load_seeds() -> list[Seed]:
    seeds = []
    for base in SEED_DIRS:
        for path in sorted(base.rglob("*")):
            if not path.is_file() or path.stat().st_size > MAX_SEED_BYTES:
                continue
            if path.suffix in (".py", ".md") or path.name == "EXPECTED.json":
                continue
            data = path.read_bytes()
            seeds.append(Seed(path, _kind(data[:SNIFF_BYTES]), data))
    return seeds


SEEDS = load_seeds()


def seeds_of(kind: InputKind) -> list[Seed]:
    """Seeds of one format; every seed when a parser has none yet (a new format)."""
    return [s for s in SEEDS if s.kind is kind] or SEEDS


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


class Variant:
    """A hostile file; its repr names how it was made, not its (megabytes of) bytes.

    Not a dataclass: Hypothesis prints dataclasses field by field, megabytes included.
    """

    __slots__ = ("data", "how")

    def __init__(self, data: bytes, how: str) -> None:
        self.data, self.how = data, how

    def __repr__(self) -> str:
        digest = hashlib.sha256(self.data).hexdigest()[:12]
        return f"Variant({self.how!r}, {len(self.data)} bytes, sha256 {digest}…)"


@st.composite
def mutate(draw: st.DrawFn, data: bytes, partner: bytes) -> tuple[bytes, str]:
    """One or more mutations of ``data`` (``partner``: a second seed to interleave)."""
    applied = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        op = draw(st.sampled_from(MUTATIONS))
        applied.append(op)
        n = max(len(data), 1)
        if op == "truncate":
            data = data[: draw(st.integers(min_value=0, max_value=n))]
        elif op == "empty":
            data = b""
        elif op == "binary":
            data = draw(st.binary(min_size=1, max_size=4096))
        elif op == "latin-1":
            data = data.decode("utf-8", "replace").encode("latin-1", "replace") + b"\xe9\xff"
        elif op == "utf-16":
            codec = draw(st.sampled_from(["utf-16", "utf-16-le", "utf-16-be"]))
            data = data.decode("utf-8", "replace").encode(codec)
        elif op == "crlf":
            data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        elif op == "ansi":
            colour = draw(st.sampled_from([b"\x1b[31m", b"\x1b[1;36m", b"[36m", b"\x1b[0m"]))
            data = b"\n".join(colour + line + b"\x1b[0m" for line in _lines(data))
        elif op == "megabyte-line":
            at = draw(st.integers(min_value=0, max_value=n))
            size = draw(st.integers(min_value=1 << 20, max_value=3 << 20))
            unit = draw(st.sampled_from([b"x", b"ab ", b"[rank1]:", b"\xff", b'{"a":']))
            data = data[:at] + unit * (size // len(unit)) + data[at:]
        elif op == "nul":
            at = draw(st.integers(min_value=0, max_value=n))
            data = data[:at] + b"\0" * draw(st.integers(min_value=1, max_value=64)) + data[at:]
        elif op == "interleave":
            ours, theirs = _lines(data), _lines(partner)
            merged = []
            for i in range(max(len(ours), len(theirs))):
                if i < len(ours):
                    merged.append(b"[rank0]:" + ours[i])
                if i < len(theirs):
                    merged.append(b"[rank1]:" + theirs[i])
            data = b"\n".join(merged)
        elif op == "splice":  # one rank's line cut into another's, mid-line
            at = draw(st.integers(min_value=0, max_value=n))
            piece = partner[: draw(st.integers(min_value=0, max_value=max(len(partner), 1)))]
            data = data[:at] + piece + data[at:]
        elif op == "flip":
            buf = bytearray(data or b"\0")
            for _ in range(draw(st.integers(min_value=1, max_value=16))):
                i = draw(st.integers(min_value=0, max_value=len(buf) - 1))
                buf[i] = draw(st.integers(min_value=0, max_value=255))
            data = bytes(buf)
        elif op == "repeat":
            data = data * draw(st.integers(min_value=2, max_value=4))
        elif op == "numbers":  # absurd numbers where the format has numbers
            big = draw(st.sampled_from([b"99999999999999999999999", b"-1", b"1e308", b"NaN"]))
            data = re.sub(rb"\b\d{1,6}\b", big, data, count=draw(st.integers(1, 50)))
        elif op == "gzip":
            data = gzip.compress(data, mtime=0)
    return data, "+".join(applied)


MUTATIONS = ["truncate", "empty", "binary", "latin-1", "utf-16", "crlf", "ansi", "megabyte-line",
             "nul", "interleave", "splice", "flip", "repeat", "numbers", "gzip"]  # fmt: skip
