"""Undo what launchers and terminals do to a dump's lines (FORMATS.md §8.1-8.3).

A stack dump rarely arrives as the tool printed it: torchrun tees it with
``[default3]:``, the in-process excepthook adds ``[rank3]:``, Kubernetes and
collectors stamp times, mpirun and pdsh add their own tags, a TTY adds ANSI colours
and CRLF, and several ranks share one console so their lines interleave. Parsers
match *after* this module has peeled those layers off, and use the rank, host and
pid the prefixes carried to attribute what they parse.

``split_streams`` regroups interleaved lines by the process that wrote them, so a
console holding eight ranks' py-spy dumps parses as eight dumps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from hangdoc.analyzer.parsers.base import decode_bytes

# ESC-introduced CSI/OSC sequences, and the bare "[36m" that survives a copy-paste.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Z0-9]")
_BARE_SGR = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m")
# A bare reset between a prefix and the line ("<stamp> [0m host:1:2 [0] NCCL INFO …"): the
# space it left goes with it, as at the start of a line.
_BARE_SGR_SPACED = re.compile(r"(?<= )\[\d{1,3}(?:;\d{1,3})*m (?=\S)")
_LEADING_SGR = re.compile(r"(?:\x1b)?\[\d{1,3}(?:;\d{1,3})*m")


@dataclass(frozen=True, slots=True)
class Tagged:
    """One line with its launcher prefixes removed, and what they said."""

    text: str
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None


def strip_colours(line: str) -> str:
    """Drop ANSI colour codes, with or without their ESC (a copy-paste loses it)."""
    coloured = line.startswith(("\x1b", "[")) and bool(_LEADING_SGR.match(line))
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if "[" in line and "m" in line:
        line = _BARE_SGR.sub("", _BARE_SGR_SPACED.sub("", line))
    if coloured and line.startswith(" ") and not line.startswith("  "):
        line = line[1:]  # "[0m host:1:2 [0] NCCL INFO …": the space after a colour reset
    return line


def clean_line(line: str) -> str:
    """Drop ANSI colour codes and carriage returns; a tqdm-style redraw keeps its last
    non-empty segment, as a terminal would have shown it."""
    line = strip_colours(line)
    if "\r" in line:
        segments = [s for s in line.split("\r") if s.strip()]
        line = segments[-1] if segments else ""
    return line


def clean_lines(text: str) -> list[str]:
    """Split text into cleaned lines (CRLF, lone CR, ANSI handled)."""
    return [clean_line(line) for line in text.split("\n")]


# Each pattern is anchored at the start of what is left of the line. They are tried
# repeatedly because launchers stack: "[default1]:[rank1]:[E… ProcessGroupNCCL…]".
_K8S_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2}) ")
# A time of day alone, with or without its fraction: a collector's ("10:28:25.123 "), and
# Jenkins' Timestamper plugin's default "HH:mm:ss " before every line of a console log
# (jenkinsci/timestamper-plugin: the system clock format "'<b>'HH:mm:ss'</b> '"; PyTorch's
# CI logs as pasted into its issues, pytorch#11364's "02:21:53 RuntimeError: Broken pipe").
_COLLECTOR_TIME = re.compile(r"\d{2}:\d{2}:\d{2}(?:\.\d{3,9})? ")
# Open MPI's --tag-output "[1,3]<stdout>:"; SageMaker's MPI launcher writes the rank and
# the host into it: "[1,mpirank:3,algo-1]<stdout>:" (aws-samples/sagemaker-distributed-
# training-workshop#6).
_MPIRUN = re.compile(
    r"(?:[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4})?"
    r"\[(\d+),(?:mpirank:)?(\d+)(?:,([\w.-]{1,64}))?\]<(?:stdout|stderr|stddiag)>: ?"
)
# Log shippers' own layers (shared/FORMATS.md §8.1): ``kubectl logs --prefix``
# ("[pod/%s/%s] ", kubectl's logs.go addPrefixIfNeeded: pod, container), docker compose
# ("trainer-1  | ", "algo-1-8gd7b_1  | ": service and replica, padded, then "| ";
# aws/sagemaker-training-toolkit#37 local mode), journald/syslog ("Feb 18 10:28:25 host
# python[1234]: ", systemd's short format: time, host, identifier[pid]). Peeled silently:
# the names they carry are a container's or a unit's, and a host or pid here would change
# how the log parser attributes ranks (parsers/logs/attribution.py) from what it reads
# without the shipper.
_KUBECTL = re.compile(r"\[pod/([\w.-]{1,253})/[\w.-]{1,63}\] ")
# Akash Console's deployment log view (akash-network/console, apps/deploy-web
# services/provider-proxy/logFormatters.ts formatLogMessage: "[${serviceName}]: ${message}",
# the service name being the pod name's part before its first "-"): a lower-case SDL
# service name, no dash, in brackets, then ": ". (torchrun's "[default3]:" and the
# excepthook's "[rank3]:" are tried first, and this one is only taken with a letter first.)
_AKASH = re.compile(r"\[[a-z][a-z0-9]{0,62}\]: ")
_COMPOSE = re.compile(r"([A-Za-z0-9][\w.-]{0,80}?[-_]\d{1,4}) +\| ")
_JOURNALD = re.compile(
    r"[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d+)? ([\w.-]{1,64}) [\w.@/-]{1,64}\[(\d+)\]: "
)
_NUMERIC_TAG = re.compile(r"\[\d+\] ")
# (vLLM's V1 workers before their parallel coordinates named them: "VllmWorker rank={rank}",
# vllm/v1/executor/multiproc_executor.py WorkerProc's _add_prefix, the rank in its world.)
_RAY = re.compile(r"\([\w.:-]+(?: rank=\d{1,6})? pid=(\d+)(?:, ip=([0-9A-Fa-f.:]+))?\) ")
# vLLM's workers (V1) prefix their lines with a process name made of their parallel
# coordinates (vllm/v1/executor/multiproc_executor.py ``setup_proc_title_and_log_prefix``:
# "Worker", then "_DP{r}" when dp_size > 1, "_PP{r}" when pp_size > 1, "_PCP{r}", "_TP{r}"
# when tp_size > 1, "_DCP{r}", "_EP{r}"; vllm's ``decorate_logs``: "(Worker_TP1 pid=2004) "),
# the form of the Ray-style prefix above. A tensor-parallel rank of one stage and replica
# is the rank in the workers' world, as a stage is when each stage is one rank; other
# combinations need sizes the prefix does not give.
_VLLM_WORKER = re.compile(r"\(Worker((?:_(?:DP|PP|PCP|TP|DCP|EP)\d{1,4})+) pid=")
_VLLM_COORDINATE = re.compile(r"_([A-Z]+)(\d+)")
_VLLM_WORKER_RANK = re.compile(r"\(VllmWorker rank=(\d{1,6}) pid=")


def vllm_worker_rank(prefix: str) -> int | None:
    """The rank a vLLM worker's prefix places its process at, or None."""
    if (named := _VLLM_WORKER_RANK.match(prefix)) is not None:
        return int(named.group(1))
    m = _VLLM_WORKER.match(prefix)
    if m is None:
        return None
    coordinates = dict(_VLLM_COORDINATE.findall(m.group(1)))
    coordinates.pop("EP", None)  # the expert-parallel rank is another numbering
    if len(coordinates) != 1:
        return None
    ((axis, value),) = coordinates.items()
    return int(value) if axis in ("TP", "PP") else None


_DETERMINED = re.compile(r"\[[^\]\n]{1,64}\] [0-9a-f]{8} \|\| ")
_STREAM_NAME = re.compile(r"(?:stderr|stdout): ")
_RANK = re.compile(r"\[rank(\d+)\]: ?")
_ROLE = re.compile(r"\[([A-Za-z_][A-Za-z_-]*?)(\d+)\]: ?")
_SILENT = (
    _K8S_TIME,
    _COLLECTOR_TIME,
    _DETERMINED,
    _NUMERIC_TAG,
    _STREAM_NAME,
    _KUBECTL,
    _JOURNALD,
    _COMPOSE,
    _AKASH,
)
# The silent prefixes as one anchored alternation, tried in the same order: its match is
# the first of them that matches, and so ends where that one's does (no pattern refers to
# a group). One C-level match where a training log's every line tried eight.
_ANY_SILENT = re.compile("|".join(f"(?:{p.pattern})" for p in _SILENT))
# Cheap pre-check: does the line start with something a prefix could start with?
_MAYBE_PREFIX = re.compile(r"[\[(0-9A-Za-z]")
# The layers peel takes (its gate, _MAYBE_PREFIX, aside): the log peeler asks first
# whether any of them, or its own, can start where it is (logs/prefix._ANY_ROUND_LAYER).
PEEL_LAYERS = (_RANK, _ROLE, _MPIRUN, _RAY, _ANY_SILENT)

_MAX_LAYERS = 8
# A tag peel reads a local rank from (_ROLE, which _RANK is tried before), anywhere in a
# line: a line without one has no local rank whatever its layers (the log scanner's
# prefilter reads such a line's other identity later, if at all).
# (_ROLE where _RANK is not, with its "[" first: a search for a pattern that starts with a
# lookahead tries every position of the line, one that starts with a literal skips to it.)
_LOCAL_RANK_TAG = re.compile(r"\[(?!rank\d+\]:)([A-Za-z_][A-Za-z_-]*?)(\d+)\]: ?")


def local_rank_tag(line: str) -> bool:
    """False only when ``peel`` reads no local rank from any layer of ``line``."""
    return "]:" in line and _LOCAL_RANK_TAG.search(line) is not None


def peel(line: str) -> Tagged:
    """Remove stacked launcher prefixes from one cleaned line; keep what they told."""
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    text = line
    for _ in range(_MAX_LAYERS):
        if not text or not _MAYBE_PREFIX.match(text):
            break
        if m := _RANK.match(text):
            rank = int(m.group(1))
        elif m := _ROLE.match(text):
            local_rank = int(m.group(2))
        elif m := _MPIRUN.match(text):
            rank = int(m.group(2))
            host = m.group(3) or host
        elif m := _RAY.match(text):
            pid = int(m.group(1))
            host = m.group(2) or host
            rank = vllm_worker_rank(text) if rank is None else rank
        else:
            # Prefixes that say nothing about who wrote the line: times, tags.
            m = _ANY_SILENT.match(text)
            if m is None:
                break
        text = text[m.end() :]
    return Tagged(text, rank, local_rank, host, pid)


# pdsh/clush: "<host>: <line>". Too ambiguous to peel line by line ("Error: x" looks
# the same), so it is only peeled when most lines of a file carry it.
_PDSH = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]{0,62}): ")
_PDSH_SAMPLE_LINES = 400
_PDSH_MIN_SHARE = 0.6
_NOT_HOSTS = frozenset({"Error", "Locals", "Arguments", "Warning", "Note", "Traceback"})


def detect_pdsh_hosts(lines: Iterable[str]) -> frozenset[str]:
    """Host tags when the text looks like pdsh/clush output, else an empty set."""
    seen = 0
    hits: dict[str, int] = {}
    for line in lines:
        if not line.strip():
            continue
        seen += 1
        m = _PDSH.match(line)
        if m and m.group(1) not in _NOT_HOSTS:
            hits[m.group(1)] = hits.get(m.group(1), 0) + 1
        if seen >= _PDSH_SAMPLE_LINES:
            break
    if not seen or sum(hits.values()) < _PDSH_MIN_SHARE * seen:
        return frozenset()
    if len(hits) > max(8, seen // 4):  # many distinct "hosts": ordinary "key: value" text
        return frozenset()
    return frozenset(hits)


StreamKey = tuple[str | None, int | None, int | None, int | None]


@dataclass(slots=True)
class Stream:
    """The lines one process wrote, as (1-based line number, text without prefixes)."""

    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    lines: list[tuple[int, str]] = field(default_factory=list)

    @property
    def tagged(self) -> bool:
        """True when a prefix said who wrote these lines."""
        return any(v is not None for v in (self.rank, self.local_rank, self.host, self.pid))


def _key(tag: Tagged) -> StreamKey:
    # torchrun's "[default3]:" is on every line, "[rank3]:" only on some: key on the
    # local rank when there is one so both kinds of line land in one stream.
    if tag.local_rank is not None:
        return (tag.host, tag.pid, tag.local_rank, None)
    return (tag.host, tag.pid, None, tag.rank)


def split_streams(text: str) -> list[Stream]:
    """Clean and peel every line, then group lines by the process their prefix names.

    A line without any prefix continues the previous line's stream when it is blank or
    indented (the continuation of a multi-line record whose first line carried the
    prefix, §8.4); otherwise it belongs to the untagged stream.
    """
    lines = clean_lines(text)
    pdsh = detect_pdsh_hosts(lines)
    streams: dict[StreamKey, Stream] = {}
    untagged: StreamKey = (None, None, None, None)
    previous: StreamKey = untagged
    for number, raw in enumerate(lines, start=1):
        if not pdsh and not _MAYBE_PREFIX.match(raw):
            # No prefix starts so (a stack's frames, blank lines: most of a paste of
            # dumps): peel would take nothing and name no one; the line goes where an
            # untagged line goes, without a Tagged of its own.
            key = previous if not raw.strip() or raw[:1] in " \t" else untagged
            stream = streams.get(key)
            if stream is None:
                stream = streams[key] = Stream()
            stream.lines.append((number, raw))
            previous = key
            continue
        host: str | None = None
        line = raw
        if pdsh and (m := _PDSH.match(line)) and m.group(1) in pdsh:
            host = m.group(1)
            line = line[m.end() :]
        tag = peel(line)
        if host is not None and tag.host is None:
            tag = Tagged(tag.text, tag.rank, tag.local_rank, host, tag.pid)
        key = _key(tag)
        if key == untagged and (not tag.text.strip() or tag.text[:1] in " \t"):
            key = previous
        stream = streams.get(key)
        if stream is None:
            stream = streams[key] = Stream(tag.rank, tag.local_rank, tag.host, tag.pid)
        elif stream.rank is None and tag.rank is not None:
            stream.rank = tag.rank
        stream.lines.append((number, tag.text))
        previous = key
    return [s for s in streams.values() if any(t.strip() for _, t in s.lines)]


# torch.distributed.debug periodic files (FORMATS.md §4): "=== Rank <i>: <addr> ===".
_SECTION = re.compile(r"=== Rank (\d+)(?::\s*(.*?))?\s*===\s*$")


@dataclass(slots=True)
class Section:
    """A part of a stream: one rank's section of a torch.distributed.debug file, or
    the whole stream when it has no sections (rank None)."""

    rank: int | None
    address: str | None
    lines: list[tuple[int, str]]


def split_sections(lines: list[tuple[int, str]]) -> list[Section]:
    """Cut a stream at ``=== Rank <i>: <addr> ===`` headers."""
    sections: list[Section] = [Section(None, None, [])]
    for number, text in lines:
        m = _SECTION.match(text)
        if m:
            sections.append(Section(int(m.group(1)), m.group(2) or None, []))
        else:
            sections[-1].lines.append((number, text))
    return [s for s in sections if s.rank is not None or any(t.strip() for _, t in s.lines)]


# Sniffers look at the first lines only; cleaning a whole 64 KiB head for each of them
# would dominate the cost of loading thousands of files.
_HEAD_TEXT_BYTES = 16 * 1024


def head_lines(head: bytes, limit: int = 200) -> list[str]:
    """The first cleaned, peeled, non-blank lines of a file head, for sniffers."""
    raw_lines = decode_bytes(head[:_HEAD_TEXT_BYTES]).split("\n", limit * 2)[: limit * 2]
    lines = [clean_line(line) for line in raw_lines]
    pdsh = detect_pdsh_hosts(lines)
    out: list[str] = []
    for raw in lines:
        line = raw
        if pdsh and (m := _PDSH.match(line)) and m.group(1) in pdsh:
            line = line[m.end() :]
        text = peel(line).text
        if text.strip():
            out.append(text)
            if len(out) >= limit:
                break
    return out


def sniff_lines(head: bytes, count: int) -> list[str]:
    """The first ``count`` meaningful lines of a head: torch.debug section headers and
    their "Error: …" lines (unreachable ranks) do not use up a sniffer's window.

    Of the head asked last, remembered: the sniffers ask of one head in turn (text_kind
    asks the faulthandler and py-spy sniffers, each for its window), and cleaning and
    peeling its 200 lines was a third of a rank log's sniffing."""
    global _last_sniffed
    last = _last_sniffed  # one read: another thread may replace it
    if last is not None and (last[0] is head or last[0] == head):
        lines = last[1]
    else:
        lines = tuple(
            line
            for line in head_lines(head)
            if not (_SECTION.match(line) or line.startswith("Error:"))
        )
        _last_sniffed = (head, lines)
    return list(lines[:count])


# The head sniff_lines read last and its meaningful lines (a head is at most SNIFF_BYTES).
_last_sniffed: tuple[bytes, tuple[str, ...]] | None = None
