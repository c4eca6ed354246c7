"""Errors the CLI prints as one line plus a remedy, never as a traceback.

Each class carries the exit status the command ends with, so that the status of a
failure is decided once, here, and is the same on every path that raises it. The
statuses are documented in the README ("Exit statuses"); ``ExitStatus`` names them.
"""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """The exit statuses of every ``hangdoc`` command (the README lists them)."""

    OK = 0  # done; for analyze: a diagnosis with a cause (hang or not hung)
    INCONCLUSIVE = 1  # analyze found no cause (nothing usable included); other errors
    USAGE = 2  # bad options or arguments, an unknown rule, an output path it cannot use
    COLLECTION_FAILED = 3  # collect got nothing it could write
    OUTPUT_FAILED = 4  # the analysis ran but an output could not be written
    HANG_REPORTED = 5  # watch: the job ended (or watch was stopped) after a hang was reported
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


class HangdocError(Exception):
    """Base of every error meant for the user. ``help_text`` says what to try next."""

    exit_code: int = ExitStatus.INCONCLUSIVE
    help_text: str = ""

    def __init__(self, message: str, *, help_text: str | None = None) -> None:
        super().__init__(message)
        if help_text is not None:
            self.help_text = help_text


class UsageError(HangdocError):
    """The command line asks for something impossible; nothing was done (status 2, the
    status click gives its own usage errors, so every usage error ends the same way)."""

    exit_code = ExitStatus.USAGE


class OutputPathError(UsageError):
    """An output path that cannot be written (no folder, a directory, not writable, or
    an existing file without --force). Raised before any analysis starts."""


class BadInputError(HangdocError):
    """Nothing usable in what the user gave (each file's reason is in the message).

    The same status as an inconclusive analysis: the loader now returns an Evidence
    with each input's reason instead of raising, and both paths must end alike.
    """

    exit_code = ExitStatus.INCONCLUSIVE


class CollectionError(HangdocError):
    exit_code = ExitStatus.COLLECTION_FAILED


class OutputWriteError(HangdocError):
    """An output could not be written after the analysis (disk full, a renderer bug);
    the other outputs were written all the same."""

    exit_code = ExitStatus.OUTPUT_FAILED
