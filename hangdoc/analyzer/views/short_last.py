"""A rank whose last iteration had less data than every one before it, by its own log.

A loop that prints how much data each iteration got ("step 2: 8 samples", "rollout 2:
completion lengths [1, 2, 1, 2]") says where a rank ran short: its last line of that
template holds a smaller amount than every earlier line of it, its own and the other
ranks'. Where every rank ends on the same smaller amount (the short last batch of an
epoch that is not dropped, on every rank alike) nobody is short: the amount is smaller
only against lines of the same template that are all larger. What a short rank did
next, the stacks say (rules/hd105_p2p_deadlock.py: the first pipeline stage cut fewer
micro-batches than the next ones expect; rules/hd106_uneven_data.py: the rank left a
loop whose per-iteration collective the others are still in).

The amount of a line is its whole numbers from the first one that its own words call an
amount of data (a word of log_compare's length vocabulary, singular or plural, right
after it or at the end of its clause before it) to the end of the line: "8 samples",
"lengths [1, 2, 1, 2]". A rate ("12 samples/s") and a fraction ("3/10 shards", progress)
are not amounts; a line with a number that is not whole after its amount starts (a loss,
a time) is not compared.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hangdoc.analyzer.model import LINE_NUMBER, Evidence, LogLine
from hangdoc.analyzer.views.log_compare import masked
from hangdoc.analyzer.views.meaning import tokens

# The words that say a number is an amount of data (views/log_compare.py's _LENGTH_WORDS,
# less the words that name a container rather than count in it).
_AMOUNT_WORDS = frozenset({
    "batch", "batches", "microbatch", "microbatches", "sample", "samples", "example",
    "examples", "item", "items", "len", "length", "lengths", "records", "rows", "sequences",
    "shards", "files", "images",
})  # fmt: skip
_CLAUSE = re.compile(r"[,;|\[\]()]")
_WHOLE = re.compile(r"^\d+$")
_PER = re.compile(r"\s*[A-Za-z_]*\s*/")
# Only the end of a log says how the last iteration went: the lines looked at per rank.
_TAIL = 200


@dataclass(frozen=True, slots=True)
class ShortLast:
    """A rank's last line of a template, with less data than every other line of it."""

    rank: int
    template: str
    line: LogLine  # the rank's last line of the template
    amount: tuple[int, ...]
    earlier: LogLine  # the largest earlier line, cited against it
    earlier_rank: int
    earlier_amount: tuple[int, ...]
    prints: int  # how many lines of the template this rank printed (in its tail)
    others_prints: int  # the most lines of it any other rank printed (0: none did)

    def detail(self) -> str:
        return (
            f"rank {self.rank}'s last {self.line.text.strip()!r} holds less than "
            f"{self.earlier.text.strip()!r} (rank {self.earlier_rank})"
        )


def _is_amount(text: str, start: int, end: int, previous_end: int, next_start: int) -> bool:
    if _PER.match(text, end) or text[:start].rstrip().endswith("/"):
        return False  # a rate ("120 samples/s") or a fraction ("3/10"), not an amount
    following = tokens(_CLAUSE.split(text[end:next_start], 1)[0])[:1]
    before = text[previous_end:start]
    clause = _CLAUSE.split(before)
    preceding = tokens(clause[-1] if clause[-1].strip() else before[-40:])[-3:]
    return bool(set(following) & _AMOUNT_WORDS or set(preceding) & _AMOUNT_WORDS)


def amount_of(text: str) -> tuple[int, ...] | None:
    """The line's amount of data (module docstring), or None."""
    spans = [m.span() for m in LINE_NUMBER.finditer(text)]
    for i, (start, end) in enumerate(spans):
        previous_end = spans[i - 1][1] if i else 0
        next_start = spans[i + 1][0] if i + 1 < len(spans) else len(text)
        if _is_amount(text, start, end, previous_end, next_start):
            values = [text[s:e] for s, e in spans[i:]]
            if not all(_WHOLE.match(v) for v in values):
                return None
            return tuple(int(v) for v in values)
    return None


def _less(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x <= y for x, y in zip(a, b, strict=True)) and sum(a) < sum(b)


def short_last_lines(evidence: Evidence) -> dict[int, ShortLast]:
    """Each rank whose last line of a template with an amount of data holds less than
    every other line of that template in the ranks' tails (the first such template of
    the rank, by its last line)."""
    by_template: dict[str, dict[int, list[tuple[LogLine, tuple[int, ...]]]]] = {}
    for process in evidence.processes:
        lines: Sequence[LogLine] = process.log_lines
        if process.rank is None or not lines:
            continue
        for line in list(lines[-_TAIL:]):
            template = masked(line.text)
            if not set(tokens(template)) & _AMOUNT_WORDS:
                continue
            amount = amount_of(line.text)
            if amount is not None:
                by_template.setdefault(template, {}).setdefault(process.rank, []).append(
                    (line, amount)
                )
    out: dict[int, ShortLast] = {}
    for template, ranks in by_template.items():
        for rank, own in ranks.items():
            if rank in out:
                continue
            last, amount = own[-1]
            earlier = [(rank, line, a) for line, a in own[:-1]] + [
                (other, line, a) for other, theirs in ranks.items() if other != rank
                for line, a in theirs
            ]  # fmt: skip
            if not earlier or not all(_less(amount, a) for _, _, a in earlier):
                continue
            cited_rank, cited, cited_amount = max(earlier, key=lambda e: sum(e[2]))
            out[rank] = ShortLast(
                rank=rank,
                template=template,
                line=last,
                amount=amount,
                earlier=cited,
                earlier_rank=cited_rank,
                earlier_amount=cited_amount,
                prints=len(own),
                others_prints=max((len(t) for r, t in ranks.items() if r != rank), default=0),
            )
    return out
