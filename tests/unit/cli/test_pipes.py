"""Pastes and pipes: ``analyze -`` reads stdin, ``--json -``/``--md -`` write stdout (and the
summary moves to stderr), ``rules`` is greppable when stdout is not a terminal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hangdoc.errors import ExitStatus
from tests.unit.cli.conftest import FIXTURE_DUMP, ROOT, Run, console_script

DUMP = str(FIXTURE_DUMP)
FAULTHANDLER = ROOT / "tests" / "unit" / "parsers" / "samples" / "faulthandler_sigusr1.txt"
PYSPY_RANK3 = FIXTURE_DUMP / "rank3" / "pyspy.1.json"


def test_json_to_stdout_is_the_only_thing_on_stdout(hangdoc: Run) -> None:
    done = hangdoc("analyze", DUMP, "--json", "-")
    assert done.returncode == ExitStatus.OK, done.stderr
    doc = json.loads(done.stdout)  # nothing else on stdout
    assert doc["verdict"] == "hang" and doc["findings"][0]["culprit_ranks"] == [3]
    assert "verdict: hang" in done.stderr  # the summary went to stderr


def test_md_to_stdout_and_quiet(hangdoc: Run) -> None:
    done = hangdoc("analyze", DUMP, "--md", "-", "-q")
    assert done.returncode == ExitStatus.OK
    assert done.stdout.startswith("#") and done.stderr == ""


def test_json_to_stdout_with_other_outputs_in_files(hangdoc: Run, tmp_path: Path) -> None:
    html = tmp_path / "r.html"
    done = hangdoc("analyze", DUMP, "--json", "-", "--html", str(html))
    json.loads(done.stdout)
    assert html.exists() and f"HTML report: {html}" in done.stderr


def test_paste_on_stdin_is_analyzed_as_a_file_named_stdin(hangdoc: Run) -> None:
    done = hangdoc("analyze", "-", "--json", "-", stdin=FAULTHANDLER.read_text())
    doc = json.loads(done.stdout)
    assert [Path(i["path"]).name for i in doc["inputs"]] == ["stdin"]
    assert doc["inputs"][0]["kind"] == "faulthandler" and doc["inputs"][0]["error"] is None


def test_paste_on_stdin_is_read_for_its_stacks_and_its_log_lines(hangdoc: Run) -> None:
    # GIVEN a py-spy dump with the job's watchdog timeouts pasted under it, on stdin
    dump = (ROOT / "tests" / "unit" / "parsers" / "samples" / "pyspy" / "dump.txt").read_text()
    log = (ROOT / "fixtures" / "logs" / "public" / "torch-2.4_pg_status_laggard.log").read_text()
    done = hangdoc("analyze", "-", "--json", "-", stdin=dump + log)
    doc = json.loads(done.stdout)
    # THEN it is named a py-spy text, and the ranks its log lines name are seen
    [item] = doc["inputs"]
    assert item["kind"] == "pyspy_text" and item["ranks"] == [0, 1, 2, 3]
    assert doc["ranks"]["seen"] == [0, 1, 2, 3]


def test_paste_joins_the_other_inputs(hangdoc: Run, tmp_path: Path) -> None:
    # GIVEN the dump and a pasted copy of one of its stacks on stdin
    archive = tmp_path / "t.tar.gz"
    done = hangdoc(
        "analyze", DUMP, "-", "--archive", str(archive), "-q", stdin=PYSPY_RANK3.read_text()
    )
    assert done.returncode == ExitStatus.OK, done.stderr
    assert archive.exists()  # the paste was still there when the archive was made


def test_empty_stdin_is_an_input_problem_not_a_crash(hangdoc: Run, tmp_path: Path) -> None:
    out = tmp_path / "f.json"
    done = hangdoc("analyze", "-", "--json", str(out), stdin="")
    assert done.returncode == ExitStatus.INCONCLUSIVE, done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(out.read_text())["inputs"][0]["error"] == "empty file"


def test_rules_in_a_pipe_are_one_whole_line_each(hangdoc: Run) -> None:
    # GIVEN stdout is a pipe THEN plain lines, never cut: a grep finds a summary
    done = hangdoc("rules")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) >= 40
    hd101 = next(line for line in lines if line.startswith("HD101\t"))
    _, name, categories, summary = hd101.split("\t")
    assert name and categories and len(summary) > 20
    from hangdoc.rules import get_rule

    found = get_rule("HD101")
    assert found is not None and summary == " ".join(found.summary.split())


def test_rules_through_grep(tmp_path: Path) -> None:
    from hangdoc.rules import get_rule

    found = get_rule("HD001")
    assert found is not None
    needle = found.summary.split()[-3:]  # the end of the summary: cut off in a table
    listing = subprocess.run([str(console_script()), "rules"], capture_output=True, text=True)
    grep = subprocess.run(
        ["grep", "-F", " ".join(needle)], input=listing.stdout, capture_output=True, text=True
    )
    assert grep.returncode == 0 and grep.stdout.startswith("HD001"), listing.stdout


@pytest.mark.parametrize("fmt", ["table", "plain", "json"])
def test_rules_formats(hangdoc: Run, fmt: str) -> None:
    done = hangdoc("rules", "--format", fmt)
    assert done.returncode == 0
    if fmt == "json":
        rules = json.loads(done.stdout)
        assert {"id", "name", "categories", "summary"} <= set(rules[0])
        assert any(r["id"] == "HD001" for r in rules)
    elif fmt == "table":
        assert "┃" in done.stdout or "│" in done.stdout
    else:
        assert done.stdout.splitlines()[0].count("\t") == 3


def test_closed_pipe_ends_quietly() -> None:
    # GIVEN a reader that leaves at once THEN no traceback, no "Exception ignored", and
    # not status 1 (which means "inconclusive")
    script = str(console_script())
    done = subprocess.run(
        f"'{script}' rules --format json | true; echo ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", capture_output=True, text=True,
    )  # fmt: skip
    assert "Traceback" not in done.stderr and "Exception" not in done.stderr, done.stderr
    assert done.stdout.strip() in ("0", "141")  # 0 when the output fit before it left


def test_no_progress_spinner_when_stderr_is_not_a_terminal(hangdoc: Run) -> None:
    done = hangdoc("analyze", DUMP, "--json", "-")
    assert "analyzing…" not in done.stderr and "\x1b[" not in done.stderr


def test_progress_spinner_on_a_terminal_for_a_long_analysis(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN stderr is a terminal and every analysis counts as long
    import io

    from rich.console import Console

    import hangdoc.cli as cli
    import hangdoc.cli_streams as streams

    screen = io.StringIO()
    monkeypatch.setattr(cli, "err_console", Console(file=screen, force_terminal=True))
    monkeypatch.setattr(streams, "PROGRESS_AFTER_S", 0.0)
    real = cli.run_analysis

    def slow(*args: object, **kwargs: object) -> object:
        import time

        time.sleep(0.5)  # long enough for the spinner to draw
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cli, "run_analysis", slow)
    # WHEN analyzed THEN the spinner was drawn on stderr, and is gone at the end
    assert cli.main(["analyze", DUMP, "--json", str(tmp_path / "f.json")]) == 0
    assert "analyzing…" in screen.getvalue()
