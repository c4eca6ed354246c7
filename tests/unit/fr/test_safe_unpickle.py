"""Malicious pickles are refused with a clear message and nothing in them runs."""

from __future__ import annotations

import builtins
import copyreg
import os
import pickle
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from hangdoc.analyzer.model import InputKind
from hangdoc.analyzer.parsers.flight_recorder import FlightRecorderParser
from hangdoc.common.safe_unpickle import (
    UnsafePickleError,
    describe_load_error,
    safe_load,
    safe_loads,
)


class _Reducer:
    """Pickles as ``func(*args)``: the classic code-execution pickle."""

    def __init__(self, func: Callable[..., object], *args: object) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[Callable[..., object], tuple[object, ...]]:
        return self.func, self.args


def _attacks(marker: Path) -> dict[str, object]:
    touch = f"touch {marker}"
    return {
        "os.system": _Reducer(os.system, touch),
        "subprocess.Popen": _Reducer(subprocess.Popen, ["touch", str(marker)]),
        "builtins.eval": _Reducer(builtins.eval, f"open({str(marker)!r}, 'w').close()"),
        "builtins.exec": _Reducer(builtins.exec, f"open({str(marker)!r}, 'w').close()"),
    }


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize(
    "attack", ["os.system", "subprocess.Popen", "builtins.eval", "builtins.exec"]
)
def test_reducer_attacks_are_refused_and_nothing_runs(
    tmp_path: Path, attack: str, protocol: int
) -> None:
    # GIVEN a dump-shaped pickle whose one entry is a reducer that would create a file
    marker = tmp_path / "pwned"
    payload = {"version": "2.10", "entries": [_attacks(marker)[attack]]}
    data = pickle.dumps(payload, protocol=protocol)
    # WHEN it is loaded THEN it is refused, naming the global, and the file never appears
    with pytest.raises(UnsafePickleError, match=r"names the global .*(system|Popen|eval|exec)"):
        safe_loads(data)
    assert not marker.exists()


def test_extension_registry_opcodes_are_refused(tmp_path: Path) -> None:
    # EXT1 names a global through copyreg's registry instead of GLOBAL: same door.
    marker = tmp_path / "pwned"
    copyreg.add_extension("posix", "system", 0xF1)
    try:
        data = pickle.dumps(_Reducer(os.system, f"touch {marker}"), protocol=2)
        assert pickle.EXT1 in data
        with pytest.raises(UnsafePickleError):
            safe_loads(data)
    finally:
        copyreg.remove_extension("posix", "system", 0xF1)
    assert not marker.exists()


@pytest.mark.parametrize(
    "data",
    [
        b"cos\nsystem\n(S'true'\ntR.",  # GLOBAL + REDUCE (protocol 0)
        b"(S'true'\nios\nsystem\n.",  # INST
        b"(cos\nsystem\nS'true'\no.",  # OBJ
        b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x04true\x85R.",  # STACK_GLOBAL + REDUCE
        b"\x80\x02cbuiltins\neval\nq\x00X\x01\x00\x00\x001\x85\x81.",  # NEWOBJ
    ],
    ids=["global-reduce", "inst", "obj", "stack-global", "newobj"],
)
def test_hand_written_opcodes_naming_globals_are_refused(data: bytes) -> None:
    with pytest.raises(UnsafePickleError):
        safe_loads(data)


def test_persistent_ids_are_refused() -> None:
    with pytest.raises(UnsafePickleError, match="persistent"):
        safe_loads(b"Pfoo\n.")


def test_build_on_plain_containers_reaches_no_code() -> None:
    # BUILD needs __setstate__ or __dict__; a dict has neither, so it fails as bad data.
    with pytest.raises(AttributeError):
        safe_loads(b"}(S'a'\nI1\ndb.")


def test_plain_data_loads_like_pickle() -> None:
    value = {
        "version": "2.10",
        "entries": [{"t": (1, "a"), "x": [1.5, None, True, "é"], "big": 1 << 70}],
    }
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert safe_loads(pickle.dumps(value, protocol=protocol)) == value
    # bytes have an opcode from protocol 3 on (protocol 2 pickles them via a global)
    assert safe_loads(pickle.dumps([b"raw"], protocol=3)) == [b"raw"]


def test_truncated_pickle_is_reported_not_raised_by_the_parser(tmp_path: Path) -> None:
    data = pickle.dumps({"version": "2.10", "pg_config": {}, "entries": [{"record_id": 1}] * 50})
    path = tmp_path / "comm_lib_trace_rank_3"
    path.write_bytes(data[: len(data) // 2])
    parsed = FlightRecorderParser().parse(path, "x/comm_lib_trace_rank_3")
    assert parsed.kind is InputKind.FLIGHT_RECORDER
    assert parsed.error is not None and "truncated" in parsed.error


def test_parser_reports_a_malicious_dump_as_an_input_error(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "comm_lib_trace_rank_0"
    path.write_bytes(
        pickle.dumps({"pg_config": {}, "entries": [_Reducer(os.system, f"touch {marker}")]})
    )
    parser = FlightRecorderParser()
    assert parser.sniff(path.read_bytes()[:65536])
    parsed = parser.parse(path, "bad/comm_lib_trace_rank_0")
    assert parsed.error is not None
    assert "refused" in parsed.error and "system" in parsed.error
    assert "Nothing in it was executed" in parsed.error
    assert not parsed.processes
    assert not marker.exists()


def test_describe_load_error_words() -> None:
    assert "truncated" in describe_load_error(EOFError())
    assert "not a readable pickle" in describe_load_error(ValueError("x"))


def test_safe_load_reads_a_real_torch_dump() -> None:
    sample = Path(__file__).resolve().parents[3] / "fixtures/fr/torch_samples/fr_pickle"
    with (sample / "comm_lib_trace_rank_0").open("rb") as handle:
        doc = safe_load(handle)
    assert isinstance(doc, dict) and doc["version"] == "2.10"
    assert doc["entries"][0]["process_group"] == ("0", "default_pg")
