"""A death's report told with other specifics: the metamorphic check of naming a death's cause.

A rank that died says why by what it raised (the exception's type, its errno) and where
(the frames of the libraries it was in: torch.save's writer, os.rename, a DataLoader's
worker start, a collective). The rest of its report is specific to the job that printed
it: the paths of its files, the names of its own functions and modules, the words of a
message beyond its type and errno. The next report of the same failure has other
specifics, so a cause read from them is memory, not reading. Each variant here changes
only those specifics, deterministically, and keeps what the failure's sources print:

* ``paths``: every path a message names becomes another (``/mnt/v1/d2/f3``: no name, no
  extension kept), and the install prefix of a library's frame another environment's
  (``/usr/local/lib/python3.10/dist-packages/`` for a conda env's ``site-packages``),
  the part under it (``torch/serialization.py``) kept: that is where it was raised;
* ``job_names``: the job's own frames (a file outside an installed library and the
  standard library) get another file name and function name, and the job's names are
  renamed wherever the text calls them (``self.save_checkpoint(`` → ``self.fn_2(``);
* ``wording``: an exception whose type or errno names its failure keeps only that: an
  OSError's message becomes "[Errno N] <strerror>" (the errno's text, os.strerror's)
  with the file names the call was given (CPython's format: ": 'a'", ": 'a' -> 'b'"),
  a typed exception's (torch.OutOfMemoryError, MemoryError, FileExistsError …) another
  sentence; a message of any other type (RuntimeError, Exception, OSError without an
  errno) is left as it is: its words are all the evidence there is.

``VARIANTS`` lists them alone and all three together.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

Change = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class Variant:
    """A named way to tell the same death with other specifics."""

    name: str
    apply: Change


# A traceback's frame line: 'File "PATH", line N, in FUNC'.
_FRAME = re.compile(
    r'^(?P<lead>\s*File ")(?P<path>[^"]+)(?P<mid>", line \d+, in )(?P<func>[\w<>.]+)'
)
# An installed library's or the standard library's file: the part from the install root.
_LIBRARY_ROOT = re.compile(
    r"^(?P<prefix>.*?/(?:site-packages|dist-packages)/|.*?/lib/python\d+(?:\.\d+)?/)(?P<rest>.+)$"
)
# Files no job writes: compiled extensions' sources, the interpreter's frozen modules.
_COMPILED = re.compile(r"\.(?:pyx|pxd|pxi|so|cpp|cc|cu|h)$|^<")


def _library(path: str) -> bool:
    return _LIBRARY_ROOT.match(path) is not None or _COMPILED.search(path) is not None


def _other_prefix(prefix: str) -> str:
    return (
        "/opt/conda/envs/x/lib/python3.11/site-packages/"
        if "dist-packages" in prefix
        else "/usr/local/lib/python3.10/dist-packages/"
    )


def _frame_path(path: str) -> str:
    m = _LIBRARY_ROOT.match(path)
    if m is None:
        return path
    if "/lib/python" in m.group("prefix") and not re.search(r"(?:site|dist)-packages/", m.group(0)):
        return "/usr/lib/python3.10/" + m.group("rest")  # the standard library
    return _other_prefix(m.group("prefix")) + m.group("rest")


# A path in a message: quoted (with a slash, or a file name with an extension), or bare.
_QUOTED_PATH = re.compile(r"(?P<q>['\"])(?P<p>[^'\"\s]*/[^'\"\s]*|[^'\"\s/]+\.\w{1,12})(?P=q)")
# (bare: rooted, "./"-relative, or of three segments at least: "send/recv" is words)
_BARE_PATH = re.compile(
    r"(?<![\w:/.\"'])(?P<p>(?:\.{0,2}/|~/)(?:[\w.@+-]+/)*[\w.@+:-]+|[\w.@+-]+/(?:[\w.@+-]+/)+[\w.@+:-]+)"
)


# A library's source place (NCCL's "include/alloc.h:125", c10's "CUDAException.cpp:44"):
# where the library printed from, not a path of the job's.
_SOURCE_PLACE = re.compile(r"\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp)(?::\d+)?$")


def _neutral(n: int) -> str:
    return f"/mnt/v{n}/d{n + 1}/f{n + 2}"


def paths(text: str) -> str:
    """Every path named outside a frame's file another; a library frame's prefix another."""
    names: dict[str, str] = {}

    def rename(path: str) -> str:
        if path not in names:
            names[path] = _neutral(len(names) * 3 + 1)
        return names[path]

    out: list[str] = []
    for line in text.splitlines(keepends=True):
        frame = _FRAME.match(line)
        if frame is not None:
            path = frame.group("path")
            if _library(path):
                line = line.replace(path, _frame_path(path), 1)
            out.append(line)
            continue
        line = _QUOTED_PATH.sub(lambda m: m.group("q") + rename(m.group("p")) + m.group("q"), line)
        line = _BARE_PATH.sub(lambda m: _bare(m.group("p"), rename), line)
        out.append(line)
    return "".join(out)


def _bare(path: str, rename: Callable[[str], str]) -> str:
    """A bare token with slashes is a path when it does not look like a library's name
    (``torch/csrc/…`` in a C++ location, ``a/b`` of a fraction like ``3/4``)."""
    if path.startswith(("/mnt/v", "torch/", "c10/", "../")) or re.fullmatch(r"[\d/.]+", path):
        return path
    if "/" not in path.strip("/") or _SOURCE_PLACE.search(path):
        return path
    return rename(path)


def job_names(text: str) -> str:
    """The job's own frames under other file and function names, its names renamed
    wherever the text calls them."""
    functions: dict[str, str] = {}
    files: dict[str, str] = {}
    for line in text.splitlines():
        frame = _FRAME.match(line)
        if frame is None or _library(frame.group("path")):
            continue
        path = frame.group("path")
        files.setdefault(path, f"/srv/job/mod_{len(files) + 1}.py")
        func = frame.group("func").rsplit(".", 1)[-1]
        if func.isidentifier() and not func.startswith("__") and func != "main":
            functions.setdefault(func, f"fn_{len(functions) + 1}")
    if not functions and not files:
        return text
    called = (
        re.compile(r"\b(?P<name>" + "|".join(map(re.escape, functions)) + r")\b")
        if functions
        else None
    )
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        frame = _FRAME.match(line)
        if frame is not None and not _library(frame.group("path")):
            func = frame.group("func").rsplit(".", 1)[-1]
            line = (
                frame.group("lead")
                + files[frame.group("path")]
                + frame.group("mid")
                + functions.get(func, func)
                + line[frame.end() :]
            )
        elif frame is None and called is not None:
            line = called.sub(lambda m: functions[m.group("name")], line)
        out.append(line)
    return "".join(out)


# An exception's line, "Type: message", the type a dotted name ending in Error/Exception.
_EXCEPTION = re.compile(
    r"^(?P<lead>\s*)(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception))"
    r"(?P<wrapped>\([\w.]+\))?: (?P<message>\S.*?)(?P<end>\s*)$"
)
_ERRNO = re.compile(r"^\[Errno (?P<n>\d+)\]")
_FILES = re.compile(r": '[^']*'(?: -> '[^']*')?\s*$")
# Types whose name says what failed (their message's words add only detail): Python's
# OSError subclasses (PEP 3151: each stands for its errnos) and MemoryError, and torch's
# own classes (torch/csrc/Exceptions.h: c10::OutOfMemoryError as torch.OutOfMemoryError
# and torch.cuda.OutOfMemoryError; c10::DistError and its DistBackendError,
# DistNetworkError, DistStoreError as torch.distributed's). Any other type's message is
# the evidence, and is kept.
_TYPED = frozenset(
    {
        name
        for name, cls in vars(builtins).items()
        if isinstance(cls, type)
        and issubclass(cls, (OSError, MemoryError))
        and cls not in (OSError, MemoryError)
    }
    | {
        "MemoryError",
        "OutOfMemoryError",
        "DistError",
        "DistBackendError",
        "DistNetworkError",
        "DistStoreError",
    }
)


def wording(text: str) -> str:
    """An exception whose type or errno names its failure keeps only that."""
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        m = _EXCEPTION.match(line.rstrip("\r\n"))
        if m is None:
            out.append(line)
            continue
        ending = line[len(line.rstrip("\r\n")) :]
        message = m.group("message")
        errno = _ERRNO.match(message)
        kind = m.group("type").rsplit(".", 1)[-1]
        if errno is not None:
            # the errno's own text (os.strerror), and the file names the call was given:
            # CPython's OSError_str format, not words of the message
            number = int(errno.group("n"))
            files = _FILES.search(message)
            message = f"[Errno {number}] {os.strerror(number)}" + (files.group(0) if files else "")
        elif kind in _TYPED and m.group("wrapped") is None:
            message = "the operation could not be completed (see above)"
        out.append(
            m.group("lead") + m.group("type") + (m.group("wrapped") or "") + ": " + message + ending
        )
    return "".join(out)


def compose(*steps: Change) -> Change:
    def apply(text: str) -> str:
        for step in steps:
            text = step(text)
        return text

    return apply


VARIANTS: tuple[Variant, ...] = (
    Variant("paths", paths),
    Variant("job_names", job_names),
    Variant("wording", wording),
    Variant("all", compose(job_names, paths, wording)),
)


# The cases the check reads, from the answers scored at first sight
# (fixtures/first_sight): deaths HD030 answered, each a case of the casebook's train split.
# ``named``: those whose label is a more specific cause than the death (the cause the
# report shows it died of); ``crashes``: those labelled a crash HD030 got right, which
# must stay crashes. Set-up failures (a label of nccl_init_or_bootstrap_hang) are read by
# where they happen, not by what the death raised: not this check's.
_NOT_NAMED = frozenset({"unknown", "rank_dead_or_crashed", "nccl_init_or_bootstrap_hang"})


def first_sight_deaths(root: Path) -> tuple[list[str], list[str]]:
    """(named, crashes): the train cases of HD030's answers at first sight under ``root``
    (the repository), as above."""
    from hangdoc.casebook import read_case, split_of

    named: list[str] = []
    crashes: list[str] = []
    for path in sorted((root / "fixtures" / "first_sight").glob("2026-*.json")):
        for answer in json.loads(path.read_text()).get("answers", []):
            name = answer["case"]
            folder = root / "fixtures" / "cases" / name
            if answer.get("rule") != "HD030" or name in named + crashes or not folder.is_dir():
                continue
            case = read_case(folder)
            if split_of(case.source) != "train" or case.category.value != answer["label"]:
                continue
            if not answer["right"] and answer["label"] not in _NOT_NAMED:
                named.append(name)
            elif answer["right"] and answer["label"] == "rank_dead_or_crashed":
                crashes.append(name)
    return named, crashes


# The causes a death's own exception can show (what it raised and where: the storage,
# a DataLoader's worker, the GPU's memory or hardware, a check across ranks), and the
# crash itself.
DEATH_CAUSES = frozenset(
    {
        "io_or_filesystem_stall",
        "dataloader_deadlock_or_worker_hang",
        "cuda_oom",
        "collective_size_or_dtype_mismatch",
        "gpu_hardware_or_driver",
        "rank_dead_or_crashed",
    }
)
_RAISED = re.compile(
    r"(?m)^[^\S\n]*(?:\[rank\d+\]:[^\S\n]*)?(?:\w+\.)*\w*(?:Error|Exception)(?:\([\w.]+\))?: \S"
)


def casebook_deaths(root: Path) -> list[str]:
    """The casebook's train cases labelled with one of DEATH_CAUSES whose artifacts hold
    an exception's line (a death told by what it raised)."""
    from hangdoc.casebook import read_casebook, split_of

    cases, _problems = read_casebook(root / "fixtures" / "cases")
    out: list[str] = []
    for case in cases:
        if split_of(case.source) != "train" or case.category.value not in DEATH_CAUSES:
            continue
        texts = (p.read_bytes().decode("utf-8", errors="replace") for p in case.artifact_paths())
        if any(_RAISED.search(t) for t in texts):
            out.append(case.folder.name)
    return out


@dataclass(frozen=True, slots=True)
class Told:
    """One case told one way: the label, and the category hangdoc names."""

    case: str
    variant: str
    label: str
    got: str

    @property
    def right(self) -> bool:
        return self.label == self.got


def tell(root: Path, names: Sequence[str], variants: Sequence[Variant] = VARIANTS) -> list[Told]:
    """Every case of ``names`` told every way (the variants that change its text), and as
    it is (variant ``as is``)."""
    from hangdoc.casebook import read_case
    from hangdoc.casebook_eval import run_case

    out: list[Told] = []
    with tempfile.TemporaryDirectory(prefix="hangdoc-death-") as tmp:
        for name in names:
            case = read_case(root / "fixtures" / "cases" / name)
            label = case.category.value
            out.append(Told(name, "as is", label, run_case(case).predicted.value))
            for variant in variants:
                folder = Path(tmp) / variant.name / name
                folder.mkdir(parents=True)
                changed = False
                for artifact in case.artifacts:
                    text = (
                        (case.folder / artifact.file)
                        .read_bytes()
                        .decode("utf-8", errors="surrogateescape")
                    )
                    told = variant.apply(text)
                    changed = changed or told != text
                    (folder / artifact.file).write_bytes(
                        told.encode("utf-8", errors="surrogateescape")
                    )
                if changed:
                    copy = dataclasses.replace(case, folder=folder)
                    out.append(Told(name, variant.name, label, run_case(copy).predicted.value))
    return out


def kept(told: Sequence[Told], variant: str) -> tuple[int, int]:
    """Of the cases right as they are that ``variant`` changed: how many it keeps right."""
    right = {t.case for t in told if t.variant == "as is" and t.right}
    rows = [t for t in told if t.variant == variant and t.case in right]
    return sum(t.right for t in rows), len(rows)


def table(told: Sequence[Told]) -> str:
    """Right as they are; then per variant, of those right as they are that it changed,
    how many keep their label."""
    plain = [t for t in told if t.variant == "as is"]
    lines = [f"{'as is':10} {sum(t.right for t in plain):3}/{len(plain):<3}"]
    for variant in VARIANTS:
        k, n = kept(told, variant.name)
        lines.append(f"{variant.name:10} {k:3}/{n:<3}")
    return "\n".join(lines)
