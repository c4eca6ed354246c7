"""The ranks' own logs compared with each other, line by line.

Ranks of one job run the same code, so their logs follow the same templates. Where they
stop following each other is where the hang began:

* the last thing a rank said is an action that never finished ("saving shard 3 …" with
  no "saved"), while other ranks went on or said something else;
* the same line carries a different count on some ranks ("1248 batches" against "1250",
  "bins: 9" against "bins: 10"): different amounts of data, or different tensor sizes;
* a rank's progress counter stops behind the others' ("step 97" while they print
  "step 100").

Templates are mined in two steps: numbers and hex are masked by one regular expression
(so a line's counts stay in hand as parameters), then the distinct masked lines, far
fewer than the lines, are clustered by drain3 so that lines differing in a word (a host
name, a file name) share a template. Every divergence cites the lines it rests on.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from hangdoc.analyzer.model import LINE_NUMBER, Evidence, LogLine, LogTemplates, LogWindow
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.meaning import meaning_of, tokens

# A number of a line (the model's pattern, which node summaries cut lines at too).
_NUMBER = LINE_NUMBER
# What separates one number's words from the next number's.
_CLAUSE = re.compile(r"[,;|\[\]()]")
_MAX_PARAMS = 8
# Words that say a number counts work or sizes data: their counts must agree across ranks.
_COUNT_WORDS = frozenset({
    "batch", "batches", "step", "steps", "iteration", "iterations", "iters", "iter",
    "sample", "samples", "example", "examples", "item", "items", "len", "length",
    "num", "count", "total", "epoch", "epochs", "records", "rows", "tokens", "sequences",
})  # fmt: skip
# Words that say a number is an amount of data, a length: when it differs, the ranks have
# different amounts of data (uneven data). "steps per epoch" is one too (see _role).
_LENGTH_WORDS = frozenset({
    "batch", "batches", "microbatch", "microbatches", "sample", "samples", "example",
    "examples", "item", "items", "len", "length", "records", "rows", "sequences", "dataset",
    "datasets", "dataloader", "loader", "sampler", "shards", "files", "images",
})  # fmt: skip
# Words that say a number is how far a rank got: when it differs, the ranks went different
# ways (or one stopped), which is a divergence, not a length.
_PROGRESS_WORDS = frozenset({
    "step", "steps", "iteration", "iterations", "iters", "iter", "epoch", "epochs",
    "progress", "update", "updates",
})  # fmt: skip
# Words that make a count of steps a length: "steps per epoch", "total steps", "num_steps".
_TOTAL_WORDS = frozenset({"per", "total", "num", "number", "count", "max", "len", "length"})
_SIZE_WORDS = frozenset({
    "size", "sizes", "shape", "shapes", "numel", "bins", "bin", "dim", "dims", "elements",
    "classes", "buckets", "width", "vocab",
})  # fmt: skip
# Words that say a line reports what it hands to a collective ("reducing count histories
# {'web': 6, 'books': 0}", "all_gather sizes …", "broadcasting 3 buffers"): a number of such
# a line whose own words name neither a length nor progress is the size of a collective's
# operand, so a rank that prints another one calls the collective with another size. The
# names are torch.distributed's collectives split into words (``tokens``: all_reduce → all,
# reduce) and their verbs.
_COLLECTIVE_WORDS = frozenset({
    "reduce", "reducing", "allreduce", "allreducing", "gather", "gathering", "allgather",
    "broadcast", "broadcasting", "scatter", "scattering", "alltoall",
})  # fmt: skip
_START_WORDS = frozenset({
    "saving", "writing", "starting", "start", "begin", "beginning", "running", "evaluating",
    "validating", "loading", "uploading", "flushing", "gathering", "computing",
    "checkpointing", "entering", "calling", "waiting", "syncing", "synchronizing",
})  # fmt: skip
_END_WORDS = frozenset({
    "saved", "written", "wrote", "done", "finished", "finish", "complete", "completed",
    "end", "ended", "loaded", "uploaded", "flushed", "gathered", "computed", "took",
    "exiting", "exited", "left", "returned", "success", "succeeded", "ok",
    # an action that failed ended too: the line reports its outcome ("Connect to … failed")
    "failed", "failure", "aborted",
})  # fmt: skip


@dataclass(frozen=True, slots=True)
class CitedLine:
    rank: int
    line: LogLine


class DivergenceKind(enum.StrEnum):
    """How some ranks' logs part from the others'."""

    UNFINISHED = "unfinished"  # the last line starts an action nothing ended
    ONLY_SOME = "only_some"  # a line only these ranks printed, near the end
    COUNTER = "counter"  # the same line with a different amount of data (a length)
    SIZE = "size"  # the same line with a different size
    PROGRESS = "progress"  # the same line with a different count of steps done
    # the same line with a different value of a field its own key names, a key that says
    # neither data, size nor progress ("oom=1" against "oom=0": a count of something the
    # rank met that the others did not)
    FIELD = "field"
    BEHIND = "behind"  # a progress counter stopped behind the others'


@dataclass(frozen=True, slots=True)
class Divergence:
    """One way some ranks' logs part from the others'."""

    kind: DivergenceKind
    ranks: tuple[int, ...]  # the ranks that stand out
    others: tuple[int, ...]  # the ranks they are compared with
    meaning: Activity | None
    template: str
    detail: str
    lines: tuple[CitedLine, ...]
    # ONLY_SOME: after the line, these ranks printed a line every rank prints (they came
    # back to the others' path, as far as the log's order shows): where they parted only if
    # another source (their stacks) says so.
    rejoined: bool = False
    # COUNTER/SIZE: a number that differs is 0 on the odd ranks and more on the others (an
    # empty operand: NCCL and gloo return from a collective of 0 elements at once).
    empty: bool = False


@dataclass(slots=True)
class LogComparison:
    ranks: tuple[int, ...] = ()
    templates: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    # A progress line every rank repeats ("epoch 1 step 7 …") ends on the same count,
    # printed as often, on every rank: the ranks ran the same number of steps.
    progress_agrees: bool = False
    # Lines every rank prints once with an amount of data ("rank 2: 2 of 10 shards",
    # "len(loader)=37") whose count parts the ranks into groups, however many each holds
    # (``length_splits``): the ranks were given different amounts of data.
    lengths: list[LengthSplit] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LengthSplit:
    """The first line of one template, printed by every rank, whose amount of data differs
    between the ranks: the ranks grouped by the count they print, fewest first. No group
    need be a minority (the counters above need one, for a count that differs on a tie may
    be a loss or a time): a length is a count of its own words (``_role``), so two halves
    of a job that print two lengths were given two amounts of data."""

    groups: tuple[tuple[int, ...], ...]  # ranks by the count they print, fewest first
    template: str
    lines: tuple[CitedLine, ...]  # one line of each group, in the same order


@dataclass(slots=True)
class _Templates:
    """Masked line → template id, one drain3 miner for the whole comparison."""

    ids: dict[str, int] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)
    miner: object = None

    def of(self, masked: str) -> int:
        known = self.ids.get(masked)
        if known is not None:
            return known
        cluster = self._cluster(masked)
        self.ids[masked] = cluster
        self.texts.setdefault(cluster, masked)
        return cluster

    def _cluster(self, masked: str) -> int:
        if self.miner is None:
            from drain3 import TemplateMiner  # type: ignore[import-untyped]
            from drain3.template_miner_config import (  # type: ignore[import-untyped]
                TemplateMinerConfig,
            )

            config = TemplateMinerConfig()
            config.profiling_enabled = False
            config.drain_sim_th = 0.6
            self.miner = TemplateMiner(config=config)
        result = self.miner.add_log_message(masked)  # type: ignore[attr-defined]
        return int(result["cluster_id"])


class _Sequence:
    """The templates of a rank's window in order, shared by every rank whose window gives
    the same ones (most ranks of a job: 4 sequences for 16,384 ranks of the benchmark),
    with what the checks ask of them worked out once for all those ranks."""

    __slots__ = ("_firsts", "_last_and_count", "_order", "_tails", "templates")

    def __init__(self, templates: list[int]) -> None:
        self.templates = templates
        self._order: dict[int, None] | None = None
        self._last_and_count: dict[int, tuple[int, int]] | None = None
        self._firsts: dict[tuple[int, int], list[int]] = {}
        self._tails: dict[int, list[int]] = {}

    def order(self) -> dict[int, None]:
        """Its templates in the order it first shows them."""
        if self._order is None:
            self._order = dict.fromkeys(self.templates)
        return self._order

    def last_and_count(self) -> dict[int, tuple[int, int]]:
        """template → (index of its last line, how many lines): counted in C, and the
        last index found by one search from the end per template (a rank has tens of
        templates and thousands of lines)."""
        if self._last_and_count is None:
            counts = Counter(self.templates)
            backwards, end = self.templates[::-1], len(self.templates) - 1
            self._last_and_count = {
                template: (end - backwards.index(template), n) for template, n in counts.items()
            }
        return self._last_and_count

    def first_indices(self, template: int, limit: int) -> list[int]:
        """The indices of a template's first ``limit`` lines (searched in C)."""
        found = self._firsts.get((template, limit))
        if found is None:
            found = self._firsts[(template, limit)] = []
            find, start = self.templates.index, 0
            with contextlib.suppress(ValueError):
                while len(found) < limit:
                    start = find(template, start) + 1
                    found.append(start - 1)
        return found

    def new_in_tail(self, tail: int) -> list[int]:
        """The indices of its last ``tail`` lines whose template no earlier line has."""
        found = self._tails.get(tail)
        if found is None:
            start = max(0, len(self.templates) - tail)
            earlier = set(self.templates[:start])
            found = self._tails[tail] = [
                index
                for index in range(start, len(self.templates))
                if self.templates[index] not in earlier
            ]
        return found


@dataclass(slots=True)
class _RankLog:
    rank: int
    lines: Sequence[LogLine]
    sequence: _Sequence

    @property
    def templates(self) -> list[int]:
        return self.sequence.templates

    def last_and_count(self) -> dict[int, tuple[int, int]]:
        return self.sequence.last_and_count()

    def first_indices(self, template: int, limit: int) -> list[int]:
        return self.sequence.first_indices(template, limit)

    def params(self, index: int) -> tuple[str, ...]:
        """The numbers of one line, read when a check needs them (few lines do); a
        window from a node summary gives them without building the line."""
        lines = self.lines
        if isinstance(lines, LogWindow):
            return lines.numbers(index)[:_MAX_PARAMS]
        return tuple(_NUMBER.findall(lines[index].text)[:_MAX_PARAMS])

    def roles(self, index: int) -> tuple[DivergenceKind | None, ...]:
        """What each number of one line counts, by the words next to it (``_role``)."""
        text = self.lines[index].text
        spans = [m.span() for m in _NUMBER.finditer(text)][:_MAX_PARAMS]
        out: list[DivergenceKind | None] = []
        for i, (start, end) in enumerate(spans):
            before = text[spans[i - 1][1] if i else 0 : start]
            after = text[end : spans[i + 1][0] if i + 1 < len(spans) else len(text)]
            out.append(_role(before, after))
        return tuple(out)


# A number that is the value of a named field: "oom=1", "retries: 3" (the key, then = or :).
_FIELD_KEY = re.compile(r"([A-Za-z_][\w.-]*)\s*[=:]\s*$")
_KNOWN_WORDS = _COUNT_WORDS | _LENGTH_WORDS | _PROGRESS_WORDS | _TOTAL_WORDS | _SIZE_WORDS


def _role(before: str, after: str) -> DivergenceKind | None:
    """What a number counts, by its own words: the word right after it ("1248 batches",
    "35batch"), else the words of its clause before it ("len(loader) = 1248", "bins: 9",
    "step 97"); "steps per epoch: 1250" is a length. The value of a field whose key says
    none of these and that has no unit after it ("oom=1") counts something else, whatever
    the line's other words say."""
    following = tokens(_CLAUSE.split(after, 1)[0])[:1]
    key = _FIELD_KEY.search(before)
    if not following and key is not None and not set(tokens(key.group(1))) & _KNOWN_WORDS:
        return DivergenceKind.FIELD  # no unit of its own after it ("ready: 20 samples")
    clause = _CLAUSE.split(before)
    preceding = tokens(clause[-1] if clause[-1].strip() else before[-40:])[-3:]
    for words in (following, preceding):
        seen = set(words)
        if seen & _TOTAL_WORDS and seen & (_PROGRESS_WORDS | _LENGTH_WORDS):
            return DivergenceKind.COUNTER  # "steps per epoch", "total steps", "num_batches"
        if seen & _LENGTH_WORDS:
            return DivergenceKind.COUNTER
        if seen & _SIZE_WORDS:
            return DivergenceKind.SIZE
        if seen & _PROGRESS_WORDS:
            return DivergenceKind.PROGRESS
    return None


def compare_logs(evidence: Evidence) -> LogComparison:
    """Compare the log windows of every rank that has log lines."""
    logs = [
        (p.rank, p.log_lines, p.log_templates)
        for p in evidence.processes
        if p.rank is not None and p.log_lines
    ]
    if len(logs) < 2:
        return LogComparison(ranks=tuple(r for r, _, _ in logs))
    miner = _Templates()
    ranks: list[_RankLog] = []
    shapes: dict[bytes, int] = {}
    tables: dict[int, tuple[tuple[str, ...], list[int | None]]] = {}
    # one _Sequence per distinct sequence of templates: by its runs where a summary gave
    # them, by the whole list where the lines were masked
    by_runs: dict[tuple[tuple[int, int], ...], _Sequence] = {}
    by_list: dict[tuple[int, ...], _Sequence] = {}
    for rank, lines, given in sorted(logs, key=lambda item: item[0]):
        if given is not None and given.describes(lines):
            runs = given_template_runs(given, miner, tables)
            sequence = by_runs.get(runs)
            if sequence is None:
                sequence = by_runs[runs] = _Sequence(_expanded(runs))
        else:
            ids = template_ids(lines, miner, shapes)
            key = tuple(ids)
            sequence = by_list.get(key)
            if sequence is None:
                sequence = by_list[key] = _Sequence(ids)
        ranks.append(_RankLog(rank, lines, sequence))
    found: list[Divergence] = []
    found.extend(_unfinished(ranks, miner))
    found.extend(_only_some(ranks, miner, found))
    found.extend(_counters(ranks, miner))
    behind, agrees = _behind(ranks, miner)
    found.extend(behind)
    return LogComparison(
        ranks=tuple(r.rank for r in ranks),
        templates=len(miner.texts),
        divergences=found,
        progress_agrees=agrees,
        lengths=length_splits(ranks, miner),
    )


# A line's shape: its text with every ASCII digit made one byte (NUL). Every digit of a
# line is inside one of _NUMBER's matches (each starts at a digit), and which spans match
# depends only on where the digits, colons and dots are, except for hex ("0x…", the one
# place a digit's value counts): lines of one shape without "0x" (and without a NUL of
# their own) mask alike, so each shape is masked once. 1.6 million lines at 1,024 ranks
# have about a dozen shapes; encoding and translating bytes is C, 6× cheaper than
# masking (tests/unit/views/test_log_number_mask.py holds the two to the same answers).
_SHAPE = bytes.maketrans(b"0123456789", b"\x00" * 10)


def template_ids(
    lines: Sequence[LogLine], miner: _Templates, shapes: dict[bytes, int]
) -> list[int]:
    """Each line's template: ``miner.of`` its masked text, looked up by its shape when it
    has one (``shapes``: shape → template, kept across ranks)."""
    sub, of, out = _NUMBER.sub, miner.of, []
    for line in lines:
        text = line.text
        if "0x" in text or "\x00" in text:
            out.append(of(sub("#", text)))
            continue
        shape = text.encode("utf-8", "surrogatepass").translate(_SHAPE)
        found = shapes.get(shape)
        if found is None:
            found = shapes[shape] = of(sub("#", text))
        out.append(found)
    return out


def given_template_runs(
    given: LogTemplates,
    miner: _Templates,
    tables: dict[int, tuple[tuple[str, ...], list[int | None]]],
) -> tuple[tuple[int, int], ...]:
    """The runs of ``template_ids`` of a window whose templates a node summary gave: each
    of the node's masked templates goes to ``miner.of`` once, in the order the rank's
    lines first show it (the order ``template_ids`` would ask, on which the miner's
    clusters depend), and the runs are mapped, not the lines (runs that become alike are
    joined). ``tables``: per node table, its templates' ids so far (the table kept with
    them, so that its id() stays its own)."""
    masked = given.masked
    known = tables.get(id(masked))
    if known is None:
        known = tables[id(masked)] = (masked, [None] * len(masked))
    ids = known[1]
    for node_id, _ in given.runs:
        if ids[node_id] is None:
            ids[node_id] = miner.of(masked[node_id])
    out: list[tuple[int, int]] = []
    for node_id, count in given.runs:
        template = ids[node_id]
        assert template is not None
        if out and out[-1][0] == template:
            out[-1] = (template, out[-1][1] + count)
        else:
            out.append((template, count))
    return tuple(out)


def _expanded(runs: tuple[tuple[int, int], ...]) -> list[int]:
    out: list[int] = []
    for template, count in runs:
        out.extend(itertools.repeat(template, count))
    return out


def _words(text: str) -> set[str]:
    return set(tokens(text))


# A line's shape for ``_starts_an_action``: its digits made one. Its words (``tokens``)
# are split where its letters and digits are, not by the digits' values, so its words
# that are words (start and end words have no digit) are the same as the line's.
_DIGITS_AS_ONE = bytes.maketrans(b"0123456789", b"1" * 10)


def _starts_an_action(line: LogLine, seen: dict[bytes, bool]) -> bool:
    """The line starts an action ("saving shard 3 …") and does not say it ended; decided
    once per shape (``seen``): the ranks' last lines are mostly one line with other
    numbers."""
    shape = line.text.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ONE)
    found = seen.get(shape)
    if found is None:
        words = _words(line.text)
        found = seen[shape] = bool(
            (words & _START_WORDS or line.text.rstrip().endswith(("...", "…")))
            and not words & _END_WORDS
        )
    return found


def _unfinished(ranks: list[_RankLog], miner: _Templates) -> list[Divergence]:
    """Ranks whose last line starts an action that no later line of theirs finishes,
    while the other ranks' last lines are something else."""
    last = {r.rank: r.templates[-1] for r in ranks}
    odd: dict[int, list[_RankLog]] = {}
    starts: dict[bytes, bool] = {}
    for r in ranks:
        if _starts_an_action(r.lines[-1], starts):
            odd.setdefault(r.templates[-1], []).append(r)
    out = []
    for template, culprits in odd.items():
        others = [r for r in ranks if last[r.rank] != template]
        if not others or len(culprits) > len(others):
            continue  # everyone (or most) stopped there: not a divergence between ranks
        if _cut_in_a_burst(culprits, others, ranks):
            continue
        text = culprits[0].lines[-1].text
        out.append(
            Divergence(
                kind=DivergenceKind.UNFINISHED,
                ranks=tuple(r.rank for r in culprits),
                others=tuple(r.rank for r in others),
                meaning=meaning_of(tokens(text)),
                template=miner.texts[template],
                detail=f"last said {text!r} and nothing after it",
                lines=tuple(CitedLine(r.rank, r.lines[-1]) for r in culprits)
                + tuple(CitedLine(r.rank, r.lines[-1]) for r in others[:2]),
            )
        )
    return out


def _source_end(ranks: list[_RankLog], source: str) -> int | None:
    """The last line number of one source among the ranks' lines (None: no line of it)."""
    numbers = [line.line for r in ranks for line in r.lines if line.source == source]
    return max(numbers, default=None)


def _cut_in_a_burst(
    culprits: list[_RankLog], others: list[_RankLog], ranks: list[_RankLog]
) -> bool:
    """One shared console whose text ends in a burst of the others' last lines, one rank's
    line after another's (eight ranks printing "load end" in the same second): a paste cut
    there may have cut the culprits' own line of that burst, so their action is not shown
    unfinished. A rank's own file, or a console that goes on after, shows it. Lines no rank
    owns may sit between the burst's (the rest of a line a paste hard-wrapped)."""
    lasts = [r.lines[-1] for r in (*culprits, *others)]
    source = lasts[0].source
    if any(line.source != source or not line.line for line in lasts):
        return False
    burst = sorted(r.lines[-1].line for r in others)
    first, end = burst[0], burst[-1]
    # (the source's end is looked up only here: every rank's lines are walked for it)
    if len({r.templates[-1] for r in others}) != 1 or end != _source_end(ranks, source):
        return False
    inside = sum(
        1 for r in ranks for line in r.lines if line.source == source and first <= line.line <= end
    )
    if inside != len(burst):
        return False  # another rank's line between them: no burst
    return all(r.lines[-1].line < first for r in culprits)


# How many occurrences of a template the ranks' numbers are compared at, from the first.
_DEPTH = 50
_TAIL = 20  # the last lines of a rank, where what it did differently shows


def _only_some(
    ranks: list[_RankLog], miner: _Templates, found: list[Divergence]
) -> list[Divergence]:
    """Where the ranks' logs first part: a template that a minority of ranks prints near
    the end of its log, for the first time there, and that no other rank ever prints
    ("running validation on rank 0 only"). A template a rank prints all along (rank 0's
    routine logging) is not new in its tail, so it does not count."""
    seen_by = _seen_by(ranks)
    named = {rank for d in found for rank in d.ranks}
    candidates: dict[int, list[tuple[_RankLog, int, bool]]] = {}
    for r in ranks:
        if r.rank in named:
            continue  # already named by an unfinished action
        for index in r.sequence.new_in_tail(_TAIL):
            template = r.templates[index]
            holders = seen_by[template]
            if len(holders) * 2 < len(ranks):  # a minority prints it, the rest never do
                if _done_alone(r.lines[index].text):
                    continue  # work it did alone, reported done: not what they wait for
                rejoined = _rejoined(r, index, seen_by, len(ranks))
                candidates.setdefault(template, []).append((r, index, rejoined))
                break  # the first template where this rank parts from the others
    out = []
    for template, hits in candidates.items():
        holders = seen_by[template]
        if {r.rank for r, _, _ in hits} != holders:
            continue  # some holders printed it earlier: not where they parted
        others = tuple(r.rank for r in ranks if r.rank not in holders)
        text = hits[0][0].lines[hits[0][1]].text
        out.append(
            Divergence(
                kind=DivergenceKind.ONLY_SOME,
                ranks=tuple(sorted(holders)),
                others=others,
                meaning=meaning_of(tokens(text)),
                template=miner.texts[template],
                detail=f"only these ranks printed {text!r}, near the end of their logs",
                lines=tuple(CitedLine(r.rank, r.lines[i]) for r, i, _ in hits[:3]),
                rejoined=all(back for _, _, back in hits),
            )
        )
    return out[:2]


def _seen_by(ranks: list[_RankLog]) -> dict[int, set[int]]:
    """template → the ranks that print it (each sequence's templates listed once)."""
    holders: dict[int, list[int]] = {}
    for r in ranks:
        holders.setdefault(id(r.sequence), []).append(r.rank)
    sequences = {id(r.sequence): r.sequence for r in ranks}
    seen_by: dict[int, set[int]] = {}
    for key, sequence in sequences.items():
        for template in sequence.order():
            seen_by.setdefault(template, set()).update(holders[key])
    return seen_by


# Work one rank may do alone while the others wait: reported done, it is over.
_ALONE = frozenset({Activity.CHECKPOINT_SAVE, Activity.EVAL, Activity.METRICS})


def _done_alone(text: str) -> bool:
    """The line reports a save or an evaluation as done ("Saved model to …"): work a
    rank does alone (rank 0 writes the checkpoint), ended, so not what the others wait
    for. A loop that ended on some ranks only ("epoch 0 finished") is a parting, kept."""
    words = tokens(text)
    return bool(set(words) & _END_WORDS) and meaning_of(words) in _ALONE


def _rejoined(r: _RankLog, index: int, seen_by: dict[int, set[int]], world: int) -> bool:
    """After its line at ``index``, the rank printed a line that every rank prints: it
    came back to the path the others are on (rank 0 logs its validation metrics alone, then
    prints "saving model" with every rank), so the line it printed alone is work it did
    and finished, not where it left them. The job's own lines only: the library's
    timeouts and teardown every rank prints are events, not log lines; and a line with
    words (a rule of dashes every rank prints says nothing of where they are)."""
    later = range(index + 1, len(r.templates))
    return any(len(seen_by[r.templates[j]]) == world and _words(r.lines[j].text) for j in later)


def _counters(ranks: list[_RankLog], miner: _Templates) -> list[Divergence]:
    """The same line with a number that differs on a minority of ranks: the k-th time each
    rank prints a template that holds a count or a size, its whole numbers are compared,
    and what the first differing number counts (its own words, ``_role``; else the
    template's) says which divergence it is: an amount of data, a size, or progress."""
    # Each rank's templates in the order it first prints them; all of them in the order
    # they first appear, rank after rank (the order the checks below are tried in).
    first_seen = [r.sequence.order() for r in ranks]
    order: dict[int, None] = {}
    for seen in first_seen:
        order.update(seen)
    lookup = {r.rank: r for r in ranks}
    out: list[Divergence] = []
    for template in order:
        holders = [r for r, seen in zip(ranks, first_seen, strict=True) if template in seen]
        if len(holders) < 2 or len(holders) < len(ranks) * 0.5:
            continue
        text = miner.texts[template]
        words = _words(text)
        is_size = bool(words & _SIZE_WORDS) or _operands(words)
        if not (is_size or words & _COUNT_WORDS):
            continue
        # only the first _DEPTH occurrences are ever compared (_first_disagreement)
        per_rank = {r.rank: r.first_indices(template, _DEPTH) for r in holders}
        found = _first_disagreement(ranks, per_rank)
        if found is None:
            continue
        minority, majority, position, differing = found
        odd = lookup[minority[0]]
        odd_values = odd.params(per_rank[minority[0]][position])
        common_values = lookup[majority[0]].params(per_rank[majority[0]][position])
        empty = any(
            i < min(len(odd_values), len(common_values))
            and odd_values[i] == "0"
            and common_values[i].isdigit()
            and int(common_values[i]) > 0
            for i in differing
        )
        roles = odd.roles(per_rank[minority[0]][position])
        role = next((roles[i] for i in differing if i < len(roles) and roles[i]), None)
        kind = role or (DivergenceKind.SIZE if is_size else DivergenceKind.COUNTER)
        cited = tuple(
            CitedLine(rank, lookup[rank].lines[per_rank[rank][position]])
            for rank in (*minority, *majority[:2])
        )
        out.append(
            Divergence(
                kind=kind,
                ranks=minority,
                others=majority,
                meaning=meaning_of(words),
                template=text,
                detail=(
                    f"{cited[0].line.text!r} on rank {cited[0].rank} against "
                    f"{cited[-1].line.text!r} on rank {cited[-1].rank}"
                ),
                lines=cited,
                empty=empty,
            )
        )
        if len(out) >= 3:
            break
    return out


def _operands(words: set[str]) -> bool:
    """The line names what a rank hands to a collective (``_COLLECTIVE_WORDS``) and no
    amount of data or progress: its counts are the sizes of the collective's operands."""
    return bool(words & _COLLECTIVE_WORDS) and not words & (_LENGTH_WORDS | _PROGRESS_WORDS)


def _first_disagreement(
    ranks: list[_RankLog], per_rank: dict[int, list[int]]
) -> tuple[tuple[int, ...], tuple[int, ...], int, tuple[int, ...]] | None:
    """(ranks with the odd value, ranks with the common value, occurrence, the positions
    of the numbers that differ) at the first occurrence where a minority of ranks prints
    other numbers than the rest. Only whole numbers count, and not a number that is each
    rank's own rank (``rank 3: …``)."""
    lookup = {r.rank: r for r in ranks}
    depth = min(len(v) for v in per_rank.values())
    for position in range(min(depth, _DEPTH)):
        raw = {rank: lookup[rank].params(indices[position]) for rank, indices in per_rank.items()}
        keep = _whole_positions(raw)
        values = {rank: tuple(v[i] for i in keep) for rank, v in raw.items()}
        tally = Counter(values.values())
        if len(tally) < 2:
            continue
        common, common_n = tally.most_common(1)[0]
        minority = tuple(sorted(r for r, v in values.items() if v != common))
        if common_n <= len(minority) or not common:
            return None  # no clear majority: numbers that vary (losses, times), not counts
        odd = values[minority[0]]
        differing = tuple(i for i, a, b in zip(keep, odd, common, strict=True) if a != b)
        majority = tuple(sorted(r for r, v in values.items() if v == common))
        return minority, majority, position, differing
    return None


def _whole_positions(raw: dict[int, tuple[str, ...]]) -> list[int]:
    """The positions of each rank's whole numbers, without those that hold the rank's own
    id on every rank (or a fraction, a time or hex on any)."""
    width = min(len(v) for v in raw.values())
    return [
        i
        for i in range(width)
        if all(v[i].isdigit() for v in raw.values())
        and not all(v[i] == str(rank) for rank, v in raw.items())
    ]


def masked(text: str) -> str:
    """A line with its numbers masked: what lines of one template share."""
    return _NUMBER.sub("#", text).strip()


def same_progress(lines: list[tuple[int, LogLine]]) -> bool:
    """Each rank's line is one line of the same template at the same counts: a progress
    line ("Batch 15/37700 loss … rank 1") that every one of these ranks printed at the same
    point. Its words must count work (a step, a batch, an epoch) and at least one whole
    number other than each rank's own id must be compared; losses, times and the rank's own
    id may differ."""
    if len(lines) < 2 or len({rank for rank, _ in lines}) < len(lines):
        return False
    templates = {masked(line.text) for _, line in lines}
    if len(templates) != 1 or not _words(next(iter(templates))) & _COUNT_WORDS:
        return False
    raw = {rank: tuple(_NUMBER.findall(line.text)[:_MAX_PARAMS]) for rank, line in lines}
    if not _whole_positions(raw):
        return False
    return len(set(_whole_counts(raw).values())) == 1


def _whole_counts(raw: dict[int, tuple[str, ...]]) -> dict[int, tuple[str, ...]]:
    """Each rank's whole numbers (``_whole_positions``)."""
    keep = _whole_positions(raw)
    return {rank: tuple(v[i] for i in keep) for rank, v in raw.items()}


def _behind(ranks: list[_RankLog], miner: _Templates) -> tuple[list[Divergence], bool]:
    """A progress line every rank repeats ("epoch E step N …"): the ranks whose last
    (E, N) is behind the others'; and whether such a line ends on the same (E, N), printed
    as often, on every rank (then they ran the same number of steps)."""
    stats = {r.rank: r.last_and_count() for r in ranks}
    lookup = {r.rank: r for r in ranks}
    shared = set.intersection(*(set(s) for s in stats.values()))
    best: tuple[int, int, dict[int, tuple[str, ...]]] | None = None  # repeats, template, last
    # A rank that printed the line fewer times than the others, its last count behind
    # theirs: it stopped while they went on (a console where ranks 0, 1, 3 print "iter
    # 1010" and "iter 1020" after the "iter 1000" that all four printed).
    stopped: tuple[int, int, dict[int, tuple[str, ...]]] | None = None
    agrees = False
    for template in sorted(shared):
        if not _words(miner.texts[template]) & _COUNT_WORDS:
            continue
        lastval = _whole_counts(
            {rank: lookup[rank].params(st[template][0]) for rank, st in stats.items()}
        )
        if not all(lastval.values()):
            continue
        repeats = {st[template][1] for st in stats.values()}
        fewest, same_last = min(repeats), len(set(lastval.values())) == 1
        if fewest >= 2 and same_last and len(repeats) == 1:
            agrees = True
        if fewest >= 3 and not same_last and (best is None or fewest > best[0]):
            best = (fewest, template, lastval)
        elif not same_last and stopped is None:
            count = {rank: st[template][1] for rank, st in stats.items()}
            if _stopped_early(lastval, count):
                stopped = (fewest, template, lastval)
    best = best or stopped
    if best is None:
        return [], agrees
    _, template, lastval = best
    top = max(lastval.values(), key=_numeric)
    behind = tuple(sorted(r for r, v in lastval.items() if _numeric(v) < _numeric(top)))
    ahead = tuple(sorted(r for r, v in lastval.items() if v == top))
    if not behind or len(behind) > len(ahead):
        return [], False

    def last_line(rank: int) -> CitedLine:
        return CitedLine(rank, lookup[rank].lines[stats[rank][template][0]])

    return [
        Divergence(
            kind=DivergenceKind.BEHIND,
            ranks=behind,
            others=ahead,
            meaning=None,
            template=miner.texts[template],
            detail=f"last progress {' '.join(lastval[behind[0]])} against {' '.join(top)}",
            lines=tuple(last_line(rank) for rank in (*behind[:3], ahead[0])),
        )
    ], False


# How many times the ranks that went on must have printed a progress line, to say that one
# which printed it fewer times stopped.
_WENT_ON = 3


def _stopped_early(lastval: dict[int, tuple[str, ...]], count: dict[int, int]) -> bool:
    """The ranks whose last count is behind printed the line fewer times than every rank
    at the top count, each of which printed it at least ``_WENT_ON`` times: a minority that
    stopped where the others went on."""
    top = max(lastval.values(), key=_numeric)
    ahead = [r for r, v in lastval.items() if v == top]
    behind = [r for r, v in lastval.items() if _numeric(v) < _numeric(top)]
    if not behind or len(behind) >= len(ahead):
        return False
    fewest_ahead = min(count[r] for r in ahead)
    return fewest_ahead >= _WENT_ON and all(count[r] < fewest_ahead for r in behind)


def _numeric(values: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


# Appended for issue 21, item 4 (the job's own values compared across ranks): the last line
# of every rank, with its numbers masked (losses, timings, the rank's own number differ on
# every rank and say nothing), compared word for word. Only a value on which every other
# rank agrees exactly counts, and only when a minority differs (``MIN_AGREEING`` ranks at
# least agree).
MIN_AGREEING = 2


class ValueKind(enum.StrEnum):
    ORDER = "order"  # the same words in another order: the same names, ordered otherwise
    VALUE = "value"  # other words


@dataclass(frozen=True, slots=True)
class LastValue:
    """The ranks whose last line prints the others' template with another value."""

    kind: ValueKind
    ranks: tuple[int, ...]
    others: tuple[int, ...]
    lines: tuple[CitedLine, ...]  # the odd ranks' last lines, then one of the others'

    @property
    def detail(self) -> str:
        odd, agreed = self.lines[0], self.lines[-1]
        return (
            f"{odd.line.text.strip()!r} on rank {odd.rank} against "
            f"{agreed.line.text.strip()!r} on rank {agreed.rank}"
        )


def last_line_values(evidence: Evidence) -> LastValue | None:
    """A minority of ranks whose last log line differs, numbers aside, from the last line
    every other rank prints alike, in words the majority's line also holds (the same
    template: the same words, but for one value)."""
    last: dict[int, LogLine] = {}
    for proc in evidence.processes:
        if proc.rank is not None and proc.rank not in last and proc.log_lines:
            last[proc.rank] = proc.log_lines[-1]
    if len(last) < MIN_AGREEING + 1:
        return None
    masked = {rank: tuple(tokens(_NUMBER.sub("#", line.text))) for rank, line in last.items()}
    counts = Counter(masked.values())
    agreed, n = counts.most_common(1)[0]
    odd = tuple(sorted(r for r, words in masked.items() if words != agreed))
    if not odd or n < MIN_AGREEING or len(odd) >= n or not agreed:
        return None
    kinds = set()
    for rank in odd:
        words = masked[rank]
        if len(words) != len(agreed) or words[:1] != agreed[:1]:
            return None  # another line, not the same one with another value
        if sorted(words) == sorted(agreed):
            kinds.add(ValueKind.ORDER)
        elif sum(a != b for a, b in zip(words, agreed, strict=True)) <= max(1, len(agreed) // 3):
            kinds.add(ValueKind.VALUE)
        else:
            return None
    kind = ValueKind.ORDER if kinds == {ValueKind.ORDER} else ValueKind.VALUE
    others = tuple(sorted(r for r in masked if r not in odd))
    lines = tuple(CitedLine(r, last[r]) for r in (*odd, others[0]))
    return LastValue(kind, odd, others, lines)


# Appended for issue 21 (live-2026-11-28e, sharded-reader): the amounts of data the ranks
# print, compared whatever the size of each group. A reader that hands whole shard files
# round robin gives half of the ranks 3 shards and half 2: no minority, but two lengths.
_MAX_LENGTH_SPLITS = 3
# A job states its amounts of data near the start, in a few lines: the templates that name
# a length are tried up to this many (each one reads a number of every rank).
_MAX_LENGTH_TEMPLATES = 16


def length_splits(ranks: list[_RankLog], miner: _Templates) -> list[LengthSplit]:
    """Templates every rank prints whose first line holds an amount of data (a number
    that ``_role`` reads as a length, or one of a line whose words name only a length:
    "3 of 10 shards") that differs between the ranks, in at most a few groups: each rank's
    count, the ranks grouped by it. The rank's own id is not a count (``_whole_positions``),
    and a number that differs on every rank (a file index, a seed) splits nothing."""
    if len(ranks) < 2:
        return []
    # most ranks share a sequence (``_Sequence``): each distinct one is asked once
    sequences = {id(r.sequence): r.sequence for r in ranks}.values()
    shared = set.intersection(*(set(s.order()) for s in sequences))
    lookup = {r.rank: r for r in ranks}
    out: list[LengthSplit] = []
    tried = 0
    for template in ranks[0].sequence.order():
        if template not in shared:
            continue
        words = _words(miner.texts[template])
        if not words & _LENGTH_WORDS:
            continue
        tried += 1
        if tried > _MAX_LENGTH_TEMPLATES:
            break
        first = {r.rank: r.first_indices(template, 1)[0] for r in ranks}
        raw = {rank: lookup[rank].params(index) for rank, index in first.items()}
        keep = _whole_positions(raw)
        differing = [i for i in keep if len({v[i] for v in raw.values()}) > 1]
        if not differing:
            continue
        position = differing[0]
        groups: dict[int, list[int]] = {}
        for rank, values in raw.items():
            groups.setdefault(int(values[position]), []).append(rank)
        if len(groups) > len(ranks) // 2:
            continue  # a number of each rank's own (a file index, a seed): not a length
        odd = lookup[next(iter(groups[min(groups)]))]
        roles = odd.roles(first[odd.rank])
        role = roles[position] if position < len(roles) else None
        if role is None and words & (_PROGRESS_WORDS | _SIZE_WORDS):
            continue  # the line names a length and progress or a size: which is unsure
        if role not in (None, DivergenceKind.COUNTER):
            continue
        ordered = [tuple(sorted(groups[count])) for count in sorted(groups)]
        out.append(
            LengthSplit(
                groups=tuple(ordered),
                template=miner.texts[template],
                lines=tuple(
                    CitedLine(group[0], lookup[group[0]].lines[first[group[0]]])
                    for group in ordered
                ),
            )
        )
        if len(out) >= _MAX_LENGTH_SPLITS:
            break
    return out
