"""Python sources: the messages of ``raise``, ``logger.<level>(…)`` and ``warnings.warn``.

Read with :mod:`ast`, so an f-string's fields, ``%``-formats, ``.format`` calls and
concatenations become template slots named by their expressions.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from catalog.sources import Site

from hangdoc.analyzer.parsers.catalog.template import Part, Slot

_LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal"}
_LOGGERS = re.compile(
    r"(?:^|\.)(?:_?log(?:ger)?\w*|LOG(?:GER)?|logging|_LOGGER|rank_zero_\w+)$", re.I
)
# Framework helpers that log a message (Lightning, DeepSpeed, Megatron).
_LOG_FUNCTIONS = frozenset(
    {
        "rank_zero_warn",
        "rank_zero_info",
        "rank_zero_debug",
        "log_dist",
        "print_rank_0",
        "logger_warning_once",
        "warning_once",
        "print_rank_last",
    }
)
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(?:\*|\d+)?(?:\.\d+)?[diouxXeEfgGcrsa%]")
_BRACES = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def _spec_type(spec: str) -> str:
    spec = spec.strip()
    if not spec:
        return "text"
    last = spec[-1]
    if last in "d":
        return "int"
    if last in "eEfFgG%":
        return "float"
    if last in "xX":
        return "hex"
    return "text"


def _short(expr: str) -> str:
    expr = re.sub(r"\s+", " ", expr.strip())
    return expr if len(expr) <= 60 else expr[:57] + "..."


def message_parts(node: ast.expr, args: list[ast.expr] | None = None) -> list[Part] | None:
    """Template parts of a message expression, or None when it holds no literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if args:
            return _printf(node.value, args)
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts: list[Part] = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value)
            elif isinstance(value, ast.FormattedValue):
                spec = ""
                if isinstance(value.format_spec, ast.JoinedStr):
                    spec = "".join(
                        v.value
                        for v in value.format_spec.values
                        if isinstance(v, ast.Constant) and isinstance(v.value, str)
                    )
                parts.append(Slot(_short(ast.unparse(value.value)), _spec_type(spec)))
        return parts
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = message_parts(node.left) or [Slot(_short(ast.unparse(node.left)))]
        right = message_parts(node.right) or [Slot(_short(ast.unparse(node.right)))]
        if not any(isinstance(p, str) for p in (*left, *right)):
            return None
        return [*left, *right]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            values = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            return _printf(node.left.value, list(values))
        return None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        return _format(node.func.value.value, node.args, node.keywords)
    return None


def _printf(fmt: str, args: list[ast.expr]) -> list[Part]:
    parts: list[Part] = []
    values = iter(args)
    pos = 0
    for m in _PRINTF.finditer(fmt):
        parts.append(fmt[pos : m.start()])
        pos = m.end()
        conv = m.group(0)[-1]
        if conv == "%":
            parts.append("%")
            continue
        value = next(values, None)
        name = _short(ast.unparse(value)) if value is not None else "value"
        kind = {"d": "int", "i": "int", "f": "float", "g": "float", "e": "float", "x": "hex"}
        parts.append(Slot(name, kind.get(conv, "text")))
    parts.append(fmt[pos:])
    return parts


def _format(fmt: str, args: list[ast.expr], keywords: list[ast.keyword]) -> list[Part]:
    parts: list[Part] = []
    named = {k.arg: k.value for k in keywords if k.arg}
    auto = iter(args)
    pos = 0
    for m in _BRACES.finditer(fmt):
        parts.append(fmt[pos : m.start()])
        pos = m.end()
        if m.group(1) is None:
            parts.append(m.group(0)[0])
            continue
        field, _, spec = m.group(1).partition(":")
        field = field.split("!")[0]
        if field == "":
            value = next(auto, None)
        elif field.isdigit():
            value = args[int(field)] if int(field) < len(args) else None
        else:
            value = named.get(field.split(".")[0].split("[")[0])
        name = _short(ast.unparse(value)) if value is not None else field or "value"
        parts.append(Slot(name, _spec_type(spec)))
    parts.append(fmt[pos:])
    return parts


def _call_name(node: ast.expr) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - unparse of a valid tree
        return ""


class _Visitor(ast.NodeVisitor):
    def __init__(
        self, project: str, path: str, version: str, constants: dict[str, str] | None = None
    ) -> None:
        self.project, self.path, self.version = project, path, version
        self.sites: list[Site] = []
        self._functions: list[str] = []
        self._constants = constants or {}

    def _format_of(self, node: ast.expr) -> ast.expr:
        """A module constant named as a log call's format is that string: vLLM keeps
        ``LONG_WAIT_TIME_LOG_MSG = "No available … in %d seconds. …"`` and logs
        ``logger.info(LONG_WAIT_TIME_LOG_MSG, interval)``."""
        if isinstance(node, ast.Name) and node.id in self._constants:
            return ast.Constant(self._constants[node.id])
        return node

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self._functions.append(node.name)
        self.generic_visit(node)
        self._functions.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function
    visit_ClassDef = _function

    def _add(self, level: str, parts: list[Part] | None, line: int) -> None:
        function = ".".join(self._functions)
        if parts is None:
            self.sites.append(
                Site(self.project, level, (), self.path, function, line, self.version, False)
            )
            return
        self.sites.append(
            Site(self.project, level, tuple(parts), self.path, function, line, self.version)
        )

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args:
            name = _call_name(exc.func).split(".")[-1]
            if name[:1].isupper():
                self._add(f"raise {name}", message_parts(exc.args[0]), node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and node.args:
            owner = _call_name(func.value)
            if func.attr in _LOG_METHODS and _LOGGERS.search(owner):
                level = "logger." + ("warning" if func.attr == "warn" else func.attr)
                fmt = self._format_of(node.args[0])
                self._add(level, message_parts(fmt, node.args[1:]), node.lineno)
            elif func.attr == "warn" and owner == "warnings":
                self._add("warnings.warn", message_parts(node.args[0]), node.lineno)
        elif isinstance(func, ast.Name) and node.args and func.id in _LOG_FUNCTIONS:
            self._add(func.id, message_parts(node.args[0]), node.lineno)
        self.generic_visit(node)


def sites_of(source: str, project: str, path: str, version: str) -> list[Site]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    visitor = _Visitor(project, path, version, module_strings(tree))
    visitor.visit(tree)
    return visitor.sites


def module_strings(tree: ast.Module) -> dict[str, str]:
    """The module's ``NAME = "literal"`` assignments (adjacent literals are one constant)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found[node.targets[0].id] = node.value.value
    return found


def extract_tree(root: Path, under: str, project: str, version: str) -> list[Site]:
    """Every message site in the ``.py`` files of ``root/under`` (paths kept relative to
    ``root``)."""
    sites: list[Site] = []
    for path in sorted((root / under).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if "/test" in rel or rel.startswith("test"):
            continue
        sites.extend(sites_of(path.read_text("utf-8", "replace"), project, rel, version))
    return sites
