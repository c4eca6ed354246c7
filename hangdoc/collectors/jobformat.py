"""Formats of whole-job collection, shared by the collectors (writers) and the analyzer.

Like ``dumpformat``, this is a module of ``collectors`` that the analyzer may import. A
whole-job collection (``hangdoc collect --slurm-job``) writes::

    OUT/
      job.json                 # JobManifest: every node, its outcome, its clock offset
      <host>/                  # one node dump per node (dumpformat.py)
        manifest.json
        summary.json           # NodeSummary: the node's ranks reduced, read first
        rank<R>/...

``summary.json`` is written by the node itself right after its dump (the analyzer's
``write_node_summary``), so ``hangdoc analyze`` of thousands of nodes reads one small
file per node and opens raw per-rank files only for the few ranks a finding is about.

Versioning: bump SUMMARY_FORMAT / JOB_FORMAT when a key changes meaning; adding keys is
allowed and readers ignore keys they do not know.

The per-rank records of a summary (``proc``, ``collectives``, ``log_events``, ``gpu``:
``NodeSummary.tables`` from /6, each ``RankSummary``'s own lists before) are the
analyzer model's dataclasses (analyzer/model.py: ProcSample, CollectiveRecord, LogEvent,
GpuState) written field by field under their own names (/6: a column per field,
analyzer/summaries/columns.py), defaults left out, with every Frame replaced by its
index in ``frames``. The model only appends fields, so old summaries stay readable.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

SUMMARY_NAME = "summary.json"
# /2: log events carry a typed payload per kind (analyzer/payloads.py) instead of
# string pairs; a /1 summary is refused with a note and its dump's raw files are read.
# /3: each rank's log window is a digest (``RankSummary.log_window``: template numbers into
# ``NodeSummary.log_templates`` and the lines' numbers; analyzer/summaries/log_window.py)
# instead of its lines under ``extra``; a /2 summary still loads.
# /4: a process group's ranks may be runs (``rank_runs``: [[first, count, step], ...];
# analyzer/summaries/rank_runs.py) instead of its ``ranks``; /2 and /3 summaries still load.
# /5: a log window's templates and line-number differences are runs (``tr``, ``lr``:
# [[value, lines], ...]) instead of a value a line (``t``, ``l``); /2 to /4 still load.
# /6: the ranks' ``proc``, ``collectives``, ``log_events`` and ``gpu`` records are
# ``NodeSummary.tables``, one table per kind for the node, a column per field
# (analyzer/summaries/columns.py), not in each ``RankSummary``; and a log window's
# numbers are the lengths (``nl``) of its runs' numbers in ``NodeSummary.window_numbers``
# (one string for the node, its last key: the reader does not parse it with the JSON)
# instead of the strings (``n``); /2 to /5 still load.
# /7: a table may write the node's equal records once (``d``: how many distinct, ``u``:
# each row's index into them; the columns are then the distinct records'), found by the
# node when it writes the summary; /2 to /6 still load (a /6 reader would read the
# distinct records as the rows, so the version changes).
SUMMARY_FORMAT = "hangdoc.summary/7"
SUMMARY_FORMATS_READ = frozenset(
    {
        "hangdoc.summary/2",
        "hangdoc.summary/3",
        "hangdoc.summary/4",
        "hangdoc.summary/5",
        "hangdoc.summary/6",
        SUMMARY_FORMAT,
    }
)
SUMMARY_FORMAT_PREFIX = "hangdoc.summary/"
JOB_MANIFEST_NAME = "job.json"
JOB_FORMAT = "hangdoc.job/1"
JOB_FORMAT_PREFIX = "hangdoc.job/"

# A frame of the summary's frame table: [function, file, line | null, native 0/1] and,
# when py-spy recorded them, [[name, repr], ...] locals as a fifth element.
FrameRow = list[object]
# One thread of one rank at one sample: [shape index, os_thread_id, thread_id], and its own
# source file as a fourth element in the rare case that it is not its sample's.
ThreadRef = list[int | str | None]

NodeStatus = Literal["ok", "partial", "failed", "timeout"]
Transfer = Literal["shared", "stream", "summary"]
# What a whole-job collection was asked for: auto lets each node pick shared or stream.
TransferMode = Literal["auto", "shared", "stream", "summary"]


class ThreadShape(TypedDict):
    """What a thread's stack looks like, without the ids that differ from rank to rank."""

    frames: list[int]  # indices into NodeSummary.frames, innermost first
    name: str | None
    active: bool | None
    owns_gil: bool | None
    is_main: bool


class ChildStackRecord(TypedDict):
    pid: int
    cmdline: str | None
    threads: list[ThreadRef]


class StackSampleRecord(TypedDict):
    index: int
    time: float | None
    source: str
    threads: list[ThreadRef]
    children: NotRequired[list[ChildStackRecord]]


class RankSummary(TypedDict):
    """One process of the node. ``proc``/``collectives``/``log_events``/``gpu`` hold the
    model's records (see the module docstring); what was cut is counted in ``reduced``."""

    rank: int | None
    pid: int | None
    host: str | None
    local_rank: int | None
    world_size: int | None
    local_world_size: int | None
    group_rank: int | None
    cmdline: str | None
    start_time: float | None
    exited: bool
    env: dict[str, str]  # only the keys whose value differs from NodeSummary.env
    sources: list[str]
    # Live samples only. Stacks read from text (tracebacks in logs, pasted dumps) are the
    # model's ``text_stacks``, written generically under ``extra`` (each thread with the
    # exception a traceback ended it with); a summary written before they were told apart
    # may hold them here.
    stacks: list[StackSampleRecord]
    # /2 to /5 (/6: in ``NodeSummary.tables``)
    proc: NotRequired[list[dict[str, object]]]
    collectives: NotRequired[list[dict[str, object]]]
    log_events: NotRequired[list[dict[str, object]]]
    gpu: NotRequired[list[dict[str, object]]]
    activity: str  # the main thread at the last sample, in plain words
    reduced: dict[str, int]  # fr_records / log_events / proc_threads left out
    # /3: the model's ``log_lines`` as a digest (analyzer/summaries/log_window.py).
    log_window: NotRequired[dict[str, object]]
    extra: NotRequired[dict[str, object]]  # model fields added after this format


class StackClass(TypedDict):
    """Ranks whose main thread stood at the same call path at the last sample."""

    ranks: list[int]
    pids: list[int]  # processes without a known rank
    shape: int | None  # index into NodeSummary.threads (None: no stack)
    activity: str


class CollectiveBrief(TypedDict):
    seq: int
    op: str
    state: str
    input_sizes: list[list[int]]
    dtypes: list[str]


class GroupRankState(TypedDict):
    """Flight recorder state of some ranks of one process group (same state, one entry)."""

    ranks: list[int]
    last_completed: CollectiveBrief | None
    pending: list[CollectiveBrief]


class GroupState(TypedDict):
    group: str
    desc: str | None
    states: list[GroupRankState]


class LogHighlight(TypedDict):
    kind: str
    count: int
    ranks: list[int]
    first_time: float | None
    first_text: str
    source: str


class NodeSummary(TypedDict):
    format: str
    hangdoc_version: str
    host: str
    created_at: float
    dump_format: str | None
    manifest_finished_at: float | None  # ties this summary to the manifest it summarises
    complete: bool
    sample_times: list[float]
    env: dict[str, str]  # environment shared by every rank of the node
    frames: list[FrameRow]
    threads: list[ThreadShape]
    stack_classes: list[StackClass]
    fr_groups: list[GroupState]
    log_highlights: list[LogHighlight]
    ranks: list[RankSummary]
    # /6: the ranks' proc, collectives, log_events and gpu records, one table each, a
    # column per field, rows in the order of ``ranks`` (analyzer/summaries/columns.py)
    tables: NotRequired[dict[str, dict[str, object]]]
    # /3: the templates of the ranks' log windows, each a line's pieces between its numbers.
    log_templates: NotRequired[list[list[str]]]
    # Evidence-level records (model dataclasses, as above).
    host_info: dict[str, object] | None
    process_groups: list[dict[str, object]]  # /4: ``rank_runs`` in place of long ``ranks``
    job_log_events: list[dict[str, object]]
    inputs: list[dict[str, object]]  # files with an error, and those rules read by kind
    steps: list[dict[str, object]]  # collector steps that did not succeed
    notes: list[str]
    counts: dict[str, int]  # inputs / steps / raw files not carried here
    # /6: every log window's runs' numbers, in turn (the last key: analyzer/summaries/read.py)
    window_numbers: NotRequired[str]


class NodeRecord(TypedDict):
    """One node of a whole-job collection and how it went."""

    host: str
    status: NodeStatus
    reason: str | None
    dir: str | None  # the node's dump under OUT, when one arrived
    transfer: Transfer | None
    remote_dir: str | None  # where the node kept its raw dump (summary-only transfer)
    ranks: list[int]
    started_at: float | None  # launcher clock: when the node said hello
    finished_at: float | None  # launcher clock
    duration_s: float | None
    # The node's clock minus the launcher's when its hello line arrived: an upper bound
    # on the skew of its sample times against other nodes' (plus the delivery delay).
    clock_offset_s: float | None
    bytes: int  # archive bytes received (stream transfers)


class JobManifest(TypedDict):
    format: str
    hangdoc_version: str
    launcher: str  # "slurm", "kubernetes", "ssh"...
    job_id: str
    job_name: str | None
    host: str  # where the launcher ran
    started_at: float
    finished_at: float | None
    complete: bool
    command: list[str]  # the launcher command line that ran the node collectors
    options: dict[str, object]
    nodes: list[NodeRecord]
    warnings: list[str]
