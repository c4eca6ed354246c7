"""Errors the CLI prints as one line plus a remedy, never as a traceback."""

from __future__ import annotations


class HangdocError(Exception):
    """Base of every error meant for the user. ``help_text`` says what to try next."""

    exit_code: int = 1
    help_text: str = ""

    def __init__(self, message: str, *, help_text: str | None = None) -> None:
        super().__init__(message)
        if help_text is not None:
            self.help_text = help_text


class UsageError(HangdocError):
    exit_code = 1


class BadInputError(HangdocError):
    """Nothing usable in what the user gave (each file's reason is in the message)."""

    exit_code = 2


class CollectionError(HangdocError):
    exit_code = 3
