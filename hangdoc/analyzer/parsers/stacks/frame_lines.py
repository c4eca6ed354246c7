"""The lines of a py-spy, faulthandler or gdb dump, known by their shape alone.

Every line of a text is offered to the stack recognisers and to the log recognisers
(``analyzer/parsers/text.py``). A dump's frame lines are the stacks' alone: nothing a log
recogniser looks for is in ``    all_reduce (torch/distributed/distributed_c10d.py:2050)``,
``  File "/srv/job/fh.py", line 4 in allreduce_wait`` or ``#3  0x00007f32 in
ncclProxyProgress (proxyState_=0x5603) at proxy.cc:868``, nor in py-spy's ``Process``,
``Python`` and ``Thread`` lines, yet the log scanner's work on each (its prefix peeler and
every single-line recogniser, about 13 µs a line) is most of the cost of reading a large
paste of stacks. So the log side sees a blank line in their place (the numbering of the
other lines unchanged). A blank line is not the line in every state the scanner keeps
(a bare exception line it reports only when nothing but blank lines follow); on every
text the project holds no event changes (``tests/unit/parsers/test_text_path.py``), and
the lines where one would are left to it: faulthandler's thread lines (a thread's dump
often follows the bare exception line that ended it), a Python traceback's frames
(``line 4, in f``, with the comma: the scanner follows tracebacks to make their exception
events), torch's C++ ``frame #3:`` lines, and the frames torch prints under "Stack trace
of the failed collective:" (``#0 all_reduce from file.py:12``), which the scanner keeps
with that record.

py-spy and faulthandler frames count only indented (py-spy indents by four spaces,
faulthandler by two), behind a launcher's prefix if any: an unindented line ending in
``(train.py:12)`` may be the job's own log line.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.stacks.pyspy_frames import FRAME as PYSPY_FRAME

# faulthandler's frame (Python/traceback.c dump_frame): 'File "<path>", line <n> in <name>'.
_FAULT_FRAME = re.compile(r'\s+File "[^"\n]*", line (?:\d+|\?\?\?) in \S')
_FAULT_FRAME_HEAD = 'File "'
_HEAD_WIDTH = 16
# The launcher prefixes a rank's frames carry in a shared console (parsers/prefixes.py),
# with the one space torch writes after them.
_LAUNCHER_PREFIX = re.compile(r"(?:\[(?:rank|default)\d+\]:)+ ?")
# The headers of a py-spy dump ("Process 9106: python train.py", "Python v3.11.7 (…)",
# 'Thread 9106 (idle): "MainThread"'); not faulthandler's (the module's docstring).
_DUMP_HEADER = re.compile(
    r"(?:Process \d+: |Python v\d|Thread (?:0[xX][0-9a-fA-F]+|\d+) \((?:idle|active|gil))"
)
# gdb's frame (``bt``): "#N  0xADDR in FUNC (ARGS) …", or "#N  FUNC (ARGS) at FILE:LINE".
_GDB_FRAME = re.compile(r"#\d+ +(?:0x[0-9a-fA-F]+ in \S|\S.*\) at \S+:\d+\s*$)")


# The characters a line is_dump_frame is True for starts with (a prefix's "[", an
# indent, gdb's "#", py-spy's "Process", "Python" and "Thread"): a line that starts with
# none of them is no frame, found at one look (tests/unit/parsers/test_line_router.py).
FRAME_FIRSTS = "[ \t#PT"


def is_dump_frame(line: str) -> bool:
    """True for a gdb frame line, or an indented py-spy or faulthandler one, behind the
    ``[rank3]:`` or ``[default3]:`` prefix torchrun and torch put on a rank's lines."""
    if line[:1] == "[" and (prefix := _LAUNCHER_PREFIX.match(line)) is not None:
        line = line[prefix.end() :]
    if line[:1] not in (" ", "\t"):
        if line[:1] == "#":
            return _GDB_FRAME.match(line) is not None
        return line[:1] in "PT" and _DUMP_HEADER.match(line) is not None
    if line.rstrip().endswith(")"):
        return PYSPY_FRAME.match(line) is not None
    return _FAULT_FRAME_HEAD in line[:_HEAD_WIDTH] and _FAULT_FRAME.match(line) is not None
