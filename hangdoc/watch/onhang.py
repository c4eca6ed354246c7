"""``--on-hang CMD``: the command ``hangdoc watch`` runs after it wrote a report.

The command is split like a shell would split it (``shlex``), and run as an argument
list, never through a shell: a title or a path with a quote or a ``;`` in it stays one
argument. Placeholders in braces are replaced in each argument::

    --on-hang 'scancel 123456'
    --on-hang 'notify-oncall --summary {md} --title "{title}"'
    --on-hang './post-to-chat.sh {json}'

``{dir}`` the report folder, ``{html}``, ``{json}``, ``{md}`` the reports, ``{dump}`` the
dump, ``{verdict}``, ``{category}``, ``{culprits}`` (``3`` or ``2,3``), ``{title}``. The
same values are in the command's environment as ``HANGDOC_DIR``, ``HANGDOC_HTML``… The
command's output and exit status go to ``on-hang.log`` in the report folder (and its
status to watch.log); it has ``timeout_s`` to finish, after which it (and only it, in
its own process group) is stopped.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hangdoc.errors import UsageError

PLACEHOLDERS: tuple[str, ...] = (
    "dir", "html", "json", "md", "dump", "verdict", "category", "culprits", "title",
)  # fmt: skip
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
LOG_NAME = "on-hang.log"


@dataclass(frozen=True, slots=True)
class OnHangResult:
    argv: tuple[str, ...]
    status: int | None  # None: it could not start, or was stopped at its timeout
    duration_s: float
    log: Path
    error: str | None = None

    def text(self) -> str:
        if self.error is not None:
            return self.error
        return f"exited with {self.status} after {self.duration_s:.1f} s"


def parse_command(text: str) -> tuple[str, ...]:
    """The --on-hang value as an argument list; UsageError when it is not one."""
    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        raise UsageError(f"--on-hang {text!r}: {exc}") from None
    if not argv:
        raise UsageError("--on-hang: no command given")
    for word in argv:
        for name in _PLACEHOLDER.findall(word):
            if name not in PLACEHOLDERS:
                raise UsageError(
                    f"--on-hang: unknown placeholder {{{name}}}",
                    help_text="Known: " + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS) + ".",
                )
    return argv


def expand(argv: Sequence[str], values: Mapping[str, str]) -> list[str]:
    return [_PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), word) for word in argv]


def run_on_hang(
    argv: Sequence[str], values: Mapping[str, str], folder: Path, timeout_s: float
) -> OnHangResult:
    """Run the command once, its output into ``folder/on-hang.log``; never raises."""
    command = expand(argv, values)
    env = {**os.environ, **{f"HANGDOC_{k.upper()}": v for k, v in values.items()}}
    log = folder / LOG_NAME
    began = time.monotonic()
    try:
        with log.open("wb") as out:
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=env, cwd=folder, start_new_session=True,
            )  # fmt: skip
            try:
                status = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)  # its own group: never the job
                proc.wait()
                why = f"did not finish within {timeout_s:g} s and was stopped"
                return OnHangResult(tuple(command), None, time.monotonic() - began, log, why)
    except OSError as exc:
        why = f"could not run {command[0]}: {exc.strerror or exc}"
        with contextlib.suppress(OSError):
            log.write_text(why + "\n", encoding="utf-8")
        return OnHangResult(tuple(command), None, time.monotonic() - began, log, why)
    return OnHangResult(tuple(command), status, time.monotonic() - began, log)
