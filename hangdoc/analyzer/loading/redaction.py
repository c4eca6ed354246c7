"""Hide secrets in a loaded Evidence, once, before any rule or renderer sees it.

Dumps written by ``hangdoc collect`` are redacted already, but ``analyze`` also reads
loose files from tickets (a pasted log with an ``HF_TOKEN=…`` line, a py-spy
``--locals`` dump, a dump collected with ``--no-redact``). Every report — HTML,
Markdown, findings JSON, the terminal summary, the ticket archive's copy of the
report — is rendered from the Evidence and the findings that rules build from it, so
redacting the Evidence right after loading is the one choke point that covers them
all, including renderers written later. The patterns are
``hangdoc/common/redact.py``'s: one definition of what a secret looks like.

What is redacted: environment values, command lines, thread names, frame locals (by
the variable's name, and by the value's shape), log event text and payloads, notes,
input errors and paths, collector step reasons, the command lines of the processes at
the other end of a thread's wait (a lock's holder, a pipe's child). What is not:
function names, file paths of frames and collective metadata — code identifiers, not
credentials, and the bulk of a 16,384-rank Evidence (millions of frames) that rules
match on; nor the ranks' log windows (``log_lines``, millions of lines at that scale, a
few µs each): the views quote a few of them into findings, and the engine redacts the
findings (analyzer/engine.py ``_redacted``).
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar, cast

from hangdoc.analyzer.model import (
    ChildStacks,
    Evidence,
    InputFile,
    KernelWait,
    LogEvent,
    ProcessEvidence,
    ProcSample,
    StackSample,
    TextStack,
    ThreadStack,
)
from hangdoc.analyzer.payloads.base import EventPayload
from hangdoc.common.redact import (
    REDACTED,
    is_secret_name,
    redact_cmdline,
    redact_text,
    shape_is_clean,
)


def redact_evidence(evidence: Evidence) -> Evidence:
    """Redact ``evidence`` in place (and return it); idempotent.

    Cost matters at 16,384 ranks: the same thread names and stacks repeat on every rank,
    so a thread's redacted form is computed once per distinct (name, frames).
    """
    memo = _Memo()
    for proc in evidence.processes:
        _redact_process(proc, memo)
    evidence.job_log_events = [_event(e, memo) for e in evidence.job_log_events]
    evidence.notes = [redact_text(n) for n in evidence.notes]
    evidence.inputs = [_input(i, memo) for i in evidence.inputs]
    evidence.collect_steps = [
        dataclasses.replace(s, reason=redact_text(s.reason)) if s.reason else s
        for s in evidence.collect_steps
    ]
    return evidence


_S = TypeVar("_S", StackSample, TextStack)


class _Memo:
    """Redacted thread names and record values already seen: the same few repeat on every
    rank (a thread's name; a payload's interface, address, library version), and a
    job's events are tens of thousands."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        # shapes of texts (digits made 0) that hold no trigger (common/redact.py): the
        # ranks' events say the same things with other numbers
        self.shapes: dict[bytes, bool] = {}
        self.values = _Values(self)
        # environments and command lines: a node's ranks share most of theirs
        self.secret_names: dict[str, bool] = {}
        self.env_values: dict[str, str] = {}
        self.cmdlines: dict[str, str] = {}

    def text(self, text: str) -> str:
        return text if shape_is_clean(text, self.shapes) else redact_text(text)

    def value(self, value: str) -> str:
        return self.values[value] or value

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """``redact_env`` of it, each name's secrecy and each value's redaction decided
        once (a node's ranks share most of their variables, and differ in a few)."""
        out: dict[str, str] = {}
        for name, value in env.items():
            secret = self.secret_names.get(name)
            if secret is None:
                secret = self.secret_names[name] = is_secret_name(name)
            if secret:
                out[name] = REDACTED
            else:
                cleaned = self.env_values.get(value)
                if cleaned is None:
                    cleaned = self.env_values[value] = redact_text(value)
                out[name] = cleaned
        return out

    def cmdline(self, cmdline: str) -> str:
        cleaned = self.cmdlines.get(cmdline)
        if cleaned is None:
            cleaned = self.cmdlines[cmdline] = redact_cmdline(cmdline)
        return cleaned

    def name(self, name: str) -> str:
        cleaned = self.names.get(name)
        if cleaned is None:
            cleaned = self.names[name] = redact_text(name)
        return cleaned


class _Values(dict[str | None, str | None]):
    """Record values → redacted, each computed when first asked for (None stays None):
    looked up in C, a record's text fields at once (``_record``)."""

    def __init__(self, memo: _Memo) -> None:
        super().__init__({None: None})
        self.memo = memo

    def __missing__(self, value: str | None) -> str | None:
        cleaned = self[value] = self.memo.text(value) if isinstance(value, str) else value
        return cleaned


def _redact_process(proc: ProcessEvidence, memo: _Memo) -> None:
    if proc.env:
        proc.env = memo.env(proc.env)
    if proc.cmdline:
        proc.cmdline = memo.cmdline(proc.cmdline)
    proc.stack_samples = [_sample(s, memo) for s in proc.stack_samples]
    proc.proc_samples = [_proc_sample(s) for s in proc.proc_samples]
    proc.text_stacks = [_sample(s, memo) for s in proc.text_stacks]
    proc.log_events = [_event(e, memo) for e in proc.log_events]


def _sample(sample: _S, memo: _Memo) -> _S:
    threads = _threads(sample.threads, memo)
    children = tuple(_child(c, memo) for c in sample.children)
    unchanged = threads is sample.threads and all(
        a is b for a, b in zip(children, sample.children, strict=True)
    )
    return sample if unchanged else dataclasses.replace(sample, threads=threads, children=children)


def _proc_sample(sample: ProcSample) -> ProcSample:
    """The command lines of the processes at the other end of its threads' waits."""
    if not any(t.wait is not None and t.wait.peers for t in sample.threads):
        return sample
    threads = tuple(
        dataclasses.replace(t, wait=_wait(t.wait)) if t.wait is not None and t.wait.peers else t
        for t in sample.threads
    )
    return dataclasses.replace(sample, threads=threads)


def _wait(wait: KernelWait) -> KernelWait:
    peers = tuple(
        dataclasses.replace(p, command=redact_cmdline(p.command)) if p.command else p
        for p in wait.peers
    )
    return dataclasses.replace(wait, peers=peers)


def _child(child: ChildStacks, memo: _Memo) -> ChildStacks:
    threads = _threads(child.threads, memo)
    cmdline = redact_cmdline(child.cmdline) if child.cmdline else child.cmdline
    if threads is child.threads and cmdline == child.cmdline:
        return child
    return dataclasses.replace(child, threads=threads, cmdline=cmdline)


def _threads(threads: tuple[ThreadStack, ...], memo: _Memo) -> tuple[ThreadStack, ...]:
    out = tuple(_thread(t, memo) for t in threads)
    return threads if all(a is b for a, b in zip(out, threads, strict=True)) else out


def _thread(thread: ThreadStack, memo: _Memo) -> ThreadStack:
    name = memo.name(thread.name) if thread.name else thread.name
    return thread if name == thread.name else dataclasses.replace(thread, name=name)


def _event(event: LogEvent, memo: _Memo) -> LogEvent:
    text = memo.text(event.text)
    host = memo.value(event.host) if event.host else event.host
    payload = cast(EventPayload, _record(event.payload, memo))
    if text == event.text and host == event.host and payload is event.payload:
        return event
    return dataclasses.replace(event, text=text, host=host, payload=payload)


class _Kind(enum.Enum):
    """How a record's field is redacted, by its declared type."""

    TEXT = 1  # a str (or None)
    TEXTS = 2  # a tuple: of str, redacted each (of anything else: left as it is)
    ANY = 3  # a dataclass, or a type not told apart here: by the value, as it comes


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """How one record class is redacted: its text fields whose names are not secret,
    read at once (``plain``: their names; ``read``: a getter of their values, as a
    tuple), and the other fields that can hold text, one by one (name, secret, kind)."""

    plain: tuple[str, ...]
    read: Callable[[Any], tuple[Any, ...]]
    others: tuple[tuple[str, bool, _Kind], ...]
    # the others' values at once (and the class last): when none is set (None, an empty
    # tuple), as in most of a job's payloads, there is nothing to look at one by one
    read_others: Callable[[Any], tuple[Any, ...]]


# Each record class's plan, decided once per class: a field's name and declared type are
# all that decide it. Enums, numbers and flags are not text.
_PLANS: dict[type, _Plan] = {}
_NOT_TEXT = frozenset({int, float, bool, type(None)})


def _kind(tp: object) -> _Kind | None:
    """How a field of type ``tp`` is redacted; None: it holds no text."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        tp = args[0]  # X | None: as X (None is left as it is)
    if tp is str:
        return _Kind.TEXT
    if tp in _NOT_TEXT or (isinstance(tp, type) and issubclass(tp, enum.Enum)):
        return None
    if typing.get_origin(tp) is tuple:
        return _Kind.TEXTS
    return _Kind.ANY


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        try:
            hints = typing.get_type_hints(cls)
        except (NameError, TypeError):  # (a type this module cannot resolve: by value)
            hints = {}
        plain: list[str] = []
        others: list[tuple[str, bool, _Kind]] = []
        for f in dataclasses.fields(cls):
            kind = _kind(hints[f.name]) if f.name in hints else _Kind.ANY
            secret = is_secret_name(f.name)
            if kind is _Kind.TEXT and not secret:
                plain.append(f.name)
            elif kind is not None:
                others.append((f.name, secret, kind))
        getter = operator.attrgetter(*plain, "__class__")  # (a tuple, whatever the count)
        # (with no other field this getter gives the class alone: not called then)
        read_others = operator.attrgetter(*(name for name, _, _ in others), "__class__")
        plan = _PLANS[cls] = _Plan(tuple(plain), getter, tuple(others), read_others)
    return plan


def _record(record: Any, memo: _Memo) -> object:
    """A payload (or a record nested in one) with its text redacted: every string field,
    hidden whole when its name looks secret; enums and numbers are not text. The text
    fields whose names are not secret are looked up together, in C (a job's events are
    hundreds of thousands, and their texts repeat or differ only in their digits)."""
    plan = _plan(type(record))
    changes: dict[str, object] = {}
    values = plan.read(record)[:-1]
    try:
        cleaned = tuple(map(memo.values.__getitem__, values))
    except TypeError:  # (a value that is not text where the class says text: one by one)
        cleaned = tuple(memo.value(v) if isinstance(v, str) else v for v in values)
    if cleaned != values:
        for name, value, text in zip(plan.plain, values, cleaned, strict=True):
            if text != value:
                changes[name] = text
    others = plan.others if plan.others and any(plan.read_others(record)[:-1]) else ()
    for name, secret, kind in others:
        value = getattr(record, name)
        if value is None:
            continue
        if kind is _Kind.TEXTS and type(value) is tuple:
            if not value or not isinstance(value[0], str):
                continue
            new: object = tuple(memo.value(v) for v in value)
        elif isinstance(value, enum.Enum):
            continue
        elif isinstance(value, str):
            new = REDACTED if value and secret else memo.value(value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            new = _record(value, memo)
        elif isinstance(value, tuple) and value and isinstance(value[0], str):
            new = tuple(memo.value(v) for v in value)
        else:
            continue
        if new != value:
            changes[name] = new
    return dataclasses.replace(record, **changes) if changes else record


def _input(item: InputFile, memo: _Memo) -> InputFile:
    path = memo.text(item.path)  # (a job's paths differ in their digits: one shape)
    error = redact_text(item.error) if item.error else item.error
    if path == item.path and error == item.error:
        return item
    return dataclasses.replace(item, path=path, error=error)
