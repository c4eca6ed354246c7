"""The casebook of public reports (fixtures/cases/): reading and checking its case files.

A case is one public thread with its pasted machine output and the label the thread
supports (fixtures/cases/README.md). The split into train and test is a hash of the
source URL, so it cannot drift as cases are added, and nobody picks which case lands where.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from hangdoc.analyzer.model import Category

CASE_FILE = "case.toml"
TEST_SHARE_PERCENT = 30
LABEL_CONFIDENCES = ("maintainer", "reporter fix", "likely")


class CaseError(ValueError):
    """A case folder that does not follow fixtures/cases/README.md."""


@dataclass(frozen=True, slots=True)
class Artifact:
    file: str
    where: str
    cut: str


@dataclass(frozen=True, slots=True)
class Case:
    """One public thread and what it established."""

    case_id: str
    folder: Path
    source: str
    project: str
    summary: str
    category: Category
    alternatives: tuple[Category, ...]
    culprit_ranks: tuple[int, ...] | None
    confidence: str
    thread_cause: str
    decisive: tuple[str, ...]
    artifacts: tuple[Artifact, ...]
    # The project's own fixtures or tests cite this thread: hangdoc was built against it,
    # so it cannot measure what hangdoc does on reports it has never seen.
    seen: bool = False

    @property
    def split(self) -> str:
        """``test`` for the hash-chosen share of threads the project has not seen."""
        return "train" if self.seen else split_of(self.source)

    @property
    def accepted(self) -> frozenset[Category]:
        return frozenset((self.category, *self.alternatives))

    def artifact_paths(self) -> list[Path]:
        return [self.folder / a.file for a in self.artifacts]


def normalise_url(url: str) -> str:
    return url.strip().lower().rstrip("/").removeprefix("http://").removeprefix("https://")


def split_of(url: str) -> str:
    """``test`` for a fixed ~30 % of threads, chosen by the hash of the URL; else ``train``."""
    digest = hashlib.sha256(normalise_url(url).encode()).hexdigest()
    return "test" if int(digest[:8], 16) % 100 < TEST_SHARE_PERCENT else "train"


def _category(value: object, where: str) -> Category:
    try:
        return Category(str(value))
    except ValueError:
        raise CaseError(f"{where}: {value!r} is not a category of DESIGN.md") from None


def _str(doc: dict[str, object], key: str, where: str, *, required: bool = True) -> str:
    value = doc.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise CaseError(f"{where}: `{key}` must be a non-empty string")
    return value


def read_case(folder: Path) -> Case:
    """Read and check one case folder; CaseError names what is wrong."""
    path = folder / CASE_FILE
    where = str(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CaseError(f"{where}: {exc}") from None
    source = _str(doc, "source", where)
    if not source.startswith(("http://", "https://")):
        raise CaseError(f"{where}: `source` must be the thread's URL")
    confidence = _str(doc, "confidence", where)
    if confidence not in LABEL_CONFIDENCES:
        raise CaseError(f"{where}: `confidence` must be one of {', '.join(LABEL_CONFIDENCES)}")
    alternatives = doc.get("alternatives", [])
    if not isinstance(alternatives, list):
        raise CaseError(f"{where}: `alternatives` must be a list")
    culprits = doc.get("culprit_ranks")
    if culprits is not None and (
        not isinstance(culprits, list) or not all(isinstance(r, int) for r in culprits)
    ):
        raise CaseError(f"{where}: `culprit_ranks` must be a list of ranks (or left out)")
    decisive = doc.get("decisive", [])
    if not isinstance(decisive, list) or not all(isinstance(d, str) for d in decisive):
        raise CaseError(f"{where}: `decisive` must be a list of lines")
    raw_artifacts = doc.get("artifacts", [])
    if not isinstance(raw_artifacts, list) or not raw_artifacts:
        raise CaseError(f"{where}: at least one [[artifacts]] entry")
    artifacts = []
    for raw in raw_artifacts:
        if not isinstance(raw, dict):
            raise CaseError(f"{where}: each [[artifacts]] entry is a table")
        name = _str(raw, "file", where)
        if "/" in name or name.startswith(".") or not (folder / name).is_file():
            raise CaseError(f"{where}: artifact {name!r} is not a file of this folder")
        artifacts.append(
            Artifact(name, _str(raw, "where", where), _str(raw, "cut", where, required=False))
        )
    return Case(
        case_id=folder.name,
        folder=folder,
        source=source,
        project=_str(doc, "project", where),
        summary=_str(doc, "summary", where),
        category=_category(doc.get("category"), where),
        alternatives=tuple(_category(a, where) for a in alternatives),
        culprit_ranks=tuple(culprits) if culprits is not None else None,
        confidence=confidence,
        thread_cause=_str(doc, "thread_cause", where, required=False),
        decisive=tuple(decisive),
        artifacts=tuple(artifacts),
    )


def decisive_lines_missing(case: Case) -> list[str]:
    """Decisive lines that occur in none of the case's artifacts (each must occur in one)."""
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in case.artifact_paths()]
    return [line for line in case.decisive if not any(line.strip() in t for t in texts)]


def _whitespace_normalised(text: str) -> str:
    return " ".join(text.split())


def _fixed_message(raw: str) -> bool:
    """One line and no digit: nothing in it belongs to one run (no time, pid, rank, size)."""
    lines = [line for line in raw.splitlines() if line.strip()]
    return len(lines) == 1 and not any(char.isdigit() for char in lines[0])


def shared_pastes(cases: list[Case]) -> list[str]:
    """A problem for each paste that occurs in another case's paste (equal, or contained in
    it, once runs of whitespace are one space): one run's output kept twice (a thread that
    reposts another's paste, or the same lines in two reports) would be scored twice, and
    across the splits it would put train's text into test.

    A paste of one line without a digit is a fixed message (Ray's "Task was killed due to
    the node running low on memory."): two runs print it alike, so it says nothing of which
    run it came from and is not compared."""
    pastes: list[tuple[Case, str, str]] = []
    for case in cases:
        for artifact in case.artifacts:
            path = case.folder / artifact.file
            raw = path.read_text(encoding="utf-8", errors="replace")
            text = _whitespace_normalised(raw)
            if text and not _fixed_message(raw):
                pastes.append((case, artifact.file, text))
    pastes.sort(key=lambda paste: len(paste[2]))
    problems = []
    for index, (case, name, text) in enumerate(pastes):
        for other, other_name, other_text in pastes[index + 1 :]:
            if other is not case and text in other_text:
                same = "the same paste as" if text == other_text else "a part of the paste"
                problems.append(
                    f"{case.folder}: {name} is {same} {other.case_id}/{other_name}: "
                    "keep one case per paste (or only the parts that differ)"
                )
                break
    return problems


_GITHUB = re.compile(r"https?://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+")


def cited_elsewhere(root: Path) -> set[str]:
    """Threads the project's own fixtures and tests cite, outside the casebook: the repo is
    the casebook's grandparent (fixtures/cases); elsewhere nothing is known as cited."""
    repo = root.resolve().parent.parent
    found: set[str] = set()
    for folder in (repo / "fixtures", repo / "tests"):
        if not folder.is_dir():
            continue
        for path in folder.rglob("*"):
            if root.resolve() in path.resolve().parents or not path.is_file():
                continue
            if path.suffix not in (".txt", ".log", ".md", ".toml", ".py", ".json", ""):
                continue
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            found.update(normalise_url(m) for m in _GITHUB.findall(text))
    return found


def read_casebook(root: Path) -> tuple[list[Case], list[str]]:
    """Every case under ``root`` (sorted by id), and the problems of folders that failed
    or of cases that share a thread or a paste.

    A case whose thread the project's own fixtures or tests cite is marked ``seen`` and
    scored with the train split, whatever its hash says.
    """
    cases: list[Case] = []
    problems: list[str] = []
    cited = cited_elsewhere(root)
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            case = read_case(folder)
        except CaseError as exc:
            problems.append(str(exc))
            continue
        missing = decisive_lines_missing(case)
        if missing:
            problems.append(f"{folder}: decisive line(s) in no artifact: {missing[0]!r}")
        if normalise_url(case.source) in cited:
            case = dataclasses.replace(case, seen=True)
        cases.append(case)
    sources: dict[str, str] = {}
    for case in cases:
        key = normalise_url(case.source)
        if key in sources:
            problems.append(f"{case.folder}: same thread as {sources[key]}")
        sources[key] = case.case_id
    problems.extend(shared_pastes(cases))
    return cases, problems


def _check_main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path("fixtures/cases")
    cases, problems = read_casebook(root)
    for problem in problems:
        print(problem)
    test = sum(1 for c in cases if c.split == "test")
    projects = len({c.project for c in cases})
    print(f"{len(cases)} cases ({test} test), {projects} projects, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    import sys

    sys.exit(_check_main(sys.argv[1:]))
