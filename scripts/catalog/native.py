"""Native libraries whose messages land in a distributed job's stderr beside torch's and
NCCL's: UCX's signal handler (every process that loads UCX: Open MPI, some NCCL network
plugins), aws-ofi-nccl (NCCL's libfabric network plugin, EFA and Slingshot fabrics) and
apache/tvm-ffi's segfault handler (loaded by xgrammar and flashinfer, so by vLLM, SGLang
and the RL stacks built on them; it replaces the process's SIGSEGV handler).

Each is read from its own repository at every release tag (and HEAD), the files where the
messages are printed; a format given by a macro of the same file (UCX's
``UCS_DEBUG_BACKTRACE_LINE_FMT``) is read through its ``#define``; a logging macro that
puts a prefix before every format (``NCCL_OFI_WARN``: ``"NET/OFI " fmt``) gives it here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from catalog import csource
from catalog.rows import rows_json, unheld, write
from catalog.sources import BlobReader, Site, git, group, tree

from hangdoc.analyzer.parsers.catalog.template import Part


@dataclass(frozen=True, slots=True)
class NativeSource:
    """Where one library prints its messages, and how."""

    repository: str
    tag: str  # a release tag: its version is the first group
    paths: tuple[str, ...]  # files or folders, at each tag
    printf: tuple[tuple[str, int], ...] = ()  # (call, index of its format argument)
    streams: tuple[str, ...] = ()  # ``<<`` chains into these are messages
    prefix: str = ""  # what the logging macro puts before every format
    levels: tuple[tuple[str, str], ...] = ()  # call -> the level the row records
    note: str = ""


NATIVE = {
    # src/ucs/debug/debug.c: ucs_error_signal_handler → "Caught signal %d (%s: %s%s)" through
    # ucs_log_fatal_error (log.c puts "[host:pid:tid] " before it), then
    # ucs_debug_print_backtrace's "==== backtrace (tid:%7d) ====" and one line per frame
    # (UCS_DEBUG_BACKTRACE_LINE_FMT, two definitions: with and without line info).
    "ucx": NativeSource(
        "github.com/openucx/ucx",
        r"v(\d+\.\d+\.\d+)",
        ("src/ucs/debug/debug.c",),
        printf=(
            ("ucs_log_fatal_error", 0),
            ("fprintf", 1),
            ("snprintf", 2),
            ("ucs_error", 0),
            ("ucs_warn", 0),
            ("ucs_debug", 0),
            ("ucs_trace", 0),
        ),
        levels=(("ucs_log_fatal_error", "fatal"), ("fprintf", "fprintf"), ("snprintf", "fprintf")),
        note="release tags vX.Y.Z (not -rc) and HEAD: src/ucs/debug/debug.c",
    ),
    # include/nccl_ofi_log.h: NCCL_OFI_WARN(fmt, …) is NCCL's logger with "NET/OFI " fmt, so
    # the line reads "NCCL WARN NET/OFI …" under NCCL's own header.
    "aws_ofi_nccl": NativeSource(
        "github.com/aws/aws-ofi-nccl",
        r"v(\d+\.\d+\.\d+)(?:-aws)?",
        ("src", "include"),
        printf=(("NCCL_OFI_WARN", 0), ("NCCL_OFI_INFO", 1)),
        prefix="NET/OFI ",
        levels=(("NCCL_OFI_WARN", "WARN"), ("NCCL_OFI_INFO", "INFO")),
        note="release tags vX.Y.Z[-aws] (not -rc) and HEAD: src/**, include/** "
        "(NCCL_OFI_WARN/INFO, whose macro prefixes 'NET/OFI ')",
    ),
    # src/ffi/backtrace.cc: TVMFFISegFaultHandler streams "!!!!!!! Segfault encountered
    # !!!!!!!\n" and the backtrace to std::cerr, one '  File "<file>", line <n>, in <func>'
    # per frame ("<unknown>", line 0 where no debug info names the file).
    "tvm_ffi": NativeSource(
        "github.com/apache/tvm-ffi",
        r"v(\d+\.\d+\.\d+)",
        ("src/ffi",),
        streams=("std::cerr", "backtrace_stream", "backtrace_stream_"),
        note="release tags vX.Y.Z and HEAD: src/ffi/** (std::cerr and backtrace stream chains)",
    ),
}

_DEFINE_STRING = re.compile(r'^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+("(?:[^"\\\n]|\\.)*")', re.M)


def _releases(repo: Path, pattern: str) -> list[tuple[str, str]]:
    """(version, tag) of each release, oldest first; the last tag of a version wins."""
    found: dict[str, str] = {}
    for tag in git(repo, "tag").split():
        m = re.fullmatch(pattern, tag)
        if m is not None:
            found.setdefault(m.group(1), tag)
    return sorted(found.items(), key=lambda kv: [int(n) for n in kv[0].split(".")])


def release_refs(repo: Path, pattern: str) -> list[tuple[str, str]]:
    """(version, ref) of each release tag, oldest first, then HEAD (named by its date and
    commit, as the rows' version ranges name it)."""
    head = git(repo, "rev-parse", "HEAD").strip()
    date = git(repo, "log", "-1", "--format=%cs", "HEAD").strip()
    return [*_releases(repo, pattern), (f"{date} {head[:10]}", "HEAD")]


def sites_of(code: str, project: str, spec: NativeSource, path: str, version: str) -> list[Site]:
    clean = csource.blank_comments(code)
    spans = csource.function_spans(clean)
    lines = csource.LineIndex(clean)
    macros: dict[str, list[str]] = {}
    for m in _DEFINE_STRING.finditer(clean):
        macros.setdefault(m.group(1), []).append(m.group(2))
    levels = dict(spec.levels)
    sites: list[Site] = []
    names = tuple(name for name, _ in spec.printf)
    at = dict(spec.printf)
    for call in csource.find_calls(clean, names) if names else ():
        index = at[call.name]
        if len(call.args) <= index:
            continue
        fmt = call.args[index].strip()
        # a format named by a macro of this file: each of its definitions is a site
        formats = macros.get(fmt, [fmt])
        function = csource.enclosing(spans, call.offset)
        for text in formats:
            lit = csource.literal(text)
            if lit is None or not lit.text.strip():
                continue
            lit = csource.Literal(spec.prefix + lit.text, lit.markers)
            parts = tuple(csource.printf_parts(lit, call.args[index + 1 :]))
            level = levels.get(call.name, call.name)
            sites.append(Site(project, level, parts, path, function, call.line, version))
    for stream in spec.streams:
        for m in re.finditer(rf"(?<![\w:]){re.escape(stream)}\s*<<", clean):
            end = clean.find(";", m.end())
            if end < 0:
                continue
            operands = csource.split_stream(clean[m.end() : end])
            found: list[Part] | None = csource.stream_parts(operands)
            if found is None:
                continue
            function = csource.enclosing(spans, m.start())
            line = lines.line(m.start())
            sites.append(Site(project, "stream", tuple(found), path, function, line, version))
    return sites


def do_native(project: str, repo: Path) -> list[Site]:
    spec = NATIVE[project]
    refs = release_refs(repo, spec.tag)
    reader = BlobReader(repo)
    cache: dict[tuple[str, str], list[Site]] = {}
    sites: list[Site] = []
    try:
        for version, ref in refs:
            for under in spec.paths:
                for path, sha in tree(repo, ref, under, (".c", ".cc", ".cpp", ".h", ".hpp")):
                    if under != path and ("/test" in path or "/tests/" in path):
                        continue
                    if (sha, path) not in cache:
                        cache[(sha, path)] = sites_of(reader.read(sha), project, spec, path, "")
                    sites.extend(
                        Site(s.project, s.level, s.parts, s.file, s.function, s.line, version)
                        for s in cache[(sha, path)]
                    )
    finally:
        reader.close()
    versions = [version for version, _ in refs]
    present = [v for v in versions if any(s.version == v for s in sites)]
    source = {
        "repository": spec.repository,
        "read": spec.note,
        "versions": present,
        "calls": ", ".join([name for name, _ in spec.printf] + [f"{s} <<" for s in spec.streams]),
    }
    write(project, source, rows_json(group(sites), present), unheld(sites, present))
    return sites
