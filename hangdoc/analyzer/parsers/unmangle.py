"""Undo what pasting did to machine output, before any recogniser reads it.

A paste reaches hangdoc through Markdown, terminals and log shippers
(hangdoc/paste_mangling.py lists the ways): quoted ("> ", nested), indented four spaces
or a tab as a code block, fenced, tagged by kubectl or docker compose, coloured,
decorated with emphasis, hard-wrapped at the terminal's width, its first line cut by the
selection. The recognisers match the tools' own formats (a py-spy thread line at the
start of a line, a traceback's ``  File`` at its indentation, an NCCL header's fields), so
each of these layers, left in place, hides whole records from them. They are undone
here, by mechanism, outermost first:

1. fences (```` ``` ````, ``~~~``) become blank lines and mark code, which keeps its
   emphasis characters (Markdown renders none there);
2. a block quote's markers, common to a run of lines, are removed (a REPL's ``>>>`` is
   not a quote; ">text" quoting keeps the line's own spaces);
3. an indentation margin common to every line of the text, or to a block that follows a
   blank line, of four columns or a tab (a Markdown code block), is removed: a smaller
   one may be the format's own (faulthandler's two spaces);
4. one log shipper's tag on every line (kubectl's ``[pod/…/…]``, docker compose's
   ``svc-1  |``) and the log stream's name ``aws logs tail`` prints after its stamp are
   removed; time stamps stay, they are the lines' times (the line readers peel them);
5. colours (ANSI escape sequences, and their remains without ESC) are removed, then
   Markdown emphasis around a line or a word (``**…**``, `` `…` ``) outside code; the
   count Ray's driver appends to a line its log deduplication stands for
   (`` [repeated 6x across cluster]``) is removed;
6. a first line whose header the selection cut is restored from a later line of the
   same process (``_restored_head``);
7. lines a terminal hard-wrapped are joined: the wrap width is the length several lines
   share exactly with no line longer (a spike at the maximum, not a slope), and a line at
   that width is joined to the next unless the next starts like a record of its own (a
   time stamp, a log, glog or NCCL header, a launcher prefix, a frame, a traceback line,
   the next row of one template); a line wrapped once (no spike) only where the
   boundary shows a column's cut (``_cut_at_edge``: a frame line only where its
   function's name goes on, an NCCL header where its level does); where no spike shows,
   a wrap at word boundaries (a soft wrap copied as line breaks: lines that end short of
   the edge because the next word would not fit, ``_word_width``) is joined with the
   space it broke at, and so is a spike that such lines show to be a word wrap's (long
   words cut at the column pile up at its edge too); at a column wrap's boundary with no
   space on either side, the space a word wrap would have dropped goes back where a
   library's message joined so is the catalog's and joined without is not
   (``_column_glue``), or where the boundary is a seam between two words
   (``_word_seam``); until no wrap is left; then the breaks of a wrap at word boundaries
   that the lengths do not show (a one-line paste broken once, one message printed many
   times and broken alike) are joined where the joined line is a record of a known shape
   that the piece alone is not (``_shape_joins``); then a second copy of the whole paste
   is dropped (``_second_copy``, on whole lines);
8. a first line that a selection cut inside a library message's body (`` to recv from …``)
   gets the cut-away start of the message back from the message catalog, whose row's
   body the line ends (``_restored_body``, parsers/catalog/cut_body.py).
9. a first line cut inside an NCCL header's source location gets the file back from the
   catalog row that prints its message (``_restored_source``), one cut inside an
   OSError's class name the class of its errno (``_restored_os_error``), one cut inside
   a traceback's frame line its '  File "' (``_restored_frame``).

A CRLF's "\r" is dropped as the lines are split. Line numbers stay those of the file the
user gave: ``Unmangled.line_map`` maps each line of the new text back, so evidence cites
the user's file.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from hangdoc.analyzer.parsers.catalog.cut_body import cut_body
from hangdoc.analyzer.parsers.catalog.matcher import default_matcher
from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.parser import recognise_line
from hangdoc.analyzer.parsers.logs.prefix import peel_line
from hangdoc.analyzer.parsers.prefixes import strip_colours
from hangdoc.analyzer.parsers.stacks.pyspy_frames import FRAME as PYSPY_FRAME

_FENCE = re.compile(r" {0,3}(?:`{3,}|~{3,})[\w+.-]*\s*$")
# One Markdown quote marker, with the one space it may carry.
_QUOTE = re.compile(r" {0,3}> ?")
# ">text": markers with no space after them; then a line's own spaces are its own.
_TIGHT = re.compile(r" {0,3}>+[^\s>]")
_SPACED = re.compile(r" {0,3}> \S")  # "> text": the space is the marker's
_BARE_QUOTE = re.compile(r" {0,3}>")
_REPL = re.compile(r" {0,3}(?:>>>|\.\.\.)(?: |$)")
_MIN_QUOTE_RUN = 2
_CODE_MARGIN = 4  # columns of a Markdown code block
# Emphasis as Markdown writes it: the markers flank text (no space inside them, no word
# character outside), so "a**2 + b**2" and "f(*args, **kwargs)" are left alone.
_BOLD = re.compile(r"(?<![\w*\\])\*\*(?=\S)(.+?)(?<=\S)\*\*(?![\w*])")
# A line bolded whole, trailing spaces aside.
_WHOLE_BOLD = re.compile(r"(\s*)\*\*(?=\S)((?:(?!\*\*).)*?)(?<=\S)\*\*\s*")
_CODE_SPAN = re.compile(r"(?<![\w`\\])`(?=[^`\s])([^`\n]*?[^`\s])`(?![\w`])")
_MIN_WRAP_WIDTH = 30
# A line wrapped once shows no width (one piece at the edge): joined only where the piece
# at the text's longest length ends as a column cuts, not as a line ends. Terminals wider
# than this are rare; a longer line is a log's own (a JSON record, a command line).
_MAX_LONE_WIDTH = 320
# A wrap at word boundaries leaves each piece within a word of the edge; a line this close
# to it that ends although the next line's first word would have fit ended on its own.
_WORD_NEAR_EDGE = 12
# Soft wraps are set for prose: a mail client's 72 or 78 columns, an editor's 80, a page's
# wider; lines all shorter than this are a short log's own, each about as long as the next.
_MIN_WORD_WIDTH = 60
# A row of a drawn table (nvidia-smi's "| … |", a rule "+---+"): closed by its border, whole.
# A rule of one character ("*****", "-----"), or the carets CPython 3.11 draws under the
# failing expression of a frame: a line of its own, whatever follows it.
_RULE = re.compile(r"\s*([=\-*#+_~^])\1{2,}\s*")
_TABLE_ROW_DRAWN = re.compile(r"\s*[|+].*[|+]\s*$")
# A piece that ends in a word, a path or a key, where the next piece goes on with it: a
# word cut in two ("subproc" / "ess 9439"), a path or a value cut after its separator
# ("'output/" / "checkpoint_2.pt'"), a space kept at the column before a lower-case word
# ("invalid" / " usage, NCCL version"), closing punctuation ("(2" / ")", "'" / ", '--x'",
# "tmp.pth.tar" / "' -> 'last.pth.tar'", "world_size" / "=2048").
# A line of its own starts at its margin with a word, a capital, a record's mark.
_CUT_WORD = re.compile(r"[a-z0-9_]")
_CUT_SPACE = re.compile(r" [a-z]")
_CUT_CLOSE = re.compile(r"[)\]},;]|\.[A-Za-z0-9]|=[^=]|['\"](?=[\s,)\]};:.]|$)")
_PATH_MARKS = frozenset("/=-")
# A traceback's frame line ends with its function; its source line follows (a paste that
# lost the source line's indentation starts it at the margin).
_FRAME_LINE = re.compile(r'\s*File ".*", line \d+, in \S+$')
# ... and a frame line's end, wherever its start went (a wrap broke its path): CPython's
# traceback (Lib/traceback.py StackSummary.format_frame_summary) ends the line with the
# function's name and writes the source line on a line of its own, so nothing continues it.
_FRAME_LINE_END = re.compile(r'", line \d+, in [\w<>.]+$')
# ... unless the column cut the function's name: the rest is the name's end alone, and the
# frame's source line follows the rest, indented under the frame ("  File …, line 118, in
# _verify_param_shape_acro" / "ss_processes" / "    return dist._verify_params_…"). A
# source line that lost its indentation starts at the margin, like the rest: left as it is.
_NAME_REST = re.compile(r"[\w<>]+$")
# NCCL's debug.cc writes its header's "NCCL" and the level together ("… [0] NCCL INFO …",
# "… [0] transport.cc:154 NCCL WARN …"): a piece that ends with the header's "NCCL " is
# continued by its level, which elsewhere starts a record of its own (Python logging's).
# (a wrap at word boundaries drops the space after "NCCL": the level went on all the same)
_LEVEL_PENDING = re.compile(r"(?:\[\d+\]|\w:\d+) NCCL ?$")
_LEVEL_ALONE = re.compile(r"(?:\[\d+\]|\w:\d+) NCCL (?:WARN|INFO|TRACE)$")
_PENDING_LEVEL = re.compile(r"(?:WARN|INFO|TRACE) ")
# A name, a colon and a space start a line of its own: an exception's or a library's
# message ("ncclInvalidUsage: This usually reflects …" under torch's NCCL error line); a
# lower-case word before a colon is a key cut ("(err" / "no: 110 - Connection timed out").
_NAMED_LINE = re.compile(r"[A-Za-z_]\w*[A-Z.][\w.]*: |[A-Z][\w.]*: ")
# A shipper's RFC 3339 stamp, then a log stream's name (CloudWatch's are paths:
# "job/algo-1-1714557600", "ecs/trainer/5f2c…"), then the line.
# awscli prints the stamp with Python's isoformat(): an offset ("+00:00"), never "Z";
# a "Z" stamp is kubectl's or docker's, and a path after it is the job's own text (Horovod
# names a tensor "MetricAverageCallback/HorovodAllreduce_…").
_STAMPED_STREAM = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?[+-]\d\d:\d\d) "
    r"([A-Za-z0-9][\w.-]*(?:/[\w.$\[\]-]+)+)(?= )"
)
_MIN_STREAM_LINES = 3
_WHOLE_SHARE = 0.5
# Signs of each layer somewhere in a text, searched once over the whole of it.
_SIGN_QUOTE = re.compile(r"^ {0,3}>", re.MULTILINE)
_SIGN_FLUSH = re.compile(r"^(?=[^ \t\n])", re.MULTILINE)  # a line at the left edge
_SIGN_BLOCK = re.compile(r"\n[ \t]*\n[ \t]+\S")  # an indented block after a blank line
_SIGN_TAG = re.compile(r"^(?:\[pod/|[A-Za-z0-9][\w.-]{0,80}?[-_]\d{1,4} +\| )", re.MULTILINE)
_SIGN_STREAM = re.compile(r"^\d{4}-\d\d-\d\dT\S+ [A-Za-z0-9][\w.-]*/", re.MULTILINE)
_SIGN_SGR = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m")
# Ray's driver prints one line for the same line of several workers with the count of the
# others after it, and the first time a note on how to turn that off
# (ray/_private/ray_logging/__init__.py, DedupState.formatted:
# f" [repeated {count}x across cluster]" + _warn_once()).
_RAY_DEDUP = re.compile(
    r" ?\[repeated \d+x across cluster\](?: \(Ray deduplicates logs by default\.[^)\n]*\))?"
    r"[ \t]*$"
)
_SIGN_RAY_DEDUP = " across cluster]"
# A launcher's rank tag inside a line, after text of another process's (a line cut by
# another rank's prefixed line): "Epoch 1:  45%|####[rank1]: Traceback (most recent …".
# Looked for by counting (a search for a tag after any character tries every position
# of a 50 MB log: 0.6 s): more tags than lines that start with one, or stack it on
# another (torch's excepthook's "[rankN]:", torchrun's "[defaultN]:" for its default
# role; the step itself takes any role's).
_TAG_STARTS = ("[rank", "[default")


def _sign_cut_by_tag(text: str) -> bool:
    return any(
        text.count(tag) > text.count(f"\n{tag}") + text.count(f"]:{tag}") + text.startswith(tag)
        and _SIGN_CUT_BY_TAG.search(text) is not None
        for tag in _TAG_STARTS
    )


_SIGN_CUT_BY_TAG = re.compile(r"[^:\n]\[(?:rank\d+|[A-Za-z_][\w-]*?\d+)\]:")
# The tags themselves, at a line's start (``prefixes._RANK``, ``prefixes._ROLE``): the
# family a text's lines carry is the one a cut line's inserted line carries.
_LINE_TAG = re.compile(r"\[(rank|[A-Za-z_][\w-]*?)(\d+)\]: ?")
_MIN_TAGGED = 2
_WORD = re.compile(r"\w")
# What may stand before a line's tag without being a line of its own: markup ("**",
# "> "), a launcher's label of the node or task (srun's "11: ", pdsh's "host: ").
_BEFORE_TAG = re.compile(r"[^\w\[]*(?:[\w.-]{1,64}: ?)?[^\w\[]*")
# A line that starts with a tag behind those ("**[rank1]: …", "11: [rank11]: …").
_MARKED_TAG = re.compile(_BEFORE_TAG.pattern + r"\[(rank|[A-Za-z_][\w-]*?)(\d+)\]:")
# kubectl's "--prefix" (logs.go addPrefixIfNeeded) and docker compose's service column.
_SHIPPER_TAG = re.compile(r"\[pod/[\w.-]+/[\w.-]+\] |[A-Za-z0-9][\w.-]{0,80}?[-_]\d{1,4} +\| ")
_STREAM_SHARE = 0.8
# A log viewer's rows pasted as a Markdown table (a web console's export, copied into an
# issue: Qwen3-VL#1756's "  |   | 2025-11-04 10:07:58.273395 master-0 >> [rank1]:[E1104 …] … |"):
# the outer pipes, and the empty or row-number cells before the message, are the table's.
# A table is taken for a viewer's only where its rows start with a date and time (the
# viewer's time column): the job's own tables (nvidia-smi, a model summary) do not.
_TABLE_ROW = re.compile(r"[ \t]{0,3}\|(.*)\|[ \t]*$")
_TABLE_RULE = re.compile(r"[ \t]{0,3}\|?(?:[ \t]*:?-{3,}:?[ \t]*\|)+[ \t]*(?::?-{3,}:?[ \t]*)?$")
_LEADING_CELL = re.compile(r"[ \t]*\d{0,7}[ \t]*\|")
_DATE_TIME = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_STAMP_FIRST = re.compile(_DATE_TIME)
# A time stamp and nothing after it but its colon: a header a line was cut after (a
# collector's "TIME: " before mpirun's "[1,12]<stdout>:" and NCCL's header), no line of
# its own.
_STAMP_ALONE = re.compile(r"\[?" + _DATE_TIME + r"\]?:?")
_SIGN_TABLE = re.compile(r"^[ \t]{0,3}\|[ \t\d|]*" + _DATE_TIME, re.MULTILINE)
_MIN_TABLE_ROWS = 2
# A source column a viewer or shipper prints between its stamp and the line: the host,
# pod or stream the line came from, then a separator no log message starts with
# ("TIME master-0 >> LINE", "TIME worker-1 | LINE"). The source names a machine, not a rank
# (the line's own prefixes say which rank).
_SOURCE_COLUMN = re.compile(
    r"(" + _DATE_TIME + r") ([A-Za-z0-9][\w.:/@-]{0,80}) ?(?:>>|\||»|->|=>)(?: |$)"
)
_SIGN_SOURCE = re.compile(
    r"^" + _DATE_TIME + r" [A-Za-z0-9][\w.:/@-]{0,80} ?(?:>>|\||»|->|=>)(?: |$)", re.MULTILINE
)
# A level is a line's own word, not a source (a format "TIME LEVEL | message").
_LEVELS = frozenset(
    {"TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "WARNING", "ERROR", "CRITICAL", "FATAL"}
)
_MAX_SOURCES = 16
# vLLM's logger (vllm/logger.py ``_FORMAT`` "%(levelname)s %(asctime)s %(filename)s:%(lineno)d]
# %(message)s", later "[%(filename)s:%(lineno)d]"; its NewLineFormatter, "Adds logging prefix to
# newlines to align multi-line messages") writes a record's header again on each of its lines:
# a traceback logged so has "ERROR 04-15 00:31:11 worker_base.py:574] " before every frame.
# (The DEBUG header's path, "[v1/executor/multiproc_executor.py:597]", is left to the line
# readers, which peel it on each line: removed here before a hard wrap is rejoined, it
# broke the rejoin of the wrapped frames.)
_RECORD_PREFIX = re.compile(
    r"(?:\([\w.:-]+ pid=\d+(?:, ip=[0-9A-Fa-f.:]+)?\) )?"
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"\[?[\w.-]+\.py:\d+\] "
)
_SIGN_RECORD_PREFIX = re.compile(
    r"^(?:\([\w.:-]+ pid=\d+[^)\n]{0,40}\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d "
    r"[\d:.]{8,15} \[?[\w.-]+\.py:\d+\]"
    r" +(?:Traceback \(most recent call last\):|File \")",
    re.MULTILINE,
)
_MIN_RECORD_LINES = 3
_ZONE = re.compile(r"[+-]\d\d:?\d\d$")
_MAX_WRAP_PIECES = 64
# A first line cut inside its header: its first token at least this long (holding a
# digit: a pid, a time) and the next few characters (a device, a level), found in one of
# the next lines, no further in than a header is long.
_MIN_CUT_TOKEN = 6
# A paste pasted twice: the distinct lines of one copy, at least (one line over and over is
# a log's own repetition, a warning printed every minute).
_MIN_COPY_LINES = 2
# An NCCL line whose header the selection cut inside its source location ("77 NCCL WARN …",
# ":230 NCCL WARN …", "et.h:344 WARN …", of "graph/xml.h:77 NCCL WARN …"): what is left of
# "FILE:LINE", then the level.
_CUT_NCCL_SOURCE = re.compile(
    r"(?P<left>(?:[\w./-]*:)?(?P<line>\d+)) (?P<level>(?:NCCL )?(?:WARN|INFO) )"
)
# Python's OSError as printed ("FileNotFoundError: [Errno 2] No such file or directory: …"),
# its class name cut by the selection ("Error: [Errno 2] …", "rror: [Errno 2] …"), or the
# whole name cut, with or without its ": " (": [Errno 2] …", "[Errno 2] …"): CPython's
# OSError_str (Objects/exceptions.c) prints "[Errno %S] %S: %R" (and "… %R -> %R") where
# the error names files, and only an OSError prints that, so a line that starts with it is
# an OSError's message whatever its class name was (the class is restored from the errno).
_CUT_OS_ERROR = re.compile(
    r"(?P<left>[A-Za-z]*(?:: )?)\[Errno (?P<errno>\d{1,4})\] (?P<files>[^'\n]*?: ')?"
)
# NCCL prints __FILE__ as compiled from its src/ folder ("graph/xml.h").
_NCCL_SOURCE_ROOT = "src/"
# A day is every line's of that day: no process's identity (a time with its fraction is).
_BARE_DATE = re.compile(r"\d{4}-\d\d-\d\d|\d\d?/\d\d?(?:/\d{2,4})?")
# A source location ("rocessGroupNCCL.cpp:563]", the end of c10's "[E ProcessGroupNCCL.cpp:563]")
# is every rank's: it names the line of code, not the process that printed it.
_SOURCE_LOCATION = re.compile(r"[\w.-]*\.(?:cpp|cc|cu|cxx|c|h|hpp|py|rs|go):\d+\]?:?$")
_CUT_AGREE = 4
_CUT_LOOKAHEAD = 200
_MAX_HEAD = 48
# A cut first line of a wrapped paste, with the wrap's rest: lines tried together.
_MAX_CUT_PIECES = 3
# The most lines the restorations of the first line from the catalog count as changed:
# a cut body (the lines it joins) and a cut source location or exception class.
_FIRST_LINE_MOST = _MAX_CUT_PIECES + 1
_MIN_JOINS = 2
_SAME_CHARS = 10
_DIGITS = re.compile(r"\d+")
_SHAPE_CHARS = 20
_RUNS = re.compile(r"(x|\s)\1+")
_SHAPE_MARKS = 2
_CLASSES = str.maketrans("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "x" * 62)
# A tqdm bar cut inside its bar (tqdm/std.py: format_meter prints "{l_bar}{bar}{r_bar}",
# l_bar "{desc}: {percentage:3.0f}%|", r_bar "| {n_fmt}/{total_fmt} [{elapsed}<…]"; class
# Bar pads the bar to its width with its charsets' blank, UTF " ▏▎▍▌▋▊▉█", ASCII
# " 123456789#"): the piece ends after "NN%|" with no closing pipe, and its rest starts
# with more of the bar, up to the pipe before the counts (or the column's edge). That
# rest starts with the padding's spaces, which elsewhere are a format's own indentation.
_BAR_CHARS = " \u2588-\u258f#1-9"
_OPEN_BAR = re.compile(rf"\d%\|[{_BAR_CHARS}]*$")
_BAR_REST = re.compile(rf"[{_BAR_CHARS}]+$|[{_BAR_CHARS}]*\| ?(?:[\d.]+[kKMG]?/|$)")
# A tqdm bar's line closed by its counts ("| 0/23 [00:00<?, ?it/s]": tqdm's format_meter
# ends "{n}/{total} [{elapsed}<{remaining}, {rate}{postfix}]"): a whole line, printed so
# at each update where the output is no terminal, whatever room is left after it.
_BAR_CLOSED = re.compile(r"\| ?[\d.]+[kKMG]?/[\d.?]+[kKMG]? \[[\d:]+<[^\]]*\]$")
# What a record of its own starts with, so a line that starts so is no wrapped rest.
_NEW_RECORD = re.compile(
    r"""(?x)
    $ | \s{2} | \t                                  # blank; the format's own indentation
    | \[(?:rank|default|RANK|Rank)\s?\d+\]          # torch / torchrun prefixes
    | \[\d+,\d+\]<std | \(\w+\ pid=\d+ | \[\d+\]\    # mpirun, Ray, a numeric tag
    | \[\d+\]:\s*$                                  # an entry of torchrun's failure table
    | \[?\d{4}-\d\d-\d\d[T\ ]\d\d:\d\d              # ISO stamps
    | \[?[IWEF]\d{4}\ \d\d:\d\d:\d\d                # glog
    | \[[IWEF]\ [\w.]+:\d+\]                        # c10 without a time
    | [A-Z][a-z]{2}\ [\ \d]\d\ \d\d:\d\d:\d\d       # syslog, journald
    | \[\ *\+?\d+\.\d+\]                            # dmesg
    | \d\d/\d\d\ \d\d:\d\d:\d\d                     # mmengine
    | [A-Za-z0-9][\w.-]*:\d+:\d+\ \[\d+\]           # NCCL's host:pid:tid [dev]
    | \[pod/ | [\w.-]+-\d+\ +\|\                    # kubectl, docker compose
    | Traceback\ \( | During\ handling | The\ above\ exception
    | terminate\ called\                            # libstdc++'s terminate handler
    | File\ " | Thread\ (?:\d|0x) | Current\ thread | Process\ \d+: | Python\ v\d
    | \#\d+\ | frame\ \#\d+: | Exception\ raised\ from | Stack\ \(most
    | [A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit|Failure)(?::|$)
    | (?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\b
    | [=\-*#+|]{3}                                  # rules, tables, separators
    | \[>{3} | \[[>\ ]{8,}(?:\]|$)                   # mmcv's ProgressBar ('\r[{bar}] n/N, …')
    | \d{1,3}%\|                                     # tqdm's meter with no description
    """
)


@dataclass(frozen=True, slots=True)
class Unmangled:
    """The text with the paste's layers undone, and where each of its lines came from."""

    text: str
    line_map: tuple[int, ...]  # 1-based line of the given text, per line of ``text``
    undone: tuple[str, ...]  # what was undone, in words, for a note
    changed: int = 0  # lines of the given text that a layer was taken off
    lines: int = 0  # lines of the given text

    @property
    def whole(self) -> bool:
        """The layers were on most of the text: a paste mangled as a whole, not a log
        with a quoted line here and a coloured word there."""
        return self.changed >= _WHOLE_SHARE * self.lines

    def original_line(self, number: int) -> int:
        """The given file's line number of line ``number`` (1-based) of ``text``."""
        if 1 <= number <= len(self.line_map):
            return self.line_map[number - 1]
        return number


@dataclass(slots=True)
class _Lines:
    texts: list[str]
    origin: list[int]  # 1-based line of the given text
    code: list[bool]  # inside a fence: no Markdown emphasis there
    # while wraps are joined (``_rejoin_all``): each line's last piece as pasted, whose
    # length says where its line was broken (a joined line is longer than any pasted)
    tails: list[str] | None = None


def _quote_runs(lines: _Lines) -> int:
    """Remove the quote markers common to each run of quoted lines; how many lines."""
    texts = lines.texts
    changed = 0
    i = 0
    while i < len(texts):
        if not _QUOTE.match(texts[i]) or _REPL.match(texts[i]):
            i += 1
            continue
        j = i
        while j < len(texts) and _QUOTE.match(texts[j]) and not _REPL.match(texts[j]):
            j += 1
        if j - i >= _MIN_QUOTE_RUN or (i == 0 and j == len(texts)):
            # A quoted blank line is markers only (">", "> >"): it sets no depth.
            content = {k for k in range(i, j) if _unquoted(texts[k]).strip()}
            depth = min((_depth(texts[k]) for k in content), default=1)
            # ">text" quoting (no space after the marker) keeps the line's own spaces.
            tight = any(_TIGHT.match(texts[k]) for k in content) and not any(
                _SPACED.match(texts[k]) for k in content
            )
            marker = _BARE_QUOTE if tight else _QUOTE
            for k in range(i, j):
                if k not in content:
                    texts[k] = ""
                    continue
                for _ in range(depth):
                    m = marker.match(texts[k])
                    assert m is not None
                    texts[k] = texts[k][m.end() :]
            changed += j - i
        i = j
    return changed


# pytest's failure lines (_pytest/_code/code.py, FormattedExcinfo.get_exconly with markall):
# each line of the raised exception's text behind its ``fail_marker`` "E" and the failing
# source line's indentation less one column ("E       RuntimeError: …"; a blank line of the
# text is "E" and spaces, which an editor trims to "E"). A paste of a failed test's output
# holds the job's traceback (a spawned process's) only so: a prefix on every line of a run,
# like a quote's marker, not the job's own text.
_PYTEST_FAIL = re.compile(r"E(?: {3,}|[ ]*$)")
_SIGN_PYTEST_FAIL = re.compile(r"^E {3,}\S", re.MULTILINE)


def _pytest_fail_runs(lines: _Lines) -> int:
    """Remove pytest's "E" marker and the indentation common to each run of its failure
    lines (two or more, or the whole text); how many lines."""
    texts = lines.texts
    changed = 0
    i = 0
    while i < len(texts):
        if not _PYTEST_FAIL.match(texts[i]):
            i += 1
            continue
        j = i
        while j < len(texts) and _PYTEST_FAIL.match(texts[j]):
            j += 1
        content = [k for k in range(i, j) if texts[k][1:].strip()]
        if content and (j - i >= _MIN_QUOTE_RUN or (i == 0 and j == len(texts))):
            width = min(len(texts[k]) - len(texts[k][1:].lstrip(" ")) for k in content)
            for k in range(i, j):
                texts[k] = texts[k][width:] if k in content else ""
            changed += j - i
        i = j
    return changed


def _unquoted(text: str) -> str:
    while (m := _QUOTE.match(text)) is not None:
        text = text[m.end() :]
    return text


def _depth(text: str) -> int:
    depth = 0
    while (m := _QUOTE.match(text)) is not None:
        depth += 1
        text = text[m.end() :]
    return depth


def _margin(texts: list[str]) -> str:
    """The whitespace every non-blank line starts with."""
    common: str | None = None
    for text in texts:
        if not text.strip():
            continue
        lead = text[: len(text) - len(text.lstrip(" \t"))]
        if common is None:
            common = lead
        else:
            k = 0
            while k < len(common) and k < len(lead) and common[k] == lead[k]:
                k += 1
            common = common[:k]
        if not common:
            return ""
    return common or ""


def _is_code_margin(margin: str) -> bool:
    return "\t" in margin or len(margin) >= _CODE_MARGIN


def _strip_margin(texts: list[str], first: int, last: int, margin: str) -> None:
    for k in range(first, last):
        if texts[k].startswith(margin):
            texts[k] = texts[k][len(margin) :]
        elif not texts[k].strip():
            texts[k] = ""


def _indent_blocks(lines: _Lines) -> int:
    """Remove a code block's margin: the whole text's, else each block's that follows a
    blank line (or starts the text) and ends before a line at the left edge."""
    texts = lines.texts
    whole = _margin(texts)
    if _is_code_margin(whole):
        _strip_margin(texts, 0, len(texts), whole)
        return sum(1 for t in texts if t.strip())
    changed = 0
    i = 0
    while i < len(texts):
        starts_block = (i == 0 or not texts[i - 1].strip()) and texts[i][:1] in (" ", "\t")
        if not starts_block or not texts[i].strip():
            i += 1
            continue
        j = i
        while j < len(texts) and (not texts[j].strip() or texts[j][:1] in (" ", "\t")):
            j += 1
        margin = _margin(texts[i:j])
        if _is_code_margin(margin) and sum(1 for t in texts[i:j] if t.strip()) >= 2:
            _strip_margin(texts, i, j, margin)
            changed += j - i
        i = j
    return changed


def _emphasis(lines: _Lines) -> int:
    changed = 0
    for k, text in enumerate(lines.texts):
        if lines.code[k] or ("**" not in text and "`" not in text):
            continue
        new = _BOLD.sub(r"\1", text)
        new = _CODE_SPAN.sub(r"\1", new)
        if new != text:
            lines.texts[k] = new
            changed += 1
    return changed


def wrap_width(texts: list[str]) -> int | None:
    """The width a terminal wrapped these lines at, when they show one: at least two
    lines exactly as long as the longest, and more of them than lines a little shorter
    (a natural text's longest lines taper off; a wrapped one's pile up at the edge)."""
    lengths = Counter(map(len, texts))
    if not lengths:
        return None
    width = max(lengths)
    at_edge = lengths[width]
    if width < _MIN_WRAP_WIDTH or at_edge < 2:
        return None
    below = sum(lengths.get(n, 0) for n in range(width - 5, width))
    return width if at_edge > below else None


def _shape(text: str) -> str:
    """Runs of letters and digits as one mark (ids are hex, numbers have widths), runs of
    spaces as one (columns are padded), punctuation as it is."""
    return _RUNS.sub(r"\1", text.translate(_CLASSES))


def _same_shape(text: str, record: str) -> bool:
    """``text`` starts like ``record``: the next record of one template (a table's rows,
    a message repeated per rank), not a wrapped piece of the last. Alike are the same
    words with other numbers ("root   10  0.0" under "root    1  0.0"), or the same
    punctuation around other ids (a CSV's rows of hex UUIDs); a wrapped piece starts
    wherever the column fell, and shares neither with its line's start."""
    head = text[:_SAME_CHARS]
    if len(head) == _SAME_CHARS and _DIGITS.sub("0", head) == _DIGITS.sub(
        "0", record[:_SAME_CHARS]
    ):
        return True
    shape = _shape(text[:_SHAPE_CHARS])
    marks = len(shape) - shape.count("x") - shape.count(" ")  # words are any words
    return (
        len(text) >= _SHAPE_CHARS
        and marks >= _SHAPE_MARKS
        and shape == _shape(record[:_SHAPE_CHARS])
    )


# An exception's type cut by the edge: what is left of its name starts lower-case with no
# module path before it ("Ru" / "ntimeError: …"), which no class name does (PEP 8's
# CapWords; a qualified name starts with its module, "torch.distributed.DistBackendError").
_CUT_EXCEPTION_NAME = re.compile(r"[a-z][A-Za-z0-9_]*(?:Error|Exception|Warning|Interrupt):")


def _header_only(record: str) -> bool:
    """``record`` is a line's header and nothing of its body (a logger's, a launcher's
    prefix, the body's own indentation): no line is printed so, so a piece that ends
    there was cut by the edge, and the next line is its body whatever it starts like
    (vLLM's V1 worker prefix and logger header are 80 columns wide before a traceback
    line's indentation: a terminal 80 wide cuts each such line right after them)."""
    if _STAMP_ALONE.fullmatch(record.strip()):
        return True
    # (a wrap at word boundaries drops the space it broke at, which ends a header)
    tag = peel_line(record if record.endswith(" ") else f"{record} ")
    return tag.tagged and not tag.text.strip()


def _continues(text: str, record: str) -> bool:
    """``text`` may be the wrapped rest of ``record``: it starts no record of its own
    (a py-spy frame is one, indented or not), or it goes on with a tqdm bar ``record``
    leaves open (``_OPEN_BAR``), or ``record`` is a header alone (``_header_only``)."""
    if _OPEN_BAR.search(record) and _BAR_REST.match(text):
        return True
    if text and record.strip() and _header_only(record):
        return True
    if record[-1:].isalpha() and _CUT_EXCEPTION_NAME.match(text):
        return True
    if _LEVEL_PENDING.search(record) and _PENDING_LEVEL.match(text):
        return True
    return (
        not _NEW_RECORD.match(text)
        and not _same_lead(text, record)
        and not _same_shape(text, record)
        and not (text.endswith(")") and PYSPY_FRAME.match(text))
    )


# A line's leading name and colon, as a launcher or a shell tags each line of a stream
# ("worker-1: ", pdsh's "node3: ", "11: "): a wrapped piece does not repeat its line's tag.
_LEADING_NAME = re.compile(r"[A-Za-z0-9][\w.@-]{0,63}:(?= )")


def _same_lead(text: str, record: str) -> bool:
    """``text`` starts with the tag ``record`` starts with: the stream's next line, not a
    piece of ``record`` (a paste that prints one long line thrice shows a spike of lengths
    at its edge, which is no terminal's width)."""
    lead = _LEADING_NAME.match(_unemphasised(text))
    return lead is not None and _unemphasised(record).startswith(lead.group())


def _cut_at_edge(piece: str, rest: str, after: str | None = None) -> bool:
    """The boundary between a piece at the edge and the next line is a column's cut: the
    piece ends inside a word, a path or a key, or the next line goes on with a lower-case
    word after the space the column fell on (kept on either side of the cut), or with
    closing punctuation, or with the level an NCCL header leaves pending. A traceback's
    frame line is whole unless its function's name goes on in ``rest`` with the frame's
    source line ``after`` it (``_frame_name_cut``)."""
    if not piece or not rest:
        return False
    if _FRAME_LINE.match(piece):
        return _frame_name_cut(piece, rest, after)
    if _LEVEL_PENDING.search(piece) and _PENDING_LEVEL.match(rest):
        return True
    if _NAMED_LINE.match(rest):
        return False
    last = piece[-1]
    if last.isalnum() or last == "_":
        return bool(_CUT_WORD.match(rest) or _CUT_SPACE.match(rest) or _CUT_CLOSE.match(rest))
    if last in _PATH_MARKS:
        # after a name ("output/", "dtype="), not a rule of dashes
        return len(piece) > 1 and (piece[-2].isalnum() or piece[-2] in "._") and rest[0].isalnum()
    if last in "':,":
        return bool(_CUT_SPACE.match(rest) or _CUT_CLOSE.match(rest))
    if last == " ":
        # the column fell just after a space ("… while rank 1 " / "is all-gathering …"):
        # a lower-case word goes on with the sentence
        return rest[0].islower()
    return bool(_CUT_CLOSE.match(rest))


def _frame_name_cut(piece: str, rest: str, after: str | None) -> bool:
    """A frame line at the edge whose function's name the column cut: ``rest`` is a name's
    end and nothing else, and ``after`` it comes the frame's source line, indented deeper
    than the frame (CPython's traceback prints it four spaces in, the frame two), so the
    rest is no source line of its own."""
    if after is None or not _NAME_REST.match(rest) or not after.strip():
        return False
    margin = len(piece) - len(piece.lstrip())
    return len(after) - len(after.lstrip()) > margin and not _FRAME_LINE.match(after)


def _first_word(text: str) -> str:
    return _DIGITS.sub("0", text.split(" ", 1)[0])


class _LineStarts:
    """How many lines start with each first word (numbers as one): a line that starts
    like another line of the text is a record of a template ("rank=0 starting epoch 0"
    under "rank=3 loaded shard with 4000 records"), not a piece a column cut off, which
    starts wherever the column fell. Counted once, when a lone wrap is first tried."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self._counts: Counter[str] | None = None

    def shared(self, text: str) -> bool:
        if self._counts is None:
            self._counts = Counter(_first_word(t) for t in self.texts if t)
        return self._counts[_first_word(text)] > 1


def _lone_width(texts: list[str]) -> int | None:
    """The width of a wrap that shows no spike: the text's longest length, where a line
    of that length ends as a column cuts (``_cut_at_edge``) and its next line starts no
    record of its own."""
    width = max(map(len, texts), default=0)
    if not _MIN_WRAP_WIDTH <= width <= _MAX_LONE_WIDTH:
        return None
    starts = _LineStarts(texts)
    for k, text in enumerate(texts[:-1]):
        if len(text) == width and _lone_joins(text, texts[k + 1], text, starts, _at(texts, k + 2)):
            return width
    return None


def _at(texts: list[str], k: int) -> str | None:
    return texts[k] if k < len(texts) else None


def _lone_joins(piece: str, rest: str, record: str, starts: _LineStarts, after: str | None) -> bool:
    """``rest`` is the wrapped rest of ``piece`` (the last piece of ``record``), in a text
    that shows no wrap width; ``after`` is the line after ``rest``."""
    return _continues(rest, record) and _cut_at_edge(piece, rest, after) and not starts.shared(rest)


def _first_word_length(text: str) -> int:
    at = text.find(" ")
    return len(text) if at < 0 else at


def _word_break(piece: str, rest: str, width: int) -> bool | None:
    """Whether the boundary between ``piece`` and the next line ``rest`` is where a wrap at
    word boundaries (``width`` columns) broke a line: the next word would not have fit
    (a greedy wrap breaks a line only then). None where the pair says nothing: a blank
    line, a rest that starts indented (the wrap drops the space it breaks at) or far from
    the edge, where the next word would have fit with room to spare; a frame line, a row
    of a drawn table, and a rest that starts with a name and ": " are whole lines."""
    # the next word needs a space before it; ``fold -s`` keeps the space on the piece, and
    # breaks where the space after the next word would pass the edge: the same count
    room = width - len(piece) - 1
    if room < 0 and piece.endswith(" ") and rest.startswith(" ") and piece.strip():
        return True  # a run of spaces across the edge (a tqdm bar's padding), cut there
    if not rest[:1].strip() or not piece.strip():
        return None
    broke = _first_word_length(rest) > room
    if (not broke and room >= _WORD_NEAR_EDGE) or (
        _FRAME_LINE.match(piece)
        or _FRAME_LINE_END.search(piece)
        or (_RULE.fullmatch(piece) and not rest.startswith(piece.strip()[:1]))
        or _TABLE_ROW_DRAWN.match(piece)
        or _BAR_CLOSED.search(piece)
        or _NAMED_LINE.match(_unemphasised(rest))
    ):
        return None  # lengths first: most pairs of a long text say nothing
    return broke


def _unemphasised(rest: str) -> str:
    """A line's start without the Markdown emphasis markers left on it ("**", "`": where no
    span pairs them, or inside a fence, which keeps them): a bolded line that starts a
    record of its own still starts one."""
    return rest.lstrip("*`")


def _word_width(texts: list[str]) -> int | None:
    """The width a wrap at word boundaries broke these lines at, when they show one (a soft
    wrap an issue tracker, a mail client or an editor turned into line breaks): the lines
    break at spaces, so no length piles up at the edge as a terminal's does. What shows it
    is where the lines end: at least two lines, each followed by the rest of its record,
    end short of that length because the next word would not fit (a terminal's wrap cuts
    at the edge, never short of it), more of them than end at the edge itself (where a
    terminal's wrap, wrapped again, puts most of its pieces; a word wrap only the pieces
    whose next space fell on the column), and fewer lines near that edge end although it would
    (a text's own lines end where their sentence or record ends, whatever room is left).
    A frame line ends with its function, and a rest that starts with a name and ": " is
    an exception's or a library's message: neither is a break. Nor is a piece at the edge
    with no space after its margin: a word longer than the line (a path, a URL), which
    either wrap cuts at the column, says nothing of which wrap it was; so a word wrap of
    long paths, whose cut pieces pile up at the edge as a terminal's do, is still one."""
    width = max(map(len, texts), default=0)
    if not _MIN_WORD_WIDTH <= width <= _MAX_LONE_WIDTH:
        return None
    breaks = fits = 0
    # a piece counts once, at the edge or short of it: one message printed thrice and
    # broken alike is one place a wrap fell
    at_edge: set[str] = set()
    short_of_edge: set[str] = set()
    for k in range(len(texts) - 1):
        if _long_word_cut(texts[k], width):
            continue
        found = _word_break(texts[k], texts[k + 1], width)
        if found is None or not _continues(_unemphasised(texts[k + 1]), texts[k]):
            continue
        if found:
            breaks += 1
            (short_of_edge if len(texts[k]) < width else at_edge).add(texts[k])
        else:
            fits += 1
    short, edge = len(short_of_edge), len(at_edge)
    return width if short >= _MIN_JOINS and short > edge and breaks > fits else None


def _word_joins(piece: str, rest: str, record: str, width: int) -> bool:
    if (
        rest.strip()
        and piece.strip()
        and (len(piece) >= width - 1 or _first_word_length(rest.lstrip()) > width - len(piece) - 1)
        and _header_only(record)
    ):
        return True  # a header alone at the edge: its body went on (``_header_only``)
    return bool(_word_break(piece, rest, width)) and _continues(_unemphasised(rest), record)


def _long_word_cut(piece: str, width: int) -> bool:
    """``piece`` is a word longer than the line, cut at the column (at the width, no space
    after its margin): a wrap at word boundaries cuts it so, as a terminal does."""
    return len(piece) == width and " " not in piece.lstrip(" ")


def _word_glue(piece: str, width: int, rest: str = "", record: str = "") -> str:
    """What the wrap took out between ``piece`` and its rest: the space it broke at, none
    where the piece kept it, or where a word longer than the line was cut at the column
    (``_long_word_cut``), unless the rest goes on after a space all the same: a whole
    word as long as the longest line (the width may be wider than any line) followed by
    the next, shown as ``_column_glue`` shows it (a frame line, a seam of two words)."""
    if piece.endswith(" "):
        return ""
    if _long_word_cut(piece, width):
        spaced = _spaced_shape(record, rest) or _word_seam(piece, rest, None)
        return " " if spaced else ""
    return " "


def _rejoin_words(lines: _Lines, width: int) -> int:
    """Join the pieces of lines a wrap at word boundaries broke at ``width``: the space it
    broke at goes back between them."""
    return _join_pieces(
        lines,
        lambda k, text: _word_joins(lines.texts[k - 1], lines.texts[k], text, width),
        lambda k, text: _word_glue(lines.texts[k - 1], width, lines.texts[k], text),
    )


def _column_glue(text: str, rest: str, known: _KnownWords | None = None) -> str:
    """What goes between a piece a column cut and its rest: nothing (a terminal's wrap
    cuts at the column whatever it cuts, the space kept on one side where it fell on
    one), or the space a wrap at word boundaries dropped, where the lengths showed no wrap
    of either kind for sure and neither side of the boundary holds a space: a library's
    message then decides, the catalog row that the line joined with a space is (and
    joined without one is not, or only a less specific row: "… is all-gathering 1" /
    "parameters while …", "… pair.cc:534] Connection" / "closed by peer …"). Before the
    catalog, two things show a space was dropped: the line joined with it is a record of
    a known shape that joined without it is not (``_spaced_shape``: a traceback's frame,
    an NCCL header and its level), or the boundary is a seam between two words, not a cut
    inside one (``_word_seam``: "barrier on" / "rank: 0", "invalid" / "usage")."""
    if not text or not rest or text[-1].isspace() or rest[0].isspace():
        return ""
    if text[-1].isdigit() and rest[0].isdigit():
        return ""  # a number the column cut
    if _spaced_shape(text, rest) or _word_seam(text, rest, known):
        return " "
    if _recognised_only_spaced(text, rest):
        return " "
    spaced = default_matcher().match(f"{text} {rest}")
    if spaced is None or not spaced.start < len(text) < spaced.end - 1:
        return ""  # no message, or none that the boundary falls inside
    glued = default_matcher().match(text + rest)
    return " " if glued is None or glued.row.specificity < spaced.row.specificity else ""


# A traceback's frame line, where a prefix may stand before it ("[rank1]:   File …") and
# faulthandler's form ("line 4 in f") as well as CPython's ("line 4, in f").
_FRAME_ANYWHERE = re.compile(r'(?:^|[\s:])File "[^"]+", line \d+,? in \S')
# CPython's OSError.__str__ (Objects/exceptions.c OSError_str) with its file names:
# "[Errno %S] %S: %R" and "[Errno %S] %S: %R -> %R"; without them it is "[Errno %S] %S",
# so a piece that ends before a file name is a whole message of another form.
_OS_ERROR_FILES = re.compile(r"\[Errno -?\d+\] [^'\"]*?: '[^']*'(?: -> '[^']*')?$")
_SHAPES = (_FRAME_ANYWHERE, _OS_ERROR_FILES)
_LETTERS_END = re.compile(r"(?<![A-Za-z0-9_])(?:[A-Za-z]{2,}|\d+)$")
_LETTERS_START = re.compile(r"[A-Za-z]{2,}(?![A-Za-z0-9_])")
_MIN_SEAM_WORD = 4  # after a number, a word at least this long ("128" / "params")
_SHORT_WORD = 3  # a word this short is a word of a seam where many messages print it
_SHORT_WORD_ROWS = 100


@functools.cache
def _catalog_words() -> tuple[frozenset[str], frozenset[str]]:
    """Every word the catalog's messages print as a word of its own (two letters or more;
    a word glued to a slot, "%sms", prints as part of another), in lower case, but a
    short one only where it is a word of many messages (a function word, "on", "an",
    "in"; a prefix a column cut off, "de" / "tokenizer", "re" / "try", is in a few); and
    those with no capital inside them, in lower case ("ProcessGroup" is a name, and says
    nothing of whether "process" / "group" is one word)."""
    words: set[str] = set()
    rows: Counter[str] = Counter()
    for row in default_matcher().catalog.rows:
        printed: set[str] = set()
        parts = row.parts
        for index, part in enumerate(parts):
            if not isinstance(part, str):
                continue
            for m in re.finditer(r"[A-Za-z]{2,}", part):
                glued_left = m.start() == 0 and index > 0 and not isinstance(parts[index - 1], str)
                glued_right = (
                    m.end() == len(part)
                    and index + 1 < len(parts)
                    and not isinstance(parts[index + 1], str)
                )
                if not glued_left and not glued_right:
                    words.add(m.group())
                    printed.add(m.group().lower())
        rows.update(printed)
    common = frozenset(w for w, n in rows.items() if len(w) > _SHORT_WORD or n >= _SHORT_WORD_ROWS)
    plain = frozenset(w.lower() for w in words if not any(c.isupper() for c in w[1:]))
    return common, plain


class _KnownWords:
    """The words of a text, as printed (a word a column cut in two is printed whole
    elsewhere as often as not). Counted on first use."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self._own: frozenset[str] | None = None

    def whole(self, word: str) -> bool:
        """``word`` is printed so elsewhere in the text."""
        if self._own is None:
            self._own = frozenset(w for t in self.texts for w in re.findall(r"[A-Za-z]{2,}", t))
        return word in self._own


def _word_seam(text: str, rest: str, known: _KnownWords | None) -> bool:
    """The boundary between ``text`` and ``rest`` (no space on either side) lies between
    two words, where a wrap at word boundaries dropped a space, not inside one word that a
    column cut: the word ``text`` ends with and the one ``rest`` starts with are each a
    word the catalog prints, and the two run together are no word of the catalog's or the
    text's ("barrier on" / "rank: 0"; "subproc" / "ess" is a word cut, and so is "time" /
    "out"). A number before a word is a seam too ("128" / "params"); a capital after a
    lower-case letter may be a CamelCase name's hump, which a column cuts: no seam."""
    end = _LETTERS_END.search(text)
    start = _LETTERS_START.match(rest)
    if end is None or start is None:
        return False
    left, right = end.group(), start.group()
    if left[-1].islower() and right[0].isupper():
        return False
    vocabulary, plain = _catalog_words()
    if right.lower() not in vocabulary:
        return False
    if left.isdigit():
        return len(right) >= _MIN_SEAM_WORD  # a unit glued to its number is shorter
    if left.lower() not in vocabulary:
        return False
    glued = left + right
    return not (glued.lower() in plain or (known is not None and known.whole(glued)))


def _spaced_shape(text: str, rest: str) -> bool:
    """Joined with a space, ``text`` and ``rest`` make a record of a known shape that
    neither is alone, nor the two joined without it: a traceback's frame line (a path
    too long for the line broke it after ``File``, or the number after ``line``), an
    OSError's message with its file names (``_OS_ERROR_FILES``), or an NCCL header whose
    level (``NCCL`` / ``WARN …``) or message (``NCCL WARN`` / ``Cuda failure …``) went on."""
    if text.endswith(" ") or rest.startswith(" "):
        return False
    if _LEVEL_PENDING.search(text) and _PENDING_LEVEL.match(rest):
        return True
    if _LEVEL_ALONE.search(text):
        return True  # NCCL prints no level without its message (debug.cc)
    spaced, glued = f"{text} {rest}", text + rest
    return any(
        shape.search(spaced) and not shape.search(text) and not shape.search(glued)
        for shape in _SHAPES
    )


def _catalog_spans(record: str, rest: str) -> bool:
    """Joined with a space, ``record`` and ``rest`` hold a library's message that neither
    holds alone: the catalog's most specific row for the joined line goes on across the
    boundary, has literal words before it, matches neither side by itself, and is more
    specific than any row the record matches alone (a message printed on one line is
    printed so whole; broken, its pieces are each short of the row: "Failed: Cuda error
    FILE:LINE" / "'peer access is not supported …'")."""
    joined = f"{record} {rest}"
    found = default_matcher().match(joined)
    boundary = len(record)
    if found is None or not found.start < boundary < found.end - 1:
        return False
    row = found.row
    if row.pattern.search(record) or row.pattern.search(rest):
        return False
    if not set(_WORD_RUNS.findall(joined[found.start : boundary])) & row.words:
        return False  # the message starts in the record, not in a slot's text
    alone = default_matcher().match(record)
    return alone is None or alone.row.specificity < row.specificity


_WORD_RUNS = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
_OPENERS = {"[": "]", "(": ")", "{": "}"}
_CLOSERS = frozenset(_OPENERS.values())


def _spaced_seam(piece: str, rest: str) -> bool:
    """Not inside a run of letters and digits, or at a seam of two words there
    (``_word_seam``): where a word wrap may have broken, not only a column."""
    return not (piece[-1:].isalnum() and rest[:1].isalnum()) or _word_seam(piece, rest, None)


def _brackets_span(piece: str, rest: str) -> bool:
    """A bracket ``piece`` leaves open is the first one ``rest`` closes ("[PG ID 2 PG GUID
    3" / "Rank 14] Process group …"): one bracketed field across the boundary, which a
    record prints on one line (a call's arguments that go on under it are indented, and
    no rest of a wrap at word boundaries is)."""
    left: list[str] = []
    for char in piece:
        if char in _OPENERS:
            left.append(char)
        elif char in _CLOSERS and left and _OPENERS[left[-1]] == char:
            left.pop()
    if not left:
        return False
    depth = 0
    for char in rest:
        if char in _OPENERS:
            depth += 1
        elif char in _CLOSERS:
            if depth == 0:
                return char == _OPENERS[left[-1]]
            depth -= 1
    return False


def _recognised_only_spaced(text: str, rest: str) -> bool:
    """The log readers recognise the line joined with a space and not joined without one
    ("… key: store_based_barrier_key:1" / "(world_size=8, …"; "… has inconsistent" /
    "399 params."): the space was a wrap's at word boundaries, which the lengths did not
    show (one message printed many times, broken alike, piles its pieces at one edge)."""
    return recognise_line(f"{text} {rest}") is not None and recognise_line(text + rest) is None


def _hit_facts(hit: Hit) -> tuple[object, ...]:
    """What a recognised line says: who it is of or about (its rank, process, host, and
    those it names), then each field its payload read."""
    payload = hit.payload
    fields = (
        tuple(getattr(payload, f.name) for f in dataclasses.fields(payload))
        if dataclasses.is_dataclass(payload)
        else ()
    )
    return (
        hit.rank, hit.pid, hit.host, hit.named_local_rank, hit.named_pid, hit.named_host,
        type(payload), *fields,
    )  # fmt: skip


def _says_more(alone: tuple[object, ...], joined: tuple[object, ...]) -> bool:
    """``joined`` keeps every fact ``alone`` read and reads at least one it lacked (a
    worker's local rank, a collective's op type): not the same facts with other text."""
    if len(alone) != len(joined):
        return False
    gained = False
    for old, new in zip(alone, joined, strict=True):
        if old in (None, "", ()) or (isinstance(old, (list, dict)) and not old):
            gained = gained or new not in (None, "", ())
        elif old != new:
            return False
    return gained


def _recognised_join(record: str, rest: str) -> bool:
    """Joined with a space, ``record`` and ``rest`` make a line the log readers recognise
    (parsers/logs: a launcher's report of a worker's death, torch's store barrier), and
    ``rest`` alone is none, and ``record`` alone is none or the same message reading less
    (a worker's exit code without the local rank the rest names, a collectives' mismatch
    without the op type), never other text in a fact it read."""
    joined = recognise_line(f"{record} {rest}")
    if joined is None or recognise_line(rest) is not None:
        return False
    alone = recognise_line(record)
    if alone is None:
        return True
    # the same message, to which the rest adds what the record lacks
    return alone.kind is joined.kind and _says_more(_hit_facts(alone), _hit_facts(joined))


def _shape_joins_next(
    piece: str, rest: str, record: str, longest: int, after: str | None = None
) -> bool:
    """``rest`` is the rest of ``record`` (whose last piece is ``piece``), broken where a
    wrap at word boundaries broke it, shown by what the joined line is rather than by the
    lengths (a one-line paste broken once or twice shows no width; a message printed
    thrice and broken alike shows one break): the next word would not have fit on a line
    as long as the text's longest, ``rest`` starts no record of its own, and joined with
    the space the wrap dropped the two make a record of a known shape that ``record``
    alone is not (``_spaced_shape``, ``_catalog_spans``)."""
    if not _may_break(piece, rest, record, longest):
        return False
    if _long_word_cut(piece, longest):
        # a word longer than the line, cut at the column: the rest goes on without a space
        glued = record + rest
        return any(s.search(glued) and not s.search(record) for s in _SHAPES)
    if (
        _spaced_shape(record, rest)
        or _header_only(record)
        or (_brackets_span(piece, rest) and _spaced_seam(piece, rest))
        or _catalog_spans(record, rest)
        or _recognised_join(record, rest)
    ):
        return True
    # a record broken twice: the shape shows once its third piece is on too
    return (
        after is not None
        and _may_break(rest, after, f"{record} {rest}", longest)
        and (
            _spaced_shape(record, f"{rest} {after}")
            or _catalog_spans(record, f"{rest} {after}")
            or _recognised_join(record, f"{rest} {after}")
        )
    )


def _may_break(piece: str, rest: str, record: str, longest: int) -> bool:
    """The boundary between ``piece`` and ``rest`` may be a wrap's at word boundaries: no
    space on either side (the wrap dropped it), the next word would not have fit on a
    line as long as the text's longest, and ``rest`` starts no record of its own."""
    if not piece.strip() or not rest[:1].strip() or piece.endswith(" ") or _RULE.fullmatch(piece):
        return False
    if len(piece) > longest or len(piece) + 1 + _first_word_length(rest) <= max(
        longest, _MIN_WORD_WIDTH
    ):
        # longer than any line pasted: pieces a wrap joined, which ended where they ended;
        # or the next word would have fit (on the longest line, or on a line as wide as a
        # wrap at word boundaries ever is): the line ended there
        return False
    return _continues(_unemphasised(rest), record)


def _shape_joins(lines: _Lines, longest: int) -> int:
    """Join the breaks of a wrap at word boundaries that the lengths do not show, each
    where the joined line is a record of a known shape (``_shape_joins_next``), with the
    space the wrap dropped."""
    if longest > _MAX_LONE_WIDTH:
        return 0  # no wrap at word boundaries leaves a line this long
    old = lines.texts
    tails = lines.tails if lines.tails is not None else old
    return _join_pieces(
        lines,
        lambda k, text: _shape_joins_next(tails[k - 1], old[k], text, longest, _at(old, k + 1)),
        lambda k, text: _shape_glue(tails[k - 1], old[k], text, longest),
    )


def _shape_glue(piece: str, rest: str, record: str, longest: int) -> str:
    """The space a wrap at word boundaries dropped; but a piece as long as the longest
    line that ends inside a run of letters and digits the rest goes on with, where no
    shape or seam of two words shows a space, is a column's cut ("…/lib/python" /
    "3.10/site-packages/…"): nothing goes between."""
    if _long_word_cut(piece, longest):
        return ""
    if (
        len(piece) == longest
        and piece[-1:].isalnum()
        and rest[:1].isalnum()
        and _column_glue(record, rest) == ""
    ):
        return ""
    return " "


def _shape_breaks(texts: list[str]) -> bool:
    """Cheap: a break ``_shape_joins`` would join."""
    longest = max(map(len, texts), default=0)
    return longest <= _MAX_LONE_WIDTH and any(
        _shape_joins_next(texts[k], texts[k + 1], texts[k], longest, _at(texts, k + 2))
        for k in range(len(texts) - 1)
    )


def _join_pieces(
    lines: _Lines,
    joins_next: Callable[[int, str], bool],
    glue: Callable[[int, str], str] = lambda _k, _text: "",
) -> int:
    """Join each line with the pieces after it while ``joins_next(k, joined so far)`` says
    line ``k`` goes on the line before it (at most ``_MAX_WRAP_PIECES`` pieces), with
    ``glue(k, joined so far)`` between them; the joined line keeps its first piece's origin.
    Both wraps, at a column and at word boundaries, join this way."""
    old = lines.texts
    old_tails = lines.tails
    texts, origin, code, tails = [], [], [], []
    joins = 0
    i = 0
    while i < len(old):
        text = old[i]
        pieces = 1
        # the joined line ends with a piece bolded whole ("**…NCC**" / "L version …"): the
        # reporter bolded the line as the wrap showed it, so its marks close the joined line
        bolded = not lines.code[i] and _WHOLE_BOLD.fullmatch(text) is not None
        while i + pieces < len(old) and pieces < _MAX_WRAP_PIECES and joins_next(i + pieces, text):
            piece = old[i + pieces]
            if bolded:
                core = text.rstrip()
                base = core[:-2] + text[len(core) :]  # without the closing marks
                inner = base + glue(i + pieces, base) + piece
                body = inner.rstrip()
                text = f"{body}**{inner[len(body) :]}"
            else:
                text += glue(i + pieces, text) + piece
                bolded = not lines.code[i] and _WHOLE_BOLD.fullmatch(piece) is not None
            pieces += 1
        texts.append(text)
        origin.append(lines.origin[i])
        code.append(lines.code[i])
        if old_tails is not None:
            tails.append(old_tails[i + pieces - 1])
        joins += pieces - 1
        i += pieces
    lines.texts, lines.origin, lines.code = texts, origin, code
    lines.tails = tails if old_tails is not None else None
    return joins


def _plain(text: str) -> str:
    """A line without the Markdown emphasis around its words (as ``_emphasis`` takes it off)."""
    if "**" not in text and "`" not in text:
        return text
    return _CODE_SPAN.sub(r"\1", _BOLD.sub(r"\1", text))


def _spike(texts: list[str], lengths: list[int], nested: bool) -> tuple[int | None, int]:
    """The width a spike of ``lengths`` (those of ``texts``, or of the lines they stand for)
    shows, and how many lines at it go on on the next line; None where fewer than
    ``_MIN_JOINS`` do (rows of one template at one width, not a wrap)."""
    width = wrap_width(texts)
    if width is None:
        return None, 0
    joinable = [
        texts[k]
        for k in range(len(texts) - 1)
        if lengths[k] == width and _continues(texts[k + 1], texts[k])
    ]
    count = len(set(joinable) if nested else joinable)
    return (width, count) if count >= _MIN_JOINS else (None, 0)


def _rejoin(
    lines: _Lines, nested: bool = False, words: bool = True, spike_only: bool = False
) -> tuple[int, str | None]:
    """Join the pieces of hard-wrapped lines; (joins made, width in words). Where the
    lengths show no wrap width (a spike at the edge), a wrap at word boundaries is looked
    for (``_word_width``); where none shows either, a line at the text's longest length is
    joined to the next only where their boundary shows a column's cut. In a ``nested``
    pass (a wrap inside a wrap already joined) the lines of a spike must differ: a message
    printed twice and joined twice is no width. ``words``: a wrap at word boundaries may
    still be found (one per round: its joined lines are no second wrap's pieces).
    ``spike_only``: only a wrap whose width shows as a spike is joined (the others are
    measured once Markdown's emphasis is gone)."""
    old = lines.texts
    lengths = [len(text) for text in old]
    width, joinable_count = _spike(old, lengths, nested)
    if spike_only:
        # Before Markdown's emphasis is taken off: the marks a reporter added widen the
        # lines they mark ("**…**" around a whole line, backticks around a name), so the
        # width may show only on the lines without them; the job's own backticks ("use
        # `--gpu_ids`") were wrapped with its text, so the lines as they are stand where
        # they show as many pieces.
        plain = [text if lines.code[k] else _plain(text) for k, text in enumerate(old)]
        plain_lengths = [len(text) for text in plain]
        if plain_lengths != lengths:
            plain_width, plain_count = _spike(plain, plain_lengths, nested)
            if plain_width is not None and plain_count > joinable_count:
                width, lengths = plain_width, plain_lengths
    evidence_needed = False
    if width is None and spike_only:
        return 0, None
    # A spike may be a word wrap's too, where long words cut at the column pile up at the
    # edge; lines that end short of it because the next word would not fit are no
    # terminal's (``_word_width``), and its pieces are joined with the spaces it dropped.
    if words and (soft := _word_width(old)) is not None and width in (None, soft):
        joins = _rejoin_words(lines, soft)
        return joins, f"a wrap at word boundaries at {soft} columns"
    starts = _LineStarts(old)
    if width is None:
        width = _lone_width(old)
        evidence_needed = True
    if width is None:
        return 0, None
    at_edge = width

    def joins_next(k: int, text: str) -> bool:
        if lengths[k - 1] != at_edge:
            return False
        if evidence_needed:
            return _lone_joins(old[k - 1], old[k], text, starts, _at(old, k + 1))
        return _continues(old[k], text)

    known = _KnownWords(old)
    joins = _join_pieces(lines, joins_next, lambda k, text: _column_glue(text, old[k], known))
    return joins, f"a hard wrap at {width} columns"


def _rejoin_all(
    lines: _Lines, nested: bool = False, spike_only: bool = False, longest: int | None = None
) -> tuple[int, list[str]]:
    """Join wraps until none is left: a paste copied from a wide terminal, then from a
    narrow one, holds a wrap inside a wrap (once the narrow one's pieces are joined, the
    wide one's lines are at their own edge); then the breaks of a wrap at word boundaries
    that only the records they break show (``_shape_joins``), measured against
    ``longest``, the longest line as pasted (before any join)."""
    total, widths = 0, list[str]()
    words = True
    if longest is None:
        longest = max(map(len, lines.texts), default=0)
    lines.tails = list(lines.texts)
    while True:
        joins, width = _rejoin(
            lines, nested=nested or bool(widths), words=words, spike_only=spike_only
        )
        if not joins or width is None:
            if not spike_only and (shaped := _shape_joins(lines, longest)):
                total += shaped
                widths.append("breaks at word boundaries inside a record of a known shape")
            lines.tails = None
            return total, widths
        total += joins
        widths.append(width)
        words = words and "word" not in width


# A log shipper's stamp on a line (kubectl's and docker's ``--timestamps``, RFC 3339 with
# "Z"; CloudWatch's once its stream name is gone, with "+00:00"; journald's short format,
# "May 01 10:00:00 HOST IDENT[PID]: "), and the one space after it: what the job printed
# starts there, its own indentation included.
_SHIPPER_STAMP = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d) "
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? [\w.-]{1,64} [\w.@/-]{1,64}\[\d+\]: "
)


def _rejoin_under_stamps(
    lines: _Lines, nested: bool = False, spike_only: bool = False
) -> tuple[int, list[str]]:
    """Join the pieces of a wrap that lies under a shipper's stamps: a paste wrapped (by a
    terminal, an editor) before a log shipper stamped each of its lines, pieces included.
    Each piece's rest then starts with a stamp, a record of its own to ``_continues``, and
    stamps of varying length (journald's host and pid) blur the width's spike; so where a
    stamp starts most non-blank lines, the wrap is looked for on the lines without their
    stamps, as the job printed them, and a joined line keeps its first piece's stamp (its
    rests' are dropped: the shipper stamped one line's pieces alike)."""
    heads = [m.group() if (m := _SHIPPER_STAMP.match(t)) else "" for t in lines.texts]
    meaningful = sum(1 for t in lines.texts if t.strip())
    stamped = sum(1 for h in heads if h)
    if stamped < _MIN_STREAM_LINES or stamped < _STREAM_SHARE * meaningful:
        return 0, []
    rests = _Lines(
        [t[len(h) :] for t, h in zip(lines.texts, heads, strict=True)],
        list(lines.origin),
        list(lines.code),
    )
    head_of = dict(zip(lines.origin, heads, strict=True))
    joins, widths = _rejoin_all(rests, nested=nested, spike_only=spike_only)
    if not joins:
        return 0, []
    lines.texts = [head_of.get(o, "") + t for o, t in zip(rests.origin, rests.texts, strict=True)]
    lines.origin, lines.code = rests.origin, rests.code
    return joins, [f"{w} under the log shipper's stamps" for w in widths]


def _tag_family(texts: list[str]) -> frozenset[str]:
    """The tags (``rank``, torchrun's role ``default`` …) the text's lines carry, at their
    starts or written into another's, several times."""
    counts = Counter(m.group(1) for t in texts if "]:" in t for m in _LINE_TAG.finditer(t))
    return frozenset(name for name, n in counts.items() if n >= _MIN_TAGGED)


def _tags_end(text: str) -> int:
    """Where the stacked tags that start ``text`` end ("[default1]:[rank1]:")."""
    end = 0
    while (m := _LINE_TAG.match(text, end)) is not None:
        end = m.end()
    return end


def _belongs(piece: str, rest: str) -> bool:
    """The grammar says ``rest`` finishes ``piece``: joined, they make a traceback's frame
    line that the piece alone is not, or a library message (the catalog's row) that the
    boundary falls inside. A line that merely starts no record (a wrapped rest of the line
    written in, a job's own line) is not enough."""
    joined = piece + rest
    if _FRAME_LINE.match(joined) and not _FRAME_LINE.match(piece):
        return True
    row = default_matcher().match(joined)
    return row is not None and row.start < len(piece) < row.end


def _cut_by_tag(lines: _Lines) -> int:
    """Take apart a line that another rank's tagged line was written into, where the cut
    line's rest follows: the text before the tag is one process's line, cut; the tag starts
    the other's; the next line, where it starts no record of its own, carries no tag
    (``_continues``) and finishes the cut line's record (``_belongs``), is its rest,
    joined back to it. Only tags of a family the text's lines carry several times."""
    family = _tag_family(lines.texts)
    if not family:
        return 0
    texts, origin, code = [], [], []
    changed = 0
    k = 0
    old = lines.texts
    while k < len(old):
        queue = [old[k]]
        where, fenced = lines.origin[k], lines.code[k]
        k += 1
        while queue:
            text = queue.pop(0)
            cut = next(
                (
                    m
                    for m in _LINE_TAG.finditer(text, _tags_end(text) + 1)
                    if m.group(1) in family and text[m.end() :].strip()
                ),
                None,
            )
            # (a piece of markup only, "**" or "> ", is a decoration of the tagged line, a
            # launcher's label, a time stamp or a shipper's tag alone its header)
            if (
                cut is None
                or not _WORD.search(text, _tags_end(text), cut.start())
                or _BEFORE_TAG.fullmatch(text, _tags_end(text), cut.start()) is not None
                or _header_only(text[: cut.start()])
            ):
                texts.append(text)
                origin.append(where)
                code.append(fenced)
                continue
            piece, inserted = text[: cut.start()], text[cut.start() :]
            rest = old[k] if k < len(old) else ""
            tagged = _MARKED_TAG.match(rest)
            if (
                not rest.strip()
                or (tagged is not None and tagged.group(1) in family)
                or not _continues(rest, piece)
                or not _belongs(piece, rest)
            ):
                # No rest: the log scanner reads the records spliced in the line as they
                # are (scanner._split_records), a bar glued to the line after it included.
                texts.append(text)
                origin.append(where)
                code.append(fenced)
                continue
            k += 1
            texts.append(piece + rest)
            origin.append(where)
            code.append(fenced)
            queue.insert(0, inserted)
            changed += 1
    lines.texts, lines.origin, lines.code = texts, origin, code
    return changed


def _colours(lines: _Lines) -> int:
    changed = 0
    for k, text in enumerate(lines.texts):
        if "\x1b" in text or ("[" in text and "m" in text):
            new = strip_colours(text)
            if new != text:
                lines.texts[k] = new
                changed += 1
    return changed


def _ray_dedup(lines: _Lines) -> int:
    changed = 0
    for k, text in enumerate(lines.texts):
        if _SIGN_RAY_DEDUP in text:
            new = _RAY_DEDUP.sub("", text)
            if new != text:
                lines.texts[k] = new
                changed += 1
    return changed


def _fences(lines: _Lines) -> int:
    inside = False
    found = 0
    for k, text in enumerate(lines.texts):
        if _FENCE.match(text):
            lines.texts[k] = ""
            inside = not inside
            found += 1
            continue
        lines.code[k] = inside
    return found


def _group_counts(
    lines: _Lines, pattern: re.Pattern[str], group: int
) -> tuple[dict[str, int], int]:
    """How many non-blank lines ``pattern`` starts, by its ``group``; and how many
    non-blank lines there are."""
    counts: dict[str, int] = {}
    meaningful = 0
    for text in lines.texts:
        if not text.strip():
            continue
        meaningful += 1
        if (m := pattern.match(text)) is not None:
            counts[m.group(group)] = counts.get(m.group(group), 0) + 1
    return counts, meaningful


def _on_most_lines(
    lines: _Lines, pattern: re.Pattern[str], group: int, every: bool = False
) -> str | None:
    """The ``group`` of ``pattern`` that starts most non-blank lines, where it starts enough
    of them to be a shipper's (a tag on a few lines is the lines' own text), or, with
    ``every``, every one of a text shorter than that (a one-line paste from a shipper)."""
    counts, meaningful = _group_counts(lines, pattern, group)
    if not counts:
        return None
    found, seen = max(counts.items(), key=lambda item: item[1])
    if seen < _STREAM_SHARE * meaningful or (
        seen < _MIN_STREAM_LINES and not (every and seen == meaningful)
    ):
        return None
    return found


def _shipper_tag(lines: _Lines) -> int:
    """Remove the one tag a log shipper put on every line (``kubectl logs --prefix``'s
    "[pod/NAME/CONTAINER] ", docker compose's "SERVICE-1  | "): it names a container, not
    a rank, and on a wrapped line's rest it would pass for a new record. Several pods'
    tags in one paste are left to the launcher peeler, line by line."""
    tag = _on_most_lines(lines, _SHIPPER_TAG, 0)
    if tag is None:
        return 0
    changed = 0
    for k, text in enumerate(lines.texts):
        if text.startswith(tag):
            lines.texts[k] = text[len(tag) :]
            changed += 1
        elif text == tag.rstrip():
            lines.texts[k] = ""
    return changed


def _table_rows(lines: _Lines) -> int:
    """Take the lines out of a log viewer's rows pasted as a Markdown table: each run of
    table rows (two or more) whose rows mostly start, after their empty or row-number
    cells, with a date and time. Its rules (``|---|``) and header rows become blank lines."""
    texts = lines.texts
    changed = 0
    i = 0
    while i < len(texts):
        if not (_TABLE_ROW.match(texts[i]) or _TABLE_RULE.match(texts[i])):
            i += 1
            continue
        j = i
        while j < len(texts) and (_TABLE_ROW.match(texts[j]) or _TABLE_RULE.match(texts[j])):
            j += 1
        # a row above a rule is the table's header (column titles): not a line
        header = {k - 1 for k in range(i + 1, j) if _TABLE_RULE.match(texts[k])}
        cells = {
            k: _row_content(texts[k])
            for k in range(i, j)
            if k not in header and not _TABLE_RULE.match(texts[k])
        }
        stamped = sum(1 for c in cells.values() if _STAMP_FIRST.match(c))
        if (j - i >= _MIN_TABLE_ROWS or len(texts) == 1) and stamped >= _STREAM_SHARE * max(
            1, sum(1 for c in cells.values() if c)
        ):
            for k in range(i, j):
                texts[k] = cells.get(k, "")
                changed += 1
        i = j
    return changed


def _row_content(row: str) -> str:
    """A table row's text without its outer pipes, the empty or row-number cells before
    it and a cell's padding; the cells after the first with text are the line's own
    ("a | b"), and so are its spaces (a terminal's padding, a cut line's end)."""
    m = _TABLE_ROW.match(row)
    inner = m.group(1) if m is not None else row
    while (lead := _LEADING_CELL.match(inner)) is not None:
        inner = inner[lead.end() :]
    # one space of padding on each side is the table's; the rest is the line's own
    inner = inner[1:] if inner.startswith(" ") else inner
    inner = inner[:-1] if inner.endswith(" ") else inner
    return "" if not inner.strip() else inner


def _source_column(lines: _Lines) -> int:
    """Remove the source column (a host, a pod, a stream) that a log viewer or shipper
    printed between its stamp and each line, before a separator: on most lines, with a
    few sources at most (several hosts' lines interleaved), none of them a level word."""
    counts, meaningful = _group_counts(lines, _SOURCE_COLUMN, 2)
    seen = sum(counts.values())
    if (
        not counts
        or seen < _STREAM_SHARE * meaningful
        or (seen < _MIN_STREAM_LINES and seen != meaningful)
        or len(counts) > _MAX_SOURCES
        or any(source.upper() in _LEVELS for source in counts)
    ):
        return 0
    changed = 0
    for k, text in enumerate(lines.texts):
        if (m := _SOURCE_COLUMN.match(text)) is not None:
            rest = text[m.end() :]
            stamp = m.group(1)
            # A stamp with its zone is a shipper's, which the line readers peel as they
            # peel kubectl's; one without is the viewer's local time, which no reader can
            # set against the job's own clocks: the line is left as the job wrote it.
            zoned = stamp.endswith("Z") or _ZONE.search(stamp) is not None
            lines.texts[k] = f"{stamp} {rest}" if zoned and rest else (rest if not zoned else stamp)
            changed += 1
    return changed


def _record_prefix(lines: _Lines) -> int:
    """Remove a logger's header that a multi-line record repeats on each of its lines
    (vLLM's NewLineFormatter): in each run of three or more lines under one same header
    that holds a traceback, the header is kept on the run's first line only when the
    line is a message of its own (not the traceback's first line), and on a line right
    above a traceback's first line (a logger.exception record's message: the run holds
    several records of one logging call)."""
    texts = lines.texts
    changed = 0
    i = 0
    while i < len(texts):
        m = _RECORD_PREFIX.match(texts[i])
        if m is None:
            i += 1
            continue
        head = m.group(0)
        j = i + 1
        while j < len(texts) and texts[j].startswith(head):
            j += 1
        run = [texts[k][len(head) :] for k in range(i, j)]
        if j - i >= _MIN_RECORD_LINES and any(
            r.startswith(("Traceback (most recent call last):", '  File "')) for r in run
        ):
            first = 0 if run[0].startswith("Traceback (most recent call last):") else 1
            for k in range(i + first, j):
                if k + 1 < j and run[k + 1 - i].startswith("Traceback (most recent call last):"):
                    # a record's own message (logger.exception's, over its traceback) in
                    # a run of several records: it keeps its header, and the place of
                    # the logging call the header names
                    continue
                texts[k] = texts[k][len(head) :]
                changed += 1
        i = j
    return changed


def _stream_column(lines: _Lines) -> int:
    """Remove a log stream's name that a shipper printed after its stamp on every line
    (``aws logs tail``: "TIME STREAM MESSAGE"); the stamp stays, it is the line's time."""
    # a stamp, then a path-like stream name: on every line of a short text, a shipper's too
    stream = _on_most_lines(lines, _STAMPED_STREAM, 2, every=True)
    if stream is None:
        return 0
    changed = 0
    for k, text in enumerate(lines.texts):
        m = _STAMPED_STREAM.match(text)
        if m is not None and m.group(2) == stream:
            lines.texts[k] = text[: m.end(1)] + text[m.end(2) :]
            changed += 1
    return changed


def _restored_head(texts: list[str]) -> tuple[int, str] | None:
    """Restore the start of a first line that a selection cut inside its header, from a
    later line of the same process: the first line's first token (a host:pid:tid, a time)
    ends a token of that line, and what follows it agrees. The header's identity (pid,
    tid, time) is in the part both lines share, so the restored start is that process's;
    a token too short to carry one ("]:", "k3]:"), or a source location that every
    rank's line holds ("rocessGroupNCCL.cpp:563]"), or a bare date, is left as cut; so is a
    first line whose start other lines start with (a record, uncut). A cut header may still
    look like one ("5:2123:2230 [3] …", host "5"), so every first line is tried; an uncut
    one occurs only at the start of later lines, and is left as it is."""
    first = next((k for k, t in enumerate(texts) if t.strip()), None)
    if first is None:
        return None
    cut = texts[first]
    token = cut.split(" ", 1)[0]
    if (
        len(token) < _MIN_CUT_TOKEN
        or not any(c.isdigit() for c in token)
        or _SOURCE_LOCATION.match(token)
        or _BARE_DATE.fullmatch(token)
    ):
        return None
    agree = cut[: len(token) + _CUT_AGREE]
    later = texts[first + 1 : first + 1 + _CUT_LOOKAHEAD]
    if any(text.startswith(agree) for text in later):
        return None  # a record's own start: later records start so too, it was not cut
    for text in later:
        at = text.find(agree, 1, _MAX_HEAD + len(agree))
        if at > 0:
            return first, text[:at] + cut
    return None


def _second_copy(texts: list[str]) -> int | None:
    """Where a second copy of the whole paste starts: the text is one block of lines
    twice over (blank lines between or after them aside), a careless copy pasted again.
    Its own lines, repeated, are the same lines, not a second rank's or sample's: a
    rank's or a sample's would differ in a pid, a time, a thread or a rank label."""
    filled = [k for k, text in enumerate(texts) if text.strip()]
    half = len(filled) // 2
    if half < _MIN_COPY_LINES or len(filled) != 2 * half:
        return None
    if any(texts[filled[k]] != texts[filled[half + k]] for k in range(half)):
        return None
    copy = [texts[k] for k in filled[:half]]
    if len(set(copy)) < _MIN_COPY_LINES or _second_copy(copy) is not None:
        return None  # one line over and over, or a period repeated: a log's own repetition
    return filled[half - 1] + 1  # the blank lines between the copies go too


def _twice(lines: _Lines) -> int:
    start = _second_copy(lines.texts)
    if start is None:
        return 0
    dropped = len(lines.texts) - start
    del lines.texts[start:], lines.origin[start:], lines.code[start:]
    return dropped


def _cut_head(lines: _Lines) -> int:
    restored = _restored_head(lines.texts)
    if restored is None:
        return 0
    lines.texts[restored[0]] = restored[1]
    return 1


def _restored_body(texts: list[str]) -> tuple[int, int, str] | None:
    """Restore the start of a first line that a selection cut inside a library message's
    body, from the catalog row whose body's end the line is (parsers/catalog/cut_body.py):
    the row's literal text before the cut is what the library printed there. A line that
    starts as a record does (a header, a stamp, a prefix) was not cut in its body. A cut
    line of a hard-wrapped paste is shorter than the wrap width, so the wrap's rest is not
    joined to it: the next lines that start no record of their own are tried with it.
    (first line, lines taken, restored text)."""
    first = next((k for k, t in enumerate(texts) if t.strip()), None)
    if first is None or _NEW_RECORD.match(texts[first].lstrip()):
        return None
    text = texts[first]
    for taken in range(1, _MAX_CUT_PIECES + 1):
        if taken > 1:
            if first + taken > len(texts) or _NEW_RECORD.match(texts[first + taken - 1]):
                return None
            text += texts[first + taken - 1]
        found = cut_body(text)
        if found is not None:
            return first, taken, found.restored
    return None


def _restored_source(texts: list[str]) -> tuple[int, str] | None:
    """Restore an NCCL line's source location that the selection cut ("77 NCCL WARN
    Attribute arch of node cpu not found"): the catalog row whose message the line holds
    names the source file that prints it, and what is left of "FILE:LINE" must be that
    file's end. The location places a WARN (a graph/ or init file is a setup's); the
    host, pid and device before it stay cut."""
    first = next((k for k, t in enumerate(texts) if t.strip()), None)
    if first is None:
        return None
    m = _CUT_NCCL_SOURCE.match(texts[first])
    if m is None:
        return None
    found = default_matcher().match(texts[first][m.end() :])
    if found is None or found.row.project != "nccl":
        return None
    left, line = m.group("left"), m.group("line")
    files = {
        source.file.removeprefix(_NCCL_SOURCE_ROOT)
        for source in found.row.sources
        if source.file.startswith(_NCCL_SOURCE_ROOT)
    }
    whole = [f"{file}:{line}" for file in sorted(files) if f"{file}:{line}".endswith(left)]
    if len(whole) != 1 or whole[0] == left:
        return None  # not that row's file, or more than one file ends so, or nothing was cut
    return first, whole[0] + texts[first][len(left) :]


def _restored_os_error(texts: list[str]) -> tuple[int, str] | None:
    """Restore the class of a Python OSError whose name the selection cut ("Error: [Errno
    2] No such file or directory: …"): CPython raises the subclass its errno maps to
    (PEP 3151: ENOENT is FileNotFoundError, EACCES PermissionError, …), and constructing
    an OSError with that errno gives it. What is left must be that class name's end."""
    first = next((k for k, t in enumerate(texts) if t.strip()), None)
    if first is None:
        return None
    m = _CUT_OS_ERROR.match(texts[first])
    if m is None:
        return None
    name = type(OSError(int(m.group("errno")), "")).__name__
    left = m.group("left")
    if not left.endswith(": "):
        # no separator left: only the file-name form is surely an OSError's own message
        # (a bare "[Errno 5] …" may be a program's words)
        if left or m.group("files") is None:
            return None
        return first, f"{name}: {texts[first]}"
    word = left.removesuffix(": ")
    if name == word or not name.endswith(word):
        return None
    return first, name + texts[first][len(word) :]


# The end of a Python traceback's frame line, as CPython's traceback module prints it
# ('  File "{filename}", line {lineno}, in {name}'): a selection that cut its start leaves
# the end of the "File" keyword and the file's name, or only the end of the name.
# (one quote at most, taken where it is: "[^"]*"?[^"]*" backtracked quadratically on a long
# line without one, which a hostile input is)
_FRAME_END = re.compile(
    r'(?P<path>[^"]*(?:"[^"]*)?)", line (?P<no>\d+), in (?P<func>[^\s"]+)[ \t]*'
)
# A frame line is short; a first line longer than this is no frame's end.
_MAX_FRAME_LINE = 4096
_FRAME_FILE = '  File "'
# A frame's file: a Python source, or CPython's "<string>", "<frozen …>".
_FRAME_PATH_END = re.compile(r"(?:\.pyx?|>)$")


def _restored_frame(texts: list[str]) -> tuple[int, str] | None:
    """Restore the start of a first line that a selection cut inside a traceback's frame
    line ('le "/opt/…/distributed_c10d.py", line 2060, in all_gather', or 'rch/distributed/
    distributed_c10d.py", line …' where the cut fell in the file's name): what is left
    before the opening quote must be the end of CPython's '  File "', and what is left of
    the name must end as a source file's name does. The frame is read again as a frame,
    so the traceback it heads keeps its exception and where it was raised; the cut part of
    the file's name stays cut."""
    first = next((k for k, t in enumerate(texts) if t.strip()), None)
    if first is None:
        return None
    if len(texts[first]) > _MAX_FRAME_LINE:
        return None
    m = _FRAME_END.fullmatch(texts[first])
    if m is None:
        return None
    before = m.group("path")
    quote = before.find('"')
    left, path = (before[: quote + 1], before[quote + 1 :]) if quote >= 0 else ("", before)
    if not path or path[:1].isspace() or _FRAME_PATH_END.search(path) is None:
        return None
    if left.lstrip() == _FRAME_FILE.lstrip() or not _FRAME_FILE.endswith(left):
        return None  # a whole frame line (nothing cut), or not a frame's start
    return first, _FRAME_FILE + path + texts[first][m.end("path") :]


# torchrun's and torch's own line tags ("[default3]:", "[rank3]:": torchrun's --tee prefix,
# the "[rank{N}]:" torch.distributed puts before what its processes print) with the
# opening bracket cut by the selection: the word and the whole number are left, so the
# tag is restored by its bracket alone.
_CUT_TAG = re.compile(r"(?:rank|default)\d{1,6}\]:(?=\S)")


def _restored_tag(texts: list[str]) -> tuple[int, str] | None:
    """Restore the bracket of a first line's rank tag that the selection cut ("rank0]:[E811
    01:10:50… ProcessGroupNCCL.cpp:1515] …" of "[rank0]:[E811 …"): the tag's word and its
    number are whole (the number follows the word), so the rank it names is the line's.
    A tag cut inside its word ("k3]:") is left as cut: "rank" or "default" is not known."""
    first = next((k for k, t in enumerate(texts) if t.strip()), None)
    if first is None or _CUT_TAG.match(texts[first]) is None:
        return None
    return first, "[" + texts[first]


def _cut_tag(lines: _Lines) -> int:
    restored = _restored_tag(lines.texts)
    if restored is None:
        return 0
    lines.texts[restored[0]] = restored[1]
    return 1


def _cut_source(lines: _Lines) -> int:
    restored = (
        _restored_source(lines.texts)
        or _restored_os_error(lines.texts)
        or _restored_frame(lines.texts)
    )
    if restored is None:
        return 0
    lines.texts[restored[0]] = restored[1]
    return 1


def _cut_body(lines: _Lines) -> int:
    restored = _restored_body(lines.texts)
    if restored is None:
        return 0
    first, taken, text = restored
    lines.texts[first : first + taken] = [text]
    del lines.origin[first + 1 : first + taken]
    del lines.code[first + 1 : first + taken]
    return taken


def _indented(text: str) -> bool:
    """Every line indented (a margin to find), or an indented block after a blank line."""
    return not _SIGN_FLUSH.search(text) or bool(_SIGN_BLOCK.search(text))


_Step = tuple[Callable[[str], bool], Callable[[_Lines], int], str]
_STEPS: tuple[_Step, ...] = (
    (lambda t: "```" in t or "~~~" in t, _fences, "Markdown fences"),
    (lambda t: bool(_SIGN_QUOTE.search(t)), _quote_runs, "a block quote's '>' markers"),
    (_indented, _indent_blocks, "a code block's indentation"),
    # A quoted paste inside a code block ("    > …"): its markers show once the margin is gone.
    (lambda t: bool(_SIGN_QUOTE.search(t)), _quote_runs, "a block quote's '>' markers"),
    (lambda t: bool(_SIGN_TABLE.search(t)), _table_rows, "a log viewer's table around the lines"),
    (
        lambda t: bool(_SIGN_PYTEST_FAIL.search(t)),
        _pytest_fail_runs,
        "pytest's 'E' marker on a failed test's lines",
    ),
    (lambda t: bool(_SIGN_TAG.search(t)), _shipper_tag, "a log shipper's tag on every line"),
    (lambda t: bool(_SIGN_STREAM.search(t)), _stream_column, "a log stream's name on every line"),
    (lambda t: bool(_SIGN_SOURCE.search(t)), _source_column, "a log viewer's source column"),
    (lambda t: "\x1b" in t or bool(_SIGN_SGR.search(t)), _colours, "colour codes"),
    (lambda t: _SIGN_RAY_DEDUP in t, _ray_dedup, "Ray's count of the lines it deduplicated"),
    (
        lambda t: bool(_SIGN_RECORD_PREFIX.search(t)),
        _record_prefix,
        "a logger's header repeated on each line of a record",
    ),
    (lambda _: True, _cut_head, "a cut in the first line's header (restored from a later line)"),
)
# Undone once the wrap is rejoined (the line after a cut one is then the cut line's rest,
# not the wrapped rest of the line written into it), before the copies are compared.
_CUT_BY_TAG: _Step = (
    _sign_cut_by_tag,
    _cut_by_tag,
    "a line cut by another rank's tagged line (taken apart, its rest joined back)",
)
# Undone on whole lines, once the wrap is rejoined: two copies of one line are the log's own
# (a warning printed twice), and a wrap cuts that line into two different pieces.
_TWICE: _Step = (lambda t: _doubled(t), _twice, "a second copy of the whole paste")
# Undone after the hard wrap is rejoined: a terminal wrapped the text as the job printed
# it, backticks of its own messages included ("use `--gpu_ids`"), so the widths that show
# the wrap are measured before any of them is taken for Markdown.
_EMPHASIS: _Step = (lambda t: "**" in t or "`" in t, _emphasis, "Markdown emphasis")
# Undone last, on the first line as the other layers left it (whole, unquoted, plain).
_CUT_BODY: _Step = (
    lambda _: True,
    _cut_body,
    "a cut in the first line's message (its start restored from the message catalog)",
)
_CUT_TAG_STEP: _Step = (
    lambda t: "]:" in t,
    _cut_tag,
    "a cut in the first line's rank tag (its opening bracket restored)",
)
_CUT_SOURCE: _Step = (
    lambda t: "WARN " in t or "INFO " in t or "[Errno " in t or '", line ' in t,
    _cut_source,
    "a cut in the first line's source location or exception class (restored from the "
    "message catalog, or the OSError subclass of its errno), or in a traceback's frame "
    'line (its "File" restored)',
)


def _doubled(text: str) -> bool:
    """Cheap: is the text its first half twice (blank lines aside)? The second copy starts
    where the first line recurs at a line's start; a few recurrences are tried."""
    body = text.strip("\n")
    first = body.split("\n", 1)[0]
    if not first.strip():
        return False
    at = body.find("\n" + first + "\n")
    for _ in range(3):
        if at < 0:
            return False
        # the copies are as long, give or take their blank lines and CRs
        if abs(len(body) - 2 * at) <= at // 8 + 4 and (
            body[at:].strip("\n").replace("\r", "") == body[:at].strip("\n").replace("\r", "")
        ):
            return True
        at = body.find("\n" + first + "\n", at + 1)
    return False


def _wrap_shown(texts: list[str]) -> bool:
    return (
        wrap_width(texts) is not None
        or _lone_width(texts) is not None
        or _word_width(texts) is not None
        or _shape_breaks(texts)
    )


def might_be_mangled(text: str) -> bool:
    """Cheap: could ``unmangle`` change anything in this text?"""
    head = text.split("\n", _CUT_LOOKAHEAD + 50)[: _CUT_LOOKAHEAD + 50]
    return (
        "\x1b" in text
        or "\n>" in text
        or text.startswith((">", " >", "  >", "   >"))
        or "\n " in text
        or "\n\t" in text
        or text.startswith((" ", "\t"))
        or "**" in text
        or "`" in text
        or _SIGN_RAY_DEDUP in text
        or _sign_cut_by_tag(text)
        or _STAMPED_STREAM.match(text) is not None
        or _SIGN_TABLE.search(text) is not None
        or _SIGN_PYTEST_FAIL.search(text) is not None
        or _SIGN_RECORD_PREFIX.search(text) is not None
        or _SIGN_SOURCE.search(text) is not None
        or _SHIPPER_TAG.match(text) is not None
        or _wrap_shown(text.split("\n", 20000)[:20000])
        or _restored_head([t.rstrip("\r") for t in head]) is not None
        or _restored_body([t.rstrip("\r") for t in head[:_CUT_LOOKAHEAD]]) is not None
        or _restored_source([t.rstrip("\r") for t in head[:_CUT_LOOKAHEAD]]) is not None
        or _doubled(text)
        or _restored_os_error([t.rstrip("\r") for t in head[:_CUT_LOOKAHEAD]]) is not None
        or _restored_tag([t.rstrip("\r") for t in head[:_CUT_LOOKAHEAD]]) is not None
        or _restored_frame([t.rstrip("\r") for t in head[:_CUT_LOOKAHEAD]]) is not None
    )


def unmangle(text: str, *, whole_only: bool = False) -> Unmangled | None:
    """The text with the paste's layers undone; None when there were none.

    ``whole_only``: only a result that is ``whole`` is wanted, None stands for any other
    (the head of a big file, loading/paste_view.py). The first line's restorations from
    the catalog change a few lines at most (``_FIRST_LINE_MOST``); where the other layers
    left the text short of whole by more, they cannot make it so, and are not looked for
    (the catalog's index of message ends is built for them: 0.1 s)."""
    if not might_be_mangled(text):
        return None
    ends = text.endswith("\n")
    raw = (text[:-1] if ends else text).split("\n")
    texts = [t[:-1] if t.endswith("\r") else t for t in raw]
    lines = _Lines(texts, list(range(1, len(texts) + 1)), [False] * len(texts))
    undone: list[str] = []
    # Each layer is looked for line by line only where one search of the whole text (in
    # C) finds a sign of it.
    changed = 0
    # the text as the layers undone so far left it (CRs gone), for the next layer's signs
    current = "\n".join(texts) if "\r" in text else text
    for signed, step, what in _STEPS:
        count = step(lines) if signed(current) else 0
        if count:
            if what not in undone:
                undone.append(what)
            changed += count
            current = "\n".join(lines.texts)
    # A wrap that shows no spike (a lone wrap, a wrap at word boundaries) is measured
    # without Markdown's emphasis markers, which a reporter adds to the lines as copied
    # (they widen the lines they mark, and hide where a line starts): where the text holds
    # any, it is looked for once they are gone.
    words_later = _EMPHASIS[0](current)
    longest = max(map(len, lines.texts), default=0)
    joins, widths = _rejoin_all(lines, spike_only=words_later, longest=longest)
    # (a wrap under the stamps is looked for after one over them: a stamped paste may be
    # wrapped again by the terminal it was copied from, whose pieces carry no stamp)
    more, also = _rejoin_under_stamps(lines, nested=bool(joins), spike_only=words_later)
    joins, widths = joins + more, widths + also
    if joins:
        current = "\n".join(lines.texts)
        # A quoted paste wrapped by a terminal has its markers on each line's first piece
        # only: runs of quoted lines show once the pieces are joined.
        if _SIGN_QUOTE.search(current) and (count := _quote_runs(lines)):
            if "a block quote's '>' markers" not in undone:
                undone.append("a block quote's '>' markers")
            changed += count
            current = "\n".join(lines.texts)
    for signed, step, what in (
        _CUT_BY_TAG,
        _TWICE,
        _EMPHASIS,
        _CUT_TAG_STEP,
        _CUT_BODY,
        _CUT_SOURCE,
    ):
        if (
            whole_only
            and step is _cut_body
            and (changed + 2 * joins + _FIRST_LINE_MOST < _WHOLE_SHARE * len(raw))
        ):
            return None
        count = step(lines) if signed(current) else 0
        if count:
            undone.append(what)
            changed += count
            current = "\n".join(lines.texts)
        if step is _emphasis and (count or words_later):
            # emphasis added to a wrapped paste hides the wrap's width until it is gone
            more, also = _rejoin_all(lines, nested=True, longest=longest)
            joins, widths = joins + more, widths + also
            if more:
                current = "\n".join(lines.texts)
    if joins:
        undone.append(f"{' and '.join(widths)} ({joins} lines joined)")
    if not undone:
        return None
    body = "\n".join(lines.texts) + ("\n" if ends else "")
    fixed = Unmangled(body, tuple(lines.origin), tuple(undone), changed + 2 * joins, len(raw))
    return None if whole_only and not fixed.whole else fixed
