"""Peel every layer that wraps a log line, keeping what each layer said.

Launcher tags (``[default3]:``, ``[rank3]:``, mpirun, Ray, Determined...) are the job of
the shared :mod:`hangdoc.analyzer.parsers.prefixes`; this module adds the layers that
only logs carry and whose content matters here: time stamps (Kubernetes ISO, syslog,
``dmesg -T``, Python logging), glog/c10 headers (``[E709 17:05:38.16 ProcessGroupNCCL.cpp:632]``,
``E0325 20:57:27.62 2606 torch/…/api.py:869]``), and old Python logging
(``ERROR:torch.distributed.elastic…:``). The layers stack in any order, so both kinds
are peeled alternately until neither matches (FORMATS.md §8.1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hangdoc.analyzer.parsers import prefixes
from hangdoc.analyzer.parsers.logs.timefmt import (
    MONTHS,
    Stamp,
    dated_stamp,
    dated_stamp_of,
    glog_stamp,
    seconds_of_day,
)
from hangdoc.analyzer.parsers.prefixes import clean_line, peel


@dataclass(slots=True)
class LineTag:
    """A line without its prefixes, and who/when/what level they said it was."""

    text: str
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    stamp: Stamp | None = None
    level: str | None = None  # I/W/E/F (glog) or the Python level name's initial
    origin: str | None = None  # "ProcessGroupNCCL.cpp:632", a logger name
    tagged: bool = False  # a launcher prefix was present (used for hard-wrap rejoin)


_ISO = re.compile(
    r"\[?(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2}(?:[.,]\d+)?)"
    r"(?P<zone>Z|[+-]\d{2}:?\d{2})?\]?(?P<sep> *(?:\||-(?!-)) *| +)"
)
# (A dash after the stamp separates it from the message, as Python logging's " - " does;
# two dashes begin the message: torch.multiprocessing's "-- Process 1 terminated with
# the following error:" under a shipper's stamp keeps both.)
# mmengine's MMFormatter (mmengine/logging/logger.py): "%(asctime)s - %(name)s -
# %(levelname)s - %(message)s" with datefmt "%m/%d %H:%M:%S", no year ("06/27 08:41:09 -
# mmengine - INFO - …"): the logs of mmengine, mmdet, mmseg, xtuner and their kin.
_MMDD = re.compile(r"(\d{2})/(\d{2}) (\d{2}):(\d{2}):(\d{2}(?:[.,]\d+)?)(?P<sep> +- +| +)")
# What a selection that began inside a bracketed stamp leaves of it ("08:39:46] " of
# "[2025-04-08 08:39:46] "): the time of day and the closing bracket.
_CUT_STAMP = re.compile(r"(\d{2}):(\d{2}):(\d{2}(?:[.,]\d+)?)\] +")
_SYSLOG = re.compile(
    r"([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2})(?:\.\d+)? (\S+) "
    r"([\w.\-/]+?)(?:\[\d+\])?: "
)
_DMESG_T = re.compile(
    r"\[(?:[A-Z][a-z]{2} )?([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})\] ?"
)
# dmesg, and ``dmesg -H``/``--reltime`` whose stamps are deltas ("[  +0.000049]").
_DMESG = re.compile(r"\[ *\+?\d+\.\d+\] ?")
_GLOG = re.compile(
    r"\[?([IWEF])(\d{3,4}) (\d{2}):(\d{2}):(\d{2}(?:\.\d+)?) +(?:\d+ +)?([\w./\-]+:\d+)\] ?"
)
_C10_NO_TIME = re.compile(r"\[([IWEF]) ([\w./\-]+:\d+)\] ?")
_PYLOG_OLD = re.compile(r"(ERROR|WARNING|INFO|DEBUG|CRITICAL):((?:torch|deepspeed)[\w.]*):")
_TORCH_LOGGER = re.compile(r"((?:torch|deepspeed)[\w.]*): \[(ERROR|WARNING|INFO|DEBUG|CRITICAL)\] ")
_NEMO = re.compile(r"\[NeMo ([IWEDC]) (\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) [^\]]*\] ?")
_DETERMINED_RANK = re.compile(r"\[rank=(\d+)\] ?")
# DeepSpeed's logger (deepspeed/utils/logging.py, LoggerFactory's formatter "[%(asctime)s]
# [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s"): after the stamp,
# "[INFO] [logging.py:96:log_dist] ". Its words ("logging", "log_dist") are not the message's.
_DS_LOGGER = re.compile(r"\[(DEBUG|INFO|WARNING|ERROR|CRITICAL)\] \[([\w.-]+\.py:\d+:\w+)\] ")
# torchtitan's logger: "[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s"; the
# stamp is the ISO layer, then "root - ERROR - " (Python logging's " - "-joined format).
_TITAN = re.compile(r"\[titan\] ?")
# vLLM's logger (vllm/logger.py: _FORMAT "%(levelname)s %(asctime)s %(filename)s:%(lineno)d]
# %(message)s", later "… [%(fileinfo)s:%(lineno)d] …", _DATE_FORMAT "%m-%d %H:%M:%S"): one
# space after the bracket, then the message, whose own indentation ("  File …" of a
# traceback the logger printed) is kept. The file info is the file's name, or at
# VLLM_LOGGING_LEVEL=DEBUG its path under the package shrunk to a few levels
# (vllm/logging_utils/formatter.py NewLineFormatter's shrink_path:
# "v1/executor/multiproc_executor.py", "model_executor/.../quantization/utils/fp8_utils.py").
_VLLM_LOGGER = re.compile(
    r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}(?:\.\d+)?) "
    r"\[?([\w./-]+\.py:\d+)\] "
)
# Metaflow's task log (metaflow/runtime.py, the task's log(): "[%s (pid %s)] " % (run/step/
# task path, pid), after the runtime logger's time stamp), and for a step run on AWS Batch
# the Batch job id before what the job printed (metaflow/plugins/aws/batch/batch_cli.py
# echo: "[%s] %s" % (batch_id, msg)).
_METAFLOW = re.compile(
    r"\[[\w.-]+/\w+/[\w.-]+ \(pid (\d+)\)\] "
    r"(?:\[[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\] )?"
)
_PYLOG_DASH = re.compile(r"([\w.]{1,80}) - (ERROR|WARNING|INFO|DEBUG|CRITICAL) - ")
# A launcher's own tag before torchrun/torch prefixes ("B-nemo-ft3/0 [default1]:[rank1]:",
# pdsh "node7: [rank3]:"): peeled only when a rank prefix follows it.
_LEADING_TAG = re.compile(
    r"(?![\w.]*(?:Error|Exception|Warning|Exit):? )[^\s\[][^\s]{0,63} "
    r"(?=\[(?:rank|default|[A-Za-z_]+)\d+\]:)"
)
# pdsh/clush "<host>: " before an NCCL line's own "host:pid:tid [dev]" header
# ("worker-1: worker-1:2914:4490 [0] transport/nvls.cc:245 NCCL WARN …", nccl#1029):
# the header's shape makes the tag a launcher's, line by line, even where too few lines
# of the file carry it for parsers/prefixes.py detect_pdsh_hosts. The tag may be doubled
# ("10.0.87.143: 10.0.87.143: ip-10-0-87-143:149:298 [5] …", nccl#563): a launcher run
# through pdsh that prefixes each line with the host again (DeepSpeed's PDSHRunner
# starts its per-node launcher through pdsh, which adds its own "<host>: ").
_PDSH_BEFORE_NCCL = re.compile(
    r"(?:[A-Za-z0-9][\w.-]{0,62}: ){1,3}(?=[A-Za-z0-9][\w.\-]*:\d+:\d+ \[\d+\] )"
)
# Open MPI's ``--tag-output`` ("[1,3]<stdout>:") and Horovod's own launcher (horovodrun with
# gloo: horovod/runner/common/util/safe_shell_exec.py forward_stream writes
# "{time}[{rank}]<{prefix}>:{line}", time being time.asctime() with --timestamp-output).
# A paste rendered as Markdown loses the "<stderr>" as an HTML tag, leaving "[15]" glued to
# the line ("[15]worker-23:83:2526 [0] misc/socket.cc:503 NCCL WARN …", horovod issue 3611):
# that bare form is taken only before an NCCL ``host:pid:tid [dev]`` header.
_MPI_RANK_TAG = re.compile(
    r"(?:[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4})?"
    r"\[(?:1,)?(\d+)\](?:<(?:stdout|stderr)>: ?|:?(?=[A-Za-z0-9][\w.\-]*:\d+:\d+ \[\d+\] ))"
)
# ``srun --label`` (and ``torchrun --tee``-less consoles fed through it): the task id, padded
# with spaces to the width of the largest one, then ": ". The task id is SLURM_PROCID, the
# global rank under srun. Only taken as the first layer of a line, never after a stamp or a
# tag, and never with more than four pad spaces (an indented "  3: x" is a table, not srun).
_SRUN_LABEL = re.compile(r" {0,4}(\d{1,5}): (?=\S)")
# A log shipper's own layer (a k8s/CloudWatch RFC 3339 stamp, kubectl's and docker
# compose's tags, journald's header): what the job printed starts after it, so an srun
# label may still follow.
_SHIPPER = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d) (?! )"
    r"|\[pod/[\w.-]+/[\w.-]+\] |[A-Za-z0-9][\w.-]{0,80}?[-_]\d{1,4} +\| "
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? [\w.-]+ [\w.@/-]+\[\d+\]: "
)
_MAX_ROUNDS = 10
# The start of torchrun's prefix ("[rank3]:", "[default3]:"): a lower-case word after the
# bracket then a digit, where every layer peel_line tries before the launchers' needs a
# digit, a space, an upper-case letter, "NeMo", "rank=" or "titan" after a "[", and the
# shippers' and srun's layers, the log tags and Open MPI's tag start with no "[" but
# "[pod/" (tests/unit/logs/test_literal_gates.py holds the shortcut to every layer).
_TORCHRUN_FIRST = re.compile(r"\[(?:rank|default)\d")

# Every layer a round of peel_line can take after its gates (_own_layer's, the leading
# tag, Open MPI's tag, and the launchers' of prefixes.peel) as one anchored alternation:
# where none can start, the round and the peeling end in one C-level match instead of a
# dozen (the rest of a step line, after its stamp). Named groups are made plain, so that
# two layers may name one alike. tests/unit/logs/test_wrap_shape.py holds this list to
# every pattern those functions read, so a new layer cannot be missed.
_ROUND_LAYERS: tuple[re.Pattern[str], ...] = (
    _DMESG_T,
    _DMESG,
    _NEMO,
    _DETERMINED_RANK,
    _DS_LOGGER,
    _TITAN,
    _VLLM_LOGGER,
    _METAFLOW,
    _GLOG,
    _C10_NO_TIME,
    _ISO,
    _CUT_STAMP,
    _MMDD,
    _PYLOG_OLD,
    _SYSLOG,
    _PYLOG_DASH,
    _TORCH_LOGGER,
    _LEADING_TAG,
    _PDSH_BEFORE_NCCL,
    _MPI_RANK_TAG,
    *prefixes.PEEL_LAYERS,
)
_ANY_ROUND_LAYER = re.compile(
    "|".join(
        f"(?:{re.sub(r'[(][?]P<[A-Za-z_][A-Za-z0-9_]*>', '(?:', p.pattern)})" for p in _ROUND_LAYERS
    )
)


def _own_layer(text: str, tag: LineTag, reads: list[int] | None = None) -> int:
    """Length of one log-specific layer at the start of ``text`` (0 if none); fills tag.

    ``reads`` gets the place (counted from the end of ``text``) of every digit whose
    value a date's test reads (month 1-12, day 1-31): what the layer does may depend on
    those, where it depends on no other digit's value (see peel_line_reads)."""
    first = text[0]
    if first == "[":
        if m := _DMESG_T.match(text):
            tag.stamp = Stamp(
                seconds_of_day(m.group(3), m.group(4), m.group(5)),
                MONTHS.get(m.group(1)),
                int(m.group(2)),
                int(m.group(6)),
            )
            return m.end()
        if m := _DMESG.match(text):
            return m.end()
        if m := _NEMO.match(text):
            _note_reads(reads, text, m, 3, 4)
            tag.level = m.group(1)
            tag.stamp = dated_stamp(m.group(2), m.group(3), m.group(4), ":".join(m.group(5, 6, 7)))
            return m.end()
        if m := _DETERMINED_RANK.match(text):
            tag.rank = int(m.group(1))
            return m.end()
        if tag.stamp is not None and tag.level is None and (m := _DS_LOGGER.match(text)):
            tag.level, tag.origin = m.group(1)[0], m.group(2)
            return m.end()
        if m := _TITAN.match(text):
            return m.end()
        if m := _METAFLOW.match(text):
            return m.end()
    if m := _GLOG.match(text):
        _note_reads(reads, text, m, 2, 2)
        tag.level, tag.origin = m.group(1), m.group(6)
        tag.stamp = glog_stamp(m.group(2), ":".join(m.group(3, 4, 5)))
        return m.end()
    if first == "[" and (m := _C10_NO_TIME.match(text)):
        tag.level, tag.origin = m.group(1), m.group(2)
        return m.end()
    if (first.isdigit() or first == "[") and (m := _ISO.match(text)):
        _note_reads(reads, text, m, 2, 3)
        tag.stamp = dated_stamp_of(*m.group(1, 2, 3, 4, 5, 6))
        if m.group("zone") and not m.group("sep").strip():
            # A shipper's RFC 3339 stamp (kubectl/docker logs --timestamps, CloudWatch) and
            # one space: the indentation after it is the line's own ("  File …" of a trace).
            return m.start("sep") + 1
        return m.end()
    if first.isdigit() and (m := _CUT_STAMP.match(text)) is not None:
        tag.stamp = Stamp(seconds_of_day(m.group(1), m.group(2), m.group(3)))
        return m.end()
    if first.isdigit() and (m := _MMDD.match(text)) is not None:
        _note_reads(reads, text, m, 1, 2)
        mm, dd = int(m.group(1)), int(m.group(2))
        if 1 <= mm <= 12 and 1 <= dd <= 31:
            tag.stamp = Stamp(seconds_of_day(m.group(3), m.group(4), m.group(5)), mm, dd)
            return m.end()
    if first.isupper():
        if m := _VLLM_LOGGER.match(text):
            _note_reads(reads, text, m, 2, 3)
            mm, dd = int(m.group(2)), int(m.group(3))
            if 1 <= mm <= 12 and 1 <= dd <= 31:
                tag.level, tag.origin = m.group(1)[0], m.group(7)
                tag.stamp = Stamp(seconds_of_day(m.group(4), m.group(5), m.group(6)), mm, dd)
                return m.end()
        if m := _PYLOG_OLD.match(text):
            tag.level, tag.origin = m.group(1)[0], m.group(2)
            return m.end()
        if m := _SYSLOG.match(text):
            month = MONTHS.get(m.group(1))
            if month is not None:
                tag.stamp = Stamp(
                    seconds_of_day(m.group(3), m.group(4), m.group(5)), month, int(m.group(2))
                )
                if m.group(7) == "kernel":
                    # The kernel's lines name no host of their own; a process's lines
                    # (journald's "host python[pid]: ") are read as without the shipper,
                    # whose host and pid would change how their ranks are attributed.
                    tag.host = tag.host or m.group(6)
                return m.end()
    if tag.stamp is not None and tag.level is None and (m := _PYLOG_DASH.match(text)):
        tag.level, tag.origin = m.group(2)[0], m.group(1)
        return m.end()
    if first in "td" and (m := _TORCH_LOGGER.match(text)):
        tag.level, tag.origin = m.group(2)[0], m.group(1)
        return m.end()
    return 0


def _note_reads(
    reads: list[int] | None, text: str, m: re.Match[str], first: int, last: int
) -> None:
    if reads is not None:
        reads.extend(range(len(text) - m.start(first), len(text) - m.end(last), -1))


def peel_line_reads(raw: str) -> tuple[LineTag, tuple[int, ...]]:
    """peel_line, and the places (counted from the end of the cleaned line) of the digits
    whose values it tested: every other test it makes is of a character's class, in
    which every ASCII digit is alike, but for _MPI_RANK_TAG's literal "[1,"."""
    reads: list[int] = []
    return _peel(raw, reads), tuple(reads)


def peel_line(raw: str) -> LineTag:
    """Clean (ANSI, CR) and peel one physical line."""
    return _peel(raw, None)


def _peel(raw: str, reads: list[int] | None) -> LineTag:
    text = clean_line(raw.rstrip("\n"))
    tag = LineTag(text)
    shippers_only = True  # every layer peeled so far was a log shipper's
    for _ in range(_MAX_ROUNDS):
        if not text:
            break
        if _TORCHRUN_FIRST.match(text):
            # torchrun's "[rank3]:"/"[default3]:", on every line of most logs: no layer
            # tried before the launchers' can start so (_TORCHRUN_FIRST), straight to them
            shippers_only = False
        else:
            if shippers_only and (m := _SRUN_LABEL.match(text)) is not None:
                tag.rank, tag.tagged = int(m.group(1)), True
                text = text[m.end() :]
                shippers_only = False
                continue
            shippers_only = shippers_only and _SHIPPER.match(text) is not None
            if text[0] in " \t" or _ANY_ROUND_LAYER.match(text) is None:
                break
            consumed = _own_layer(text, tag, reads)
            if consumed:
                text = text[consumed:]
                continue
            if not tag.tagged and (m := _LEADING_TAG.match(text) or _PDSH_BEFORE_NCCL.match(text)):
                text = text[m.end() :]
                continue
            if m := _MPI_RANK_TAG.match(text):
                tag.rank, tag.tagged = int(m.group(1)), True
                text = text[m.end() :]
                continue
        peeled = peel(text)
        if peeled.text == text:
            break
        tag.tagged = True
        if peeled.rank is not None:
            tag.rank = peeled.rank
        if peeled.local_rank is not None:
            tag.local_rank = peeled.local_rank
        if peeled.host is not None:
            tag.host = peeled.host
        if peeled.pid is not None:
            tag.pid = peeled.pid
        text = peeled.text
    tag.text = text
    return tag
