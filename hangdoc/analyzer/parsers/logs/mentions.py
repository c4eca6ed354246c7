"""A rank the line's own words name: the fallback when no prefix or header says whose it is.

Launchers' prefixes (``[rank3]:``, ``[default3]:``, srun's ``3: ``) and NCCL's
``host:pid`` headers say whose a line is before its message. Many lines say it in the
message instead, because the job or its framework wrote its rank into what it logs:

* tags: DeepSpeed's ``log_dist`` (deepspeed/utils/logging.py: ``[Rank 3] …``),
  Lightning's ``rank_prefixed_message`` (lightning/fabric/utilities/rank_zero.py:
  ``[rank: 3] …``), a job's own logging format (``[rank=3]``, ``[RANK 3]``, ``(rank 3)``);
* words: ``rank 3: …``, ``Rank 3, world_size 8: …``, ``… on rank=3``, ``global_rank 3``,
  Lightning's ``GLOBAL_RANK: 3`` (``initializing distributed: GLOBAL_RANK: 3, MEMBER:
  4/8``), Megatron's per-rank ``rank 3 | iteration …``;
* local ranks: ``local_rank=3``, ``LOCAL_RANK: 3`` (Lightning's ``LOCAL_RANK: 0 -
  CUDA_VISIBLE_DEVICES: [0,1]``), ``local rank 3``: mapped to a global rank as torchrun's
  ``[default3]:`` is (parsers/logs/attribution.py);
* devices: ``[GPU 3]``, ``GPU 3: …``, ``[cuda:3]``: the device index, which is the local
  rank under torchrun's one process per GPU; the weakest of all;
* parallel coordinates: SGLang's scheduler processes log under ``[time DP0 PP1 TP3]``
  (sglang/srt/managers/scheduler.py ``run_scheduler_process``: `` DP{dp_rank}``, then
  `` PP{pp_rank}`` when pp_size > 1, `` TP{tp_rank}`` when tp_size > 1, `` EP{ep_rank}``),
  whose global rank in its world is ``pp_rank * tp_size + tp_rank``: taken when the
  pipeline coordinate is absent (one stage) or the tensor-parallel size is known.

A line that names a rank is not always that rank's: "connection to rank 5 closed", "recv
from rank 0", "Duplicate GPU detected : rank 1 and rank 0" speak of peers. A mention
counts only when no word before it makes the number another process's (``from``, ``to``,
``peer``, ``waiting for``…), when the line names no second rank (a line about two ranks
is about their relation), and when the number is not a LoRA or matrix rank. What is left
is weaker than any prefix or header and weaker than a file's name (a rank's own file that
speaks of rank 0 is still its own): the attribution records which kind it was.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from hangdoc.analyzer.vocabulary import RankFrom

# Markdown emphasis and code spans a reporter puts around the words that matter.
_EMPHASIS = re.compile(r"\*{1,2}|`|__")
# What strip_emphasis takes out; a line without any of them is read as it is.
EMPHASIS_MARKERS = ("*", "`", "__")
_TAG = re.compile(
    r"[\[(<]\s*(?:(?P<local>local[_ ]?rank|LOCAL_RANK)|(?:global[_ ]?)?rank|RANK|GLOBAL_RANK)"
    r"\s*[:=#]?\s*(?P<n>\d{1,6})\s*[\])>]",
    re.IGNORECASE,
)
# "rank 3", "rank=3", "rank: 3", "global_rank 3", "GLOBAL_RANK: 3", "rank_id=3", "Local
# rank 3"; not "ranks", "rank3" (a word or a path: only a tag may glue them), "rank 3.5",
# "rank 0-3" (a range). Read from each "rank" found (``_word_mentions``): one expression
# with every spelling in front would be tried at every position of every line.
_RANK = re.compile(r"rank", re.IGNORECASE)
_RANK_SPELLINGS = frozenset({"rank", "Rank", "RANK"})
_AFTER_RANK = re.compile(
    r"(?:_id|_ID)?(?:\s*[:=#]\s*|\s+)(?P<n>\d{1,6})(?![\d/]|\.\d|\s*-\s*\d|\w)"
)
_QUALIFIER = re.compile(r"(?P<q>local|global)[_ ]?$", re.IGNORECASE)
# A device named as the line's owner: a tag ("[GPU 3]", "[cuda:3]") or the line's start.
_DEVICE = re.compile(
    r"(?:^|[\[(])\s*(?:GPU|gpu|cuda:|CUDA:|device:?)\s?(?P<n>\d{1,3})\s*(?:[\])]|:\s)"
)
# SGLang's scheduler coordinates, left at the line's start once its stamp is peeled
# ("TP3] …", "PP1 TP3] …", "DP0 TP3 EP3] …").
_COORDINATES = re.compile(r"(?P<coords>(?:(?:DP|PP|TP|EP|ATTN_CP|MOE_DP)\d{1,4} ?){1,5})\] ")
_COORDINATE = re.compile(r"(DP|PP|TP|EP|ATTN_CP|MOE_DP)(\d{1,4})")
# Words after which a rank is another process's: the peer of a transfer, the rank waited
# for, one of two ranks compared ("recv from rank 0", "waiting for [rank 3]", "-> rank 2").
_PEER_WORDS = frozenset({
    "from", "to", "with", "by", "of", "peer", "remote", "than", "and", "between", "around",
    "src", "dst", "root", "neighbor", "neighbour", "next", "prev", "previous", "other",
    "send", "sending", "sent", "recv", "receive", "receiving", "received", "expected",
    "expecting", "missing", "killed", "kill", "dead", "lost", "connect", "connecting",
    "connected", "contact", "reach", "unreachable", "contain", "contains", "containing",
})  # fmt: skip
_PEER_PHRASES = frozenset({"waiting for", "wait for", "waits for"})
_ARROWS = ("->", "\u2192", "<-")
_OPENERS = "([{<'\""
# A report about a rank by someone else (a launcher, a peer's watchdog): "mpirun noticed
# that process rank 2 with PID 0 on node n exited on signal 7", "host: rank 0 died from
# signal 15", "rank 3 was killed". The line is not the rank's own; the recognisers that
# know these reports give their events the rank they name.
_REPORT_BEFORE = re.compile(r"\b(?:noticed|reported|reports|detected) that\s+(?:process\s+)?$")
_REPORT_AFTER = re.compile(
    r"\s*(?:\([^)]{0,40}\)\s*|with PID \d+\s+(?:on (?:node|host) \S+\s+)?)?(?:has\s+|was\s+|is\s+)?"
    r"(?:died|exited|killed|terminated|crashed|dead|failed|exit(?:ed)? (?:with|on)|"
    r"signal(?:l?ed)?)\b",
    re.IGNORECASE,
)
# A rank that is not a process: a LoRA adapter's, a matrix's.
_NOT_PROCESS = re.compile(r"(?:lora|LoRA|LORA|low|adapter|matrix|svd|SVD|tensor)[\s_-]*$")
_PEER_WINDOW = 24


@dataclass(frozen=True, slots=True)
class Mention:
    """A rank a line names as its own, and how strongly (a ``RankFrom``)."""

    how: RankFrom
    rank: int | None = None  # MENTION: the global rank
    local_rank: int | None = None  # MENTION_LOCAL and MENTION_DEVICE
    pipeline: int | None = None  # COORDINATES: the pipeline stage, when the line names one
    tensor: int | None = None  # COORDINATES: the tensor-parallel rank
    data: int | None = None  # COORDINATES: the data-parallel replica (a world of its own)


def strip_emphasis(text: str) -> str:
    """The line without Markdown's emphasis and code-span markers."""
    return _EMPHASIS.sub("", text) if any(m in text for m in EMPHASIS_MARKERS) else text


def find_mention(text: str) -> Mention | None:
    """The rank this line's words name as the line's own, or None (no mention, a peer's,
    or more than one rank named)."""
    low = text[:600].lower()
    has_rank = "rank" in low
    if not has_rank and "TP" not in text and "PP" not in text and not _names_device(low):
        return None
    text = strip_emphasis(text)
    coords = _coordinates(text)
    if coords is not None:
        return coords
    found: list[tuple[int, bool, int, int]] = []  # (number, local, start, end)
    if has_rank:
        tags: list[tuple[int, int]] = []
        for m in _TAG.finditer(text):
            found.append((int(m.group("n")), m.group("local") is not None, m.start(), m.end()))
            tags.append(m.span())
        for number, local, start, end in _word_mentions(text):
            if not any(s <= start < e for s, e in tags):  # else the same mention, as a tag
                found.append((number, local, start, end))
    if not found:
        device = _DEVICE.search(text) if _names_device(low) else None
        if device is None or _peer(text, device.start()):
            return None
        return Mention(RankFrom.MENTION_DEVICE, local_rank=int(device.group("n")))
    globals_named = {f[0] for f in found if not f[1]}
    locals_named = {f[0] for f in found if f[1]}
    if len(globals_named) > 1 or len(locals_named) > 1:
        return None  # a line about two ranks (a pair, a peer and itself): nobody's own
    ordered = sorted(found, key=lambda f: f[2])
    number, local, start, end = next((f for f in ordered if not f[1]), ordered[0])
    if _peer(text, start) or _NOT_PROCESS.search(text[max(0, start - 12) : start]):
        return None
    if _REPORT_BEFORE.search(text[max(0, start - 32) : start]) or _REPORT_AFTER.match(text, end):
        return None
    return _named(number, local=local)


@functools.lru_cache(maxsize=1024)
def _named(number: int, *, local: bool) -> Mention:
    """One mention object per rank named (a frozen dataclass is slow to build, and a log
    names the same few ranks on every line)."""
    if local:
        return Mention(RankFrom.MENTION_LOCAL, local_rank=number)
    return Mention(RankFrom.MENTION, rank=number)


def _word_mentions(text: str) -> list[tuple[int, bool, int, int]]:
    """Each ``rank N`` of the line, its qualifier (``local``, ``global``) read before it:
    (number, whether local, start, end)."""
    out: list[tuple[int, bool, int, int]] = []
    for m in _RANK.finditer(text):
        if m.group() not in _RANK_SPELLINGS:
            continue
        after = _AFTER_RANK.match(text, m.end())
        if after is None:
            continue
        start, local = m.start(), False
        qualifier = _QUALIFIER.search(text, max(0, start - 7), start)
        if qualifier is not None:
            start, local = qualifier.start(), qualifier.group("q").lower() == "local"
        if start and (text[start - 1].isalnum() or text[start - 1] in "_/.-"):
            continue  # inside a word or a path ("num_ranks 8", "/rank 3")
        out.append((int(after.group("n")), local, start, after.end()))
    return out


def _names_device(low: str) -> bool:
    """Whether a lowered line has a device's words at all (most lines do not: the device
    expression is then not tried)."""
    return "gpu" in low or "cuda:" in low or "device" in low


def coordinate_rank(mention: Mention, tensor_size: int | None) -> int | None:
    """The rank in its world of a line's parallel coordinates. SGLang names a coordinate
    only when its size is above 1: no pipeline coordinate, one stage (the tensor-parallel
    rank is the rank); no tensor coordinate, one rank per stage (the stage is the rank);
    both, ``stage * tensor_size + tensor rank`` when the size is known."""
    if mention.pipeline is None:
        return mention.tensor
    if mention.tensor is None:
        return mention.pipeline
    if tensor_size is None or mention.tensor >= tensor_size:
        return None
    return mention.pipeline * tensor_size + mention.tensor


def _coordinates(text: str) -> Mention | None:
    """A scheduler's coordinates at the line's start, when they name a stage or a
    tensor-parallel rank (a replica or an expert rank alone names no rank of a world)."""
    m = _COORDINATES.match(text)
    if m is None:
        return None
    parts = dict(_COORDINATE.findall(m.group("coords")))
    if "TP" not in parts and "PP" not in parts:
        return None
    pipeline = int(parts["PP"]) if "PP" in parts else None
    tensor = int(parts["TP"]) if "TP" in parts else None
    data = int(parts["DP"]) if "DP" in parts else None
    return Mention(RankFrom.COORDINATES, pipeline=pipeline, tensor=tensor, data=data)


def _peer(text: str, start: int) -> bool:
    """Whether the words just before a mention make it another process's rank: a peer
    word (``from``, ``waiting for``…), then maybe ``the`` and ``global``/``local``, then
    maybe a bracket, right before it."""
    before = text[max(0, start - _PEER_WINDOW) : start].lower().rstrip(" \t[(")
    if before.endswith(_ARROWS):
        return True
    words = before.split()
    if words and words[-1] in ("global", "local"):
        words.pop()
    if words and words[-1] == "the":
        words.pop()
    if not words:
        return False
    last = words[-1].lstrip(_OPENERS)
    if last in _PEER_WORDS:
        return True
    return len(words) > 1 and f"{words[-2].lstrip(_OPENERS)} {last}" in _PEER_PHRASES
