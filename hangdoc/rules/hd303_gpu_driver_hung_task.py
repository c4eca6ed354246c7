"""A process is stuck inside the NVIDIA kernel driver (uninterruptible sleep)

## What it means
The kernel log shows a task in `D` state (uninterruptible sleep) whose call trace runs
through one of NVIDIA's kernel modules (`[nvidia]`, `[nvidia_uvm]`, …): the hung-task
detector's `INFO: task python3:15277 blocked for more than 120 seconds.` or the task
line of `sched_show_task` (`task:python3.11 state:D … pid:15277`, sysrq-w, `echo w >
/proc/sysrq-trigger`), followed by frames such as `uvm_ioctl+0x13e0/0x16f0
[nvidia_uvm]`. The process is waiting on a lock or on the GPU inside the driver.

## Why it hangs
A task in `D` state cannot run and cannot be signalled (`kill -9` included) until the
driver call returns; when that never happens the rank never reaches its next collective
and every peer waits until its timeout. Driver-level hangs come from driver bugs, a GPU
that stopped responding, or lock contention between processes sharing the GPUs.

## Evidence used
The kernel's hung-task / blocked-task reports and their call traces in any attached
text (`dmesg`, `journalctl -k`); the process id in the report is matched to a rank
when NCCL lines name the same pid.

## How to confirm
`cat /proc/<pid>/stack` and `ps -o pid,stat,wchan:32 -p <pid>` on the node (state `D`,
a `uvm_*`/`nv*` wait channel); the node's `dmesg -T` for Xid lines around the same time;
`nvidia-smi` hanging too is a strong sign the driver is wedged.

## How to fix
The node needs a GPU reset or a reboot (a process in `D` state cannot be killed).
Update the NVIDIA driver if the trace matches a known driver bug; check `dmesg` for Xid
errors that would point at the hardware instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.host import HungTask
from hangdoc.analyzer.views.gpu_faults import ranks_for
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text


class GpuDriverHungTask(Rule):
    __doc__ = __doc__
    id = "HD303"
    name = "gpu-driver-hung-task"
    summary = "a process is stuck in D state inside the NVIDIA kernel driver"
    categories = (Category.GPU_HARDWARE,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        reports = [
            (p, hung)
            for p in tl.of(EventKind.KERNEL_HUNG_TASK)
            if (hung := p.event.payload_as(HungTask)) is not None and hung.driver
        ]
        if not reports:
            return
        stuck = [p for p, _ in reports]
        ranks = ranks_for(tl, stuck)
        tasks = sorted({f"{hung.name or '?'} (pid {p.event.pid or '?'})" for p, hung in reports})
        modules = sorted({m for _, hung in reports for m in hung.driver})
        driver_frames = [
            str(frame) for _, hung in reports for frame in hung.frames if frame.module in modules
        ]
        where = f" ({driver_frames[0]})" if driver_frames else ""
        who = ranks_text(ranks) if ranks else ", ".join(tasks[:3])
        blocked = [hung.blocked_s for _, hung in reports if hung.blocked_s]
        yield Finding(
            rule=self.id,
            category=Category.GPU_HARDWARE,
            severity=Severity.CRITICAL,
            title=f"{who} stuck in the NVIDIA driver "
            f"({', '.join(modules)}) in uninterruptible sleep",
            explanation=(
                f"The kernel reports {', '.join(tasks[:4])} in D state inside the "
                f"{', '.join(modules)} kernel module{where}"
                + (f", blocked for more than {blocked[0]} s" if blocked else "")
                + ". A process in the driver cannot make progress or be killed until the "
                "driver call returns, so its rank never reaches the next collective."
            ),
            fix=(
                "Reset the GPU or reboot the node (the process cannot be killed); look for "
                "Xid errors in dmesg around the same time, and update the NVIDIA driver if "
                "the trace matches a known driver bug."
            ),
            culprit_ranks=tuple(ranks),
            evidence=tuple(limited_refs(stuck, limit=4)),
            strength=Strength.STATED,  # the kernel reports the process stuck in the driver
        )


RULE = GpuDriverHungTask
