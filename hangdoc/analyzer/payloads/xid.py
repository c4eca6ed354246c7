"""What an NVIDIA Xid means: the GPU's hardware, its driver or firmware, or the program.

An Xid is the number the NVIDIA driver logs with ``NVRM: Xid (PCI:…): N, …`` when a GPU
channel fails (open-gpu-kernel-modules, src/nvidia/src/kernel/gpu/rc/kernel_rc.c
krcReportXid). Its numbers are the driver's error codes (src/common/sdk/nvidia/inc/
nverror.h: ``ROBUST_CHANNEL_GR_EXCEPTION (13)``, ``ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT
(31)`` …), and what each means is NVIDIA's published Xid catalog
(docs.nvidia.com/deploy/xid-errors: the Xid listing's columns "HW Error / Driver Error /
User App Error …", and for Ampere and newer GPUs the catalog's "Resolution Bucket
(Immediate Action)": ``RESTART_APP`` where the program is what failed and the GPU stays
usable, ``RESET_GPU`` / ``RESTART_BM`` / ``CONTACT_SUPPORT`` where the GPU or its driver
did). The table keeps the codes a hung or crashed job meets; a code not in it means
nothing here.

The class says whose failure it is:

* ``HARDWARE``: the GPU, its memory or its links (ECC, row remapping failed, NVLink, off
  the bus): the node's, HD300/HD301 name it.
* ``DRIVER``: the driver's or the GPU's firmware (the PMU, GSP): also the node's.
* ``WARNING``: a hardware event the GPU survived (a row remapped, many corrected bits, a
  context switch that timed out): a hint only.
* ``APPLICATION``: the program's own kernel faulted on the GPU (an out-of-range access, an
  illegal instruction, a page fault on an address it does not own). The driver kills the
  channel and with it the process's CUDA context: the process on that GPU dies of it
  (its next CUDA call fails with "an illegal memory access was encountered" or
  "unspecified launch failure"). A crash of that process (views/deaths.py), not the GPU.
* ``AFTER_EFFECT``: the driver's clean-up after another failure (a channel reset, the
  channels of a process that ended torn down): no cause of its own.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class XidFault(enum.StrEnum):
    """Whose failure an Xid reports (NVIDIA's Xid catalog, by code)."""

    HARDWARE = "hardware"
    DRIVER = "driver"
    WARNING = "warning"
    APPLICATION = "application"
    AFTER_EFFECT = "after_effect"


@dataclass(frozen=True, slots=True)
class XidMeaning:
    """One Xid code: the driver's name for it (nverror.h), what it is for people, whose
    failure it reports."""

    mnemonic: str | None  # nverror.h's name (None: a code newer than the header read)
    description: str
    fault: XidFault


def _row(mnemonic: str | None, description: str, fault: XidFault) -> XidMeaning:
    return XidMeaning(mnemonic, description, fault)


_H, _D, _W, _A, _E = (
    XidFault.HARDWARE,
    XidFault.DRIVER,
    XidFault.WARNING,
    XidFault.APPLICATION,
    XidFault.AFTER_EFFECT,
)
_NVLINK = ("NVLINK_ERROR", "NVLink error", _H)
_NVLINK_NEW = (None, "NVLink error", _H)

XID_CATALOG: dict[int, XidMeaning] = {
    # The program's kernel faulted: NVIDIA lists a user application error first among the
    # causes, and the catalog's immediate action is to restart the application.
    13: _row(
        "ROBUST_CHANNEL_GR_EXCEPTION", "graphics engine exception (usually the application)", _A
    ),
    31: _row(
        "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT",
        "GPU memory page fault (usually an illegal address in the application)",
        _A,
    ),
    # The driver's clean-up after a fault or a process that ended.
    43: _row(
        "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
        "GPU stopped processing (the process was killed or reset)",
        _E,
    ),
    45: _row(
        "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "preemptive cleanup (follows a killed process)", _E
    ),
    48: _row("ROBUST_CHANNEL_GPU_ECC_DBE", "double-bit ECC error", _H),
    61: _row("PMU_BREAKPOINT", "GPU micro-controller breakpoint", _D),
    62: _row("PMU_HALT_ERROR", "GPU micro-controller halt", _D),
    63: _row("INFOROM_DRAM_RETIREMENT_EVENT", "ECC page retirement / row remapping event", _W),
    64: _row("INFOROM_DRAM_RETIREMENT_FAILURE", "ECC page retirement / row remapper failure", _H),
    74: _row(*_NVLINK),
    79: _row("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", _H),
    92: _row("EXCESSIVE_SBE_INTERRUPTS", "high single-bit ECC error rate", _W),
    94: _row("ROBUST_CHANNEL_CONTAINED_ERROR", "contained ECC error", _H),
    95: _row("ROBUST_CHANNEL_UNCONTAINED_ERROR", "uncontained ECC error", _H),
    109: _row(None, "context switch timeout", _W),
    119: _row("GSP_RPC_TIMEOUT", "GSP RPC timeout", _D),
    120: _row("GSP_ERROR", "GSP error", _D),
    121: _row("C2C_ERROR", "C2C link error", _H),
    140: _row(None, "unrecovered ECC error", _H),
    **{code: _row(*_NVLINK_NEW) for code in range(144, 151)},
    # "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)" (R550+)
    154: _row(None, "GPU recovery action required (reset or reboot)", _H),
}


def xid_meaning(xid: int | None) -> XidMeaning | None:
    """What the Xid code means, None for a code the table does not hold (or no code)."""
    return XID_CATALOG.get(xid) if xid is not None else None
