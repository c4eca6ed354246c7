"""The states of the node's services that ``systemctl status`` showed, and what NVIDIA's
services are for.

A state line (``Active: failed (Result: exit-code)``) names no unit; the unit is the one
named last before it in the same text (systemctl prints the header and ``Loaded:`` above
``Active:``), within a few lines (parsers/logs/services.py).

NVIDIA's services, from their documentation:

* the Fabric Manager (``nvidia-fabricmanager``, program ``nv-fabricmanager``; NVIDIA's
  "Fabric Manager for NVIDIA NVSwitch Systems" user guide): on NVSwitch systems (HGX/DGX
  A100, H100, H200) it configures the NVSwitches and the GPUs' NVLink fabric. Until it runs
  at the driver's own version the GPUs' fabric is not initialised: CUDA fails to start
  (``system not yet initialized``, error 802) or peer-to-peer traffic over NVLink, NCCL's
  P2P and NVLS transports, fails or hangs. A fabric manager failed or stopped is the node's
  GPU platform down: gpu_hardware_or_driver.
* the persistence daemon (``nvidia-persistenced``; the driver's "Persistence Daemon"
  documentation): it keeps the driver's state loaded while no client holds the GPU; without
  it each start of a CUDA process pays the initialisation again. Slower, not stuck: no
  cause.
* DCGM's host engine (``nvidia-dcgm``, ``dcgm``, program ``nv-hostengine``): monitoring and
  diagnostics. Not in a job's path: no cause.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hangdoc.analyzer.payloads.host import ServiceStatus
from hangdoc.analyzer.views.timeline import Placed, Timeline
from hangdoc.analyzer.vocabulary import EventKind


class NvidiaService(enum.StrEnum):
    """What one of NVIDIA's services does for a job (the module's docstring)."""

    FABRIC_MANAGER = "fabric manager"  # the NVSwitch fabric: CUDA and NVLink need it
    PERSISTENCE = "persistence daemon"  # keeps the driver loaded: start-up time only
    MONITOR = "DCGM host engine"  # monitoring: not in a job's path


# Units and the programs their ExecStart= runs, as NVIDIA's packages name them.
_NVIDIA_SERVICES = {
    "nvidia-fabricmanager": NvidiaService.FABRIC_MANAGER,
    "nv-fabricmanager": NvidiaService.FABRIC_MANAGER,
    "nvidia-persistenced": NvidiaService.PERSISTENCE,
    "nvidia-dcgm": NvidiaService.MONITOR,
    "dcgm": NvidiaService.MONITOR,
    "nv-hostengine": NvidiaService.MONITOR,
}
# How far below the line that named the unit its Active: line may be: systemctl prints the
# header, Loaded: and, on newer systemd, Drop-In: lines (one per directory) before it.
_NEAR_LINES = 8


@dataclass(frozen=True, slots=True)
class ServiceState:
    """A unit and the state systemctl showed it in."""

    unit: str
    active: str  # systemd's ActiveState
    sub: str | None  # the parentheses after it: "Result: exit-code", "dead", "auto-restart"
    placed: tuple[Placed, ...]  # the line naming the unit and the state line

    @property
    def down(self) -> bool:
        """Not running: failed, stopped (``inactive (dead)``), or restarting after it failed
        (``activating (auto-restart)``, systemd's Restart= between two attempts)."""
        if self.active in ("failed", "inactive", "deactivating", "maintenance"):
            return True
        return self.active == "activating" and "auto-restart" in (self.sub or "")

    @property
    def nvidia(self) -> NvidiaService | None:
        """What the unit is for, when it is one of NVIDIA's."""
        return _NVIDIA_SERVICES.get(self.unit.lower())


def service_states(tl: Timeline) -> list[ServiceState]:
    """Every state line, paired with the unit named last before it in its text."""
    found: list[ServiceState] = []
    named: dict[str, tuple[Placed, str]] = {}  # per source: the last line naming a unit
    for p in tl.of(EventKind.SERVICE_STATUS):
        status = p.event.payload_as(ServiceStatus)
        if status is None:
            continue
        source = p.event.source or ""
        if status.active is None:
            if status.unit:
                named[source] = (p, status.unit)
            continue
        if status.unit:
            found.append(ServiceState(status.unit, status.active, status.sub, (p,)))
        elif (last := named.get(source)) is not None and _near(last[0], p):
            found.append(ServiceState(last[1], status.active, status.sub, (last[0], p)))
    return found


def _near(before: Placed, after: Placed) -> bool:
    if before.event.line is None or after.event.line is None:
        return before.index < after.index
    return 0 <= after.event.line - before.event.line <= _NEAR_LINES
