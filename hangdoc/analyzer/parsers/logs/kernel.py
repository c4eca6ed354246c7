"""The kernel's report of a task stuck in uninterruptible sleep (``D`` state), with its
call trace: which driver the process is stuck in.

The formats are the kernel's own:

* ``INFO: task python3:15277 blocked for more than 120 seconds.`` — the hung-task
  detector (kernel/hung_task.c, ``check_hung_task``), followed by ``Tainted:`` and the
  ``"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.`` lines;
* the task line of ``sched_show_task`` (kernel/sched/core.c): since Linux 5.10
  ``task:%-15.15s state:%c stack:%-5lu pid:%-5d ppid:%-6d flags:0x%08lx``, before it
  ``%-15.15s %c`` then the stack, pid, ppid and flags as bare numbers
  (``conda           D    0 11003   2638 0x80004002``, or with a stack pointer
  ``bptm            D ffff8817dddf80b0     0 26120  26119 0x00000080``); sysrq-w
  ("show blocked state") prints the same;
* ``Call Trace:`` then one frame a line, ``func+0x13e0/0x16f0 [module]`` (``? `` for an
  unreliable frame, ``[<ffffffffc33d41c2>]`` before it on old kernels), between
  ``<TASK>`` … ``</TASK>`` on new ones, and the register dump.

A frame in one of NVIDIA's kernel modules (``nvidia``, ``nvidia_uvm``, …) means the
process is blocked inside the GPU driver: no signal reaches it, ``kill -9`` included.
Public reports of exactly this: rwth-i6/returnn#1480 (``uvm_ioctl`` waiting on a mutex
under torchrun), NVIDIA/open-gpu-kernel-modules#456 (``uvm_spin_loop``),
NVIDIA/nvidia-persistenced#15 (``os_acquire_rwlock_read [nvidia]``), conda/conda#9306
(``uvm_gpu_fault_buffer_flush [nvidia_uvm]``, the old task-line format).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.payloads.host import HungTask, KernelFrame
from hangdoc.analyzer.vocabulary import EventKind

_BLOCKED = re.compile(
    r"INFO: task (?P<name>.+?):(?P<pid>\d+) blocked for more than (?P<secs>\d+) seconds"
)
_TASK_NEW = re.compile(
    r"^task:(?P<name>.{1,15}?) +state:(?P<state>[A-Za-z])\b(?:.*?\bpid: *(?P<pid>\d+))?"
)
_TASK_OLD = re.compile(
    r"^(?P<name>\S.{0,14}?) +(?P<state>D) +(?:[0-9a-f]{16} +)?\d+ +(?P<pid>\d+) +\d+ "
    r"+0x[0-9a-f]+\s*$"
)
_FRAME = re.compile(
    r"^\s*(?:\[<[0-9a-f]+>\] *)?(?P<unsure>\? )?(?P<fn>[\w.$]+)\+0x[0-9a-f]+/0x[0-9a-f]+"
    r"(?: \[(?P<mod>\w+)\])?\s*$"
)
# The lines between a task line and the end of its trace that are not frames.
_IN_REPORT = re.compile(
    r"^\s*(?:Call Trace:|<TASK>|</TASK>|<IRQ>|</IRQ>|Tainted:|\"echo 0 > /proc/sys/kernel/"
    r"|RIP:|RSP:|RAX:|RDX:|RBP:|R10:|R13:|Code:|(?:[0-9a-f]{16} ?){2,})"
)
_NVIDIA_MODULES = frozenset(
    {"nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem", "nvidia_fs"}
)
_MAX_FRAMES = 12


def _task_line(text: str) -> re.Match[str] | None:
    body = text.strip()
    m = _TASK_NEW.match(body)
    if m is not None and m.group("state") == "D":
        return m
    return _TASK_OLD.match(body)


@dataclass(slots=True)
class HungTaskBlock:
    """One task's report: the hung-task line and/or the task line, then its trace (the
    task is in D state: the task lines of other states are not read)."""

    # Every line a report starts with holds one of these (the scanner's prefilter).
    NEED: ClassVar[tuple[str, ...]] = ("task", " D ")
    name: str | None = None
    pid: int | None = None
    blocked_s: int | None = None
    frames: list[KernelFrame] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    has_task_line: bool = False

    @staticmethod
    def start(text: str) -> HungTaskBlock | None:
        if not any(word in text for word in HungTaskBlock.NEED):
            return None
        block = HungTaskBlock()
        if (b := _BLOCKED.search(text)) is not None:
            block.name, block.pid = b.group("name"), int(b.group("pid"))
            block.blocked_s = int(b.group("secs"))
            return block
        if (t := _task_line(text)) is not None:
            block._take_task(t)
            return block
        return None

    def _take_task(self, m: re.Match[str]) -> None:
        self.has_task_line = True
        self.name = self.name or m.group("name").strip()
        if m.group("pid") is not None:
            self.pid = int(m.group("pid"))

    def feed(self, text: str) -> bool:
        if not text.strip():
            return True
        if (f := _FRAME.match(text)) is not None:
            mod = f.group("mod")
            if len(self.frames) < _MAX_FRAMES and not f.group("unsure"):
                self.frames.append(KernelFrame(f.group("fn"), mod))
            if mod and mod not in self.modules:
                self.modules.append(mod)
            return True
        if _IN_REPORT.match(text):
            return True
        if (
            not self.has_task_line
            and not self.frames
            and (t := _task_line(text)) is not None
            and (t.group("pid") is None or int(t.group("pid")) == self.pid)
        ):
            self._take_task(t)
            return True
        return False

    def finish(self) -> Hit | None:
        if not self.frames and self.blocked_s is None:
            return None  # a bare "X D 0 1 2 0x0" line without a trace is not enough
        driver = tuple(m for m in self.modules if m in _NVIDIA_MODULES)
        hung = HungTask(
            name=self.name,
            blocked_s=self.blocked_s,
            frames=tuple(self.frames),
            modules=tuple(self.modules),
            driver=driver,
        )
        return Hit(
            EventKind.KERNEL_HUNG_TASK,
            payload=hung,
            key=("hung", self.pid, driver),
            named_pid=self.pid,
        )
