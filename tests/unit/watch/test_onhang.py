"""--on-hang: split like a shell, run as an argument list (never by a shell), its output
and status logged, bounded by its timeout."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from hangdoc.errors import UsageError
from hangdoc.watch.onhang import expand, parse_command, run_on_hang

PRINT_ARGS = (
    "import json, os, sys; print(json.dumps([sys.argv[1:], os.environ['HANGDOC_CATEGORY']]))"
)
ECHO = shlex.join([sys.executable, "-c", PRINT_ARGS])


def test_placeholders_are_replaced_inside_each_argument_and_never_split() -> None:
    argv = parse_command("notify --title '{title}' --file={md} {culprits}")
    values = {"title": "rank 3; rm -rf / is 'stuck'", "md": "/r/summary.md", "culprits": "2,3"}
    assert expand(argv, values) == [
        "notify", "--title", "rank 3; rm -rf / is 'stuck'", "--file=/r/summary.md", "2,3",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "says"),
    [("", "no command"), ("   ", "no command"), ("page '{dir}", "quotation"),
     ("page {report}", "unknown placeholder {report}")],
)  # fmt: skip
def test_a_command_that_cannot_run_is_a_usage_error(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        parse_command(text)


def test_the_command_runs_with_its_values_and_its_output_is_logged(tmp_path: Path) -> None:
    argv = parse_command(ECHO + " {category} {title}")
    result = run_on_hang(argv, {"category": "checkpoint_save_hang", "title": "a b"}, tmp_path, 30)
    assert result.status == 0 and result.error is None
    logged = json.loads((tmp_path / "on-hang.log").read_text())
    assert logged == [["checkpoint_save_hang", "a b"], "checkpoint_save_hang"]


def test_a_command_past_its_timeout_is_stopped_and_one_that_is_missing_is_said(
    tmp_path: Path,
) -> None:
    slow = (sys.executable, "-c", "import time; print('paging', flush=True); time.sleep(60)")
    result = run_on_hang(slow, {}, tmp_path, timeout_s=1)
    assert result.status is None and "did not finish within 1 s" in (result.error or "")
    assert "paging" in (tmp_path / "on-hang.log").read_text()
    missing = run_on_hang(("/nonexistent/pager",), {}, tmp_path, timeout_s=5)
    assert missing.status is None and "could not run /nonexistent/pager" in (missing.error or "")
