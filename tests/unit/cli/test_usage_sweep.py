"""Every subcommand with missing, unknown and malformed options, through the installed
console script: never a traceback, always the documented exit status (README, "Exit
statuses"): 0 for help and version, 2 for every usage error.

The cases run once, concurrently (each is a fresh process, ~0.5 s), and each case is
its own test id so that a failure names the command line.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.unit.cli.conftest import FIXTURE_DUMP, run_hangdoc

DUMP = str(FIXTURE_DUMP)
COMMANDS = ("collect", "analyze", "explain", "rules", "demo", "node-collect")
USAGE = 2
CASES: list[tuple[tuple[str, ...], int]] = [
    ((), USAGE),  # a bare `hangdoc` prints the help, as a usage error
    (("-h",), 0),
    (("--help",), 0),
    (("-V",), 0),
    (("--version",), 0),
    (("frobnicate",), USAGE),
    (("--frobnicate",), USAGE),
    (("-x",), USAGE),
    *(((cmd, "-h"), 0) for cmd in COMMANDS),
    *(((cmd, "--help"), 0) for cmd in COMMANDS),
    *(((cmd, "--frobnicate"), USAGE) for cmd in COMMANDS),
    *(((cmd, "-V"), USAGE) for cmd in COMMANDS),  # -V belongs to `hangdoc` itself
    # missing
    (("collect",), USAGE),
    (("analyze",), USAGE),
    (("explain",), USAGE),
    (("node-collect",), USAGE),
    (("analyze", "--json"), USAGE),
    (("analyze", DUMP, "--html"), USAGE),
    (("collect", "--out"), USAGE),
    (("collect", "--pid"), USAGE),
    (("demo", "--out"), USAGE),
    (("rules", "--format"), USAGE),
    # malformed
    (("collect", "--samples", "abc"), USAGE),
    (("collect", "--samples", "0"), USAGE),
    (("collect", "--interval", "-1", "--all"), USAGE),
    (("collect", "--timeout", "soon", "--all"), USAGE),
    (("collect", "--pid", "abc"), USAGE),
    (("collect", "--pid", "-5"), USAGE),
    (("collect", "--slurm-job", "1", "--transfer", "bogus"), USAGE),
    (("analyze", DUMP, "--archive", "-"), USAGE),
    (("analyze", DUMP, "--json", "-", "--md", "-"), USAGE),
    (("analyze", DUMP, "--json", "/nonexistent-folder/findings.json"), USAGE),
    (("analyze", DUMP, "--html", "/"), USAGE),
    (("analyze", "-", "-"), USAGE),
    (("analyze", DUMP, "--json", DUMP + "/manifest.json", "--force"), USAGE),  # an input
    (("explain", "HD999"), USAGE),
    (("explain", "HD001", "HD002"), USAGE),
    (("rules", "--format", "xml"), USAGE),
    (("rules", "extra"), USAGE),
    (("demo", "--ranks", "1"), USAGE),
    (("demo", "--ranks", "x"), USAGE),
    (("node-collect", "--out-parent", "/tmp", "--probe", "p", "--samples", "abc"), USAGE),
]


def _id(args: tuple[str, ...]) -> str:
    return " ".join(a.replace(str(FIXTURE_DUMP), "DUMP") for a in args) or "(no arguments)"


@pytest.fixture(scope="module")
def results() -> Iterator[dict[tuple[str, ...], subprocess.CompletedProcess[str]]]:
    with ThreadPoolExecutor(max_workers=8) as pool:
        done = dict(
            zip((a for a, _ in CASES), pool.map(lambda c: run_hangdoc(*c[0]), CASES), strict=True)
        )
    yield done


@pytest.mark.parametrize(("args", "status"), CASES, ids=[_id(a) for a, _ in CASES])
def test_no_traceback_and_the_documented_status(
    results: dict[tuple[str, ...], subprocess.CompletedProcess[str]],
    args: tuple[str, ...],
    status: int,
) -> None:
    # GIVEN the command line run through the installed console script
    done = results[args]
    both = done.stdout + done.stderr
    # THEN no traceback, and the status the README documents
    assert "Traceback" not in both, both
    assert done.returncode == status, both
    if status == USAGE and args:
        # one line naming the problem first, on stderr; stdout stays clean for pipes
        assert done.stdout == "", done.stdout
        first = done.stderr.strip().splitlines()[0]
        assert first.startswith("hangdoc"), done.stderr
        assert len(done.stderr.strip().splitlines()) <= 4, done.stderr


def test_version_prints_the_version() -> None:
    for flag in ("-V", "--version"):
        assert re.fullmatch(r"hangdoc \d+\.\d+\.\d+\S*\n", run_hangdoc(flag).stdout)


def test_usage_error_shows_the_usage_line() -> None:
    done = run_hangdoc("analyze")
    lines = done.stderr.strip().splitlines()
    assert "missing argument" in lines[0].lower() and "PATH" in lines[0]
    assert lines[1].startswith("Usage: hangdoc analyze")
    assert "--help" in lines[-1]


# node-collect is hidden: the launcher runs it, people never read its help.
@pytest.mark.parametrize("command", ["", *(c for c in COMMANDS if c != "node-collect")])
def test_help_names_values_in_words(command: str) -> None:
    # GIVEN any command's help THEN its placeholders are words (PATH, PID, FILE), never
    # Python types such as <list[Path]> or <bool>
    done = run_hangdoc(*([command] if command else []), "--help")
    assert done.returncode == 0
    assert not re.search(r"<(list|bool|str|int|float|path|Path)\b", done.stdout), done.stdout


def test_help_placeholders_of_analyze_and_collect() -> None:
    assert {"PATH", "FILE"} <= set(re.findall(r"[A-Z]{3,}", run_hangdoc("analyze", "-h").stdout))
    collect = set(re.findall(r"[A-Z]{2,}", run_hangdoc("collect", "-h").stdout))
    assert {"PID", "DIR", "FILE", "SECONDS"} <= collect


def test_unknown_rule_names_the_rule_and_the_remedy(tmp_path: Path) -> None:
    done = run_hangdoc("explain", "HD999")
    assert "no rule 'HD999'" in done.stderr and "hangdoc rules" in done.stderr
