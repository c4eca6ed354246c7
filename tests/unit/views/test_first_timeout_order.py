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


@settings(max_examples=400, deadline=None)
@given(timeouts=st.lists(_TIMEOUT, max_size=8))
def test_the_first_timeout_is_the_one_the_list_per_candidate_found(
    timeouts: list[tuple[int, float | None, str, bool]],
) -> None:
    voices = []
    for index, (rank, when, source, clocked) in enumerate(timeouts):
        event = LogEvent(
            EventKind.COLLECTIVE_TIMEOUT, "timeout", source, index, when,
            CollectiveTimeout(seq=3, op="ALLREDUCE"),
            clock=Clock.LOCAL if clocked else None,
        )  # fmt: skip
        clock = Clock.LOCAL if clocked else None
        voices.append(Voice(rank=rank, timeouts=[Placed(rank, event, index, when, clock)]))
    assert first_timeout(voices) is _list_per_candidate(voices)
