"""Synthetic flight recorder dumps in torch's exact pickle format, at any scale.

``JitPickler`` writes the byte stream torch's C++ pickler (torch/csrc/jit/serialization)
writes for an FR dump (see its docstring); ``tests/unit/fr/test_synth.py`` checks that it
reproduces real torch 2.13 dumps (fixtures/fr/*/pickle) byte for byte.

``Job`` describes a training job: N ranks in tensor-parallel groups of 8 and
data-parallel groups across them, a step of tp all_gather ×2, tp reduce_scatter, dp
all_reduce and (every 10th step) a default-group all_reduce, a ring buffer of E
entries that has wrapped (every rank's buffer starts mid-stream, at slightly different
points), and planted problems at the end, whose culprits the benchmark checks:

* ``skip``: one rank never issued the last dp all_reduce (it is busy elsewhere);
* ``size``: one rank's tp all_gather of the last step has twice its peers' elements,
  which holds its whole tp group there;
* ``type``: one rank issued a broadcast where its dp group issued all_reduce.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_PACK_I = struct.Struct("<I").pack
_PACK_i = struct.Struct("<i").pack
_PACK_H = struct.Struct("<H").pack
_PACK_q = struct.Struct("<q").pack
_PACK_d = struct.Struct(">d").pack


class JitPickler:
    """The opcode stream of torch's C++ pickler for plain data (no tensors, no classes).

    What torch 2.13 writes (read off real dumps): protocol 2; dicts as EMPTY_DICT MARK
    k v … SETITEMS and lists as EMPTY_LIST MARK … APPENDS, whatever their length; tuples
    as TUPLE1/2/3; strings memoized by value (BINUNICODE + BINPUT once, BINGET after);
    containers memoized by pointer only when shared (C++ ``use_count() > 1``): the root
    dict, and the frame dicts that several entries share (FR caches symbolized frames):
    BINPUT after SETITEMS, BINGET on reuse.
    """

    def __init__(self) -> None:
        self.out = bytearray(b"\x80\x02")
        self.memo = 0
        self.strings: dict[str, int] = {}
        self.shared: dict[int, int] = {}
        self.keep: list[object] = []  # keeps memoized objects alive so ids stay unique
        self.repeated: set[int] = set()

    def dumps(self, value: object) -> bytes:
        self.repeated = _repeated_frames(value)
        self.push(value)
        if isinstance(value, dict):
            self.put()  # the root is referenced by the dumper too: memoized
        self.out += b"."
        return bytes(self.out)

    def put(self) -> int:
        memo = self.memo
        self.out += (b"q" + bytes((memo,))) if memo < 256 else (b"r" + _PACK_I(memo))
        self.memo = memo + 1
        return memo

    def get(self, memo: int) -> None:
        self.out += (b"h" + bytes((memo,))) if memo < 256 else (b"j" + _PACK_I(memo))

    def string(self, text: str) -> None:
        known = self.strings.get(text)
        if known is not None:
            self.get(known)
            return
        data = text.encode("utf-8")
        self.out += b"X" + _PACK_I(len(data)) + data
        self.strings[text] = self.put()

    def integer(self, n: int) -> None:
        if 0 <= n < 256:
            self.out += b"K" + bytes((n,))
        elif 0 <= n < 65536:
            self.out += b"M" + _PACK_H(n)
        elif -(2**31) <= n < 2**31:
            self.out += b"J" + _PACK_i(n)
        else:
            self.out += b"\x8a\x08" + _PACK_q(n)

    def push(self, value: object, shared: bool = False) -> None:
        kind = type(value)
        if kind is str:
            self.string(value)  # type: ignore[arg-type]
        elif kind is int:
            self.integer(value)  # type: ignore[arg-type]
        elif value is None:
            self.out += b"N"
        elif value is True:
            self.out += b"\x88"
        elif value is False:
            self.out += b"\x89"
        elif kind is float:
            self.out += b"G" + _PACK_d(value)
        elif kind is dict:
            self.dict(value, shared)  # type: ignore[arg-type]
        elif kind is list:
            self.out += b"]("
            repeated, push = self.repeated, self.push
            for item in value:  # type: ignore[attr-defined]
                push(item, id(item) in repeated)
            self.out += b"e"
        elif kind is tuple:
            for item in value:  # type: ignore[attr-defined]
                self.push(item)
            self.out += {0: b")", 1: b"\x85", 2: b"\x86", 3: b"\x87"}.get(len(value), b"t")  # type: ignore[arg-type]
        else:
            raise TypeError(f"torch's FR pickler never writes {kind.__name__}")

    def dict(self, value: dict[str, object], shared: bool) -> None:
        if shared:
            known = self.shared.get(id(value))
            if known is not None:
                self.get(known)
                return
        self.out += b"}("
        string, push = self.string, self.push
        for k, v in value.items():
            string(k)  # FR dicts have string keys
            push(v)
        self.out += b"u"
        if shared:
            self.shared[id(value)] = self.put()
            self.keep.append(value)


def _repeated_frames(doc: object) -> set[int]:
    """Frame dicts referenced by more than one entry: the ones torch's pickler memoizes."""
    seen: set[int] = set()
    repeated: set[int] = set()
    entries = doc.get("entries") if isinstance(doc, dict) else doc
    for entry in entries if isinstance(entries, list) else ():
        for frame in entry.get("frames", ()) if isinstance(entry, dict) else ():
            key = id(frame)
            if key in seen:
                repeated.add(key)
            seen.add(key)
    return repeated


def jit_dumps(value: object) -> bytes:
    return JitPickler().dumps(value)


# --- a synthetic job ----------------------------------------------------------------------

_TORCH = "/opt/venv/lib/python3.11/site-packages/torch/distributed"
_FRAMES = [
    ("all_reduce", f"{_TORCH}/distributed_c10d.py", 3245),
    ("wrapper", f"{_TORCH}/c10d_logger.py", 83),
    ("_reduce_bucket", f"{_TORCH}/algorithms/ddp_comm_hooks/default_hooks.py", 22),
    ("_hook", f"{_TORCH}/../nn/parallel/distributed.py", 1498),
    ("_call_impl", "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", 1762),
    (
        "_wrapped_call_impl",
        "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py",
        1751,
    ),
    ("forward", "/srv/job/model/transformer.py", 412),
    ("_call_impl", "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", 1762),
    (
        "_wrapped_call_impl",
        "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py",
        1751,
    ),
    ("forward", "/srv/job/model/block.py", 97),
    ("checkpoint", "/opt/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py", 496),
    ("backward", "/opt/venv/lib/python3.11/site-packages/torch/autograd/__init__.py", 353),
    ("backward", "/opt/venv/lib/python3.11/site-packages/torch/_tensor.py", 648),
    ("scale_and_backward", "/srv/job/trainer/amp.py", 61),
    ("reduce_grads", "/srv/job/trainer/ddp.py", 212),
    ("train_step", "/srv/job/trainer/loop.py", 88),
    ("run_epoch", "/srv/job/trainer/loop.py", 141),
    ("fit", "/srv/job/trainer/loop.py", 33),
    ("main", "/srv/job/train.py", 57),
    (
        "wrapper",
        "/opt/venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py",
        355,
    ),
    ("<module>", "/srv/job/train.py", 80),
]
_STEP_OPS = (
    ("tp", "_all_gather_base", 0),
    ("tp", "_all_gather_base", 1),
    ("tp", "_reduce_scatter_base", 2),
    ("dp", "all_reduce", 3),
)
TP = 8


@dataclass(frozen=True)
class Planted:
    kind: str  # skip | size | type
    rank: int


@dataclass
class Job:
    """A job of ``ranks`` ranks whose FR buffers hold ``entries`` entries each."""

    ranks: int
    entries: int = 2000
    steps_before: int = 0  # steps that scrolled out of the ring buffer already
    frames: int = len(_FRAMES)  # a DDP gradient hook's stack is about this deep
    planted: list[Planted] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.planted and self.ranks >= 4 * TP:
            # in three different tp groups and three different dp groups (rank % 8)
            block = self.ranks // TP
            self.planted = [
                Planted("skip", (block // 3) * TP + 1),
                Planted("size", (2 * block // 3) * TP + 2),
                Planted("type", (block - 1) * TP + 3),
            ]
        self.steps_before = self.steps_before or self.entries // 3

    def tp_group(self, rank: int) -> tuple[str, list[int]]:
        base = rank - rank % TP
        return str(1 + rank // TP), list(range(base, min(base + TP, self.ranks)))

    def dp_group(self, rank: int) -> tuple[str, list[int]]:
        groups = (self.ranks + TP - 1) // TP
        return str(1 + groups + rank % TP), list(range(rank % TP, self.ranks, TP))

    def pg_config(self, rank: int) -> dict[str, dict[str, str]]:
        tp, tp_ranks = self.tp_group(rank)
        dp, dp_ranks = self.dp_group(rank)
        return {
            "0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(self.ranks)))},
            tp: {"name": tp, "desc": "tp", "ranks": str(tp_ranks)},
            dp: {"name": dp, "desc": "dp", "ranks": str(dp_ranks)},
        }

    def ops(self, rank: int) -> Iterator[tuple[str, str, int, str]]:
        """(group kind, op, numel, state) in issue order; the last step is where it hangs.

        In the last step the tp group holding the ``size`` rank is stuck at its first
        all_gather (all its tp ops stay in flight); every other tp group finished its tp
        ops; every rank then waits in the dp all_reduce, except the ``skip`` rank, which
        never issues it, and the ``type`` rank, which issued a broadcast instead.
        """
        planted = {p.kind: p.rank for p in self.planted}
        size_rank = planted.get("size")
        stuck_tp = size_rank is not None and size_rank // TP == rank // TP
        total = self.steps_before + self.entries // 4 + 2
        for step in range(total):
            last = step == total - 1
            for index, (kind, op, _) in enumerate(_STEP_OPS):
                numel = 4096 if kind == "tp" else 1 << 20
                state = "completed"
                if last and kind == "tp":
                    state = "scheduled" if stuck_tp else "completed"
                    if index == 0 and rank == size_rank:
                        numel *= 2
                if last and kind == "dp":
                    if planted.get("skip") == rank:
                        return  # busy elsewhere: never issues the last dp all_reduce
                    state = "scheduled"
                    if planted.get("type") == rank:
                        op = "broadcast"
                yield kind, op, numel, state
            if step % 10 == 9 and not last:
                yield "default", "all_reduce", 1, "completed"

    def dump(self, rank: int) -> dict[str, Any]:
        groups = {
            "tp": self.tp_group(rank),
            "dp": self.dp_group(rank),
            "default": ("0", list(range(self.ranks))),
        }
        descs = {"tp": "tp", "dp": "dp", "default": "default_pg"}
        seqs: dict[str, int] = {}
        common = [
            {"name": n, "filename": f, "line": line} for n, f, line in _FRAMES[1 : self.frames]
        ]
        leaf_file = _FRAMES[0][1]
        stacks = {
            op: [{"name": op, "filename": leaf_file, "line": 3000 + i}, *common]
            for i, op in enumerate(
                ("_all_gather_base", "_reduce_scatter_base", "all_reduce", "broadcast")
            )
        }
        entries: list[dict[str, Any]] = []
        for record_id, (kind, op, numel, state) in enumerate(self.ops(rank)):
            name, members = groups[kind]
            seqs[name] = seqs.get(name, 0) + 1
            size = len(members)
            inp, out = [[numel]], [[numel]]
            if op == "_all_gather_base":
                out = [[numel * size]]
            elif op == "_reduce_scatter_base":
                inp = [[numel * size]]
            entries.append(
                {
                    "frames": list(stacks[op]),
                    "record_id": record_id,
                    "pg_id": int(name),
                    "process_group": (name, descs[kind]),
                    "thread_name": "python",
                    "thread_id": "140634419342208",
                    "collective_seq_id": seqs[name],
                    "p2p_seq_id": 0,
                    "op_id": seqs[name],
                    "profiling_name": f"nccl:{op}",
                    "time_created_ns": 1_795_289_481_000_000_000 + record_id * 1_000_003 + rank,
                    "input_sizes": inp,
                    "input_dtypes": ["BFloat16"],
                    "output_sizes": out,
                    "output_dtypes": ["BFloat16"],
                    "state": state,
                    "time_discovered_started_ns": None,
                    "time_discovered_completed_ns": 1_795_289_481_000_500_000 + record_id
                    if state == "completed"
                    else None,
                    "retired": state == "completed",
                    "timeout_ms": 600000,
                    "is_p2p": False,
                }
            )
        # Every buffer has wrapped, and not at the same point (sizes E-4..E): alignment
        # across ranks is exercised.
        kept = entries[-(self.entries - rank % 5) :]
        status = {
            name: {
                "last_enqueued_collective": seq,
                "last_started_collective": -1,
                "last_completed_collective": seq - 1,
            }
            for name, seq in seqs.items()
        }
        return {
            "version": "2.10",
            "pg_config": self.pg_config(rank),
            "comm_lib_version": "2.21.5",
            "pg_status": status,
            "entries": kept,
        }

    def write(self, directory: Path, ranks: range | None = None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for rank in ranks if ranks is not None else range(self.ranks):
            (directory / f"comm_lib_trace_rank_{rank}").write_bytes(jit_dumps(self.dump(rank)))

    def expected(self) -> dict[str, tuple[int, ...]]:
        """Kind of problem → the ranks hangdoc must blame for it."""
        return {p.kind: (p.rank,) for p in self.planted}
