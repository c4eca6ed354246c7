"""The schedulers and launchers that start a job's ranks (Slurm's srun and slurmstepd, Open
MPI's mpirun and orted), the stacks that serve models on many GPUs (vLLM, Ray), and the
libraries whose CUDA errors do not read "CUDA error: …" (Triton, CuPy).

Slurm and Open MPI are read from their mirrors at release tags. Slurm logs through
``error()``/``info()``/``verbose()`` (src/common/log.h, printf formats with Slurm's own
``%p<letter>`` conversions); Open MPI's orte prints its reports with ``orte_show_help``
from ``help-*.txt`` files, one ``[topic]`` each, whose lines are printed as they are
with ``%`` conversions filled in (no argument names: a slot is named by the word before
it, "rank %lu" is a rank).

vLLM, SGLang, Ray and Triton are too large to mirror here (the fetch refuses over 500 MB):
their message files are kept outside the repository as ``<root>/<owner>/<name>/<path>``,
each file's first line naming where it was read ("# read from github.com/<owner>/<name> at
commit <sha>", or "at release <version> (commit <sha>)"); see INDEXED. Triton's was read
through the code index; vLLM's, SGLang's and Ray's are taken out of their released wheels
by ``scripts/catalog/wheels.py`` (its docstring says how to regenerate them), so a row's
versions are the releases a bug report names.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from catalog import csource, pysource
from catalog.rows import rows_json, unheld, write
from catalog.sources import BlobReader, Site, git, group, tree

from hangdoc.analyzer.parsers.catalog.template import Part, Slot

# ---- Slurm ---------------------------------------------------------------------------
# The parts of Slurm a job's output shows: srun's own messages (task exits, node failures,
# the step's cancellation), slurmstepd's (time limit, OOM kill, task exits), the step
# launch API srun uses, and the task/cgroup plugin that counts OOM kills.
_SLURM_PATHS = (
    "src/srun",
    "src/slurmd/slurmstepd",
    "src/api/step_launch.c",
    "src/plugins/task/cgroup",
)
_SLURM_LOG = (
    ("fatal", 0),
    ("error", 0),
    ("info", 0),
    ("verbose", 0),
    ("warning", 0),
    ("debug", 0),
)
# Slurm's printf extensions (src/common/xstring.c, log.c): %pA an address, %pJ a job,
# %ps a step id, %pS a step, … one value each.
_SLURM_CONV = re.compile(r"%p[A-Za-z]")
_SLURM_TAG = r"slurm-(\d+-\d+)-\d+-1"
# Values Slurm prints without spaces: host lists and task ranges (hostlist_ranged_string,
# "node[01-04]", "0-3,7"), node names. A word slot keeps a cut or prefixed line from
# stretching them over the header ("srun: error: node7: task 3: …").
_SLURM_WORD = re.compile(r"(?i)^(?:hosts?|task_str|tasks|\S*node_?(?:name|list)|\S*nodelist)$")


def do_slurm(repo: Path) -> list[Site]:
    """Every ``error/info/verbose/…`` format of srun, slurmstepd and the step launch API at
    the last release tag of each Slurm series from 20.11 on, and HEAD."""
    found: dict[str, str] = {}
    for tag in git(repo, "tag").split():
        m = re.fullmatch(_SLURM_TAG, tag)
        if m is not None and tuple(int(n) for n in m.group(1).split("-")) >= (20, 11):
            series = m.group(1).replace("-", ".")
            old = found.get(series)
            if old is None or _tag_key(tag) > _tag_key(old):
                found[series] = tag
    refs = sorted(found.items(), key=lambda kv: [int(n) for n in kv[0].split(".")])
    head = git(repo, "rev-parse", "HEAD").strip()
    date = git(repo, "log", "-1", "--format=%cs", "HEAD").strip()
    refs.append((f"{date} {head[:10]}", "HEAD"))
    names = tuple(name for name, _ in _SLURM_LOG)
    reader = BlobReader(repo)
    cache: dict[str, list[Site]] = {}
    sites: list[Site] = []
    try:
        for version, ref in refs:
            for under in _SLURM_PATHS:
                for path, sha in tree(repo, ref, under, (".c",)):
                    if sha not in cache:
                        cache[sha] = _slurm_sites(reader.read(sha), path, names)
                    sites.extend(
                        Site(s.project, s.level, s.parts, s.file, s.function, s.line, version)
                        for s in cache[sha]
                    )
    finally:
        reader.close()
    versions = [version for version, _ in refs]
    source = {
        "repository": "github.com/SchedMD/slurm",
        "read": "the last slurm-X-Y-Z-1 tag of each series from 20.11, and HEAD: "
        + ", ".join(_SLURM_PATHS),
        "versions": versions,
        "calls": "fatal, error, info, verbose, warning, debug (src/common/log.h)",
    }
    write("slurm", source, rows_json(group(sites), versions), unheld(sites, versions))
    return sites


def _tag_key(tag: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", tag))


def _slurm_sites(code: str, path: str, names: tuple[str, ...]) -> list[Site]:
    clean = csource.blank_comments(code)
    spans = csource.function_spans(clean)
    sites: list[Site] = []
    for call in csource.find_calls(clean, names):
        if not call.args:
            continue
        lit = csource.literal(call.args[0])
        if lit is None or not lit.text.strip():
            continue
        text = _SLURM_CONV.sub("%s", lit.text)
        parts = tuple(
            Slot(p.name, "word") if isinstance(p, Slot) and _SLURM_WORD.match(p.name) else p
            for p in csource.printf_parts(csource.Literal(text, lit.markers), call.args[1:])
        )
        function = csource.enclosing(spans, call.offset)
        sites.append(Site("slurm", call.name, parts, path, function, call.line, ""))
    return sites


# ---- Open MPI --------------------------------------------------------------------------
# orte's help files whose topics mpirun and the orted daemons print when a process or a
# daemon dies (errmgr, state, odls, plm) and MPI_ABORT's (ompi/mpi/help-mpi-api.txt).
# Open MPI 5 moved the launcher to PRRTE (a submodule the mirror does not hold): read at
# the v4.1.x tags, where orte is in the tree.
_OMPI_HELP = (
    "orte/tools/orterun/help-orterun.txt",
    "orte/mca/errmgr",
    "orte/mca/state",
    "orte/mca/odls/base",
    "orte/mca/odls/default",
    "orte/mca/plm/base",
    "orte/mca/plm/rsh",
    "orte/mca/plm/slurm",
    "ompi/mpi/help-mpi-api.txt",
    "ompi/runtime/help-mpi-runtime.txt",
)
_HELP_CONV = re.compile(
    r"%(?P<flags>[-+ #0]*)(?P<width>\d+)?(?:\.(?P<prec>\d+))?(?:hh|h|ll|l|L|z|j|t)?"
    r"(?P<conv>[diouxXfgecsp%])"
)
_HELP_TYPE = {"d": "int", "i": "int", "u": "uint", "x": "hex", "X": "hex", "p": "ptr"}
# The word before a conversion names its value ("rank %lu", "PID %lu", "node %s").
_WORD_BEFORE = re.compile(r"([A-Za-z_]+)\s*[:=]?\s*$")


def do_ompi(repo: Path) -> list[Site]:
    tags = sorted(
        (t for t in git(repo, "tag").split() if re.fullmatch(r"v4\.1\.\d+", t)),
        key=_tag_key,
    )
    reader = BlobReader(repo)
    cache: dict[str, list[Site]] = {}
    sites: list[Site] = []
    try:
        for tag in tags:
            for under in _OMPI_HELP:
                for path, sha in tree(repo, tag, under, (".txt",)):
                    if not path.rsplit("/", 1)[-1].startswith("help-"):
                        continue
                    if sha not in cache:
                        cache[sha] = help_sites(reader.read(sha), path)
                    sites.extend(
                        Site(s.project, s.level, s.parts, s.file, s.function, s.line, tag[1:])
                        for s in cache[sha]
                    )
    finally:
        reader.close()
    versions = [tag[1:] for tag in tags]
    source = {
        "repository": "github.com/open-mpi/ompi",
        "read": "v4.1.x tags (orte in the tree; 5.x launches with PRRTE): " + ", ".join(_OMPI_HELP),
        "versions": versions,
        "calls": "orte_show_help / opal_show_help: the lines of a help file's [topic]",
    }
    write("ompi", source, rows_json(group(sites), versions), unheld(sites, versions))
    return sites


def help_sites(text: str, path: str) -> list[Site]:
    """One site per printed line of each ``[topic]`` of an Open MPI help file: show_help
    prints a topic's lines as they are, its ``%`` conversions filled in order."""
    sites: list[Site] = []
    topic = ""
    for number, line in enumerate(text.split("\n"), 1):
        if line.startswith("#"):
            continue
        m = re.fullmatch(r"\[([^\]]+)\]\s*", line)
        if m is not None:
            topic = m.group(1)
            continue
        if not topic or len(re.findall(r"[A-Za-z]", line)) < 12:
            continue
        sites.append(Site("ompi", "show_help", _help_parts(line.rstrip()), path, topic, number, ""))
    return sites


def _help_parts(line: str) -> tuple[Part, ...]:
    parts: list[Part] = []
    pos = 0
    for m in _HELP_CONV.finditer(line):
        if m.start() > pos:
            parts.append(line[pos : m.start()])
        pos = m.end()
        if m.group("conv") == "%":
            parts.append("%")
            continue
        before = _WORD_BEFORE.search(line[: m.start()])
        name = before.group(1).lower() if before else "value"
        parts.append(Slot(name, _HELP_TYPE.get(m.group("conv"), "text")))
    if pos < len(line):
        parts.append(line[pos:])
    return tuple(parts)


# ---- CuPy ------------------------------------------------------------------------------
# cupy_backends/cuda/api/runtime.pyx: CUDARuntimeError(status) is
# '%s: %s' % (cudaGetErrorName(status), cudaGetErrorString(status)), so its line reads
# "cudaErrorIllegalAddress: an illegal memory access was encountered". The format is read
# from CuPy's source; the strings it fills in are the CUDA runtime's error strings the
# catalog already holds (data/cuda.json, read from libcudart's table).
_CUPY_FORMAT = re.compile(
    r"class CUDARuntimeError\(RuntimeError\):.*?__init__\(\s*'([^']*)'\s*%\s*\(", re.S
)


def do_cupy(repo: Path, cuda_json: Path) -> list[Site]:
    path = "cupy_backends/cuda/api/runtime.pyx"
    code = git(repo, "show", f"HEAD:{path}")
    m = _CUPY_FORMAT.search(code)
    if m is None or m.group(1) != "%s: %s":
        raise SystemExit(f"{path}: CUDARuntimeError's format is not '%s: %s' any more")
    line = code[: m.start(1)].count("\n") + 1
    head = git(repo, "rev-parse", "HEAD").strip()
    tags = git(repo, "describe", "--tags", "HEAD").strip()
    version = f"{tags} {head[:10]}"
    data = json.loads(cuda_json.read_text(encoding="utf-8"))
    sites: list[Site] = []
    for row in data["rows"]:
        if row["level"] != "CUDA error":
            continue
        text = row["template"].removeprefix("CUDA error: ")
        if text == "no error":
            continue  # cudaSuccess's string: CuPy raises no error for it
        # cudaGetErrorName gives the enum's name, and every cudaError_t value is named
        # cudaError<Something>: the name's start is literal text
        parts: tuple[Part, ...] = ("cudaError", Slot("cudaGetErrorName", "word"), ": ", text)
        sites.append(Site("cupy", "CUDARuntimeError", parts, path, "__init__", line, version))
    source = {
        "repository": "github.com/cupy/cupy",
        "read": f"HEAD: {path} (CUDARuntimeError's format) with the CUDA runtime's error "
        "strings of data/cuda.json",
        "versions": [version],
        "calls": "CUDARuntimeError.__init__: '%s: %s' % (cudaGetErrorName, cudaGetErrorString)",
    }
    write("cupy", source, rows_json(group(sites), [version]))
    return sites


# ---- read through the code index -------------------------------------------------------
# project -> (repository, owner/name under the folder, what was read and why).
INDEXED = {
    # SGLang's launcher (srt/entrypoints/engine.py): the parent's SIGCHLD and SIGQUIT
    # handlers (a child process failed) and its wait for the schedulers ("Rank N scheduler
    # is dead" when a scheduler process exits before it is ready, then its exit code); the
    # scheduler's and TP worker's start-up and watchdog, the model runner's memory checks
    # (the KV-cache pool's size), the process groups' set-up, and srt/utils' helpers
    # (the available GPU memory, the process-tree kill).
    "sglang": (
        "github.com/sgl-project/sglang",
        "sgl-project/sglang",
        "the releases' wheels (scripts/catalog/wheels.py FILES): srt/entrypoints/engine.py, "
        "srt/managers/scheduler.py, tp_worker.py, srt/model_executor/model_runner.py, "
        "srt/distributed/parallel_state.py, srt/utils(.py|/common.py)",
    ),
    # The V1 engine's process monitors (MultiprocExecutor's worker monitor, MPClient's
    # engine-core monitor), the RPC to the workers and its timeout, the engine's death
    # (EngineDeadError), its start-up, and the shared-memory broadcast queue that
    # carries every step to the workers (it warns when a reader falls behind: a worker
    # hung or busy); the GPU worker's memory profile and the KV cache's size check, the
    # process groups and their communicators (PyNccl, the custom all-reduce), the Ray
    # executor's placement groups.
    "vllm": (
        "github.com/vllm-project/vllm",
        "vllm-project/vllm",
        "the releases' wheels (scripts/catalog/wheels.py FILES): vllm/v1/executor, "
        "vllm/v1/engine core/core_client/exceptions, vllm/v1/worker/gpu_worker.py, "
        "vllm/v1/core/kv_cache_utils.py, vllm/executor/ray_*, vllm/distributed/"
        "parallel_state.py, device_communicators/ shm_broadcast, pynccl(_wrapper), "
        "custom_all_reduce, cuda_communicator",
    ),
    # ray.exceptions: what a task's caller raises when an actor, a worker, a raylet or an
    # object is lost (their __str__ and the messages they assemble); the job API's
    # supervisor and manager: what `ray job submit` / `ray job status` print when the job's
    # entrypoint exits or its supervisor dies.
    "ray": (
        "github.com/ray-project/ray",
        "ray-project/ray",
        "the releases' wheels (scripts/catalog/wheels.py FILES): python/ray/exceptions.py, "
        "python/ray/dashboard/modules/job/job_supervisor.py and job_manager.py",
    ),
    # Ray's C++ core (the raylet and its object store): the file-system monitor of the
    # object store's spill directory and session folder ("… is over 95% full, available
    # space: 0 GB; … Object creation will fail if spilling is required."). Not in the
    # wheels (a compiled binary), so read through the code index at the commit its file
    # names; its rows are project "raylet", beside ray.exceptions' "ray".
    "raylet": (
        "github.com/ray-project/ray",
        "ray-project/ray/src",
        "src/ray/common/file_system_monitor.cc (RAY_LOG / RAY_EVENT streams)",
    ),
    # The NVIDIA backend's driver.c: every CUDA driver call of Triton's launcher goes
    # through gpuAssert, which raises RuntimeError("Triton Error [CUDA]: " +
    # cuGetErrorString(code)).
    "triton": (
        "github.com/triton-lang/triton",
        "triton-lang/triton",
        "third_party/nvidia/backend/driver.c",
    ),
}
_COMMIT = re.compile(r"at commit ([0-9a-f]{40})")
_RELEASE = re.compile(r"at release (\S+?)[ :]")
# A message a Python class assembles rather than raises: the string its __str__ returns,
# or a variable or attribute named as a message ("base_error_msg", "ENGINE_DEAD_MESSAGE").
_MESSAGE_NAME = re.compile(r"(?i)(?:^|_)(?:error_)?(?:msg|message)$")
# gpuAssert's prefix: a literal assigned to ``prefix`` and then joined to the error string.
_C_PREFIX = re.compile(r'const\s+char\s*\*\s*prefix\s*=\s*("(?:[^"\\\n]|\\.)*")\s*;')
_C_ERROR_STRING = re.compile(r"\b(cuGetErrorString|hipGetErrorString|cudaGetErrorString)\b")


def do_indexed(project: str, root: Path) -> list[Site]:
    repository, under, note = INDEXED[project]
    # a folder another project is read from inside this one's (Ray's C++ src/ beside the
    # wheels' python/) is not this one's
    skip = tuple(
        root / other
        for name, (_, other, _) in INDEXED.items()
        if name != project and Path(other).is_relative_to(under) and other != under
    )
    # the repository path of a file: its path under <owner>/<name>, where ``under`` may
    # name a folder deeper in it
    prefix = "/".join(Path(under).parts[2:])
    sites, versions = indexed_sites(project, root / under, skip, prefix)
    released = all(re.fullmatch(r"\d+(?:\.\d+)*(?:\.?post\d+)?", v) for v in versions)
    source: dict[str, object] = {
        "repository": repository,
        "read": (
            f"files taken out of {note}"
            if released
            else f"files read through the code index at the commits named: {note}"
        ),
        "versions": versions,
        "calls": "raise, logger.<level>; messages assembled in __str__ and *_msg/*MESSAGE; "
        "C: PyErr_SetString and gpuAssert's prefix; C++: RAY_LOG / RAY_EVENT / RAY_CHECK "
        "streams and the string streams they print",
    }
    write(project, source, rows_json(group(sites), versions), unheld(sites, versions))
    return sites


def indexed_sites(
    project: str, base: Path, skip: tuple[Path, ...] = (), prefix: str = ""
) -> tuple[list[Site], list[str]]:
    """The message sites of the files under ``base`` (but those under ``skip``) and the
    versions they were read at (releases in their order, else commits as found), each from
    the file's first line."""
    sites: list[Site] = []
    versions: list[str] = []
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        if any(path.is_relative_to(folder) for folder in skip):
            continue  # another project's files, read from a folder inside this one's
        code = path.read_text("utf-8", "replace")
        first = code.split("\n", 1)[0]
        release = _RELEASE.search(first)
        m = _COMMIT.search(code[:400])
        if release is None and m is None:
            raise SystemExit(f"{path}: its first line does not name the commit it was read at")
        version = release.group(1) if release else m.group(1)[:10] if m else ""
        if version not in versions:
            versions.append(version)
        # a second version of one file sits beside it as <path>@<version>
        rel = path.relative_to(base).as_posix().split("@", 1)[0]
        rel = f"{prefix}/{rel}" if prefix else rel
        if rel.endswith(".py"):
            found = pysource.sites_of(code, project, rel, version)
            found += assembled_sites(code, project, rel, version)
        else:
            found = _c_sites(code, project, rel, version)
        # the header is not the file's: a line number counts from the line after it
        sites.extend(
            Site(s.project, s.level, s.parts, s.file, s.function, s.line - 1, s.version, s.literal)
            for s in found
        )
    if all(re.fullmatch(r"\d+(?:\.\d+)*(?:\.?post\d+)?", v) for v in versions):
        versions.sort(key=lambda v: tuple(int(n) for n in re.findall(r"\d+", v)))
    return sites, versions


def assembled_sites(code: str, project: str, path: str, version: str) -> list[Site]:
    """Messages a class builds and keeps: ``__str__``'s returns, and strings assigned to a
    name or attribute called a message."""
    try:
        module = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    sites: list[Site] = []
    for scope in ast.walk(module):
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            nodes: list[ast.AST] = list(ast.walk(scope))
        elif isinstance(scope, ast.ClassDef):
            # a class's own statements: ``BASE_ERROR_MSG = "The actor died …"`` (ray's
            # ActorDiedError). A module's constants are formats its log calls name: the
            # call is the row (pysource.module_strings).
            nodes = list(scope.body)
        else:
            continue
        name_of = scope.name
        for node in nodes:
            value: ast.expr | None = None
            level = ""
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.Return) and name_of == "__str__" and node.value:
                value, level = node.value, "__str__"
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
                if _MESSAGE_NAME.search(name):
                    value, level = node.value, "message"
            if value is None:
                continue
            for piece in _pieces(value):
                parts = pysource.message_parts(piece)
                if parts and any(isinstance(p, str) and p.strip() for p in parts):
                    sites.append(Site(project, level, tuple(parts), path, name_of, line, version))
    return sites


def _pieces(node: ast.expr) -> list[ast.expr]:
    """The messages of ``a + "\\n\\n" + b``: a sum joined by line breaks prints each operand
    on lines of its own (``self._base_str() + "\\n\\n" + ("All copies of …")``); any
    other sum is one message."""
    operands = _operands(node)
    if not any(_is_break(o) for o in operands):
        return [node]
    return [o for o in operands if not _is_break(o)]


def _operands(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _operands(node.left) + _operands(node.right)
    return [node]


def _is_break(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "\n" in node.value
        and not node.value.strip()
    )


# Ray's C++ logging (src/ray/util/logging.h): ``RAY_LOG(LEVEL) << a << b;`` and its
# variants (RAY_LOG_EVERY_MS(LEVEL, ms), RAY_LOG_EVERY_N), the events it records beside
# them (RAY_EVENT_EVERY_MS(LEVEL, label, ms)), and ``RAY_CHECK(cond) << …`` (a failed
# check's message, printed before the abort).
_RAY_LOG = re.compile(r"\b(RAY_LOG\w*|RAY_EVENT\w*|RAY_CHECK\w*)\s*\(")
_RAY_LEVEL = re.compile(r"\s*(DEBUG|INFO|WARNING|ERROR|FATAL)\b")
# A message built in a string stream first (``std::ostringstream ostr; ostr << …;``) and
# then logged whole (``RAY_LOG_EVERY_MS(ERROR, …) << ostr.str();``): the chain is the
# message, at the level of the log call that prints it.
_STRING_STREAM = re.compile(r"\bstd::(?:o?stringstream)\s+(\w+)\s*;")


def _ray_stream_sites(
    clean: str, project: str, path: str, version: str, spans: list[tuple[int, int, str]]
) -> list[Site]:
    """The messages of Ray's logging streams in ``clean`` (comment-free C++)."""
    lines = csource.LineIndex(clean)
    sites: list[Site] = []
    printed_by: dict[tuple[str, str], str] = {}  # (function, stream name) -> level
    for m in _RAY_LOG.finditer(clean):
        found = csource.balanced_args(clean, m.end() - 1)
        if found is None:
            continue
        args, close = found
        level = _RAY_LEVEL.match(args[0]) if args else None
        name = m.group(1)
        level_name = level.group(1) if level else ("FATAL" if "CHECK" in name else "")
        after = clean[close:]
        chain = re.match(r"\s*<<", after)
        if chain is None:
            continue
        end = csource.statement_end(clean, close)
        operands = csource.split_stream(clean[close + chain.end() : end])
        function = csource.enclosing(spans, m.start())
        streamed = re.fullmatch(r"(\w+)\.str\(\)", operands[0]) if len(operands) == 1 else None
        if streamed is not None:
            printed_by.setdefault((function, streamed.group(1)), level_name)
            continue
        parts = csource.stream_parts(operands)
        if parts is None:
            continue
        level_text = f"{name} {level_name}".strip()
        sites.append(
            Site(project, level_text, tuple(parts), path, function, lines.line(m.start()), version)
        )
    for m in _STRING_STREAM.finditer(clean):
        function = csource.enclosing(spans, m.start())
        chain = re.compile(rf"\b{m.group(1)}\s*<<")
        for c in chain.finditer(clean, m.end()):
            if csource.enclosing(spans, c.start()) != function:
                break
            end = csource.statement_end(clean, c.end())
            parts = csource.stream_parts(csource.split_stream(clean[c.end() : end]))
            if parts is None:
                continue
            level = printed_by.get((function, m.group(1)), "")
            sites.append(
                Site(
                    project,
                    f"stream {level}".strip(),
                    tuple(parts),
                    path,
                    function,
                    lines.line(c.start()),
                    version,
                )
            )
    return sites


def _c_sites(code: str, project: str, path: str, version: str) -> list[Site]:
    clean = csource.blank_comments(code)
    spans = csource.function_spans(clean)
    lines = csource.LineIndex(clean)
    sites: list[Site] = _ray_stream_sites(clean, project, path, version, spans)
    for m in _C_PREFIX.finditer(clean):
        function = csource.enclosing(spans, m.start())
        body = next((s for s in spans if s[2] == function and s[0] <= m.start() <= s[1]), None)
        text = clean[body[0] : body[1]] if body else clean[m.end() : m.end() + 400]
        error = _C_ERROR_STRING.search(text)
        lit = csource.literal(m.group(1))
        if lit is None or error is None:
            continue
        parts: tuple[Part, ...] = (lit.text, Slot(error.group(1), "text"))
        sites.append(
            Site(project, "RuntimeError", parts, path, function, lines.line(m.start()), version)
        )
    for call in csource.find_calls(clean, ("PyErr_SetString", "PyErr_Format")):
        lit = csource.literal(call.args[1]) if len(call.args) > 1 else None
        if lit is None or not lit.text.strip():
            continue
        parts = tuple(csource.printf_parts(lit, call.args[2:]))
        function = csource.enclosing(spans, call.offset)
        level = call.args[0].strip().removeprefix("PyExc_")
        sites.append(Site(project, level, parts, path, function, call.line, version))
    return sites
