"""A process's host memory as the job prints it: one reading a line, a series per process.

Jobs that watch their host memory print it with psutil's numbers: the process's resident
set (``psutil.Process().memory_info().rss``, printed as "RSS", "RSS MEM USE: 5.11G",
"rss=12.3 GB"), or the host's (DeepSpeed's ``see_memory_usage``, deepspeed/runtime/
utils.py: "CPU Virtual Memory:  used = 12.34 GB, percent = 45.6%", from
``psutil.virtual_memory()``; a monitor's "MemUsed: 230.5G"). Only these host-specific
names are read: a bare "memory"/"mem" in a training line is as often the GPU's
(torch.cuda.max_memory_allocated in mmengine's and detectron2's step lines), and a line
that names the GPU is left alone.

The scanner folds a process's readings into one event (scanner._aggregate_key): where the
series stands (its lowest, its last, the one before) is what tells a process whose memory
climbs until the kernel's OOM killer or the scheduler ends it (views/deaths.py) from one
that holds steady.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.parsers.logs.mentions import find_mention
from hangdoc.analyzer.payloads.launch import HostMemory
from hangdoc.analyzer.vocabulary import EventKind, RankFrom

# The name of a host-memory reading, then its number and unit: "RSS MEM USE: 5.11G",
# "rss=1234 MB", "CPU Virtual Memory:  used = 12.34 GB", "Host memory used: 40.1 GiB",
# "MemUsed: 230.5G".
_READING = re.compile(
    r"(?:\b(?:RSS|rss|Rss)(?:[ _](?:MEM|[Mm]em(?:ory)?))?(?:[ _](?:USE|USAGE|[Uu]se|[Uu]sage))?"
    r"|\b(?:CPU|[Cc]pu|[Hh]ost|HOST|RAM|[Ss]ystem)(?: [Vv]irtual)? (?:MEM(?:ORY)?|[Mm]em(?:ory)?)"
    r"(?: (?:USE|USAGE|USED|[Uu]se|[Uu]sage|[Uu]sed))?"
    r"|\bMemUsed)"
    r"\s*(?:[:=]|\bis\b)?\s*(?:used\s*=\s*)?(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT])(?:i?B)?\b"
)
# psutil.virtual_memory().percent, where the line prints it ("percent = 45.6%").
_PERCENT = re.compile(r"\bpercent\s*[:=]\s*(?P<pct>\d+(?:\.\d+)?)\s*%")
# A line about the GPU's memory, whatever its words: not the host's.
_GPU = re.compile(r"(?i)gpu|cuda|vram|device|allocated|reserved|\bMA\b")
_GIB = {"K": 1 / 1024**2, "M": 1 / 1024, "G": 1.0, "T": 1024.0}

NEED = Need.words(("RSS", "rss", "Rss", "emory", "MEM", "Mem", "mem"))


def match_memory(text: str) -> Hit | None:
    """One host-memory reading (a HOST_MEMORY event of one reading; the scanner folds a
    process's readings into one)."""
    if not NEED.admits(text):
        return None
    m = _READING.search(text)
    if m is None or _GPU.search(text):
        return None
    gib = float(m.group("num")) * _GIB[m.group("unit")]
    pct = _PERCENT.search(text, m.end())
    reading = HostMemory.first(gib, float(pct.group("pct")) if pct else None)
    # A rank its words name ("… rank 0 RSS MEM USE: 5.11G") keeps two ranks' series in
    # one file apart; whose the event is, attribution decides (parsers/logs/attribution.py).
    mention = find_mention(text)
    named = mention.rank if mention is not None and mention.how is RankFrom.MENTION else None
    return Hit(EventKind.HOST_MEMORY, payload=reading, key=("hostmem", named))
