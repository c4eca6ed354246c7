"""C++ messages built from variadic pieces: gloo's ``GLOO_ENFORCE*``/``GLOO_THROW*``/
``GLOO_ERROR_MSG``, c10's ``TORCH_CHECK*``/``TORCH_WARN*``/``C10_THROW_ERROR``,
``c10::str``, ``fmt::format``, and ``LOG(LEVEL) << …`` streams."""

from __future__ import annotations

import re

from catalog import csource
from catalog.sources import Site

from hangdoc.analyzer.parsers.catalog.template import Part, Slot

_COMPARE = {
    "EQ": "==",
    "NE": "!=",
    "LE": "<=",
    "LT": "<",
    "GE": ">=",
    "GT": ">",
}
_GLOO_CALLS = (
    "GLOO_ENFORCE",
    "GLOO_ENFORCE_EQ",
    "GLOO_ENFORCE_NE",
    "GLOO_ENFORCE_LE",
    "GLOO_ENFORCE_LT",
    "GLOO_ENFORCE_GE",
    "GLOO_ENFORCE_GT",
    "GLOO_ENFORCE_THAT",
    "GLOO_THROW",
    "GLOO_THROW_IO_EXCEPTION",
    "GLOO_THROW_INVALID_OPERATION_EXCEPTION",
    "GLOO_ERROR_MSG",
    "GLOO_ERROR",
    "GLOO_WARN",
    "GLOO_INFO",
)
_TORCH_CALLS = (
    "TORCH_CHECK",
    "TORCH_CHECK_WITH",
    "TORCH_CHECK_VALUE",
    "TORCH_CHECK_TYPE",
    "TORCH_CHECK_NOT_IMPLEMENTED",
    "TORCH_INTERNAL_ASSERT",
    "TORCH_WARN",
    "TORCH_WARN_ONCE",
    "C10_THROW_ERROR",
    "c10::str",
    "str",
    "fmt::format",
    "C10D_ERROR",
    "C10D_WARNING",
    "C10D_INFO",
    "C10D_DEBUG",
    "C10D_TRACE",
    "recordError",
    "C10D_THROW_ERROR",
    "C10D_CHECK_TIMEOUT",
    "C10D_NCCL_CHECK",
    "C10D_NCCL_CHECK_TIMEOUT",
    "LOG",
    "VLOG",
)
_LOG_STREAM = re.compile(
    r"\b(?:(?:LOG|VLOG|LOG_IF|C10_LOG_FIRST_N)\s*\(\s*(\w+)[^)]*\)|(ss|oss|stream|msg|errMsg))\s*<<"
)
# A message kept in a variable before it is thrown or logged: ``interpret = "…";``,
# ``std::string err = "…" + x;``.
_ASSIGN = re.compile(
    r"\b(?:std::string\s+|auto\s+|const\s+auto\s+|const\s+std::string\s+)?"
    r"(\w*(?:[Mm]sg|[Ee]rr|[Ee]rror|interpret|[Rr]eason|[Mm]essage)\w*)\s*\+?=\s*(?=\")"
)
_FMT_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
# A function of the file that formats its first argument with fmt: its first parameter is a
# fmt format (``fmt::string_view format``, ``fmt::format_string<Args...> fmt``) and the rest
# are the values (c10d's socket.cpp ``recordError(fmt::string_view format, Args&&... args)``
# builds "The client socket has failed to connect to {} {}." with ``fmt::vformat``). Calls
# of it are fmt templates: ``{}`` a value, not literal text.
_FMT_WRAPPER = re.compile(
    r"\b(\w+)\s*\(\s*(?:const\s+)?(?:fmt|std)::(?:string_view|format_string\s*<[^>]*>)"
    r"\s*&?\s*\w+\s*,\s*(?:const\s+)?\w+\s*&{0,2}\s*\.\.\."
)


def fmt_wrappers(code: str) -> frozenset[str]:
    """The names of the file's functions that take a fmt format and its values."""
    return frozenset(m.group(1) for m in _FMT_WRAPPER.finditer(code))


def fmt_parts(fmt: str, args: list[str]) -> list[Part]:
    parts: list[Part] = []
    values = iter(args)
    pos = 0
    for m in _FMT_FIELD.finditer(fmt):
        parts.append(fmt[pos : m.start()])
        pos = m.end()
        if m.group(1) is None:
            parts.append(m.group(0)[0])
            continue
        spec = m.group(1).partition(":")[2]
        value = next(values, "value")
        kind = "int" if spec.endswith("d") else "float" if spec.endswith("f") else "text"
        parts.append(Slot(value.strip()[:60], kind))
    parts.append(fmt[pos:])
    return parts


def _gloo_parts(name: str, args: list[str]) -> tuple[str, list[Part] | None]:
    if name.startswith("GLOO_ENFORCE_") and name[13:] in _COMPARE and len(args) >= 2:
        x, y = args[0], args[1]
        parts: list[Part] = [f"{x} {_COMPARE[name[13:]]} {y}. ", Slot(x), " vs ", Slot(y)]
        extra = csource.stream_parts(args[2:]) if len(args) > 2 else None
        if extra:
            parts += [". ", *extra]
        return "GLOO_ENFORCE", parts
    if name in {"GLOO_ENFORCE", "GLOO_ENFORCE_THAT"} and args:
        extra = csource.stream_parts(args[1:]) if len(args) > 1 else None
        return "GLOO_ENFORCE", [args[0] + (". " if extra else ""), *(extra or [])]
    level = {
        "GLOO_ERROR": "GLOO_ERROR",
        "GLOO_WARN": "GLOO_WARN",
        "GLOO_INFO": "GLOO_INFO",
        "GLOO_THROW_IO_EXCEPTION": "IoException",
        "GLOO_THROW_INVALID_OPERATION_EXCEPTION": "InvalidOperationException",
    }.get(name, "Exception")
    return level, csource.stream_parts(args)


def _torch_parts(
    name: str, args: list[str], fmt_names: frozenset[str] = frozenset()
) -> tuple[str, list[Part] | None]:
    if name in {"TORCH_CHECK", "TORCH_CHECK_VALUE", "TORCH_CHECK_TYPE", "TORCH_INTERNAL_ASSERT"}:
        return name, csource.stream_parts(args[1:]) if len(args) > 1 else None
    if name == "TORCH_CHECK_WITH":
        return f"TORCH_CHECK_WITH {args[0]}", csource.stream_parts(args[2:]) if len(
            args
        ) > 2 else None
    if name == "C10_THROW_ERROR" or name == "C10D_THROW_ERROR":
        return f"throw {args[0]}", csource.stream_parts(args[1:]) if len(args) > 1 else None
    if (
        name == "fmt::format"
        or name in fmt_names
        or (name.startswith("C10D_") and name[5:] in {"ERROR", "WARNING", "INFO", "DEBUG"})
    ):
        lit = csource.literal(args[0]) if args else None
        if lit is None or lit.markers:
            return name, None
        return name, fmt_parts(lit.text, args[1:])
    if name in {"c10::str", "str"}:
        return "c10::str", csource.stream_parts(args)
    return name, csource.stream_parts(args)


def sites_of(code: str, project: str, path: str, version: str) -> list[Site]:
    clean = csource.blank_comments(code)
    spans = csource.function_spans(clean)
    lines = csource.LineIndex(clean)
    sites: list[Site] = []
    names = _GLOO_CALLS if project == "gloo" else _TORCH_CALLS
    fmt_names = fmt_wrappers(clean)
    taken: list[tuple[int, int]] = []
    names = (*names, *sorted(fmt_names.difference(names)))
    for call in csource.find_calls(clean, tuple(n for n in names if n not in {"LOG", "VLOG"})):
        if any(a <= call.offset < b for a, b in taken):
            continue  # a c10::str inside a TORCH_CHECK already read
        before = clean[max(0, call.offset - 20) : call.offset]
        if (
            call.name == "str"
            and not before.endswith("c10::")
            and not re.search(r"(?:return|=|\()\s*$", before)
        ):
            continue
        if project == "gloo":
            level, parts = _gloo_parts(call.name, call.args)
        else:
            level, parts = _torch_parts(call.name, call.args, fmt_names)
        if parts is None:
            continue
        taken.append((call.offset, call.end))
        function = csource.enclosing(spans, call.offset)
        sites.append(Site(project, level, tuple(parts), path, function, call.line, version))
    for m in _LOG_STREAM.finditer(clean):
        end = clean.find(";", m.end())
        if end < 0:
            continue
        operands = csource.split_stream(clean[m.end() : end])
        parts = csource.stream_parts(operands)
        if parts is None:
            continue
        function = csource.enclosing(spans, m.start())
        level = "LOG " + m.group(1) if m.group(1) else "stream"
        sites.append(
            Site(project, level, tuple(parts), path, function, lines.line(m.start()), version)
        )
    for m in _ASSIGN.finditer(clean):
        end = clean.find(";", m.end())
        if end < 0:
            continue
        parts = csource.stream_parts(csource.split_plus(clean[m.end() : end]))
        if parts is None:
            continue
        function = csource.enclosing(spans, m.start())
        line = lines.line(m.start())
        sites.append(Site(project, "string", tuple(parts), path, function, line, version))
    return sites
