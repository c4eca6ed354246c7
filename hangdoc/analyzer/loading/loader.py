"""Turn what the user gave ``hangdoc analyze`` into one Evidence.

Accepted: dump directories (read by ``dump_reader``), directories of loose files
(walked recursively; a subdirectory that is a dump is read as a dump), archives
(.tar.gz/.tgz/.tar/.zip, extracted safely into a temporary directory), and loose
files. Every file is recognised by its content (the first parser in ``PARSERS``
whose ``sniff`` accepts its head), never by its name: a structured document (hangdoc's
JSON, py-spy's JSON, a flight recorder dump) by its own marks, and every other text by
the text path (``parsers/text.py``), which offers all its lines to the log recognisers
and to the stack recognisers alike.

A bad input never stops the analysis: a missing path, an empty, binary, truncated or
unreadable file becomes an InputFile with an error (and a note), and loading goes
on. No text is refused. When nothing usable came out of any path, ``load_paths`` still
returns the Evidence, with a first note naming each input and why: the analysis is then
inconclusive, and every output the user asked for is still written.

Rank attribution for a loose file: what its content says (``[rank3]:`` prefixes,
``=== Rank 3`` sections) wins; else its name (``rank_names``); else the rank stays
unknown and a note says so.

Hostile input is bounded: text is read through capped readers, one-document formats
past a size cap are refused, archives nested in archives share one extraction budget.
"""

from __future__ import annotations

import contextlib
import gc
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from hangdoc.analyzer.flight_recorder.bulk import read_flight_recorders
from hangdoc.analyzer.loading.dump_reader import FileContext, is_dump_dir, read_dump
from hangdoc.analyzer.loading.huge_files import bounded_view
from hangdoc.analyzer.loading.hydrate import DEFAULT_BUDGET, SummaryDump, hydrate
from hangdoc.analyzer.loading.job_merge import JobInfo, absorb_job_manifest, host_notes
from hangdoc.analyzer.loading.merge import ProcessIndex
from hangdoc.analyzer.loading.paste_view import (
    remap_lines,
    remap_parsed,
    undone_copy,
    undone_note,
    unmangled,
)
from hangdoc.analyzer.loading.redaction import redact_evidence
from hangdoc.analyzer.loading.text_workers import TextReadAhead, Windows
from hangdoc.analyzer.loading.ticket_format import INPUTS as TICKET_INPUTS
from hangdoc.analyzer.loading.ticket_format import MARKER as TICKET_MARKER
from hangdoc.analyzer.loading.window_digest import JobTemplates, digest_windows
from hangdoc.analyzer.model import (
    NO_REDACT_NOTE,
    Evidence,
    InputFile,
    InputKind,
    ProcessEvidence,
)
from hangdoc.analyzer.parsers import PARSERS
from hangdoc.analyzer.parsers.base import SNIFF_BYTES, ParsedFile, Parser
from hangdoc.analyzer.parsers.hangdoc_json import load_json_object
from hangdoc.analyzer.parsers.jsonio import as_dict, get_bool, get_list, get_str
from hangdoc.analyzer.parsers.logs.window import UNATTRIBUTED, read_window_columns
from hangdoc.analyzer.parsers.text import TEXT_KINDS, TextParser, tail_copy
from hangdoc.analyzer.parsers.unmangle import Unmangled
from hangdoc.analyzer.summaries.read import absorb_summary, read_summary
from hangdoc.collectors.jobformat import JOB_MANIFEST_NAME
from hangdoc.common.archive import (
    ArchiveError,
    ArchiveLimits,
    archive_kind,
    extract_archive,
)
from hangdoc.common.rank_names import Trailing, rank_from_name
from hangdoc.common.text import looks_binary

_MAX_ARCHIVE_DEPTH = 3
# Formats that are one document (a pickle, a JSON tree) have no useful tail: a parser
# must read them whole, so past this size they are refused instead of loaded into
# memory. The collector copies flight recorder files up to the same size.
_WHOLE_DOCUMENT_CAPS: dict[InputKind, int] = {InputKind.FLIGHT_RECORDER: 512 * 1024 * 1024}
_MAX_REASONS = 25
# Formats people paste as text: their paste layers are undone before they are read.
_TEXT_KINDS = TEXT_KINDS
NOTHING_FOUND = "read as text; no stacks, log events or ranks that hangdoc knows were found in it"
WHAT_TO_PASS = (
    "Pass a dump directory written by `hangdoc collect`, its .tar.gz, or files such as "
    "`py-spy dump` output, faulthandler tracebacks, flight recorder dumps or rank logs."
)
SUMMARIES_REDACTED_NOTE = (
    "node summaries are redacted when the node writes them; --no-summaries reads the raw "
    "files instead"
)


# The reader of every text (the last of PARSERS): an undone paste is read by it too.
_TEXT_FALLBACK: Parser = TextParser()


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file or directory"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, IsADirectoryError):
        return "is a directory"
    return exc.strerror or str(exc)


class _Loader:
    def __init__(
        self,
        limits: ArchiveLimits | None,
        summaries: bool = False,
        texts: TextReadAhead | None = None,
    ) -> None:
        self.limits = limits
        # Whole-job collection (issue 8): read a dump's summary.json instead of its raw
        # files when it has one; remember those dumps for hydrate(); job manifests.
        self.summaries = summaries
        self.summary_dumps: list[SummaryDump] = []
        self.from_summaries: dict[int, str] = {}  # id(process) -> its dump's display
        self.jobs: list[JobInfo] = []
        self.evidence = Evidence()
        # The ranks' log windows are kept as digests of templates numbered job-wide.
        self.templates = JobTemplates()
        self.index = ProcessIndex(self.templates.add_lines)
        self.seen_files: set[tuple[int, int]] = set()  # (st_dev, st_ino)
        self.seen_dumps: set[str] = set()
        self.archive_depth = 0
        self.extracted_members = 0  # over every archive extracted so far (nested too)
        self.extracted_bytes = 0
        self.useful = 0  # files (and dumps) that contributed anything
        # Flight recorder files are parsed together at the end (of the load, or of the
        # archive they came from): thousands of them are spread over worker processes.
        self.pending_fr: list[tuple[Path, str, FileContext | None, int]] = []
        # A dump's rank logs are read in worker processes as soon as it is listed; the
        # pool is this loader's unless shared by several (load_dumps), whose owner closes it.
        self.owns_texts = texts is None
        self.texts = texts if texts is not None else TextReadAhead()
        # Files of a dump not to read, by display path (hydrate(): logs a summary carries).
        self.skip_files: frozenset[str] = frozenset()

    # --- inputs and notes ------------------------------------------------------------
    def _input(self, item: InputFile, note: str | None = None) -> None:
        self.evidence.inputs.append(item)
        if note:
            self.evidence.notes.append(note)

    def _fail(self, display: str, kind: InputKind, error: str, size: int | None = None) -> None:
        self._input(InputFile(display, kind, error=error, size=size), f"{display}: {error}")

    # --- paths -----------------------------------------------------------------------
    def load_path(self, path: Path, display: str) -> None:
        try:
            st = path.stat()
        except OSError as exc:
            self._fail(display, InputKind.UNREADABLE, _os_reason(exc))
            return
        if stat.S_ISDIR(st.st_mode):
            self._load_dir(path, display)
        elif stat.S_ISREG(st.st_mode):
            self._load_file(path, display, None)
        else:
            self._fail(display, InputKind.UNREADABLE, "not a regular file (a fifo or device)")

    def _inside_loaded_dump(self, path: Path) -> bool:
        if not self.seen_dumps:
            return False
        real = Path(os.path.realpath(path))
        return any(str(parent) in self.seen_dumps for parent in real.parents)

    def _load_dir(self, path: Path, display: str) -> None:
        if is_dump_dir(path):
            self._load_dump(path, display)
            return
        if (path / TICKET_MARKER).is_file() and (path / TICKET_INPUTS).is_dir():
            # A ticket archive of `analyze --archive`: its report and JSON are outputs,
            # not evidence; read the inputs it carries, and say what it left out.
            self._ticket_notes(path / TICKET_MARKER, display)
            self._load_dir(path / TICKET_INPUTS, f"{display}/{TICKET_INPUTS}")
            return
        # Flight recorder files wait in pending_fr until a flush (they are parsed together):
        # they count as entries here, or a folder of them would be called empty.
        before = len(self.evidence.inputs) + len(self.pending_fr)
        pending_before = len(self.pending_fr)
        useful_before = self.useful
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as exc:
            self._fail(display, InputKind.UNREADABLE, _os_reason(exc))
            return
        job_file = self._job_manifest(path / JOB_MANIFEST_NAME, f"{display}/{JOB_MANIFEST_NAME}")
        for entry in entries:
            child, child_display = Path(entry.path), f"{display}/{entry.name}"
            try:
                if job_file and entry.name == JOB_MANIFEST_NAME:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    self._load_dir(child, child_display)
                elif entry.is_symlink() and entry.is_dir():
                    self.evidence.notes.append(f"{child_display}: directory link not followed")
                elif entry.is_file():
                    self._load_file(child, child_display, None)
            except OSError as exc:
                self._fail(child_display, InputKind.UNREADABLE, _os_reason(exc))
        if len(self.evidence.inputs) + len(self.pending_fr) == before:
            self._fail(display, InputKind.UNKNOWN, "empty directory")
        elif self.useful == useful_before and len(self.pending_fr) == pending_before:
            # (with flight recorder files pending, usefulness is known only after the flush)
            count = len(self.evidence.inputs) + len(self.pending_fr) - before
            self._fail(display, InputKind.UNKNOWN, f"no usable file among its {count} entries")

    def _ticket_notes(self, marker: Path, display: str) -> None:
        obj, _ = load_json_object(marker)
        for raw in get_list(obj or {}, "left_out"):
            item = as_dict(raw) or {}
            where, why = get_str(item, "path"), get_str(item, "reason")
            self.evidence.notes.append(
                f"{display}/{where}: left out of the ticket archive when it was made ({why})"
            )
        if obj is not None and get_bool(obj, "redacted") is False:
            self.evidence.notes.append(
                f"{display}: this ticket archive was made with --no-redact; its inputs may "
                "hold secrets"
            )

    def _job_manifest(self, path: Path, display: str) -> bool:
        """A whole-job collection's job.json (its failed nodes become notes)."""
        try:
            found, info = absorb_job_manifest(self.evidence, path, display)
        except Exception as exc:  # a hostile job.json must not stop the analysis
            self._fail(display, InputKind.JOB_MANIFEST, f"unreadable ({type(exc).__name__})")
            return True  # listed, with its reason: not read again as a loose file
        if info is not None:
            self.jobs.append(info)
        return found

    def _load_summary(self, path: Path, display: str) -> bool:
        """The dump's summary.json instead of its raw files, when it can be trusted."""
        try:
            contents, why = read_summary(path, display)
        except Exception as exc:  # a hostile summary must not stop the analysis either
            contents, why = None, f"summary.json could not be read ({type(exc).__name__})"
        if contents is None:
            if why:
                self.evidence.notes.append(f"{display}: {why}; its raw files are read instead")
            return False
        self.useful += 1
        absorb_summary(self.evidence, contents, display, self.index.add)
        self.from_summaries.update((id(p), display) for p in contents.processes)
        if self.archive_depth == 0:  # files of an extracted archive are gone by hydrate()
            ranks = tuple(p.rank for p in contents.processes if p.rank is not None)
            self.summary_dumps.append(
                SummaryDump(path, display, ranks, contents.whole_logs, contents.log_files)
            )
        return True

    def _load_dump(self, path: Path, display: str, ranks: frozenset[int] | None = None) -> None:
        real = os.path.realpath(path)
        if real in self.seen_dumps:
            self.evidence.notes.append(f"{display}: this dump was given twice; read once")
            return
        self.seen_dumps.add(real)
        if self.summaries and ranks is None and self._load_summary(path, display):
            return
        contents = read_dump(path, display, ranks)
        if contents.processes or contents.host is not None or contents.steps:
            self.useful += 1
        self.evidence.inputs.extend(contents.inputs)
        self.evidence.notes.extend(contents.notes)
        self.evidence.collect_steps.extend(contents.steps)
        if contents.host is not None:
            host = contents.host
            if host.host in self.evidence.hosts:
                self.evidence.notes.append(
                    f"{display}: a second dump of host {host.host} (the first was "
                    f"{self.evidence.hosts[host.host].manifest}); both are read"
                )
            else:
                self.evidence.hosts[host.host] = host
        for proc in contents.processes:
            self.index.add(proc)
        others = [o for o in contents.other_files if o.display not in self.skip_files]
        self.texts.submit((o.path, o.display, o.context) for o in others)
        for other in others:
            self._load_file(other.path, other.display, other.context)

    # --- files -----------------------------------------------------------------------
    def _load_file(self, path: Path, display: str, context: FileContext | None) -> None:
        try:
            st = path.stat()
        except OSError as exc:
            self._fail(display, InputKind.UNREADABLE, _os_reason(exc))
            return
        key = (st.st_dev, st.st_ino)
        if key in self.seen_files or (context is None and self._inside_loaded_dump(path)):
            self.evidence.notes.append(f"{display}: already read (given twice); read once")
            return
        self.seen_files.add(key)
        size = st.st_size
        if size == 0:
            if context is not None:
                # A file a dump holds (a rank's stdout or stderr log that nothing was
                # written to) is empty by nature: listed, but no problem and no note.
                self._input(InputFile(display, InputKind.UNKNOWN, size=0))
                return
            self._fail(display, InputKind.UNREADABLE, "empty file", 0)
            return
        try:
            with path.open("rb") as handle:
                head = handle.read(SNIFF_BYTES)
        except OSError as exc:
            self._fail(display, InputKind.UNREADABLE, _os_reason(exc))
            return
        if archive_kind(head) is not None:
            self._load_archive(path, display)
            return
        parser = self._sniff(head, display)
        if context is None and (parser is None or parser.kind in _TEXT_KINDS):
            fixed = self._unmangled(path, head, size, display)
            if fixed is not None:
                with undone_copy(path, fixed) as copy, copy.open("rb") as handle:
                    parser = self._sniff(handle.read(SNIFF_BYTES), display) or _TEXT_FALLBACK
                    self.evidence.notes.append(undone_note(display, fixed))
                    self._parse_text(parser, path, copy, display, size, fixed)
                return
        if parser is None:
            if looks_binary(head):
                why = "binary data in no format hangdoc reads"
                self._fail(display, InputKind.UNREADABLE, why, size)
                return
            # No text is refused (the text path keeps what it can: ranks, events, stacks,
            # a rank's own lines). A file of a dump that holds nothing is no error.
            parser = _TEXT_FALLBACK
        if parser.kind is InputKind.MANIFEST and context is None and is_dump_dir(path.parent):
            self._load_dir(path.parent, display.rsplit("/", 1)[0] if "/" in display else ".")
            return
        cap = _WHOLE_DOCUMENT_CAPS.get(parser.kind)
        if cap is not None and size > cap:
            why = (
                f"{size} bytes: over the {cap >> 20} MiB that a {parser.kind.value} file "
                "(one document, read whole) may have; not read"
            )
            self._fail(display, parser.kind, why, size)
            return
        if parser.kind is InputKind.FLIGHT_RECORDER:
            self.pending_fr.append((path, display, context, size))
            return
        ahead = self.texts.take(path) if isinstance(parser, TextParser) else None
        if ahead is None and context is None and self.owns_texts:
            self.texts.close()  # a loose file's own reader may fork: no pool threads then
        if ahead is not None and ahead.failure is not None:  # a parser bug, met by a worker
            self._fail(display, parser.kind, ahead.failure, size)
            return
        if ahead is not None and ahead.parsed is not None:
            parsed, note = ahead.parsed, ahead.note
        else:
            try:
                with bounded_view(path, size) as (readable, note):
                    parsed = parser.parse(readable, display)
            except Exception as exc:  # a parser bug must not stop the analysis
                why = f"could not parse: {type(exc).__name__}: {exc}"
                self._fail(display, parser.kind, why, size)
                return
        if note:
            parsed.notes.append(f"{display}: {note}")
        windows = ahead.windows(self.templates) if ahead is not None else None
        self._absorb(parsed, path, display, context, size, windows=windows)

    def _unmangled(self, path: Path, head: bytes, size: int, display: str) -> Unmangled | None:
        """The loose text file without its paste layers (quote, indent, wrap...), if any."""
        if looks_binary(head):
            return None
        try:
            return unmangled(path, size)
        except Exception as exc:  # unreadable now, or a bug: read the file as it is
            self.evidence.notes.append(
                f"{display}: paste layers not undone ({type(exc).__name__}: {exc})"
            )
            return None

    def _parse_text(
        self, parser: Parser, path: Path, copy: Path, display: str, size: int, fixed: Unmangled
    ) -> None:
        """Parse the undone copy of a loose text file; its line numbers become the user's."""
        try:
            parsed = parser.parse(copy, display)
        except Exception as exc:  # a parser bug must not stop the analysis
            why = f"could not parse: {type(exc).__name__}: {exc}"
            self._fail(display, parser.kind, why, size)
            return
        remap_parsed(parsed, fixed)
        self._absorb(parsed, path, display, None, size, readable=copy, fixed=fixed)

    def _flush_flight_recorders(self) -> None:
        """Parse the flight recorder files met so far, in rank order, in parallel if many.

        Rank order keeps a tensor-parallel group's files in one worker's batch, where
        they share their interned records. A failure of the worker pool itself falls
        back to parsing file by file; a failing file is an input with its reason.
        """
        if self.owns_texts:  # its threads would make the flight recorder pool fork-unsafe
            self.texts.close()
        pending = sorted(self.pending_fr, key=lambda item: (_rank_key(item[0]), item[1]))
        self.pending_fr = []
        if not pending:
            return
        files = [(path, display) for path, display, _, _ in pending]
        done = 0
        try:
            for parsed in read_flight_recorders(files):
                path, display, context, size = pending[done]
                done += 1
                self._absorb(parsed, path, display, context, size)
        except Exception as exc:  # the pool, not a file: go on without it
            self.evidence.notes.append(
                f"flight recorder workers failed ({type(exc).__name__}: {exc}); the "
                f"remaining {len(pending) - done} files were read one by one"
            )
            for path, display, context, size in pending[done:]:
                try:
                    parsed = next(read_flight_recorders([(path, display)], jobs=1))
                except Exception as err:  # a parser bug must not stop the analysis
                    why = f"could not parse: {type(err).__name__}: {err}"
                    self._fail(display, InputKind.FLIGHT_RECORDER, why, size)
                    continue
                self._absorb(parsed, path, display, context, size)

    def _sniff(self, head: bytes, display: str) -> Parser | None:
        for parser in PARSERS:
            try:
                if parser.sniff(head):
                    return parser
            except Exception as exc:  # same: one broken sniffer must not hide the file
                self.evidence.notes.append(
                    f"{display}: the {parser.kind.value} sniffer failed: {exc}"
                )
        return None

    def _attribute(
        self, parsed: ParsedFile, path: Path, display: str, context: FileContext | None
    ) -> None:
        frags = parsed.processes
        if context is not None:  # a file inside a dump: its folder says whose it is
            for frag in frags:
                if frag.rank is None:
                    frag.rank = context.rank
                same = frag.rank == context.rank
                frag.host = frag.host or context.host
                if frag.pid is None and same:
                    frag.pid = context.pid
            return
        rankless = [f for f in frags if f.rank is None]
        if not rankless:
            return
        trailing = Trailing.ONE_PROCESS if len(frags) == 1 else Trailing.NEVER
        named = rank_from_name(path, trailing)
        rank, how = named.rank, named.how
        if rank is not None and len(frags) == 1:
            frags[0].rank = rank
            self.evidence.notes.append(f"{display}: rank {rank} taken from {how}")
            return
        for frag in rankless:
            label = f"pid {frag.pid}" if frag.pid is not None else "an unknown process"
            self.evidence.notes.append(
                f"{display}: could not tell which rank wrote this (no [rankN]: prefix or "
                f"section, no rank in the file name); shown as {label}"
            )

    def _absorb(
        self,
        parsed: ParsedFile,
        path: Path,
        display: str,
        context: FileContext | None,
        size: int,
        *,
        readable: Path | None = None,
        fixed: Unmangled | None = None,
        windows: Windows | None = None,
    ) -> None:
        """``readable``: where the text was read from when not ``path`` (an undone copy,
        whose line numbers ``fixed`` maps back); ``windows``: the ranks' line windows,
        when a worker cut them already."""
        self._attribute(parsed, path, display, context)
        if parsed.kind in _TEXT_KINDS:
            # A paste of stacks holds the ranks' own lines too (its frames are no log).
            self._keep_lines(parsed, path, display, context, readable or path, fixed, windows)
        contributed = bool(parsed.processes or parsed.job_log_events or parsed.process_groups)
        if contributed:
            self.useful += 1
        ranks = tuple(sorted({p.rank for p in parsed.processes if p.rank is not None}))
        error = parsed.error
        if error is None and not contributed and context is None:
            error = NOTHING_FOUND  # read whole, and nothing in it is evidence hangdoc knows
        note = f"{display}: {error}" if error else None
        self._input(InputFile(display, parsed.kind, ranks, error, size), note)
        for frag in parsed.processes:
            if not frag.sources:
                frag.sources.append(display)
            self.index.add(frag)
        self.evidence.job_log_events.extend(parsed.job_log_events)
        for group in parsed.process_groups:
            known = self.evidence.process_groups.get(group.name)
            if known is None:
                self.evidence.process_groups[group.name] = group
            else:
                known.desc = known.desc or group.desc
                known.ranks = known.ranks or group.ranks
        self.evidence.notes.extend(parsed.notes)

    def _keep_lines(
        self,
        parsed: ParsedFile,
        path: Path,
        display: str,
        context: FileContext | None,
        readable: Path,
        fixed: Unmangled | None,
        windows: Windows | None = None,
    ) -> None:
        """The log's head and tail lines per rank, for comparing the ranks' logs."""
        if windows is None:
            windows = self._line_windows(parsed, path, display, context, readable)
            if windows is None:
                return  # the parser already read it; an error now is a race, not a new fact
        if fixed is not None:
            windows = {rank: remap_lines(lines, fixed) for rank, lines in windows.items()}
        self.evidence.job_log_lines.extend(windows.pop(UNATTRIBUTED, []))
        by_rank = {p.rank: p for p in parsed.processes if p.rank is not None}
        for rank, lines in windows.items():
            proc = by_rank.get(rank)
            if proc is None:
                proc = by_rank[rank] = ProcessEvidence(rank=rank, sources=[display])
                if context is not None:
                    proc.host, proc.pid = context.host, context.pid
                parsed.processes.append(proc)
            self.templates.add_lines(proc, lines)

    def _line_windows(
        self,
        parsed: ParsedFile,
        path: Path,
        display: str,
        context: FileContext | None,
        readable: Path,
    ) -> Windows | None:
        """Each rank's head and tail lines of the text; None when it cannot be read now."""
        # Unprefixed lines belong to the rank whose own file this is: its dump folder says
        # so, or (last resort) its name. A console that names ranks in its text only
        # ("[Rank 4] Watchdog…") is a shared one: its other lines are nobody's.
        default_rank = context.rank if context is not None else None
        ranks = {p.rank for p in parsed.processes if p.rank is not None}
        if default_rank is None and len(ranks) <= 1:
            named = rank_from_name(path, Trailing.ONE_PROCESS).rank
            if named is not None and (not ranks or named in ranks):
                default_rank = named
        # The pids of the processes whose stacks the text holds: a label that names one
        # (``node-1:24036 (rank 3)``) opens that process's section of the text.
        pids: dict[int, list[int | None]] = {}
        for proc in parsed.processes:
            if proc.text_stacks and proc.pid is not None:
                pids.setdefault(proc.pid, []).append(proc.rank)
        pid_ranks = {pid: owners[0] for pid, owners in pids.items() if len(owners) == 1}
        try:
            if parsed.tail_bytes is None:
                columns = read_window_columns(readable, default_rank, pid_ranks)
            else:
                with tail_copy(readable, parsed.tail_bytes) as tail:  # the lines the parsers read
                    columns = read_window_columns(tail, default_rank, pid_ranks)
        except OSError:
            return None
        return self.templates.windows(digest_windows(columns), display)

    def _load_archive(self, path: Path, display: str) -> None:
        if self.archive_depth >= _MAX_ARCHIVE_DEPTH:
            self._fail(display, InputKind.ARCHIVE, "archive nested too deep; not extracted")
            return
        limits = self._remaining_limits()
        if limits is None:
            self._fail(display, InputKind.ARCHIVE, "the archives given hold more than the "
                       "extraction caps allow in all; not extracted")  # fmt: skip
            return
        self.archive_depth += 1
        try:
            with extract_archive(path, display, limits) as extracted:
                self._account(extracted.root)
                error = extracted.error
                self._input(InputFile(display, InputKind.ARCHIVE, error=error, size=_size(path)))
                if error:
                    self.evidence.notes.append(f"{display}: {error}")
                for member, why in extracted.refused:
                    self._fail(f"{display}!/{member}", InputKind.UNREADABLE, why)
                inner = f"{display}!"
                if extracted.single_file:
                    for child in sorted(extracted.root.iterdir()):
                        self._load_file(child, f"{inner}/{child.name}", None)
                else:
                    self._load_dir(extracted.root, inner)
                self._flush_flight_recorders()  # before the extracted files are removed
        except ArchiveError as exc:
            self._input(InputFile(display, InputKind.ARCHIVE, error=str(exc)), str(exc))
        except OSError as exc:
            self._fail(display, InputKind.ARCHIVE, f"cannot extract: {_os_reason(exc)}")
        finally:
            self.archive_depth -= 1

    def _remaining_limits(self) -> ArchiveLimits | None:
        """The caps left for the next archive: archives inside archives share one budget,
        so a nested bomb cannot multiply the caps by its depth."""
        caps = self.limits or ArchiveLimits()
        members = caps.max_members - self.extracted_members
        total = caps.max_total_bytes - self.extracted_bytes
        if members <= 0 or total <= 0:
            return None
        return ArchiveLimits(max_members=members, max_total_bytes=total)

    def _account(self, root: Path) -> None:
        for folder, dirs, files in os.walk(root):
            self.extracted_members += len(dirs) + len(files)
            for name in files:
                with contextlib.suppress(OSError):
                    self.extracted_bytes += os.lstat(os.path.join(folder, name)).st_size

    # --- result ----------------------------------------------------------------------
    def finish(self) -> Evidence:
        self._flush_flight_recorders()
        ev = self.evidence
        if self.texts.failure is not None:
            ev.notes.append(
                f"rank log workers failed ({self.texts.failure}); the remaining logs were "
                "read one by one"
            )
        ev.processes = self.index.finish()
        self.templates.attach(ev.processes)
        ev.notes.extend(self.templates.notes)
        ev.notes.extend(self.index.notes)
        ev.notes.extend(host_notes(ev, self.jobs))
        ev.notes = list(dict.fromkeys(ev.notes))
        return ev


def _rank_key(path: Path) -> int:
    rank = rank_from_name(path, Trailing.APPENDED).rank
    return rank if rank is not None else 1 << 62


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _usable(ev: Evidence) -> bool:
    return bool(
        ev.processes or ev.job_log_events or ev.process_groups or ev.hosts or ev.collect_steps
    )


def _why_nothing(ev: Evidence, paths: Sequence[Path]) -> str:
    reasons = [
        f"  {item.path}: {item.error or 'not a format hangdoc recognises'}"
        for item in ev.inputs
        if item.kind is not InputKind.ARCHIVE or item.error
    ]
    if not reasons:
        reasons = [f"  {p}: nothing to read" for p in paths]
    shown = reasons[:_MAX_REASONS]
    if len(reasons) > len(shown):
        shown.append(f"  … and {len(reasons) - len(shown)} more")
    return "nothing usable in the inputs:\n" + "\n".join(shown)


def load_dump(path: Path, display: str, ranks: frozenset[int] | None = None) -> Evidence:
    """One dump's raw files (never its summary), only ``ranks``' folders when given; not
    redacted. The summary writer and hydrate() read dumps through this."""
    loader = _Loader(None)
    try:
        loader._load_dump(path, display, ranks)
        return loader.finish()
    finally:
        loader.texts.close()


def load_dumps(
    requests: Sequence[tuple[Path, str, frozenset[int]]], skip: frozenset[str] = frozenset()
) -> list[Evidence]:
    """Several dumps, each as ``load_dump`` reads it restricted to some ranks, one
    Evidence per dump in order; the rank logs of all of them are read in worker processes
    together (hydrate() reads a few ranks of several dumps: one log each, often). Files
    whose display path is in ``skip`` are not read (logs whose events a summary holds)."""
    texts = TextReadAhead()
    try:
        texts.submit(
            (other.path, other.display, other.context)
            for path, display, ranks in requests
            for other in read_dump(path, display, ranks).other_files
            if other.display not in skip
        )
        out = []
        for path, display, ranks in requests:
            loader = _Loader(None, texts=texts)
            loader.skip_files = skip
            loader._load_dump(path, display, ranks)
            out.append(loader.finish())
        return out
    finally:
        texts.close()


def load_paths(
    paths: Sequence[Path],
    *,
    limits: ArchiveLimits | None = None,
    redact: bool = True,
    summaries: bool = True,
    hydrate_budget: int = DEFAULT_BUDGET,
) -> Evidence:
    """Load dump directories, directories of files, archives and loose files.

    Never raises for a bad file: each becomes an ``Evidence.inputs`` entry with its
    error; when no path yielded anything usable, a first note says why. With
    ``redact`` (the default) secrets are hidden before anything else sees the Evidence
    (``analyzer.loading.redaction``); without it a note says so in every report. With
    ``summaries`` (the default) a dump's summary.json is read instead of its raw files,
    and the raw files of at most ``hydrate_budget`` ranks that stand out are read too
    (analyzer/loading/hydrate.py).
    """
    loader = _Loader(limits, summaries)
    # Directories first: a dump read before a loose copy of one of its files lets the
    # copy be recognised and skipped (and a dump's rank claims outrank a pasted file's).
    ordered = sorted(paths, key=lambda p: not p.is_dir())
    # Loading builds millions of small acyclic objects (frames, threads); the cyclic
    # collector would rescan the growing heap again and again (measured: 18.6 s instead
    # of 11 s for 16,384 ranks), and there are no cycles here for it to free.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for path in ordered:
            display = str(path).rstrip("/") or "/"
            loader.load_path(path, display)
        evidence = loader.finish()
        hydrate(evidence, loader.summary_dumps, load_dumps, hydrate_budget)
        if redact:
            # Summaries included: one from a ticket may have been edited by anyone, so
            # what the node redacted is redacted again (idempotent, ~0.1 s per 4k ranks).
            redact_evidence(evidence)
        else:
            evidence.redacted = False
            evidence.notes.insert(0, NO_REDACT_NOTE)
            if loader.from_summaries:
                evidence.notes.insert(1, SUMMARIES_REDACTED_NOTE)
    finally:
        loader.texts.close()
        if gc_was_enabled:
            gc.enable()
    if not _usable(evidence):
        # Not an error: every requested output is still written, with verdict
        # inconclusive and each input's reason; this note heads the list.
        evidence.notes.insert(0, _why_nothing(evidence, paths) + "\n" + WHAT_TO_PASS)
    return evidence
