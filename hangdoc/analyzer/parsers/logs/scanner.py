"""The line loop: peel, rejoin, follow multi-line records, recognise, collect.

One pass, constant work per line, memory bounded by what is kept: only recognised
lines become events, repeats are counted instead of stored, COLL lines and progress
bars keep their first/last state. Multi-line records (FORMATS.md §8.4) are followed
per *stream* (the rank a prefix names) for tracebacks, and globally for the reports
that no launcher prefixes (ChildFailedError, RAS, fr_trace, nvidia-smi).
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from hangdoc.analyzer.parsers.catalog import default_matcher
from hangdoc.analyzer.parsers.logs import (
    elastic,
    gpu,
    horovod,
    iostate,
    listing,
    memory,
    nic,
    pg_wrapper,
    phases,
    pipelining,
    process,
    reports,
    services,
    serving,
    sglang,
    size_checks,
    tgi,
    torch_pg,
)
from hangdoc.analyzer.parsers.logs import nccl as nccl_lines
from hangdoc.analyzer.parsers.logs.catalog_lines import catalog_hit
from hangdoc.analyzer.parsers.logs.elastic import CUT_START_WORDS, ChildFailedBlock, match_agent
from hangdoc.analyzer.parsers.logs.errors import (
    watchdog_cuda_error_cut,
    watchdog_cuda_error_joined,
)
from hangdoc.analyzer.parsers.logs.gpu import CsvBlock, TableBlock, TopoBlock, match_xid
from hangdoc.analyzer.parsers.logs.hit import Hit, Origin
from hangdoc.analyzer.parsers.logs.horovod import HorovodStallBlock, match_horovod
from hangdoc.analyzer.parsers.logs.iostate import match_io_state
from hangdoc.analyzer.parsers.logs.kernel import HungTaskBlock
from hangdoc.analyzer.parsers.logs.listing import match_listed_file
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.parsers.logs.memory import match_memory
from hangdoc.analyzer.parsers.logs.nccl import warn_at_setup
from hangdoc.analyzer.parsers.logs.nccl_stage import mark_stages, message_stage
from hangdoc.analyzer.parsers.logs.nic import match_nic_counter, match_nic_event
from hangdoc.analyzer.parsers.logs.pg_wrapper import match_wrapper
from hangdoc.analyzer.parsers.logs.phases import match_count, match_phase
from hangdoc.analyzer.parsers.logs.pipelining import match_pipelining
from hangdoc.analyzer.parsers.logs.prefilter import Prefilter
from hangdoc.analyzer.parsers.logs.prefix import LineTag, peel_line
from hangdoc.analyzer.parsers.logs.process import (
    CALLED_PROCESS,
    SAVE_FRAME,
    MpiExitBlock,
    UcxBacktraceBlock,
    exception_class,
    exception_hit,
    match_dataloader_worker,
    match_exception_line,
    match_process,
    ray_task_cause,
    writing_line,
)
from hangdoc.analyzer.parsers.logs.ray_actors import RayActorFields
from hangdoc.analyzer.parsers.logs.reports import FrTraceBlock, RasBlock
from hangdoc.analyzer.parsers.logs.services import match_service_status
from hangdoc.analyzer.parsers.logs.serving import match_serving
from hangdoc.analyzer.parsers.logs.sglang import match_sglang
from hangdoc.analyzer.parsers.logs.size_checks import match_size_check
from hangdoc.analyzer.parsers.logs.tb_stage import (
    Starter,
    collective_frame,
    frame_stage,
    frame_starter,
    line_stage,
    loader_worker_frame,
    waiting_frame,
    waiting_line,
)
from hangdoc.analyzer.parsers.logs.tgi import match_tgi
from hangdoc.analyzer.parsers.logs.timefmt import Stamp
from hangdoc.analyzer.parsers.logs.torch_pg import match_torch
from hangdoc.analyzer.parsers.logs.wrap_shape import (
    MAX_WRAP_SHAPE_LINE,
    WrapFacts,
    run_codes,
    wrap_facts,
)
from hangdoc.analyzer.parsers.logs.wrap_shape import NCCL_HEAD as _NCCL_HEAD
from hangdoc.analyzer.parsers.logs.wrap_shape import headerless as _headerless
from hangdoc.analyzer.parsers.prefixes import local_rank_tag
from hangdoc.analyzer.payloads.base import NO_PAYLOAD, EventPayload, Sign
from hangdoc.analyzer.payloads.launch import (
    CodeStage,
    ExceptionRaised,
    FatalReport,
    FatalSignal,
    HostMemory,
)
from hangdoc.analyzer.payloads.nccl import (
    CudaFailure,
    NcclColl,
    NcclError,
    NcclTransport,
    NcclTransportError,
    NcclWarn,
)
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import FailedCollectiveStack, InGroup, StoreTimeout
from hangdoc.analyzer.vocabulary import (
    EventKind,
    Phase,
    os_error_with_files,
    save_storage_error,
)

# Where a second record starts inside one physical line (interleaved consoles, tqdm).
_SPLICE = re.compile(
    r"(?<=[^\s:])(?=\[rank\d+\]:|\[default\d+\]:|\[[IWEF]\d{3,4} \d\d:\d\d:\d\d"
    r"|\[[IWEF] ProcessGroup\w*\.cpp:|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+\.py:\d+\])"
)
# The same, where the records are separated by a space only (a console copied from a web
# page, where the newlines became spaces): only taken when the line itself starts with
# such a prefix, so a message that mentions "[rank3]:" in its middle is left whole.
_SPLICE_SPACED = re.compile(r"(?<=\S) (?=\[rank\d+\]:|\[default\d+\]:)")
_LINE_PREFIXED = re.compile(r"(?:\x1b\[[\d;]*m)*\[(?:rank|default)\d+\]:")
# A tqdm meter cut after its bar by the record written over it ("… 6%|▋ [E ProcessGroup…"):
# the bar's padding is a space, which _SPLICE's lookbehind does not split after.
_METER_SPLICE = re.compile(
    r"\d%\|[ \u2588-\u258f#1-9]{0,80}?(?=\[rank\d+\]:|\[default\d+\]:"
    r"|\[[IWEF]\d{3,4} \d\d:\d\d:\d\d|\[[IWEF] ProcessGroup\w*\.cpp:)"
)
# tqdm redraws ("\r"-separated) of one or several ranks in one physical line: the rank
# prefix a segment starts with (torchrun tees the prefix before the first segment only),
# and the "n/total" of a bar, so that bars of different lengths are all kept.
_SEGMENT_OWNER = re.compile(r"(?:\x1b\[[\d;]*m)*(\[(?:rank|default)\d+\]:| {0,4}\d{1,5}: )")
_BAR_TOTAL = re.compile(r"\| *[\d.]+[kMG]?/([\d.]+[kMG]?) ")
_MAX_SEGMENT_KEYS = 256
# A rank the content says at the start of a line, after DeepSpeed's logger header:
# DeepSpeed/Megatron "[Rank 3] …", "[RANK 3] …", "rank 3: …", "rank 3 has …". torch's
# watchdog writes "[Rank N]" too, but with a *group* rank; its payload (InGroup) carries
# it and keeps it.
_SAID_RANK = re.compile(
    r"(?:\[(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\] )?(?:\[[\w.\-]+\.py:\d+:\w+\] )?"
    r"(?:\[(?:Rank|RANK) (\d{1,6})\]|[Rr]ank (\d{1,6})(?::| (?=has )))"
)
_STACK_FRAME = re.compile(r"^#\d+ \S+ from \S+:\d+")
_TRACEBACK = "Traceback (most recent call last)"
# torch.multiprocessing.spawn's ProcessRaisedException (spawn.py ProcessContext.join: msg =
# "\n\n-- Process %d terminated with the following error:\n" + the child's original
# trace): the tracebacks under it are that child's, and its number the spawn index, which
# mp.spawn passes to the function as its (local) rank.
_SPAWN_RAISED = re.compile(r"^-- Process (\d+) terminated with the following error:")
_SPAWN_RAISED_WORDS = "terminated with the following error"
_FAILED_STACK = "Stack trace of the failed collective:"
_LAST_ERROR = "Last error:"
# The failure reason ~ProcessGroupNCCL passes to ncclCommAbort (ProcessGroupNCCL.cpp:
# c10::str("Process Group destroyed on rank ", rank_)), which torch's C10D_NCCL_CHECK puts
# on the line after its "NCCL error in: <file>:<line>, <error>" (NCCLUtils.hpp
# getNcclErrorDetailStr) when aborting a communicator at the group's destruction fails.
_PG_DESTROYED = re.compile(r"^\s*Process Group destroyed on rank \d+\s*$")
# A frame of a Python traceback (traceback.format_list: '  File "%s", line %d, in %s').
_CUT_FRAME = re.compile(r'^\s+File "[^"]+", line \d+, in \S')
# The marks under a source line (Python ≥ 3.11's carets and tildes).
_MARKS = re.compile(r"^\s*[\^~]+\s*$")
# What an NCCL "Last error:" line can be besides context for the NCCL error before it.
_LAST_ERROR_KINDS = frozenset(
    {
        EventKind.NCCL_TRANSPORT_ERROR,
        EventKind.NCCL_CONFIG_ERROR,
        EventKind.NCCL_RESOURCE_ERROR,
        EventKind.CUDA_OOM,
        EventKind.CUDA_ERROR,
    }
)
_MAX_PER_KIND = 400
# Kinds that say no more than "a warning of NCCL", "an exception": a catalog row of such a
# kind adds an event only to a line that has none.
_CATCH_ALL = frozenset({EventKind.NCCL_WARN, EventKind.EXCEPTION})
_NO_KINDS: frozenset[EventKind] = frozenset()
_MAX_JOIN = 4
# Whether a line of a shape is passed over in a quiet state (Scanner._passes), per shape.
_MAX_PASS_SHAPES = 4096
_ZEROS = bytes.maketrans(b"123456789", b"000000000")
# A line that starts a record of its own is never the wrapped rest of the one before: two
# ranks' "RuntimeError: Detected mismatch …" messages, each hard-wrapped, follow each other.
_RECORD_START = re.compile(r"(?:[A-Za-z_][\w.]*(?:Error|Exception): |Traceback \(most recent)")
# ProcessGroupWrapper's "Rank N is running (inconsistent) collective:" with the
# CollectiveFingerPrint(...) pretty-printed on the lines after it.
_FP_FOLLOWS = re.compile(r"is running (?:inconsistent )?collective:\s*$")
_WRAP_LEN = 100
# DeepSpeed's launcher reports a worker's end with the worker's whole command line
# (deepspeed/launcher/launch.py, main.sigkill_handler: logger.error(f"{cmd} exits with
# return code = {last_return_code}"), cmd the list it ran, "--local_rank=N" in it): a line
# of a thousand characters or more, which a terminal, an editor or a paste hard-wraps, and
# whose local rank is then on one physical line and its exit code on a later one. Its
# lines are joined until the report's end, at most this many (a 100-column wrap of a long
# command).
_DS_REPORT = "sigkill_handler"
_DS_REPORT_END = "exits with return code"
_MAX_JOIN_COMMAND = 40

Block = (
    ChildFailedBlock
    | RasBlock
    | FrTraceBlock
    | TableBlock
    | CsvBlock
    | TopoBlock
    | HungTaskBlock
    | MpiExitBlock
    | HorovodStallBlock
    | UcxBacktraceBlock
    | RayActorFields
)
ChainKey = tuple[str | None, int | None, int | None, int | None]  # host, pid, tid, rank
Owner = tuple[int | None, int | None, int | None, str | None, int | None, int | None]


@dataclass(slots=True)
class RawEvent:
    kind: EventKind
    text: str
    line: int
    stamp: Stamp | None
    prefix_rank: int | None
    content_rank: int | None
    local_rank: int | None
    host: str | None
    pid: int | None
    repeats: int = 0
    payload: EventPayload = NO_PAYLOAD
    tid: int | None = None
    cuda_dev: int | None = None
    named_host: str | None = None
    named_pid: int | None = None
    named_local_rank: int | None = None
    partial_header: bool = False
    folded: int = 0  # lines folded into this event (COLL, transports, progress bars)

    def origin(self) -> Origin:
        return Origin(
            self.host,
            self.pid,
            self.local_rank,
            self.tid,
            self.cuda_dev,
            self.named_host,
            self.named_pid,
            self.named_local_rank,
            self.partial_header,
        )


@dataclass(slots=True)
class _Traceback:
    start: int
    last_frame: str = ""
    saving: str = ""  # the first line of it that shows a save (SAVE_FRAME)
    source: str = ""  # its innermost source line read yet (the line under a frame)
    # The store error logged right before the traceback began (c10d warns, then Python
    # raises): the traceback's frames give it its stage (tb_stage, StoreTimeout.stage).
    store: RawEvent | None = None
    # The stage its innermost line naming one shows (tb_stage.frame_stage), and whether
    # its innermost frame yet is one of torch.distributed's collectives.
    stage: CodeStage | None = None
    # The store's stage its innermost line naming one shows (tb_stage.line_stage: set-up
    # or the training loop), for a store error that is its own exception line.
    phase: Phase | None = None
    in_collective: bool = False
    in_wait: bool = False
    # Who its innermost frame that starts child processes is (tb_stage.frame_starter).
    starter: Starter | None = None
    # Its frames show a DataLoader worker's own loop (tb_stage.loader_worker_frame):
    # raised in the worker process.
    in_loader_worker: bool = False
    # The message logged right above its header (a logger.exception record: vLLM's
    # "WorkerProc failed to start.", then the traceback), and the logging call's place
    # the header's line names (LineTag.origin: every line of such a record repeats it).
    message: RawEvent | None = None
    origin: str | None = None
    # Pasted without its header from the file's first line on (its record's start cut
    # above the paste): see Scanner._head_record.
    head: bool = False
    # Its lines are a logger's error record (a framework's record of a worker's
    # exception, the header repeated on each line: vLLM's "ERROR 10-14 01:39:49
    # multiproc_worker_utils.py:226] "), and the first line's tag: see Scanner._cut_stage.
    logged_error: bool = False
    tag: LineTag | None = None

    def worker_stage(self) -> CodeStage | None:
        """Its stage, but no worker's start where its frames show the ranks themselves
        (torch.multiprocessing's start_processes), a Pool's or an executor's workers
        being started: that failure is of what started them."""
        if self.stage is CodeStage.WORKER_START and self.starter is Starter.OTHER:
            return None
        return self.stage

    def read(self, text: str) -> None:
        """What a frame or source line of it says of where it was raised."""
        stage = frame_stage(text)
        if stage is not None:
            self.stage = stage
        phase = line_stage(text)
        if phase is not None:
            self.phase = phase
        starter = frame_starter(text)
        if starter is not None:
            self.starter = starter
        if loader_worker_frame(text):
            self.in_loader_worker = True
        if text.lstrip().startswith("File "):
            self.in_collective = collective_frame(text)
            self.in_wait = self.in_collective and waiting_frame(text)
        elif self.in_collective and waiting_line(text):
            self.in_wait = True


@dataclass(slots=True)
class Scanner:
    events: list[RawEvent] = field(default_factory=list)
    local_to_global: dict[int, set[int]] = field(default_factory=dict)
    hostpid_rank: dict[tuple[str, int], set[int]] = field(default_factory=dict)
    pid_rank: dict[int, int] = field(default_factory=dict)
    dropped: int = 0
    _seen: dict[tuple[object, ...], RawEvent] = field(default_factory=dict)
    _per_kind: dict[tuple[Owner, EventKind], int] = field(default_factory=dict)
    _aggregate: dict[tuple[object, ...], RawEvent] = field(default_factory=dict)
    _block: Block | None = None
    _block_line: int = 0
    _tracebacks: dict[tuple[int | None, int | None], _Traceback] = field(default_factory=dict)
    _last_error_for: RawEvent | None = None
    _last_nccl_error: RawEvent | None = None
    _stack_event: RawEvent | None = None
    # An NCCL WARN whose body stops at NCCL's " : " separator, and its line (see _rest_of_warn).
    _open_warn: tuple[RawEvent, int] | None = None
    # A watchdog abort whose line stops inside its CUDA error, and its line (see
    # _rest_of_watchdog).
    _open_watchdog: tuple[RawEvent, int] | None = None
    _nvrm_pci: list[str] = field(default_factory=list)
    # NCCL WARN → "-> N" return-code chains per process: (first WARN, code seen yet).
    _chains: dict[ChainKey, tuple[RawEvent, bool]] = field(default_factory=dict)
    # The chains WARNs started, by process, thread and rank (see _chain_of_cut_host).
    _warn_hosts: dict[tuple[int | None, ...], set[ChainKey]] = field(default_factory=dict)
    _pending: tuple[LineTag, int, int] | None = None
    # Appended (precision6): a line that holds a catalog row's keyword and matches no row,
    # held back one line: a paste may have broken a library's message in two
    # (_message_rejoined).
    _broken: tuple[LineTag, int] | None = None
    # The line whose record being read has another record spliced after it in the same
    # physical line (a tqdm bar, which ends no state with a newline; see Progress.glued).
    _glued_at: int | None = None
    # The spawn index whose child's trace the tracebacks now read are (_SPAWN_RAISED).
    _spawn_index: int | None = None
    _prev_len: int = 0
    _prev_tag: LineTag | None = None
    # The file's last line, when it is an exception line nothing else took (see finish).
    _tail_exc: tuple[LineTag, int, tuple[str, str], str | None] | None = None
    # The last logical line read: the source line above a bare exception line, when the
    # paste cut the traceback's frames (a source line that writes a file, WRITE_CALL).
    _above: str = ""
    # Where that line was read: its line number and stream (rank, local rank).
    _above_at: tuple[int, tuple[int | None, int | None]] | None = None
    # The last event read that is an NCCL WARN whose header the paste cut away whole: the
    # return-code chain on the next line gives it its thread (see _return_code).
    _headless: RawEvent | None = None
    # The kinds of the events made of the line being read (a catalog row adds another).
    _line: int = -1
    _line_kinds: set[EventKind] = field(default_factory=set)
    # A line was passed over since the last one read (see _pass_over); _root, when set,
    # is the tagged line passed over whose identity a wrapped line after it would take,
    # not peeled until one comes (_previous_tag).
    _passing: bool = False
    _root: str | None = None
    # Whether a line with text was read yet, and the file's first line when it is an
    # exception line a logging call printed (its origin known) with the traceback above it
    # cut away: the end of an earlier record of that call (see _cut_stage).
    _read_text: bool = False
    _origin_above: str | None = None  # the origin (LineTag.origin) of the last line read
    _level_above: str | None = None  # and its level (LineTag.level: "E" for ERROR)
    _head_exc: tuple[LineTag, int, tuple[str, str]] | None = None
    # The exception ending a traceback whose frames the file begins with, its header and
    # its record's message cut above the paste, printed by a logging call (its origin) and
    # raised where no frame shown names a stage: the end of an earlier record of that call
    # (see _head_stage).
    _head_record: tuple[RawEvent, str] | None = None
    # The last exception read, when it is a Ray wrapper ("RayTaskError(RuntimeError): …"):
    # the event, the class of the remote exception it names, and its stream (see
    # _remote_cause).
    _ray_wrapper: tuple[RawEvent, str, tuple[int | None, int | None, int | None]] | None = None

    # ---- input ------------------------------------------------------------------
    def feed(self, lineno: int, raw: str) -> None:
        if not raw:
            self._blank(lineno)
            return
        # a line passed over leaves the state as it found it: quiet (_passing is cleared
        # by whatever may change it, _physical and _blank)
        if self._passing or self._quiet():
            if len(raw) <= MAX_WRAP_SHAPE_LINE:
                shape = raw.encode("utf-8", "surrogatepass").translate(_ZEROS)
                if _passes(raw, shape):
                    self._pass_over(raw, shape)
                    return
            elif (
                not _may_split(raw)
                and not scanner_prefilter().may_mean(raw)
                and not local_rank_tag(raw)
            ):
                self._pass_over(raw, None)
                return
        self._read(lineno, raw)

    def feed_lines(
        self,
        numbered: Iterable[tuple[int, str, bytes | None]],
        skip: Callable[[int, str], bool] | None = None,
    ) -> None:
        """``feed`` of each (number, line, its shape or None), a line ``skip`` is True for
        fed blank: the loop a log's reader runs, with a passed-over line's steps in it
        (most of a log's lines are passed over, and a call per line was a third of their
        cost). A shape given is the line's prefilter.line_shape.

        Where ``skip`` has a ``quiet_shape(line)`` (True: ``skip`` is False of every line
        of the line's shape, and has nothing to note of it), it is asked once a shape,
        with the pass test, and not called for a line passed over."""
        quiet_shape: Callable[[str], bool] | None = getattr(skip, "quiet_shape", None)
        passing: dict[bytes, bool] = {}  # a shape's lines pass, skip quiet (this text's)
        for lineno, raw, known in numbered:
            if raw and len(raw) <= MAX_WRAP_SHAPE_LINE:
                shape = known or raw.encode("utf-8", "surrogatepass").translate(_ZEROS)
                passes = passing.get(shape)
                if passes is None:
                    passes = _passes_shape(raw, shape) and (
                        skip is None or (quiet_shape is not None and quiet_shape(raw))
                    )
                    if len(passing) < _MAX_PASS_SHAPES:
                        passing[shape] = passes
                if (
                    passes
                    and (self._passing or self._quiet())
                    and ("]:" not in raw or not local_rank_tag(raw))
                ):
                    self._pass_over(raw, shape)
                    continue
            if skip is not None and skip(lineno, raw):
                self._blank(lineno)
                continue
            self.feed(lineno, raw)

    def feed_split(
        self,
        lines: list[str],
        shapes: list[bytes],
        skip: Callable[[int, str], bool] | None = None,
    ) -> None:
        """``feed_lines`` of a text split into its lines (numbered from 1) and their
        shapes, each run of lines passed over taken at once: most of a rank's log is
        lines that pass, and a Python step per line was most of reading them.

        Whether a line is passed over is read of its shape (the pass test, the router's
        quiet_shape, its length, no "]:" for a local rank tag to be read of) once a
        shape; the runs of such lines are found in C. A run's first lines are fed one by
        one while a record is open (passing needs a quiet state); from the first passed
        over on, the rest of the run is ``_pass_run``: what ``_pass_over`` of each leaves."""
        quiet_shape: Callable[[str], bool] | None = getattr(skip, "quiet_shape", None)
        bulk = {
            shape: 0 < len(raw) <= MAX_WRAP_SHAPE_LINE
            and b"]:" not in shape
            and _passes_shape(raw, shape)
            and (skip is None or (quiet_shape is not None and quiet_shape(raw)))
            for shape, raw in dict(zip(shapes, lines, strict=True)).items()
        }
        done = 0
        for run in _PASSING_RUN.finditer(bytes(map(bulk.__getitem__, shapes))):
            start, end = run.span()
            if done < start:
                self.feed_lines(_numbered(lines, shapes, done, start), skip)
            while start < end and not (self._passing or self._quiet()):
                self.feed_lines(_numbered(lines, shapes, start, start + 1), skip)
                start += 1
            if start < end:
                self._pass_run(lines[start:end], shapes[start:end])
            done = end
        if done < len(lines):
            self.feed_lines(_numbered(lines, shapes, done, len(lines)), skip)

    def _pass_run(self, lines: list[str], shapes: list[bytes]) -> None:
        """``_pass_over`` of each line, in order, as one step: each line's code
        (_run_code of its wrap facts, run_codes), then, in C, the last line that is a
        chain's tagged root and the last that passes nothing on; what the last of those
        left is what the run leaves (a tagged root after the last break keeps the break's
        None tag, which is read only once the root is peeled, and then replaced)."""
        codes = run_codes(lines, shapes, _run_code)
        # each line's code, plus 1 where the line before it is long (_WRAP_LEN)
        longs = bytes([self._prev_len >= _WRAP_LEN]) + bytes(
            map(_WRAP_LEN.__le__, map(len, lines[:-1]))
        )
        key = bytes(map(operator.add, codes, longs))
        cut = max(map(key.rfind, _BREAKS))
        tagged = max(map(key.rfind, _ROOTS))
        if tagged > cut:
            self._root = lines[tagged]
            if cut >= 0:
                self._prev_tag = None
        elif cut >= 0:
            self._root, self._prev_tag = None, None
        self._line = -1
        self._passing = True
        self._prev_len = len(lines[-1])

    def _read(self, lineno: int, raw: str) -> None:
        for segment in _segments(raw):
            pieces = _split_records(segment) if _may_split(segment) else [segment]
            for number, piece in enumerate(pieces):
                self._glued_at = lineno if number < len(pieces) - 1 else None
                self._physical(lineno, piece, len(raw))
            self._glued_at = None

    def _quiet(self) -> bool:
        """No record is open that the next line may continue or end: a line then does
        nothing but what it says (and what its identity passes on to a wrapped line)."""
        return (
            self._pending is None
            and self._broken is None
            and self._block is None
            and not self._tracebacks
            and self._stack_event is None
            and self._last_error_for is None
            and self._tail_exc is None
            and self._open_watchdog is None
        )

    def _pass_over(self, raw: str, shape: bytes | None) -> None:
        """A line that can mean nothing (the prefilter, in a quiet state: no record open),
        read without its peeling and tests: it holds nothing a recogniser, a catalog row
        or a record reads, is balanced, names no local rank (local_to_global) and is no
        spliced record, so all it leaves is its identity for a wrapped line after it.

        What it passes on is followed as the lines come, by their wrap facts
        (wrap_shape.wrap_facts, remembered per shape): a tagged line is the root of what
        follows, kept unpeeled (_root); a line that continues the one before (_continues)
        leaves the root as it was; any other line has nothing to pass on (an untagged
        tag is read as None wherever one is used). A log's step lines, each as long as a
        wrapped line and headerless, were each peeled (6 µs) to find that none is tagged."""
        self._line = -1
        self._passing = True
        facts = wrap_facts(raw, shape)
        if facts.tagged:
            self._root = raw  # a tagged line continues nothing: the chain's root
        elif not (facts.joins and (self._prev_len >= _WRAP_LEN or facts.indented)):
            self._root, self._prev_tag = None, None  # an untagged root: nothing to pass on
        self._prev_len = len(raw)

    def _previous_tag(self) -> LineTag | None:
        """The tag of the line before this one: of the last line read, or the identity
        the lines passed over since pass on (_pass_over), its root peeled now."""
        if self._root is not None:
            root = peel_line(self._root)
            self._root = None
            self._prev_tag = root if root.tagged else None
        return self._prev_tag

    def finish(self) -> list[RawEvent]:
        self._flush_broken()
        if self._pending is not None:
            tag, lineno, _ = self._pending
            self._pending = None
            self._logical(tag, lineno)
        self._close_block()
        for tb in self._tracebacks.values():
            self._signal_stage(tb)  # a backtrace the file ends with
            self._cut_stage(tb)
        if self._tail_exc is not None:
            # A paste that ends with a bare exception line ("FileNotFoundError: [Errno 2]
            # …", the traceback cut off above it): the line Python prints last when an
            # uncaught exception ends the process. Weak on its own (field "bare").
            tag, lineno, (exc_type, message), writing = self._tail_exc
            self._emit(exception_hit(exc_type, message, bare=True, writing=writing), tag, lineno)
        mark_stages(self.events)
        self.events.sort(key=lambda e: e.line)
        return self.events

    # ---- physical lines: identity inheritance and hard-wrap rejoin ----------------
    def _blank(self, lineno: int) -> None:
        """What ``_physical`` does with an empty line, without its peeling and tests: it
        ends a record being joined and is read as a blank line. Most lines of a paste of
        stacks reach the scanner so (the dump's frames are the stack side's: 48,000 of
        a 4 MiB paste's 79,000 lines)."""
        tag = LineTag("")
        self._prev_len, self._prev_tag = 0, tag
        self._passing, self._root = False, None
        self._flush_broken()
        if self._pending is not None:
            ptag, pline, _ = self._pending
            self._pending = None
            self._logical(ptag, pline)
        self._logical(tag, lineno)

    def _flush_broken(self) -> None:
        """Read the line held back as a message maybe broken in two, as it is."""
        if self._broken is not None:
            btag, bline = self._broken
            self._broken = None
            self._logical(btag, bline)

    def _physical(self, lineno: int, raw: str, raw_len: int) -> None:
        tag = peel_line(raw)
        text = tag.text
        headerless = _headerless(tag)
        if self._broken is not None:
            btag, bline = self._broken
            joined = _message_rejoined(btag.text, text) if headerless else None
            if joined is not None:
                self._broken = None
                btag.text = joined
                self._prev_len, self._prev_tag = raw_len, tag
                self._passing, self._root = False, None
                self._logical(btag, bline)
                return
            self._flush_broken()
        if _continues(tag, self._prev_len):
            prev = self._previous_tag()
            if prev is not None and prev.tagged:
                _inherit(tag, prev)  # wrapped continuation
        self._prev_len, self._prev_tag = raw_len, tag
        self._passing, self._root = False, None
        if self._pending is not None:
            ptag, pline, joins = self._pending
            if headerless and text.strip() and not _RECORD_START.match(text):
                ptag.text = ptag.text.rstrip() + text
                command = _open_launcher_command(ptag)
                most = _MAX_JOIN_COMMAND if command else _MAX_JOIN
                if (_balanced(ptag.text) and not command) or joins + 1 >= most:
                    self._pending = None
                    self._logical(ptag, pline)
                else:
                    self._pending = (ptag, pline, joins + 1)
                return
            self._pending = None
            self._logical(ptag, pline)
        if not _balanced(text) or _open_launcher_command(tag):
            self._pending = (tag, lineno, 0)
            return
        if _may_be_broken(text):
            self._broken = (tag, lineno)
            return
        self._logical(tag, lineno)

    # ---- logical lines ------------------------------------------------------------
    def _logical(self, tag: LineTag, lineno: int) -> None:
        text = tag.text
        self._line = -1  # a new record: the kinds of its events start over (see _emit)
        above, above_at = self._above, self._above_at
        first_text = not self._read_text
        origin_above, level_above = self._origin_above, self._level_above
        if text.strip():
            self._read_text = True
            self._origin_above, self._level_above = tag.origin, tag.level
            self._tail_exc = None
            self._above = text
            self._above_at = (lineno, (tag.rank, tag.local_rank))
        if tag.rank is not None and tag.local_rank is not None:
            self.local_to_global.setdefault(tag.local_rank, set()).add(tag.rank)
        if self._block is not None:
            if isinstance(self._block, ChildFailedBlock):
                self._block.last_line = lineno
            if isinstance(self._block, HorovodStallBlock):
                if self._block.feed_tagged(text, tag.rank):
                    return
            elif self._block.feed(text):
                return
            self._close_block()
        if not text.strip() or text.startswith("# "):
            return  # blank, or a comment line (fixture headers, shell echo of a command)
        stream = (tag.rank, tag.local_rank)
        tb = self._tracebacks.get(stream)
        if tb is not None and self._traceback_line(tb, tag, lineno, stream):
            return
        if self._continuation(tag, lineno):
            return
        if self._spawn_index is not None and not text.startswith(
            (_TRACEBACK, "During handling", "The above exception")
        ):
            self._spawn_index = None  # the child's trace ended
        if text.startswith("-- Process") and (spawned := _SPAWN_RAISED.match(text)) is not None:
            self._spawn_index = int(spawned.group(1))
            return
        if self._start_block(tag, lineno):
            return
        if text.startswith(_TRACEBACK):
            self._tracebacks[stream] = _Traceback(
                lineno,
                store=self._store_before(lineno, tag.rank),
                message=self._message_above(lineno),
                # the header's, else that of the message logged right above it
                origin=tag.origin or (origin_above if above_at == (lineno - 1, stream) else None),
            )
            return
        if text[:1] in " \t" and _CUT_FRAME.match(text):
            # A traceback pasted without its header: its frames, then its exception line.
            frame = text.strip()
            tb = _Traceback(
                lineno,
                frame,
                frame if SAVE_FRAME.search(frame) else "",
                store=self._store_before(lineno, tag.rank),
                origin=tag.origin,
                head=first_text,
                logged_error=_error_level(tag.level, tag.origin),
                tag=tag,
            )
            self._tracebacks[stream] = tb
            if (
                above_at is not None
                and above_at[0] == lineno - 1
                and above_at[1] in (stream, (None, None))
                and _cut_source(above)
            ):
                # The paste was cut between a frame and its source line: that line, right
                # above the first frame shown, is the outermost call shown (vLLM's workers'
                # 'self.NCCL_CHECK(self._funcs["ncclCommInitRank"](…' above NCCL_CHECK),
                # of the same stream, or with no header left where the cut took it.
                tb.read(above)
                tb.origin = tb.origin or origin_above
                tb.logged_error = tb.logged_error or _error_level(level_above, origin_above)
            tb.read(text)
            _stage_store(tb, frame)
            return
        if tag.rank is not None and (exc := match_exception_line(text)) is not None:
            # torch ≥2.3 prefixes only uncaught exceptions' lines with [rankN]: — a bare
            # "[rank3]: ValueError: …" is the end of a traceback pasted without its frames.
            self._emit(exception_hit(exc[0], exc[1]), tag, lineno)
        before = len(self.events)
        self._recognise(tag, lineno)
        if tag.rank is None and len(self.events) == before:
            exc_line = match_exception_line(text)
            if (
                first_text
                and exc_line is not None
                and (
                    os_error_with_files(exc_line[1])
                    or save_storage_error(f"{exc_line[0]}: {exc_line[1]}") is not None
                )
            ):
                # A paste that starts with an OSError naming its files (CPython's "[Errno
                # N] <strerror>: 'a' -> 'b'"), or with torch.save's writer failing in its
                # own words (inline_container.cc: "Parent directory <dir> does not
                # exist.", "PytorchStreamWriter failed writing file …"): the end of a
                # traceback the paste cut above it, whatever follows (another rank's
                # interleaved frames, the traceback's frames pasted after its message): a
                # file-system call failed there. Weak on its own (``bare``), as at the
                # paste's end.
                self._emit(exception_hit(*exc_line, bare=True), tag, lineno)
                return
            self._tail_exc = (
                (tag, lineno, exc_line, writing_line(above)) if exc_line is not None else None
            )
            if first_text and exc_line is not None and tag.origin is not None:
                self._head_exc = (tag, lineno, exc_line)

    def _traceback_line(
        self, tb: _Traceback, tag: LineTag, lineno: int, stream: tuple[int | None, int | None]
    ) -> bool:
        text = tag.text
        if text[:1] in " \t" or text.startswith(("During handling", "The above exception")):
            if text.lstrip().startswith("File "):
                tb.last_frame = text.strip()
            elif text[:1] in " \t" and not _MARKS.match(text):
                tb.source = text
            tb.read(text)
            if not tb.saving and SAVE_FRAME.search(text):
                tb.saving = text.strip()[:200]
            if tb.store is not None:
                _stage_store(tb, text)
            return True
        del self._tracebacks[stream]
        exc = match_exception_line(text)
        if exc is None:
            self._signal_stage(tb)
            self._cut_stage(tb)
        if exc is None or exc[0].endswith("ChildFailedError") or CALLED_PROCESS.search(text):
            # the launcher's report of a worker's end (its ChildFailedError table,
            # CalledProcessError's signal or exit status): match_process reads it
            return False
        # Where its frames name no stage, the call its record's message names (vLLM's
        # "Error executing method init_device", the logger.exception above the header).
        stage = tb.worker_stage() or _stage_of(tb.message)
        hit = exception_hit(
            exc[0],
            exc[1],
            where=tb.last_frame or None,
            saving=tb.saving or None,
            writing=writing_line(tb.source),
            source=tb.source or None,
            stage=stage,
            in_collective=tb.in_collective,
            in_wait=tb.in_wait,
            by_dataloader=tb.starter is Starter.DATALOADER,
            in_loader_worker=tb.in_loader_worker,
        )
        if self._spawn_index is not None and hit.named_local_rank is None:
            hit.named_local_rank = self._spawn_index
        event = self._emit(hit, tag, lineno)
        if tb.head and stage is None and event is not None and tb.origin is not None:
            # (the origin of its first line: a record's lines after the first may have lost
            # the header they repeated, unmangle.py's record prefix)
            self._head_record = (event, tb.origin)
        elif tb.message is not None and stage is not None:
            self._head_stage(tb, stage)
        if tb.message is not None:
            # The exception a logged message's traceback ends with is what that message
            # reports (logger.exception: the message, then the traceback): placed at the
            # message's line, before it, as the cause of the record.
            self._before(event, tb.message)
        before = len(self.events)
        self._recognise(tag, lineno)
        self._stage_raised_store(tb, before)
        return True

    def _stage_raised_store(self, tb: _Traceback, since: int) -> None:
        """A store error that is the traceback's own exception line ("RuntimeError:
        Connection reset by peer" under init_process_group's frames; torch ≤ 1.x's c10d
        raised its socket errors as a bare "RuntimeError: Broken pipe", SYSCHECK's
        std::system_error) takes the stage the traceback's frames show, as one c10d warned
        about before its traceback does (_stage_store): the stage a frame's line names
        first, else the code stage (new_group's construction is set-up, the training
        loop's all_reduce is not)."""
        stage = tb.phase
        if stage is None and tb.stage is not None:
            stage = _RAISED_STORE_PHASE.get(tb.stage)
        if stage is None:
            return
        for event in self.events[since:]:
            store = event.payload
            if isinstance(store, StoreTimeout) and store.stage is None:
                event.payload = replace(store, stage=stage, code_stage=tb.worker_stage())

    def _signal_sign(self, lineno: int, sign: Sign) -> None:
        """``sign`` on the fatal signal reported right above ``lineno`` (its backtrace's
        header): what the backtrace shows of where the process died."""
        for event in reversed(self.events[-3:]):
            if event.kind == EventKind.FATAL_SIGNAL and 0 < lineno - event.line <= 1:
                payload = event.payload
                if isinstance(payload, FatalSignal) and sign not in payload.signs:
                    event.payload = replace(payload, signs=(*payload.signs, sign))
                return

    def _signal_stage(self, tb: _Traceback) -> None:
        """Frames that end with no exception line, right under a fatal signal's report
        (tvm-ffi's "Segfault encountered" prints the native backtrace so): the stage they
        show is where the process died."""
        if tb.stage is None:
            return
        for event in reversed(self.events[-3:]):
            if event.kind == EventKind.FATAL_SIGNAL and 0 < tb.start - event.line <= 1:
                if isinstance(event.payload, FatalSignal) and event.payload.stage is None:
                    event.payload = replace(event.payload, stage=tb.stage)
                return

    def _message_above(self, lineno: int) -> RawEvent | None:
        """The logged message of the line right above a traceback's header, read as an
        exception with no type or stage (a catalog row of a logger.exception call: vLLM's
        "WorkerProc failed to start."), or None."""
        for event in reversed(self.events[-3:]):
            if event.line != lineno - 1 or event.kind is not EventKind.EXCEPTION:
                continue
            payload = event.payload
            if isinstance(payload, ExceptionRaised) and payload.exc_type is None:
                return event
        return None

    def _cut_stage(self, tb: _Traceback) -> None:
        """A logged message's traceback cut before its exception line (the paste ends,
        or the next record starts): the stage its frames show is the message's stage,
        the failure it logged was raised there (vLLM's "WorkerProc failed to start."
        over frames cut inside Worker.init_device).

        And a file whose first line is a bare exception line printed by the same logging
        call (the same origin in its header) had an earlier record of that call cut above
        it: the same message, over the same start-up path. That exception is what the
        call logged, raised where this traceback shows (weak: ``bare``). Only where the
        stage is one a failure's meaning depends on and no earlier line says otherwise."""
        stage = tb.worker_stage() or _stage_of(tb.message)
        if stage is None:
            return
        if tb.message is None:
            self._cut_setup(tb, stage)
            return
        payload = tb.message.payload
        if isinstance(payload, ExceptionRaised) and payload.stage is None:
            tb.message.payload = replace(payload, stage=stage)
        self._head_stage(tb, stage)

    def _cut_setup(self, tb: _Traceback, stage: CodeStage) -> None:
        """A framework's logged error record of a traceback (its logger's header on its
        lines, at level ERROR) cut before its exception line, whose innermost frame naming
        a stage is a set-up entry point (setup_entry_points.json: vLLM's
        PyNcclCommunicator.__init__ creating the group's communicator): the failure it
        logged was raised while communication was set up. Read as an exception of no type
        and no words (``bare``: the line is lost), so that what reads it states it weaker
        than the error line would (the unread words of views/death_kind.py's rows)."""
        if not tb.logged_error or stage not in _SETUP_STAGES or tb.tag is None:
            return
        hit = exception_hit(
            "",
            "",
            where=tb.last_frame or None,
            source=tb.source or None,
            stage=stage,
            bare=True,
        )
        assert isinstance(hit.payload, ExceptionRaised)
        hit.payload = replace(hit.payload, unread=True)
        self._emit(hit, tb.tag, tb.start)

    def _head_stage(self, tb: _Traceback, stage: CodeStage) -> None:
        """A record of a logging call whose message or frames show ``stage``, after the
        end of an earlier record of the same call (the same origin in its header) that
        the paste cut above its first line: that record's exception, a bare line
        (``_head_exc``) or the end of a traceback cut above its header
        (``_head_record``: vLLM's execute_method logging "Error executing method
        init_device." for each worker, a paste that starts inside the first one's
        traceback), is what the same call logged for the same call of the worker, raised
        there too."""
        record, self._head_record = self._head_record, None
        if record is not None and tb.origin is not None and record[1] == tb.origin:
            raised = record[0].payload
            if isinstance(raised, ExceptionRaised) and raised.stage is None:
                record[0].payload = replace(raised, stage=stage)
        head, self._head_exc = self._head_exc, None
        if head is None or tb.origin is None or head[0].origin != tb.origin:
            return
        tag, lineno, (exc_type, message) = head
        self._emit(exception_hit(exc_type, message, bare=True, stage=stage), tag, lineno)

    def _store_before(self, lineno: int, rank: int | None) -> RawEvent | None:
        """The store error of the last few lines before a traceback's first line: the
        one it was raised for (c10d's socket layer warns, then the store call raises).
        Of the traceback's own rank where both name one: ranks prefixed by torch ≥2.3
        ("[rank3]:") print their warnings interleaved, and another rank's warning right
        above is not the one this traceback raised for."""
        for event in reversed(self.events[-3:]):
            if event.kind != EventKind.STORE_TIMEOUT or not 0 < lineno - event.line <= 3:
                continue
            if rank is not None and event.prefix_rank is not None and event.prefix_rank != rank:
                continue
            return event
        return None

    def _continuation(self, tag: LineTag, lineno: int) -> bool:
        text = tag.text
        stack = self._stack_event
        if stack is not None and _STACK_FRAME.match(text):
            if isinstance(stack.payload, FailedCollectiveStack) and len(stack.payload.frames) < 21:
                frames = (*stack.payload.frames, text.strip())
                stack.payload = replace(stack.payload, frames=frames)
            return True
        self._stack_event = None
        open_warn, self._open_warn = self._open_warn, None
        if open_warn is not None and self._rest_of_warn(*open_warn, text, lineno):
            return True
        open_watchdog, self._open_watchdog = self._open_watchdog, None
        if open_watchdog is not None and _rest_of_watchdog(*open_watchdog, tag, lineno):
            return True
        self._abort_reason(text, lineno)
        if text.strip() == _LAST_ERROR:
            self._last_error_for = self._last_nccl_error
            return True
        target = self._last_error_for
        if target is not None:
            self._last_error_for = None
            if text.strip():
                self._last_error(target, text, tag, lineno)
                return True
        return False

    def _abort_reason(self, text: str, lineno: int) -> None:
        """The failure reason torch printed under the NCCL error of the line before: where
        it says the process group was being destroyed, the error is one of the abort at
        teardown (the line itself goes on to be read as the teardown it reports)."""
        last = self.events[-1] if self.events else None
        if (
            last is None
            or last.kind is not EventKind.NCCL_ERROR
            or last.line != lineno - 1
            or not isinstance(last.payload, NcclError)
            or _PG_DESTROYED.match(text) is None
        ):
            return
        last.payload = replace(last.payload, destroying=True)

    def _rest_of_warn(self, warn: RawEvent, line: int, text: str, lineno: int) -> bool:
        """The line after an NCCL WARN that stopped at a " :" as the rest of its body.

        NCCL's messages put their values after " : " ("NET/Socket : peer %s message
        truncated : receiving %d bytes instead of %d", net_socket.cc 2.10 on); a paste that
        broke the line there leaves the values on a line of their own, with no header. Read
        together, the body is what NCCL printed; taken only where the NCCL reader then
        finds a typed failure in it, else the next line is read as usual."""
        payload = warn.payload
        if (
            lineno != line + 1
            or not isinstance(payload, NcclWarn)
            or not text.strip()
            or _NCCL_HEAD.match(text)
            or "NCCL " in text
        ):
            return False
        body = f"{(payload.message or '').rstrip()} {text.strip()}"
        hit = nccl_lines.read_body("WARN", body, payload.where, payload.func)
        if hit is None or hit.kind in (EventKind.NCCL_WARN, EventKind.NCCL_RETURN):
            return False
        warn.kind, warn.payload = hit.kind, hit.payload
        warn.text = f"{warn.text} {text.strip()}"[:500]
        return True

    def _last_error(self, target: RawEvent, text: str, tag: LineTag, lineno: int) -> None:
        """The NCCL message torch appends to its NCCL error after "Last error:" (on the
        next line, or on the same line where the paste was flattened): kept on the error,
        and an event of its own where it names a failure (a link, a resource, CUDA)."""
        nccl_hit = nccl_lines.match_nccl(text) or nccl_lines.match_nccl(
            "x:0:0 [0] a.cc:1 NCCL WARN " + text
        )
        if nccl_hit is None or nccl_hit.kind not in _LAST_ERROR_KINDS:
            nccl_hit = catalog_hit(text) or nccl_hit  # a message no branch reads
        link = nccl_hit.payload if nccl_hit is not None else None
        if isinstance(target.payload, NcclError):
            target.payload = replace(
                target.payload,
                last_error=text.strip()[:300],
                last_error_stage=message_stage(text),
                last_error_peer=(link.peer if isinstance(link, NcclTransportError) else None),
                last_error_link=(link.error if isinstance(link, NcclTransportError) else None),
            )
        if nccl_hit is not None and nccl_hit.kind in _LAST_ERROR_KINDS:
            nccl_hit.host = nccl_hit.pid = nccl_hit.tid = nccl_hit.cuda_dev = None
            if isinstance(nccl_hit.payload, NcclWarn):
                nccl_hit.payload = replace(nccl_hit.payload, where=None, from_last_error=True)
            self._before(self._emit(nccl_hit, tag, lineno), target)

    def _before(self, event: RawEvent | None, record: RawEvent) -> None:
        """Place an event read from a record's continuation ("Last error:" + "Cuda failure
        2 'out of memory'") at the record's own line, before it: it is the cause the
        record reports, and the rules order cause and consequence by line."""
        if event is None or not self.events or self.events[-1] is not event:
            return
        self.events.pop()
        event.line = record.line
        for index in range(len(self.events) - 1, -1, -1):
            if self.events[index] is record:
                self.events.insert(index, event)
                return
        self.events.append(event)

    def _start_block(self, tag: LineTag, lineno: int) -> bool:
        text = tag.text
        block: Block | None = None
        if "ChildFailedError" in text and text.rstrip().endswith(
            ("ChildFailedError:", "ChildFailedError")
        ):
            block = ChildFailedBlock()
        elif ("(local_rank: " in text or "Root Cause" in text) and (
            cut := ChildFailedBlock.cut(text)
        ) is not None:
            block = cut  # the same table, its header cut away by a selection
        elif text[:1] in "JCG#" and (ras := RasBlock.start(text)) is not None:
            block = ras
        elif text[:1] in "NCI" and (fr := FrTraceBlock.start(text)) is not None:
            block = fr
        elif "NVIDIA-SMI" in text and "Driver Version" in text:
            block = TableBlock()
        elif text[:1] in " \t" and (topo := TopoBlock.header(text)) is not None:
            block = topo
        elif ", " in text and (csv := CsvBlock.header(text)) is not None:
            block = csv
        elif ("task" in text or " D " in text) and (hung := HungTaskBlock.start(text)):
            block = hung  # the kernel's report of a task in D state (kernel.py)
        elif "non-zero status" in text and (mpi := MpiExitBlock.start(text)) is not None:
            block = mpi  # mpirun's "The first process to do so was" (process.py)
        elif "ranks:" in text and (stall := HorovodStallBlock.start(text)) is not None:
            block = stall  # Horovod's stall inspector list (horovod.py)
        elif "==== backtrace" in text and (ucx := UcxBacktraceBlock.start(text)) is not None:
            block = ucx  # UCX's backtrace under its "Caught signal" (process.py)
        elif "class_name:" in text and (actor := RayActorFields.start(text)) is not None:
            block = actor  # the dead actor's fields under Ray's ActorDiedError (ray_actors.py)
        if block is None:
            return False
        self._block, self._block_line = block, lineno
        return True

    def _close_block(self) -> None:
        block, line = self._block, self._block_line
        self._block = None
        if block is None:
            return
        none = LineTag("")
        if isinstance(block, ChildFailedBlock):
            for hit, stamp, entry_line in block.finish():
                none.stamp = stamp
                self._emit(hit, none, entry_line or line)
                if hit.rank is not None and hit.named_pid is not None:
                    self.pid_rank[hit.named_pid] = hit.rank
                none = LineTag("")
        elif isinstance(block, UcxBacktraceBlock):
            if block.in_nccl:
                self._signal_sign(line, Sign.NATIVE_IN_NCCL)
        elif isinstance(block, (RasBlock, TableBlock, CsvBlock)):
            for hit in block.finish() if isinstance(block, RasBlock) else block.hits:
                self._emit(hit, none, line)
        else:
            done = block.finish()
            if done is not None:
                self._emit(done, none, line)
                if done.rank is not None and done.named_pid is not None:
                    self.pid_rank.setdefault(done.named_pid, done.rank)

    # ---- single lines ---------------------------------------------------------------
    def _recognise(self, tag: LineTag, lineno: int) -> None:
        """One line to the hand-written recognisers, then to the catalog where they left a
        gap: a line with a typed event of theirs keeps it alone (the catalog is not even
        asked: most lines of a busy log are those); a line with none, or with a catch-all
        one only (``exception``, ``nccl_warn``), takes the row's event of another kind."""
        self._recognise_by_hand(tag, lineno)
        known = self._line_kinds if lineno == self._line else _NO_KINDS
        if not known <= _CATCH_ALL:
            return
        hit = catalog_hit(tag.text)
        if hit is None or hit.kind in known or (known and hit.kind in _CATCH_ALL):
            return  # the line's meaning is known already (a catch-all kind adds nothing)
        said = _said_rank(tag)
        if said is not None and hit.rank is None and _group_rank(hit) is None:
            hit.rank = said[0]
        self._emit(hit, tag, lineno)
        if hit.kind is EventKind.NCCL_TRANSPORT_ERROR:
            self._aborted_by_transport(lineno)  # a catalog row's (gloo's ibverbs pair)

    def _recognise_by_hand(self, tag: LineTag, lineno: int) -> None:
        text = tag.text
        if _FAILED_STACK in text:
            # ≥2.6: the frames follow unprefixed as "#0 all_reduce from file:line"
            self._stack_event = self._emit(
                Hit(
                    EventKind.FAILED_COLLECTIVE_STACK,
                    payload=FailedCollectiveStack(),
                    key=("stack", lineno),
                ),
                tag,
                lineno,
            )
            return
        hit = match_any(text, self._nvrm_pci)
        said = _said_rank(tag)
        if said is not None:
            rank, rest = said
            if hit is None and rest:
                hit = match_any(rest, self._nvrm_pci)
                exc = match_exception_line(rest) if hit is None else None
                if exc is not None:
                    hit = exception_hit(exc[0], exc[1])
            if hit is not None and hit.rank is None and _group_rank(hit) is None:
                hit.rank = rank
        if hit is None:
            return
        if hit.kind is EventKind.NCCL_RETURN:
            self._known(lineno, hit.kind)  # read, even where it only extends a chain
            self._return_code(hit, tag, lineno)
            return
        event = self._emit(hit, tag, lineno)
        if (
            event is not None
            and hit.kind is EventKind.COLLECTIVE_MISMATCH
            and len(self.events) >= 2
            and self.events[-2].kind is EventKind.FATAL_SIGNAL
            and self.events[-2].line == lineno - 1
        ):
            # "terminate called after throwing …" then "  what():  <the check that failed>"
            # (gloo's size check, size_checks.py): the abort is the check's consequence.
            self._before(event, self.events[-2])
        if (
            event is not None
            and hit.kind is EventKind.CUDA_ERROR
            and len(self.events) >= 2
            and self.events[-2].kind is EventKind.FATAL_SIGNAL
            and self.events[-2].line == lineno - 1
        ):
            _after_fork(event, self.events[-2])
        if hit.kind is EventKind.NCCL_TRANSPORT_ERROR:
            # (read whether or not the line was a new event: the what() of a second
            # process's abort repeats the first one's words, one event for both)
            self._aborted_by_transport(lineno)
        if event is not None and _starts_chain(hit):
            chain_key = (event.host, event.pid, hit.tid, tag.rank)  # a WARN
            chain = self._chains.get(chain_key)
            if chain is None or chain[1]:
                self._chains[chain_key] = (event, False)
                self._warn_hosts.setdefault(chain_key[1:], set()).add(chain_key)
        if hit.kind is EventKind.NCCL_ERROR and event is not None:
            self._last_nccl_error = event
            if "Last error:" in text:
                tail = text.split("Last error:", 1)[1].strip()
                if tail:
                    self._last_error(event, tail, tag, lineno)
                else:
                    self._last_error_for = event

    def _aborted_by_transport(self, lineno: int) -> None:
        """The abort on the line above a transport's failure ("terminate called after
        throwing an instance of 'gloo::EnforceNotMet'" then its what()) is that failure
        ending the process (Sign.ABORTED_BY_TRANSPORT), not a crash of its own."""
        for fatal in self.events[-2:]:
            payload = fatal.payload
            if (
                fatal.kind is EventKind.FATAL_SIGNAL
                and fatal.line == lineno - 1
                and isinstance(payload, FatalSignal)
                and payload.reported_by is FatalReport.TERMINATE
                and Sign.ABORTED_BY_TRANSPORT not in payload.signs
            ):
                fatal.payload = replace(payload, signs=(*payload.signs, Sign.ABORTED_BY_TRANSPORT))

    def _return_code(self, hit: Hit, tag: LineTag, lineno: int) -> None:
        """``file.cc:47 -> 3``: NCCL logs the failing call's return code at every level of
        the call chain after the WARN that says what failed. The first code after a WARN
        is the error class of that WARN; the rest of the chain only repeats it. A chain
        with no WARN before it (the WARN was cut from the paste) becomes an event itself."""
        pid = hit.pid if hit.pid is not None else tag.pid
        chain_key = (hit.host or tag.host, pid, hit.tid, tag.rank)
        chain = self._chains.get(chain_key)
        if chain is None and (cut := self._chain_of_cut_host(chain_key)) is not None:
            chain_key, chain = cut
        if chain is None and (warn_above := self._warn_above(lineno, chain_key)) is not None:
            # NCCL prints the chain right after its WARN, on the WARN's thread: a WARN the
            # line above, of this process and thread, read however its header was mangled.
            chain = self._chains[chain_key] = (warn_above, False)
        headless, self._headless = self._headless, None
        if chain is None and headless is not None and headless.line == lineno - 1:
            # The WARN just before lost its whole header to the paste (a cut first line):
            # NCCL prints the chain right after the WARN on the WARN's thread, so the
            # chain's header is the WARN's.
            headless.host, headless.pid, headless.tid = hit.host or tag.host, pid, hit.tid
            headless.partial_header = True
            chain = self._chains[chain_key] = (headless, False)
        code = hit.payload
        if chain is not None and isinstance(code, NcclWarn):
            # Every caller up the chain, in order: where the failure surfaced (a
            # "bootstrap.cc:169 -> 2" says the failing call belonged to the bootstrap).
            head = chain[0]
            warn = head.payload
            if isinstance(warn, (NcclWarn, NcclError)):
                if len(" ".join(warn.rc_chain)) < 400 and code.where:
                    warn = replace(warn, rc_chain=(*warn.rc_chain, code.where))
                if isinstance(warn, NcclWarn) and _setup_by_chain(warn, code):
                    # The failure unwinds through setup code (graph/xml.cc, init.cc): what
                    # failed below it (an NVML or CUDA call) failed while a communicator
                    # was set up, whichever file printed the WARN.
                    warn = replace(warn, setup=True)
                if not chain[1]:
                    warn = replace(warn, rc=code.rc, rc_name=code.rc_name, rc_where=code.where)
                    self._chains[chain_key] = (head, True)
                head.payload = warn
            return
        event = self._emit(hit, tag, lineno)
        if event is not None:
            self._chains[chain_key] = (event, True)

    def _warn_above(self, lineno: int, key: ChainKey) -> RawEvent | None:
        """The NCCL WARN read on the line above, of this host (or of one its header names
        cut, or of none), process and thread, that no return code followed yet."""
        host, pid, tid, _ = key
        if not self.events or pid is None or tid is None:
            return None
        last = self.events[-1]
        warn = last.payload
        if (
            last.line != lineno - 1
            or not isinstance(warn, NcclWarn)
            or not (warn.message and warn.where)
            or warn.rc_chain
            or last.pid not in (None, pid)
            or last.tid not in (None, tid)
        ):
            return None
        above = last.host
        if above and host and not (above.endswith(host) or host.endswith(above)):
            return None
        return last

    def _chain_of_cut_host(self, key: ChainKey) -> tuple[ChainKey, tuple[RawEvent, bool]] | None:
        """The chain of the same process and thread whose WARN's host a cut shortened (a
        hard wrap or a selection that took the start of its header): NCCL prints every
        line of a thread with one header, so a host that is the other's tail is that host."""
        host, pid, tid, _ = key
        if not host or pid is None or tid is None:
            return None
        for other in sorted(self._warn_hosts.get(key[1:], ()), key=str):
            other_host = other[0]
            if (
                other_host
                and other_host != host
                and (host.endswith(other_host) or other_host.endswith(host))
                and (chain := self._chains.get(other)) is not None
            ):
                return other, chain
        return None

    def _known(self, lineno: int, kind: EventKind) -> None:
        """Note that the line being read holds an event of ``kind`` (see _recognise)."""
        if lineno != self._line:
            self._line, self._line_kinds = lineno, set()
        self._line_kinds.add(kind)

    def _emit(self, hit: Hit, tag: LineTag, lineno: int) -> RawEvent | None:
        self._known(lineno, hit.kind)
        if (
            lineno == self._glued_at
            and isinstance(hit.payload, PhaseMarker)
            and hit.payload.progress is not None
        ):
            glued = replace(hit.payload.progress, glued=True)
            hit.payload = replace(hit.payload, progress=glued)
        event = self._place(hit, tag, lineno)
        if event is not None and isinstance(event.payload, ExceptionRaised):
            self._remote_cause(event, tag)
        if event is not None and isinstance(event.payload, NcclWarn) and event.pid is None:
            self._headless = event
        if event is not None and hit.kind is EventKind.NCCL_WARN and event.text.endswith(" :"):
            self._open_warn = (event, lineno)
        if (
            event is not None
            and hit.kind is EventKind.WATCHDOG_TEARDOWN
            and event.line == lineno
            and watchdog_cuda_error_cut(event.text)
        ):
            self._open_watchdog = (event, lineno)
        return event

    def _remote_cause(self, event: RawEvent, tag: LineTag) -> None:
        """A Ray wrapper and the remote exception it re-raises, both read: Ray prints the
        wrapper's line ("ray.exceptions.RayTaskError(RuntimeError): ray::…") and then the
        remote traceback, which ends in that exception's own line ("RuntimeError: …").
        When the next exception of the same stream is of the class the wrapper names, the
        two are one failure: the wrapper is marked (``cause_shown``) and the remote line,
        which holds the words, is read as the failure."""
        exc_type = event.payload.exc_type or ""
        stream = (tag.rank, tag.local_rank, event.pid)
        wrapper, self._ray_wrapper = self._ray_wrapper, None
        if (
            wrapper is not None
            and wrapper[2] == stream
            and wrapper[0].line < event.line
            and exception_class(exc_type) == wrapper[1]
            and isinstance(wrapper[0].payload, ExceptionRaised)
        ):
            wrapper[0].payload = replace(wrapper[0].payload, cause_shown=True)
            return
        cause = ray_task_cause(exc_type)
        if cause is not None:
            self._ray_wrapper = (event, cause, stream)

    def _place(self, hit: Hit, tag: LineTag, lineno: int) -> RawEvent | None:
        host = hit.host or tag.host
        pid = hit.pid if hit.pid is not None else tag.pid
        if (
            tag.rank is not None
            and host is not None
            and pid is not None
            and hit.kind.value.startswith("nccl")
        ):
            self.hostpid_rank.setdefault((host, pid), set()).add(tag.rank)
        group = _group_rank(hit) if tag.rank is None and hit.rank is None else None
        owner: Owner = (tag.rank, hit.rank, tag.local_rank, host, pid, group)
        if hit.key is not None:
            seen = self._seen.get((owner, hit.kind, hit.key))
            if seen is not None:
                seen.repeats += 1
                return seen
        agg_key = _aggregate_key(hit, owner)
        if agg_key is not None:
            return self._aggregate_event(agg_key, hit, tag, lineno, owner)
        count = self._per_kind.get((owner, hit.kind), 0)
        if count >= _MAX_PER_KIND:
            self.dropped += 1
            return None
        self._per_kind[(owner, hit.kind)] = count + 1
        event = RawEvent(
            hit.kind,
            (hit.text or tag.text).strip()[:500],
            lineno,
            tag.stamp,
            tag.rank,
            hit.rank,
            tag.local_rank,
            host,
            pid,
            payload=hit.payload,
            tid=hit.tid,
            cuda_dev=hit.cuda_dev,
            named_host=hit.named_host,
            named_pid=hit.named_pid,
            named_local_rank=hit.named_local_rank,
            partial_header=hit.partial_header,
        )
        self.events.append(event)
        if hit.key is not None:
            self._seen[(owner, hit.kind, hit.key)] = event
        return event

    def _aggregate_event(
        self, key: tuple[object, ...], hit: Hit, tag: LineTag, lineno: int, owner: Owner
    ) -> RawEvent:
        """COLL lines: keep the last per communicator; transports: union per process;
        progress bars: keep the first and the latest state."""
        current = self._aggregate.get(key)
        text = (hit.text or tag.text).strip()[:500]
        if current is None:
            event = _raw(hit, text, lineno, tag, owner)
            event.folded = 1
            self.events.append(event)
            self._aggregate[key] = event
            if hit.kind is EventKind.PHASE:
                self._aggregate[(*key, "first")] = event
            return event
        n = current.folded + 1
        if isinstance(current.payload, NcclTransport) and isinstance(hit.payload, NcclTransport):
            vias = sorted({*current.payload.via, *hit.payload.via}, key=str)
            current.payload = replace(current.payload, via=tuple(vias))
            current.folded = n
            return current
        if isinstance(current.payload, HostMemory) and isinstance(hit.payload, HostMemory):
            hit.payload = current.payload.then(hit.payload)  # the series, this reading last
        if hit.kind is EventKind.PHASE and self._aggregate.get((*key, "first")) is current:
            event = _raw(hit, text, lineno, tag, owner)
            self.events.append(event)
            self._aggregate[key] = event
            current = event
        current.text, current.line = text, lineno
        current.payload = hit.payload
        current.stamp = tag.stamp or current.stamp
        current.folded = n
        return current


def _cut_source(text: str) -> bool:
    """Whether a line is a traceback's source line (indented code under a frame), not a
    frame, a caret line or an exception line."""
    return (
        text[:1] in " \t"
        and bool(text.strip())
        and not text.lstrip().startswith("File ")
        and not _MARKS.match(text)
        and match_exception_line(text.strip()) is None
    )


# The phase of a store error raised at a traceback's end, in tb_stage.line_stage's two
# values, by the stage its frames show: set-up, or the training loop's stages, which run
# once set-up is done (the store then served something else: HD201 reads no init failure).
_RAISED_STORE_PHASE = {
    CodeStage.SETUP: Phase.INIT,
    CodeStage.TRAIN: Phase.TRAIN,
    CodeStage.EVAL: Phase.TRAIN,
    CodeStage.DATA: Phase.TRAIN,
    CodeStage.CHECKPOINT_SAVE: Phase.TRAIN,
}


def _stage_store(tb: _Traceback, text: str) -> None:
    """Give the store error before ``tb`` the stage this line of it names: frames come
    outermost first, so the innermost line that names a stage has the last word, and a
    traceback cut before its exception line keeps what its frames showed."""
    store = tb.store
    if store is None or not isinstance(store.payload, StoreTimeout):
        return
    stage = line_stage(text)
    if stage is not None:
        store.payload = replace(store.payload, stage=stage)
    code_stage = tb.worker_stage()  # tb.read(text) came first: the innermost yet
    if code_stage is not None and store.payload.code_stage is not code_stage:
        store.payload = replace(store.payload, code_stage=code_stage)


# A line held back as a message maybe broken in two is at least this long: a paste's break
# inside a message leaves a long first piece (the message's words and values).
_BROKEN_MIN = 60
# The ends a message broken inside it shows: a separator its next value or clause follows
# (", " between list items or arguments, ": " before a value, an opened bracket). A line
# that ends in a word or a full stop is read as it is, at no cost: most lines are
# recognised before the catalog is asked (the held-back test would ask it for each).
_OPEN_ENDS = (",", ":", ";", "(", "[", "{", "=")


def _may_be_broken(text: str) -> bool:
    """Whether a line may be the first piece of a library's message that a paste broke
    in two: long, ending in a separator, holding a catalog row's keyword (the matcher's
    prefilter), and matched by no row."""
    if len(text) < _BROKEN_MIN or not text.rstrip().endswith(_OPEN_ENDS):
        return False
    matcher = default_matcher()
    # (the match is kept: the line's catalog_hit asks for it again, Matcher.match's memo)
    return matcher.holds_keyword(text) and matcher.match(text) is None


def _message_rejoined(piece: str, rest: str) -> str | None:
    """``piece`` and the next line joined where a paste broke one library message in two
    (a line break typed or rendered inside it: DeepSpeed's "disagreement between rank0
    and rank2: rank0: […], " then "rank2: […]"): the joined text, as printed (without or
    with the space the break replaced), is a catalog row's message that the break falls
    inside, and the rest alone is no row's and starts no record. Else None."""
    if not rest.strip() or _RECORD_START.match(rest):
        return None
    matcher = default_matcher()
    if matcher.match(rest) is not None:
        return None
    for joined in (piece + rest, f"{piece.rstrip()} {rest.lstrip()}"):
        found = matcher.match(joined)
        if found is not None and found.start < len(piece.rstrip()) < found.end:
            return joined
    return None


def _continues(tag: LineTag, prev_len: int) -> bool:
    """Whether a line is the hard-wrapped rest of the one before (of ``prev_len``
    characters), and so takes its identity when that one has a prefix."""
    text = tag.text
    wrapped = prev_len >= _WRAP_LEN or text[:1] in " \t"
    return wrapped and _headerless(tag) and bool(text.strip())


def _inherit(tag: LineTag, prev: LineTag) -> None:
    tag.rank, tag.local_rank = prev.rank, prev.local_rank
    tag.host, tag.pid, tag.tagged = prev.host, prev.pid, True


_pass_shapes: dict[bytes, bool] = {}


# Scanner.feed_split: a run of lines passed over (one byte a line: its shape passes).
_PASSING_RUN = re.compile(rb"\x01+")
# Scanner._pass_run: a passed-over line's code by its wrap facts (_run_code), plus 1
# where the line before it is long (_WRAP_LEN): each value is one case of _pass_over's.
_ROOT, _BREAK, _JOIN, _JOIN_IF_LONG = 10, 20, 30, 40
_ROOTS = (bytes([_ROOT]), bytes([_ROOT + 1]))
_BREAKS = (bytes([_BREAK]), bytes([_BREAK + 1]), bytes([_JOIN_IF_LONG]))


def _numbered(
    lines: list[str], shapes: list[bytes], start: int, end: int
) -> Iterable[tuple[int, str, bytes | None]]:
    """feed_lines' (number, line, shape) of lines[start:end], numbered from 1."""
    return zip(range(start + 1, end + 1), lines[start:end], shapes[start:end], strict=True)


def _run_code(facts: WrapFacts) -> int:
    """What a line passed over does to the identity passed on (_pass_over): a tagged
    line is a root; a headerless one continues the line before when indented, or when
    that line is long (after a short one it breaks the chain); any other passes nothing
    on."""
    if facts.tagged:
        return _ROOT
    if not facts.joins:
        return _BREAK
    return _JOIN if facts.indented else _JOIN_IF_LONG


def _passes_shape(raw: str, shape: bytes) -> bool:
    """Whether a line of ``raw``'s shape is passed over in a quiet state where it names
    no local rank (local_rank_tag, read of the line itself): it is no spliced record
    (_may_split) and can mean nothing (the prefilter). Both read the shape alone: the
    prefilter asks it (Prefilter.may_mean), and _may_split reads the line's length and
    where a "[" or ".py:" is, which its digits do not change."""
    passes = _pass_shapes.get(shape)
    if passes is None:
        if len(_pass_shapes) >= _MAX_PASS_SHAPES:
            _pass_shapes.clear()
        passes = _pass_shapes[shape] = not _may_split(raw) and not scanner_prefilter().may_mean(
            raw, shape
        )
    return passes


def _passes(raw: str, shape: bytes) -> bool:
    """Whether a line (of at most MAX_WRAP_SHAPE_LINE characters) is passed over in a
    quiet state (see _passes_shape)."""
    return _passes_shape(raw, shape) and ("]:" not in raw or not local_rank_tag(raw))


def _may_split(segment: str) -> bool:
    """Whether a second record may start inside the line (_SPLICE's lookaheads need a
    "[" past the first character, or a glog header's ".py:" in a line with a "["): a step
    line with only its rank prefix has neither, and its split was a tenth of its cost."""
    return len(segment) > 20 and (
        segment.find("[", 1) > 0 or (segment[:1] == "[" and ".py:" in segment)
    )


def _split_records(segment: str) -> list[str]:
    pieces = _SPLICE.split(segment)
    if _LINE_PREFIXED.match(segment):
        pieces = [p for piece in pieces for p in _SPLICE_SPACED.split(piece)]
    if "%|" in segment:
        pieces = [p for piece in pieces for p in _after_meter(piece)]
    return pieces


def _after_meter(piece: str) -> list[str]:
    """The piece split where a record was written over a bar (_METER_SPLICE)."""
    m = _METER_SPLICE.search(piece) if "%|" in piece else None
    return [piece] if m is None else [piece[: m.end()], piece[m.end() :]]


def _group_rank(hit: Hit) -> int | None:
    """The process-group rank a torch message names ("[PG 0 Rank 3]", "[Rank 3]")."""
    return hit.payload.group_rank if isinstance(hit.payload, InGroup) else None


# The stages of set-up (tb_stage's CodeStage values the set-up entry points name).
_SETUP_STAGES = frozenset({CodeStage.SETUP, CodeStage.DEVICE_INIT, CodeStage.WORKER_INIT})


def _error_level(level: str | None, origin: str | None) -> bool:
    """A line a logger wrote at level ERROR or CRITICAL (LineTag.level's first letter,
    with the logging call's place in its header): an error record's."""
    return origin is not None and level is not None and level[:1] in ("E", "C")


def _stage_of(message: RawEvent | None) -> CodeStage | None:
    """The stage a logged message (the line above a traceback's header) names itself: the
    call it says raised (parsers/logs/catalog_lines.py, tb_stage.called_stage)."""
    payload = message.payload if message is not None else None
    return payload.stage if isinstance(payload, ExceptionRaised) else None


def _setup_by_chain(head: NcclWarn, code: NcclWarn) -> bool:
    """A WARN (or the CUDA failure it reports) whose return-code chain reaches NCCL's
    setup code, and that is none of setup's harmless WARNs; not a transport's or a
    configuration's error, which their own rules read, nor a chain with no WARN above it
    (another thread unwinding a failure WARNed elsewhere, or a WARN the paste lost)."""
    return (
        type(head) in (NcclWarn, CudaFailure)
        and bool(head.message)
        and not head.setup
        and code.setup
        and warn_at_setup(code.where, head.message or "")
    )


def _rest_of_watchdog(abort: RawEvent, line: int, tag: LineTag, lineno: int) -> bool:
    """The line after a watchdog abort that stopped inside its CUDA error, as the rest of
    that error (errors.watchdog_cuda_error_cut). ProcessGroupNCCL's watchdog prints
    "<PG prefix> Process group watchdog thread terminated with exception: " + e.what()
    (torch ≥ 2.2 ``ncclCommWatchdog``/``Watchdog::run``; "NCCL watchdog thread" in 2.0-2.1,
    "[Rank N] NCCL watchdog thread" before), and a kernel fault's what() is c10's "CUDA
    error: <cudaGetErrorString>" (c10/cuda/CUDAException.cpp). A terminal that wrapped
    the line at its width leaves the error's rest on the next line, with no header of its
    own (the scanner gives it the wrapped line's identity, _inherit); read
    together, the abort names its CUDA error as an unwrapped line does. Taken only where
    the join holds an error string the catalog knows whole (errors.
    watchdog_cuda_error_joined), else the next line is read as usual."""
    text = tag.text
    if (
        lineno != line + 1
        or not text.strip()
        or tag.level is not None
        or _NCCL_HEAD.match(text)
        or tag.rank not in (None, abort.prefix_rank)  # (a wrapped line takes its rank)
    ):
        return False
    joined = watchdog_cuda_error_joined(abort.text, text)
    if joined is None:
        return False
    abort.text = joined[:500]
    return True


# cudaGetErrorString(cudaErrorInitializationError), as c10's C10_CUDA_CHECK prints it after
# "CUDA error: " (the catalog's cuda rows, from CUDA's cudaError_t documentation).
_CUDA_INIT_ERROR = "initialization error"


def _after_fork(event: RawEvent, abort: RawEvent) -> None:
    """``terminate called after throwing …`` then ``what():  CUDA error: initialization
    error``: the runtime could not initialise where C++ code outside any Python call (a
    destructor, a deleter, a thread) used CUDA state made before, which is a child forked
    after its parent initialised CUDA (Sign.CUDA_AFTER_FORK), not the GPU's or its
    driver's failure: the signs the catalog gave the error for the driver are dropped."""
    fatal, cuda = abort.payload, event.payload
    if not isinstance(fatal, FatalSignal) or fatal.reported_by is not FatalReport.TERMINATE:
        return
    if not isinstance(cuda, CudaFailure) or cuda.error != _CUDA_INIT_ERROR:
        return
    driver = (Sign.GPU_DRIVER_LIKELY, Sign.GPU_DRIVER_POSSIBLE)
    kept = tuple(sign for sign in cuda.signs if sign not in driver)
    event.payload = replace(cuda, signs=(*kept, Sign.CUDA_AFTER_FORK))


def _starts_chain(hit: Hit) -> bool:
    """An NCCL WARN (or torch's NCCL error) with its place: the return codes NCCL logs
    on the same thread after it belong to it."""
    payload = hit.payload
    return isinstance(payload, (NcclWarn, NcclError)) and bool(payload.where and payload.message)


def _raw(hit: Hit, text: str, lineno: int, tag: LineTag, owner: Owner) -> RawEvent:
    """An aggregated event's record: the line's own owner (its prefix, its NCCL header)."""
    return RawEvent(
        hit.kind,
        text,
        lineno,
        tag.stamp,
        *owner[:5],
        payload=hit.payload,
        tid=hit.tid,
        cuda_dev=hit.cuda_dev,
        named_host=hit.named_host,
        named_pid=hit.named_pid,
        named_local_rank=hit.named_local_rank,
        partial_header=hit.partial_header,
    )


def _said_rank(tag: LineTag) -> tuple[int, str] | None:
    """(rank, rest of the line) when an unprefixed line starts by naming its global rank.

    Only for lines no launcher prefix attributed, and not for C++ (c10/glog) lines, whose
    ``[Rank N]`` is the watchdog's group rank."""
    text = tag.text
    if tag.rank is not None or text[:1] not in "[Rr" or "ank" not in text[:60].lower():
        return None
    if tag.origin is not None and not tag.origin.split(":", 1)[0].endswith(".py"):
        return None
    m = _SAID_RANK.match(text)
    if m is None:
        return None
    return int(m.group(1) or m.group(2)), text[m.end() :].lstrip()


def _segments(raw: str) -> list[str]:
    """The parts of a physical line worth reading: the whole line, or for tqdm-style
    ``\r`` redraws the last redraw of each rank (and of each bar length), in order.

    A terminal shows only the last redraw; ``clean_line`` keeps that one. When several
    ranks share the console their redraws interleave in one physical line, and each
    rank's last state is evidence (one rank stuck at 1248/1250 while the others
    finished): keep the last segment per owning prefix and bar total."""
    body = raw.rstrip("\r")
    if "\r" not in body:
        return [raw]
    last: dict[tuple[str, str], str] = {}
    owner = ""
    for segment in body.split("\r"):
        if not segment.strip():
            continue
        m = _SEGMENT_OWNER.match(segment)
        if m is not None:
            owner = m.group(1).strip()
        elif owner:
            segment = owner + " " + segment.lstrip()
        total = _BAR_TOTAL.search(segment)
        key = (owner, total.group(1) if total is not None else "")
        if key in last or len(last) < _MAX_SEGMENT_KEYS:
            last.pop(key, None)
            last[key] = segment
    return list(last.values()) or [raw]


# NCCL's lines, by their header or by what a cut header leaves (match_any's first tests).
NCCL_NEED = Need.patterns(_NCCL_HEAD) | Need.words(("NCCL version", "NCCL ", " WARN "))


def match_any(text: str, nvrm_pci: list[str]) -> Hit | None:
    """Every single-line recogniser, most specific first (NCCL lines by their header)."""
    if NCCL_NEED.admits(text) and (hit := _match_nccl(text)) is not None:
        return hit
    elif text.lstrip().startswith("Cuda failure "):
        hit = nccl_lines.match_cuda_failure_line(text)
        if hit is not None:
            return hit
    return (
        match_size_check(text)
        or match_torch(text)
        or match_agent(text)
        or match_xid(text, nvrm_pci)
        or match_dataloader_worker(text)
        or match_process(text)
        or match_pipelining(text)
        or match_wrapper(text)
        or match_phase(text)
        or match_count(text)
        or match_io_state(text)
        or match_listed_file(text)
        or match_nic_counter(text)
        or match_nic_event(text)
        or match_memory(text)
        or match_horovod(text)
        or match_sglang(text)
        or match_serving(text)
        or match_tgi(text)
        or match_service_status(text)
    )


def _match_nccl(text: str) -> Hit | None:
    """An NCCL line, by its header, or by what a cut header left (its words)."""
    if _NCCL_HEAD.match(text) or text.startswith("NCCL version"):
        return nccl_lines.match_nccl(text)
    if "NCCL " in text[:200] or " WARN " in text[:120]:
        return nccl_lines.match_nccl_loose(text)
    return None


# The need of every recogniser match_any asks, each tested by its recogniser first
# (literals.Need): the prefilter's union.
RECOGNISER_NEEDS: tuple[Need, ...] = (
    NCCL_NEED,
    size_checks.NEED,
    torch_pg.NEED,
    elastic.NEED,
    gpu.XID_NEED,
    process.WORKER_NEED,
    process.NEED,
    pipelining.NEED,
    pg_wrapper.NEED,
    phases.PHASE_NEED,
    phases.COUNT_NEED,
    iostate.NEED,
    listing.NEED,
    nic.COUNTER_NEED,
    nic.EVENT_NEED,
    services.NEED,
    memory.NEED,
    horovod.NEED,
    sglang.NEED,
    serving.NEED,
    tgi.NEED,
)
# What the scanner itself reads in a line besides the recognisers: the records it follows
# (a traceback, its frames cut from their header, an exception line, the reports of
# _start_block, "Last error:" and the failed collective's stack) and a record cut inside
# its parentheses (_balanced).
RECORD_NEED = Need.words(
    (
        _TRACEBACK,
        _FAILED_STACK,
        _LAST_ERROR,
        "ChildFailedError",
        _SPAWN_RAISED_WORDS,
        *CUT_START_WORDS,
        "NVIDIA-SMI",
        *HungTaskBlock.NEED,
        process.MPI_NONZERO,
        "backtrace",
        "Work",
        "FingerPrint",
        *gpu.GPU_COLUMNS,
    )
) | Need.patterns(
    _CUT_FRAME,
    _FP_FOLLOWS,
    process.EXCEPTION_LINE,
    reports.RAS_START,
    reports.FR_HEAD,
    gpu.TOPO_HEAD,
    horovod.STALLED_HEADER,
)


@functools.cache
def scanner_prefilter() -> Prefilter:
    """The prefilter of every recogniser, record and catalog row (parsers/logs/prefilter.py),
    built once per process (with the catalog's matcher, on the first line)."""
    return Prefilter((*RECOGNISER_NEEDS, RECORD_NEED), default_matcher().keywords)


def _aggregate_key(hit: Hit, owner: Owner) -> tuple[object, ...] | None:
    if isinstance(hit.payload, NcclColl):
        return ("coll", owner, hit.payload.comm)
    if hit.kind is EventKind.COLLECTIVE_ISSUED:
        return ("issued", owner)  # ProcessGroupWrapper: the last fingerprint per rank
    if hit.kind is EventKind.NCCL_TRANSPORT:
        return ("via", owner)
    if hit.kind is EventKind.PHASE and hit.key is not None and hit.key[0] == "bar":
        return ("bar", owner, hit.key[1])
    if hit.kind is EventKind.HOST_MEMORY:
        return ("hostmem", owner, hit.key)  # a process's readings: one series
    return None


def _balanced(text: str) -> bool:
    """False for a record cut inside ``WorkNCCL(…)`` / ``CollectiveFingerPrint(…)``."""
    if _FP_FOLLOWS.search(text):
        return False  # the fingerprint is on the next lines (torch prints it indented)
    if "(" not in text or ("Work" not in text and "FingerPrint" not in text):
        return True
    start = text.find("WorkNCCL(")
    if start < 0:
        start = text.find("FingerPrint(")
    return start < 0 or text.count("(", start) <= text.count(")", start)


def _open_launcher_command(tag: LineTag) -> bool:
    """A line of DeepSpeed's launcher's sigkill_handler (its header's origin, or its
    text where no header was peeled) that holds the start of the command it reports
    ("['/usr/bin/python', '-u', …") but not the report's end: the rest of the report is
    on the lines after it (_DS_REPORT)."""
    text = tag.text
    if "['" not in text or _DS_REPORT_END in text:
        return False
    return _DS_REPORT in text or (tag.origin is not None and tag.origin.endswith(_DS_REPORT))
