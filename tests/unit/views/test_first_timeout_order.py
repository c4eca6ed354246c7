"""``silence.first_timeout`` reads each candidate's others lazily (it built a list of
them per rank: quadratic, 0.1 s of a 1,500-rank paste's analysis); held here to the
list-per-candidate reading it replaced, on timeouts of random ranks, times and files."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hangdoc.analyzer.model import LogEvent
from hangdoc.analyzer.payloads.torch_pg import CollectiveTimeout
from hangdoc.analyzer.views.silence import Voice, _earlier, first_timeout
from hangdoc.analyzer.views.timeline import Placed
from hangdoc.analyzer.vocabulary import Clock, EventKind


def _list_per_candidate(voices: list[Voice]) -> Placed | None:
    firsts = [v.timeouts[0] for v in voices if v.timeouts]
    for candidate in firsts:
        others = [p for p in firsts if p.rank != candidate.rank]
        if others and all(_earlier(candidate, p) for p in others):
            return candidate
    return None


_TIMEOUT = st.tuples(
    st.integers(0, 5),  # rank (repeated ranks: several voices of one rank)
    st.one_of(st.none(), st.floats(0, 30, allow_nan=False)),  # when
    st.sampled_from(["a.log", "b.log"]),  # file
    st.booleans(),  # a clock of its own
)


def _voices(timeouts: list[tuple[int, float | None, str, bool]]) -> list[Voice]:
    voices = []
    for index, (rank, when, source, clocked) in enumerate(timeouts):
        event = LogEvent(
            EventKind.COLLECTIVE_TIMEOUT, "timeout", source, index, when,
            CollectiveTimeout(seq=3, op="ALLREDUCE"),
            clock=Clock.LOCAL if clocked else None,
        )  # fmt: skip
        clock = Clock.LOCAL if clocked else None
        voices.append(Voice(rank=rank, timeouts=[Placed(rank, event, index, when, clock)]))
    return voices


@settings(max_examples=400, deadline=None)
@given(timeouts=st.lists(_TIMEOUT, max_size=8))
def test_the_first_timeout_is_the_one_the_list_per_candidate_found(
    timeouts: list[tuple[int, float | None, str, bool]],
) -> None:
    voices = _voices(timeouts)
    assert first_timeout(voices) is _list_per_candidate(voices)


def test_a_first_one_a_lone_rank_and_a_tie() -> None:
    first = _voices([(2, 1.0, "a.log", True), (0, 20.0, "a.log", True), (2, 25.0, "b.log", True)])
    found = first_timeout(first)
    assert found is not None and found.rank == 2 and found is _list_per_candidate(first)
    lone = _voices([(3, 1.0, "a.log", True), (3, 20.0, "a.log", True)])  # no other rank
    assert first_timeout(lone) is None and _list_per_candidate(lone) is None
    tie = _voices([(0, 1.0, "a.log", True), (1, 2.0, "a.log", True)])  # within the poll
    assert first_timeout(tie) is None and _list_per_candidate(tie) is None
