"""C++ messages formatted with fmt through a function of their own file: c10d's socket.cpp
``recordError(fmt::string_view format, Args&&... args)`` (``fmt::vformat``, then
``C10D_WARNING``), called as ``recordError("The client socket has failed to connect to {}
{}.", addr, err)``. ``scripts/catalog/cppstream.py`` reads the file's fmt-taking functions
(``fmt_wrappers``) and makes each ``{}`` / ``{:spec}`` of their calls a slot, as for
``fmt::format`` and ``C10D_*``; ``scripts/catalog/refmt_rows.py`` gives the rows held before
the same parts. The source below is socket.cpp's own text at pytorch commit 056b6f38c0c2
(the commit docs/catalog.md names for it), the recordError definition and two of its calls;
the lines are c10d's warnings as torch prints them (``[W <date> socket.cpp:<line>] [c10d]``).
"""

from __future__ import annotations

import pytest

from hangdoc.analyzer.parsers.catalog import default_catalog, default_matcher, to_event
from hangdoc.analyzer.parsers.catalog.template import Slot, display, normalise
from tests.unit.parsers.catalog.scripts_import import catalog_script

_SOCKET_CPP = """
class SocketListenOp {
 private:
  template <typename... Args>
  // NOLINTNEXTLINE(cppcoreguidelines-missing-std-forward)
  void recordError(fmt::string_view format, Args&&... args) {
    auto msg = fmt::vformat(format, fmt::make_format_args(args...));

    C10D_WARNING(msg);

    errors_.emplace_back(std::move(msg));
  }
};

bool SocketListenOp::tryListen(int family) {
  int r = ::getaddrinfo(nullptr, port_.c_str(), &hints, &naked_result);
  if (r != 0) {
    const char* gai_err = ::gai_strerror(r);

    recordError(
        "The local {}network addresses cannot be retrieved (gai error: {} - {}).",
        family,
        r,
        gai_err);

    return false;
  }
  recordError(
      "The server could not be initialized on any address for port={}, family={}",
      port_,
      family);
  return false;
}
"""


def test_a_function_that_takes_a_fmt_format_is_a_fmt_call() -> None:
    cppstream = catalog_script("cppstream")
    assert cppstream.fmt_wrappers(_SOCKET_CPP) == {"recordError"}
    sites = cppstream.sites_of(_SOCKET_CPP, "torch", "torch/csrc/distributed/c10d/socket.cpp", "x")
    shown = {display(site.parts) for site in sites if site.level == "recordError"}
    assert shown == {
        "The local <family>network addresses cannot be retrieved (gai error: <r> - <gai_err>).",
        "The server could not be initialized on any address for port=<port_>, family=<family>",
    }
    assert not any("{}" in p for s in sites for p in s.parts if isinstance(p, str))


def test_a_format_spec_types_its_slot() -> None:
    cppstream = catalog_script("cppstream")
    parts = cppstream.fmt_parts("waited {:d} ms for {}, {:.2f} s {{literal}}", ["a", "b", "c"])
    assert parts[1] == Slot("a", "int") and parts[3] == Slot("b") and parts[5] == Slot("c", "float")
    assert "".join(p for p in parts if isinstance(p, str)).endswith("{literal}")


def test_a_row_held_as_a_stream_gets_the_parts_a_reread_gives() -> None:
    # The shape the rows had: the format one literal, the values slots after it.
    refmt = catalog_script("refmt_rows").refmt
    cppstream = catalog_script("cppstream")
    held = (
        "The server could not be initialized on any address for port={}, family={}",
        Slot("port_"),
        Slot("family"),
    )
    sites = cppstream.sites_of(_SOCKET_CPP, "torch", "socket.cpp", "x")
    reread = next(s.parts for s in sites if "port=" in str(s.parts[0]))
    assert refmt(held) == normalise(reread)  # as rows hold parts (catalog.sources.group)
    # Not that shape: a format with fields but no slots (Python's NotImplementedError
    # given the format and its value as two arguments prints the braces), or more slots.
    assert refmt(("{} cannot be pickled",)) is None
    assert refmt(("a {} b", Slot("x"), Slot("y"))) is None


def test_no_row_of_c10ds_cpp_keeps_a_fmt_field_as_text() -> None:
    for row in default_catalog().rows:
        if row.project != "torch" or not row.sources[0].file.endswith((".cpp", ".hpp", ".h")):
            continue
        literal = "".join(p for p in row.parts if isinstance(p, str))
        assert "{}" not in literal, row.template


@pytest.mark.parametrize(
    "line,values",
    [
        (
            "[W1028 09:30:19.040768374 socket.cpp:752] [c10d] The client socket has failed to "
            "connect to [node-1]:29500 (errno: 111 - Connection refused).",
            {"peer": "node-1", "peer_port": 29500},
        ),
        (
            "[W socket.cpp:663] [c10d] The client socket has failed to connect to "
            "[localhost]:29500 (errno: 99 - Cannot assign requested address).",
            {"peer": "localhost", "peer_port": 29500},
        ),
        (
            "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 "
            "(errno: 98 - Address already in use).",
            {"peer_port": 29500},
        ),
        (
            "[W socket.cpp:601] [c10d] The IPv6 network addresses of (master-0, 29500) cannot "
            "be retrieved (gai error: -2 - Name or service not known).",
            {"peer": "master-0"},
        ),
    ],
)
def test_c10ds_socket_warnings_match_their_rows(line: str, values: dict[str, object]) -> None:
    matcher = default_matcher()
    match = matcher.match(line)
    assert match is not None and match.row.level == "recordError", line
    event = to_event(match, matcher)
    for key, value in values.items():
        assert event.values.get(key) == value, event.values
