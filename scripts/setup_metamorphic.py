"""Set-up failures read by where they happen, not by what they say: a metamorphic check.

Takes the casebook's set-up failures (label ``nccl_init_or_bootstrap_hang``), replaces
the specific text of every error message in their artifacts by one hangdoc has never seen
(:data:`UNSEEN`), keeping everything else (the frames of each traceback, the log lines
around it, NCCL's INFO output and return-code chains: the stage), and counts how many
still answer set-up. A mechanism that reads the stage generalises to the next report's
new message; one that reads the words does not (issue 21).

The messages replaced, line by line, wherever a line's prefix (a log shipper's, a rank's)
puts them:

* a Python exception's line, ``Type: message`` (``RuntimeError: NCCL error in: …``,
  ``torch.distributed.DistBackendError: …``, ``ValueError: …``), the type kept, and the
  place torch's NCCL check prints first (``NCCL error in: …/ProcessGroupNCCL.cpp:535, ``);
* NCCL's ``NCCL WARN message`` (the place before it kept);
* vLLM's record of a worker method's exception, ``… while processing method NAME:
  message, Traceback …`` (executor/multiproc_worker_utils.py), the method kept;
* the line torch prints under an NCCL error, ``Last error:`` and what follows it.

Run ``python scripts/setup_metamorphic.py [CASE…]`` for the count (all set-up cases of
the casebook, or the named ones); tests/casebook/test_setup_metamorphic.py keeps a floor.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hangdoc.analyzer.engine import analyze
from hangdoc.analyzer.loading.loader import load_paths
from hangdoc.casebook import Case, read_casebook

ROOT = Path(__file__).resolve().parent.parent
SETUP = "nccl_init_or_bootstrap_hang"
UNSEEN = "ncclFooBar: something new happened"

_EXCEPTION = re.compile(
    r"^(?P<pre>.*?(?<![\w.])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure)): "
    r"(?P<msg>\S.*)$"
)
_WARN = re.compile(r"^(?P<pre>.*\bNCCL WARN )(?P<msg>\S.*)$")
_METHOD = re.compile(
    r"^(?P<pre>.*\bwhile processing method \w+: )(?P<msg>.*?)(?P<post>, Traceback.*)$"
)
# The place torch's C10D_NCCL_CHECK prints before the error's words (NCCLUtils.hpp): where
# torch checked, which is the stage, not the message.
_PLACE = re.compile(r"NCCL (?:error|timeout) in: [^,]*:\d+, ")
_LAST = re.compile(r"^(?P<pre>.*\bLast error:)(?P<msg>.*)$")


def unseen_messages(text: str) -> str:
    """``text`` with each error message's own words replaced by :data:`UNSEEN`."""
    out: list[str] = []
    after_last: str | None = None  # the prefix of a bare "Last error:" line just read
    for line in text.split("\n"):
        if after_last is not None and line.strip():
            # its detail on the next line, under the same prefix (a rank's, a shipper's)
            keep = after_last if line.startswith(after_last) else ""
            indent = re.match(r"\s*", line[len(keep) :])
            out.append(keep + (indent.group(0) if indent else "") + UNSEEN)
            after_last = None
            continue
        after_last = None
        if (m := _METHOD.match(line)) is not None:
            line = f"{m['pre']}{UNSEEN}{m['post']}"
        elif (m := _WARN.match(line)) is not None:
            line = f"{m['pre']}{UNSEEN}"
        elif (m := _LAST.match(line)) is not None:
            if m["msg"].strip():
                line = f"{m['pre']} {UNSEEN}"
            else:
                after_last = m["pre"][: -len("Last error:")]
        elif (m := _EXCEPTION.match(line)) is not None and 'File "' not in m["pre"]:
            place = _PLACE.match(m["msg"])  # torch's "NCCL error in: FILE:LINE, " kept
            line = f"{m['pre']}: {place.group(0) if place else ''}{UNSEEN}"
        out.append(line)
    return "\n".join(out)


@dataclass(frozen=True, slots=True)
class Outcome:
    case: str
    before: str  # the category the case's own artifacts answer
    after: str  # the category once its messages are unseen ones
    rule: str


def _category(paths: list[Path]) -> tuple[str, str]:
    diagnosis = analyze(load_paths(paths), calibrate=False)
    if not diagnosis.findings:
        return "none", ""
    return diagnosis.findings[0].category.value, diagnosis.findings[0].rule


def outcome(case: Case) -> Outcome:
    """The case's answer, and its answer with every message unseen."""
    paths = list(case.artifact_paths())
    before, _ = _category(paths)
    with tempfile.TemporaryDirectory() as tmp:
        swapped: list[Path] = []
        for path in paths:
            target = Path(tmp) / path.name
            raw = path.read_bytes()
            try:
                target.write_text(unseen_messages(raw.decode("utf-8")), encoding="utf-8")
            except UnicodeDecodeError:
                target.write_bytes(raw)  # a binary artifact (a dump) keeps its bytes
            swapped.append(target)
        after, rule = _category(swapped)
    return Outcome(case.folder.name, before, after, rule)


def setup_cases(names: Iterable[str] = ()) -> list[Case]:
    """The casebook's set-up cases (or those named)."""
    wanted = set(names)
    cases, _problems = read_casebook(ROOT / "fixtures" / "cases")
    return [
        c for c in cases if c.category.value == SETUP and (not wanted or c.folder.name in wanted)
    ]


def main(argv: list[str]) -> int:
    outcomes = [outcome(c) for c in setup_cases(argv)]
    kept = [o for o in outcomes if o.after == SETUP]
    for o in outcomes:
        mark = "kept" if o.after == SETUP else "LOST"
        print(f"{mark}\t{o.case}\t{o.before} -> {o.after} ({o.rule})")
    right = [o for o in outcomes if o.before == SETUP]
    print(
        f"set-up with unseen messages: {len(kept)}/{len(outcomes)} "
        f"(answered set-up as written: {len(right)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
