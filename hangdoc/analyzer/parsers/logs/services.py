"""A system service's state, as ``systemctl status`` prints it (systemd's
src/systemctl/systemctl-show.c, print_status_info).

The block starts with the unit and its description, after a glyph of its state (``●``,
``○``, ``×``; a paste may drop it), then indented ``key: value`` lines::

    ● nvidia-fabricmanager.service - NVIDIA fabric manager service
         Loaded: loaded (/lib/systemd/system/nvidia-fabricmanager.service; enabled; …)
         Active: failed (Result: exit-code) since Mon 2024-07-01 14:43:57 UTC; 5s ago
        Process: 444114 ExecStart=/usr/bin/nv-fabricmanager -c … (code=exited, status=1/FAILURE)

``Active:`` is the unit's ActiveState (systemd.unit(5), org.freedesktop.systemd1(5): one of
active, reloading, inactive, failed, activating, deactivating, maintenance, refreshing)
with its sub-state or result in parentheses. Each line becomes one SERVICE_STATUS event:
a line that names the unit (the header, ``Loaded:``'s unit file, ``ExecStart=``'s program,
``systemctl status NAME``) or one that gives the state, or both where a paste joined them;
views/services.py pairs a state with the unit named last before it in the same text.
"""

from __future__ import annotations

import re

from hangdoc.analyzer.parsers.logs.hit import Hit
from hangdoc.analyzer.parsers.logs.literals import Need
from hangdoc.analyzer.payloads.host import ServiceStatus
from hangdoc.analyzer.vocabulary import EventKind

_UNIT_NAME = r"[A-Za-z0-9][\w:@.\-]{0,80}?"
# The header: "● name.service - Description" (the glyph optional).
_HEADER = re.compile(rf"(?:^|[\s●○×*])(?P<unit>{_UNIT_NAME})\.service\s+-\s+\S")
# "Loaded: loaded (/lib/systemd/system/name.service; enabled; …)"; "not-found" has no path.
_LOADED = re.compile(
    rf"\bLoaded: (?P<load>[\w\-]+)(?: \((?:[^;()\s]*/)?(?P<unit>{_UNIT_NAME})\.service\b)?"
)
# "$ sudo systemctl status name" (the command pasted above its output, as a shell line).
_COMMAND = re.compile(
    r"^[^\w\n]{0,16}(?:sudo\s+)?systemctl\s+status\s+(?:-\S+\s+)*(?P<unit>[A-Za-z0-9][\w:@\-]{0,80})"
    r"(?:\.service)?(?!\S)"
)
# "Process: 444114 ExecStart=/usr/bin/nv-fabricmanager …": the program the unit ran.
_EXEC = re.compile(r"\bExecStart=(?:[^\s/]*/)*(?P<program>[\w.\-]+)")
_ACTIVE = re.compile(
    r"\bActive: (?P<active>active|reloading|inactive|failed|activating|deactivating"
    r"|maintenance|refreshing)\b(?: \((?P<sub>[^()\n]{1,60})\))?"
)

# Every line the recogniser below makes an event of holds one of these (literals.Need;
# the scanner's prefilter is the union of the recognisers' needs, parsers/logs/prefilter.py).
NEED = Need.words((".service", "Active: ", "ExecStart=", "systemctl"))


def match_service_status(text: str) -> Hit | None:
    """One line of ``systemctl status``: the unit it names, its state, or both."""
    if not NEED.admits(text):
        return None
    unit = None
    for pattern in (_HEADER, _LOADED, _COMMAND):
        m = pattern.search(text)
        if m is not None and m.group("unit"):
            unit = m.group("unit")
            break
    if unit is None and (e := _EXEC.search(text)) is not None:
        unit = e.group("program")
    state = _ACTIVE.search(text)
    if unit is None and state is None:
        return None
    payload = ServiceStatus(
        unit=unit,
        active=state.group("active") if state else None,
        sub=state.group("sub") if state else None,
    )
    return Hit(EventKind.SERVICE_STATUS, payload=payload)
