"""The GPU driver reported a hardware or driver fault (Xid)

## What it means
The kernel log (`dmesg`, `journalctl -k`) carries `NVRM: Xid (PCI:…): N, …` lines, the
NVIDIA driver's error reports. Some Xids mean the GPU or its links failed: 48/94/95
(ECC errors), 63/64 (memory row remapping), 74 and 144-150 (NVLink), 79 ("GPU has fallen
off the bus"), 119/120 (GSP firmware), 61/62 (micro-controller). Others are usually the
application's own fault or a consequence (13 graphics exception, 31 memory page fault,
43 GPU stopped processing, 45 preemptive cleanup). The classes are one table, from NVIDIA's
published Xid catalog (payloads/xid.py); an application fault (13, 31) is also the death
of the process on that GPU, which HD030 names.

## Why it hangs
A GPU that faults stops executing the rank's kernels, including NCCL's: the rank's
collectives never complete and every peer waits; a GPU that fell off the bus takes the
whole process (and often the node) down.

## Evidence used
NVRM Xid lines and "fallen off the bus" / "Unable to determine the device handle"
messages in any attached text, mapped to ranks through the process id in the Xid line,
the PCI bus id (NCCL init lines carry `busId`), or the host. A derived Xid that names its
cause (`45, pid=…, Ch 00000001 caused by previous Xid 149`, the driver's kernel_rc.c)
counts as the Xid that caused it.

## How to confirm
`nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT` on the node, `nvidia-smi -q | grep
-i xid`, the node's full `dmesg -T`; run `dcgmi diag -r 3` after draining the node.

## How to fix
Drain the node and have the GPU reset or replaced (fatal Xids); for row-remapping Xids
a GPU reset applies the remap. Resume the job from its last checkpoint on healthy
nodes. Application-class Xids (13, 31, 43) point back at the job's own kernels.
"""

from __future__ import annotations

from collections.abc import Iterable

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.host import GpuXid as GpuXidPayload
from hangdoc.analyzer.payloads.xid import XID_CATALOG, XidFault
from hangdoc.analyzer.views.gpu_faults import ranks_for
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import EventKind
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text

LOST = None  # GpuXid.xid of a GPU the driver or NVML lost: no Xid number


def _table(*faults: XidFault) -> dict[int | None, str]:
    """The Xid codes of these classes in NVIDIA's Xid catalog (payloads/xid.py), with what
    each is for people."""
    return {code: m.description for code, m in XID_CATALOG.items() if m.fault in faults}


# The GPU or its driver failed (a fatal Xid), a hardware event it survived (a warning), the
# program's own fault or the driver's clean-up after one (an application Xid).
XID_FATAL: dict[int | None, str] = {
    **_table(XidFault.HARDWARE, XidFault.DRIVER),
    LOST: "GPU lost (driver cannot reach it)",
}
XID_WARN: dict[int | None, str] = _table(XidFault.WARNING)
XID_APP: dict[int | None, str] = _table(XidFault.APPLICATION, XidFault.AFTER_EFFECT)


def _xid(p: Placed) -> GpuXidPayload:
    return p.event.payload_as(GpuXidPayload) or GpuXidPayload()


def _effective(p: Placed) -> int | None:
    """The Xid an event stands for (None: the GPU was lost): a derived Xid 45/43 line that
    says "caused by previous Xid 149" (the driver's own wording, kernel_rc.c) stands for
    the Xid that caused it."""
    xid = _xid(p)
    cause = xid.caused_by_xid
    if cause is not None and (cause in XID_FATAL or cause in XID_WARN):
        return cause
    return xid.xid


def _shown(xid: int | None) -> str:
    return "lost" if xid is LOST else str(xid)


class GpuXid(Rule):
    __doc__ = __doc__
    id = "HD300"
    name = "gpu-xid"
    summary = "the GPU driver logged a hardware/driver Xid"
    categories = (Category.GPU_HARDWARE,)
    severity = Severity.CRITICAL
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        xids = tl.of(EventKind.GPU_XID)
        if not xids:
            return
        # A fatal Xid states a GPU failure; a warning Xid hints at one; an application
        # Xid (the program's own fault) names no GPU cause.
        for table, severity, strength in (
            (XID_FATAL, Severity.CRITICAL, Strength.STATED),
            (XID_WARN, Severity.WARNING, Strength.HINT),
            (XID_APP, Severity.INFO, Strength.ABSENCE),
        ):
            chosen = [p for p in xids if _effective(p) in table]
            if not chosen:
                continue
            codes = sorted({_effective(p) for p in chosen}, key=_shown)
            what = "; ".join(f"Xid {_shown(c)}: {table[c]}" for c in codes)
            derived = sorted(
                {_shown(_xid(p).xid) for p in chosen if _xid(p).caused_by_xid is not None}
            )
            if derived:
                what += f" (reported by the derived Xid {', '.join(derived)} lines it caused)"
            gpus = sorted({_xid(p).pci or "?" for p in chosen})
            ranks = ranks_for(tl, chosen)
            where = f" on {ranks_text(ranks)}" if ranks else ""
            yield Finding(
                rule=self.id,
                category=Category.GPU_HARDWARE,
                severity=severity,
                title=f"GPU fault{where}: {what} (GPU {', '.join(gpus[:3])})",
                explanation=(
                    f"The NVIDIA driver logged {what} for GPU(s) {', '.join(gpus)}"
                    + (f", used by {ranks_text(ranks)}" if ranks else "")
                    + "."
                    + (
                        " These Xids usually reflect the application or a killed process, "
                        "not the hardware."
                        if table is XID_APP
                        else ""
                    )
                ),
                fix=(
                    "Drain the node, run nvidia-smi -q -d ECC,ROW_REMAPPER and dcgmi diag, and "
                    "have the GPU reset or replaced; resume from the last checkpoint on healthy "
                    "nodes."
                )
                if table is not XID_APP
                else (
                    "Look at the job's own kernels "
                    "(illegal address, killed process) before suspecting the hardware."
                ),
                culprit_ranks=tuple(ranks),
                evidence=tuple(limited_refs(chosen, limit=5)),
                strength=strength,
            )


RULE = GpuXid
