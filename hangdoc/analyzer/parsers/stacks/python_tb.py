"""Python tracebacks (``most recent call last``) and gdb's ``py-bt`` (``most recent
call first``).

A traceback is the stack of the thread that raised, printed outermost first: it
becomes one ThreadStack, innermost first, carrying ``"Type: message"``. Chained
tracebacks ("During handling of the above exception…", "The above exception was the
direct cause…") are one raise: the last traceback is the stack that ended the thread,
the earlier ones are kept in its exception text as its causes. A torch error message
that embeds a C++ stack (``Exception raised from … (most recent call first):``) puts
those native frames innermost, under the Python frames that called into torch.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.model import Frame, ThreadStack
from hangdoc.analyzer.parsers.stacks.blocks import Block, Lines
from hangdoc.analyzer.parsers.stacks.cut import leaf_call
from hangdoc.analyzer.parsers.stacks.native import CPP_START, parse_cpp
from hangdoc.analyzer.parsers.stacks.pin_memory import (
    receiving_shared_batch,
    receiving_worker_batch,
)
from hangdoc.analyzer.parsers.stacks.segments import FH_HEADER, FH_THREAD

TB_START = re.compile(r"Traceback \(most recent call last\):\s*$")
PYBT_START = re.compile(r"Traceback \(most recent call first\):\s*$")
# py-bt of old gdb/Python 2 builds prints no header: "#4 file '…/threading.py', in 'wait'".
PYBT_OLD_START = re.compile(
    r"#\d+ (?:file '.*', in '.*'|<built-in (?:method|function) \w+|Waiting for)"
)
_THREAD_EXC = re.compile(r"Exception in thread (.+?)(?: \(.*\))?:\s*$")
# (", in" with no name after it: a paste rendered as HTML or Markdown ate "<module>")
_FILE = re.compile(r'\s*File "(.*)", line (\d+|\?)(?:, in(?: (.*))?)?\s*$')
_OLD_PYBT = re.compile(r"\s*#\d+ file '(.*)', in '(.*)'\s*$")
_BUILTIN = re.compile(r"\s*(?:#\d+ )?<built-in (?:method|function) (\w+)")
_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")
# "ValueError: msg", "torch.distributed.DistBackendError: msg", "KeyboardInterrupt".
_EXC_LINE = re.compile(r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?::\s?(.*))?$")
_EXC_WORDS = ("Error", "Exception", "Exit", "Interrupt", "Warning", "Failure", "Timeout")
_MAX_MESSAGE_LINES = 20
# A traceback cut before its exception line is still a trustworthy stack when its innermost
# frame shown is torch.distributed's group creation: deeper frames can only be inside it
# (new_group → _new_process_group_helper → ProcessGroupGloo(...) in colossalai issue 2500;
# init_process_group → rendezvous handlers in rendezvous.py). headless.py applies the same
# idea, for any torch.distributed API, to a traceback pasted without its header.
_GROUP_CREATION_FILES = ("torch/distributed/distributed_c10d.py", "torch/distributed/rendezvous.py")
_GROUP_CREATION = frozenset(
    {
        "init_process_group",
        "new_group",
        "_new_group_with_tag",
        "_new_process_group_helper",
        "_store_based_barrier",
        "new_subgroups",
        "new_subgroups_by_enumeration",
        "init_device_mesh",
        "rendezvous",
    }
)


def cut_in_group_creation(frames: list[Frame]) -> bool:
    """Frames (outermost first) of a cut traceback that stop inside group creation."""
    if len(frames) < 2 or not frames[-1].file.endswith(_GROUP_CREATION_FILES):
        return False
    return any(f.function in _GROUP_CREATION for f in frames)


def cut_in_leaf_call(frames: list[Frame]) -> bool:
    """Frames (outermost first) of a cut traceback whose innermost frame shown is a call
    whose deeper frames can only be inside it (cut.py: a collective, a file-system call, a
    checkpoint writer's entry), as headless.py reads a traceback without its header."""
    return len(frames) >= 2 and leaf_call(frames[-1])


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def exception_line(text: str) -> tuple[str, str] | None:
    """``RuntimeError: msg`` → (type, message); None for a line that is no exception."""
    m = _EXC_LINE.match(text.strip())
    if m is None:
        return None
    exc_type = m.group(1)
    leaf = exc_type.rsplit(".", 1)[-1]
    if m.group(2) is None and not leaf.endswith(_EXC_WORDS):
        return None
    if not (leaf[:1].isupper() or "." in exc_type):
        return None
    return exc_type, (m.group(2) or "").strip()


def _exception_text(exc: tuple[str, str]) -> str:
    return f"{exc[0]}: {exc[1]}" if exc[1] else exc[0]


def _one_traceback(lines: Lines, i: int) -> tuple[list[Frame], int]:
    """Frames (outermost first) after the header at ``i``; returns the index after them.

    Lines indented deeper than the header are frames and their source lines; the first
    line at the header's indent (the exception line) ends them. An indented paste (a
    logger's continuation lines) keeps working because indents are relative. A paste
    that lost its indentation (Markdown or HTML rendering strips leading spaces) has each
    frame's source line at the header's indent, right under its frame line: the one line
    after a frame that is no exception line, no frame and no header is read as its source.
    """
    base = _indent(lines[i][1])
    frames: list[Frame] = []
    i += 1
    after_frame = False
    while i < len(lines):
        text = lines[i][1]
        m = _FILE.match(text)
        if m is not None:
            line = int(m.group(2)) if m.group(2).isdigit() else None
            frames.append(Frame(function=m.group(3) or "<module>", file=m.group(1), line=line))
            i += 1
            after_frame = True
            continue
        if (
            after_frame
            and text.strip()
            and _indent(text) <= base
            and exception_line(text) is None
            and not text.strip().startswith(("Traceback ", *_CHAIN))
        ):
            i += 1  # a frame's source line, its indentation lost
            after_frame = False
            continue
        after_frame = False
        if not text.strip():
            nxt = lines[i + 1][1] if i + 1 < len(lines) else ""
            if not nxt.strip() or _indent(nxt) <= base:
                break
            i += 1
            continue
        if _indent(text) > base:
            i += 1  # source lines, carets, "[Previous line repeated N more times]"
            continue
        break
    return frames, i


def parse_traceback(lines: Lines, i: int) -> tuple[Block | None, int]:
    """A (chained) traceback starting at ``lines[i]``."""
    start = lines[i][0]
    name: str | None = None
    if i > 0 and (m := _THREAD_EXC.match(lines[i - 1][1].strip())):
        name = m.group(1)
    causes: list[str] = []
    frames: list[Frame] = []
    exc: tuple[str, str] | None = None
    while True:
        frames, i = _one_traceback(lines, i)
        exc = None
        message_lines: list[str] = []
        if i < len(lines) and (exc := exception_line(lines[i][1])) is not None:
            i += 1
            # A message may run on over several lines, up to a blank line or a chain.
            while i < len(lines) and len(message_lines) < _MAX_MESSAGE_LINES:
                text = lines[i][1]
                if (
                    not text.strip()
                    or text.strip().startswith(_CHAIN)
                    or TB_START.match(text.strip())
                ):
                    break
                if CPP_START.match(text.strip()):
                    break
                if FH_THREAD.match(text.strip()) or FH_HEADER.match(text.strip()):
                    break  # a faulthandler dump printed right under it (no blank line)
                message_lines.append(text.strip())
                i += 1
        j = i
        while j < len(lines) and not lines[j][1].strip():
            j += 1
        if j < len(lines) and lines[j][1].strip().startswith(_CHAIN):
            k = j + 1
            while k < len(lines) and not lines[k][1].strip():
                k += 1
            if k < len(lines) and TB_START.match(lines[k][1].strip()):
                if exc is not None:
                    causes.append(_exception_text(exc))
                i = k
                continue
        break
    native: list[Frame] = []
    if i < len(lines) and CPP_START.match(lines[i][1].strip()):
        cpp, i = parse_cpp(lines, i)
        if cpp is not None and cpp.threads:
            native = list(cpp.threads[0].frames)
    if exc is None and not frames:
        return None, i
    # Python prints the exception right under the innermost frame: without it the paste
    # was cut (it ends mid-traceback, or another rank's output took its end). The frames
    # left still say where the thread was, as far as they go: a position, marked cut, so
    # that nothing reads it as the thread's end (no exception, no death) nor its innermost
    # frame shown as its innermost (views/activity.py; but see cut_in_group_creation,
    # cut.py and pin_memory.py, where every frame cut can only be inside the last shown).
    summary = _exception_text(exc) if exc else None
    if summary and causes:
        summary += " (while handling " + "; ".join(causes) + ")"
    thread = ThreadStack(
        frames=tuple(native) + tuple(reversed(frames)),
        name=name,
        is_main=name is None,
        exception=summary,
    )
    block = Block(kind="traceback", start=start, threads=[thread], end=lines[i - 1][0])
    if exc is not None:
        block.exc_type, block.exc_message = exc
    else:
        # cut where the call shown holds every frame cut: its innermost frame shown is
        # where it was, as the readers of those calls have long taken it
        block.cut = not cut_at_known_call(frames)
    return block, i


# torchrun's agent (torch/distributed/run.py → launcher/api.py launch_agent, which raises
# ChildFailedError when a worker fails): its traceback is the launcher process's own.
_LAUNCHER_FILES = ("torch/distributed/run.py", "torch/distributed/launcher/api.py")


def launcher_traceback(block: Block) -> bool:
    """A traceback of torchrun's own process: its ChildFailedError, or frames of the agent
    (run.py, launcher/api.py). It names the failed worker in its table (parsers/logs/
    elastic.py reads it); the traceback itself is no worker's."""
    if block.kind != "traceback":
        return False
    if (block.exc_type or "").endswith("ChildFailedError"):
        return True
    return any(
        f.file.replace("\\", "/").endswith(_LAUNCHER_FILES) for t in block.threads for f in t.frames
    )


def cut_at_known_call(frames: list[Frame]) -> bool:
    """Frames (outermost first) of a cut traceback whose innermost frame shown is a call
    every deeper frame can only be inside (group creation, a collective, a file-system
    call, a checkpoint writer's entry, a pinned batch's receipt, the main process's receipt
    of a worker's batch): there the thread was."""
    return (
        cut_in_group_creation(frames)
        or cut_in_leaf_call(frames)
        or receiving_shared_batch(frames)
        or receiving_worker_batch(frames)
    )


def parse_pybt_frames(lines: Lines, i: int) -> tuple[list[Frame], bool | None, int]:
    """py-bt frames after its header at ``i`` (already innermost first), whether the
    thread waits for the GIL, and the index after them."""
    frames: list[Frame] = []
    waits_gil: bool | None = None
    i += 1
    while i < len(lines):
        text = lines[i][1]
        stripped = text.strip()
        if m := _FILE.match(text):
            line = int(m.group(2)) if m.group(2).isdigit() else None
            frames.append(Frame(function=m.group(3) or "?", file=m.group(1), line=line))
        elif m := _OLD_PYBT.match(text):
            frames.append(Frame(function=m.group(2), file=m.group(1)))
        elif m := _BUILTIN.match(text):
            frames.append(Frame(function=m.group(1), file="<built-in>", native=True))
        elif "Waiting for the GIL" in stripped or "Waiting for a lock (e.g. GIL)" in stripped:
            waits_gil = True
        elif not stripped or _indent(text) > 0 or stripped.startswith("#"):
            pass  # source lines, "(unable to read python frame information)", "#N …"
        else:
            break
        i += 1
    return frames, waits_gil, i


def parse_pybt(lines: Lines, i: int) -> tuple[Block | None, int]:
    """A bare ``py-bt`` (no gdb thread header above it), with or without its header."""
    start = lines[i][0]
    frames, waits_gil, i = parse_pybt_frames(
        lines, i if PYBT_START.match(lines[i][1].strip()) else i - 1
    )
    if not frames:
        return None, i
    thread = ThreadStack(frames=tuple(frames), is_main=True, owns_gil=False if waits_gil else None)
    return Block(kind="py-bt", start=start, threads=[thread], dump=True, end=lines[i - 1][0]), i
