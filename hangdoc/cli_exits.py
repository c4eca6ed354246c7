"""How a ``hangdoc`` command ends: its exit status, and no traceback for a usage error.

typer >= 0.29 vendors click as ``typer._click`` and raises that copy's exceptions; an
older typer raises those of the click package, and a plain click may be installed
beside a typer that does not use it. So the exception classes are looked up in both,
by role (Exit, Abort, UsageError, ClickException), never imported by one name.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from types import ModuleType

import typer
from rich.console import Console

from hangdoc.errors import ExitStatus, HangdocError

# A flag has no value to name; typer >= 0.29 would print "<bool>" in its place.
FLAG = ""


def run_app(app: typer.Typer, argv: list[str] | None, err_console: Console) -> int:
    """Run ``app`` on ``argv``; the exit status (``ExitStatus``), every error printed as
    one line (plus the usage for a usage error) on ``err_console``."""
    command = typer.main.get_command(app)
    words_in_help(command)
    try:
        result = command.main(args=argv, standalone_mode=False, prog_name="hangdoc")
    except HangdocError as exc:
        err_console.print(
            f"hangdoc: {exc}", style="bold red", markup=False, highlight=False, soft_wrap=True
        )
        if exc.help_text:
            err_console.print(exc.help_text, markup=False, highlight=False, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        err_console.print("hangdoc: interrupted", highlight=False)
        return ExitStatus.INTERRUPTED
    except BrokenPipeError:
        return stdout_closed()
    except SystemExit as exc:
        # click turns a closed stdout (EPIPE) into exit 1, after wrapping stdout in its
        # PacifyFlushWrapper; 1 means "inconclusive" here, so it becomes 141.
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":
            return stdout_closed()
        raise exc
    except Exception as exc:
        code = framework_exit(exc, err_console, _command_named(command, argv))
        if code is None:
            raise  # a bug: it must stay visible
        return code
    if not (sys.argv[1:] if argv is None else argv):
        # A bare ``hangdoc`` shows the help; click < 8.2 ends it with 0, newer ones with 2.
        # It is a usage error (nothing was done): 2 with every click.
        return ExitStatus.USAGE
    return result if isinstance(result, int) else ExitStatus.OK


def words_in_help(command: object) -> None:
    """Help that names values in words: typer >= 0.29 prints an argument's Python type
    (``<list[Path]>``) beside its metavar and ``<bool>`` beside ``--help``; both are
    hidden here. Cosmetic, so any typer or click without these hooks is left as it is."""
    commands = [command, *getattr(command, "commands", {}).values()]
    for cmd in commands:
        with contextlib.suppress(Exception):
            for param in getattr(cmd, "params", ()):
                if param.param_type_name == "argument" and param.metavar:
                    param.display_type_rich = lambda ctx: None
            ctx = cmd.context_class(cmd, help_option_names=["-h", "--help"])
            help_option = cmd.get_help_option(ctx)
            if help_option is not None:
                help_option.metavar = FLAG


def stdout_closed() -> int:
    """The reader of stdout went away (``hangdoc rules | head -1``): end quietly, and stop
    Python from complaining again when it flushes stdout at exit."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 128 + 13  # SIGPIPE, as a shell reports a command its pipe ended


def _click_modules() -> list[ModuleType]:
    """click's exception modules as this typer uses them: typer >= 0.29 vendors click as
    ``typer._click``; older typer uses the click package. Both are looked for, since a
    plain click may be installed beside a typer that does not use it."""
    found: list[ModuleType] = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(importlib.import_module(name))
        except ImportError:
            continue
    return found


def _command_named(command: object, argv: list[str] | None) -> str:
    """``hangdoc analyze`` when argv names a subcommand: some click errors (an option
    missing its value) carry no context to say which command they belong to."""
    args = sys.argv[1:] if argv is None else argv
    first = next((a for a in args if not a.startswith("-")), None)
    return f"hangdoc {first}" if first in getattr(command, "commands", {}) else "hangdoc"


def framework_exit(exc: Exception, err_console: Console, where: str = "hangdoc") -> int | None:
    """The exit status of an exception typer or click raised, after printing it; None for
    anything else (a bug, which must stay visible). ``where`` names the command when the
    exception does not."""
    if isinstance(exc, typer.Exit):
        return int(exc.exit_code or 0)
    if isinstance(exc, typer.Abort):
        err_console.print("hangdoc: aborted", highlight=False)
        return ExitStatus.INTERRUPTED
    for module in _click_modules():
        exit_cls = getattr(module, "Exit", None)
        if exit_cls is not None and isinstance(exc, exit_cls):
            return int(getattr(exc, "exit_code", 0) or 0)
        abort_cls = getattr(module, "Abort", None)
        if abort_cls is not None and isinstance(exc, abort_cls):
            err_console.print("hangdoc: aborted", highlight=False)
            return ExitStatus.INTERRUPTED
        usage_cls = getattr(module, "UsageError", None)
        if usage_cls is not None and isinstance(exc, usage_cls):
            _print_usage_error(exc, err_console, where)
            return ExitStatus.USAGE
        click_cls = getattr(module, "ClickException", None)
        if click_cls is not None and isinstance(exc, click_cls):
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            err_console.print(f"{where}: {message}", markup=False, highlight=False, soft_wrap=True)
            return int(getattr(exc, "exit_code", 1))
    return None


def _print_usage_error(exc: Exception, err_console: Console, where: str) -> None:
    """One line saying what is wrong, then the command's usage and where help is."""
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    if type(exc).__name__ == "NoArgsIsHelpError":
        # A bare ``hangdoc``: the help is the message (rich has printed it already).
        if message.strip():
            err_console.print(message, markup=False, highlight=False)
        return
    ctx = getattr(exc, "ctx", None)
    command = getattr(ctx, "command_path", None) or where
    err_console.print(f"{command}: {message}", markup=False, highlight=False, soft_wrap=True)
    if ctx is not None:
        with contextlib.suppress(Exception):  # the usage line is a courtesy
            usage = " ".join(str(ctx.get_usage()).split())
            err_console.print(usage, markup=False, highlight=False, soft_wrap=True)
    help_flag = "-h" if command == "hangdoc" else "--help"
    err_console.print(f"Try '{command} {help_flag}' for help.", markup=False, highlight=False)
