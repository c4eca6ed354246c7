"""DDP's reducer's unfinished-reduction error, read from the catalog's rows (meanings.toml
family torch-ddp-unfinished-reduction; torch/csrc/distributed/c10d/reducer.cpp
Reducer::ensure_prior_reduction_finished): the rank whose reducer found the previous
iteration's reduction unfinished raises out of its next forward and dies. Since 1.9 the
message names that rank, its own in DDP's group ("Parameter indices which did not receive
grad for rank R: i j …"; "Parameters which did not receive grad for rank R: names" under
TORCH_DISTRIBUTED_DEBUG): the value own_rank, the line's rank.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.parsers.catalog import default_matcher, to_event
from hangdoc.analyzer.parsers.logs.catalog_lines import catalog_hit
from hangdoc.analyzer.payloads.launch import ExceptionRaised
from hangdoc.analyzer.vocabulary import EventKind
from tests.unit.logs.helpers import diagnose

_HEAD = "Expected to have finished reduction in the prior iteration before starting a new one. "
# the messages as reducer.cpp builds them: 1.1-1.8 (one sentence of advice), 1.9- (by flag)
_OLD = (
    _HEAD + "This error indicates that your module has parameters that were not used in "
    "producing loss. You can enable unused parameter detection by (1) passing the keyword "
    "argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`;"
)
_NEW = (
    _HEAD + "This error indicates that your module has parameters that were not used in "
    "producing loss. You can enable unused parameter detection by passing the keyword "
    "argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, "
    "and by "
)
_STATIC = (
    _HEAD + "This error indicates that your training graph has changed in this iteration, "
    "e.g., one parameter is used in first iteration, but then got unused in the second "
    "iteration. this is not compatible with static_graph set to True."
)


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        (f"RuntimeError: {_OLD}", None),
        (f"RuntimeError: {_NEW}", None),
        (f"RuntimeError: {_STATIC}", None),
        ("Parameter indices which did not receive grad for rank 2: 426 427 428", 2),
        ("Parameters which did not receive grad for rank 5: head.cls.weight, head.cls.bias", 5),
    ],
)
def test_the_reducers_lines_are_a_crash_of_the_rank_they_name(line: str, rank: int | None) -> None:
    found = default_matcher().match(line)
    assert found is not None
    draft = to_event(found)
    assert draft.kind is EventKind.EXCEPTION
    assert (draft.category, draft.strength) == ("rank_dead_or_crashed", "strong")
    hit = catalog_hit(line)
    assert hit is not None and hit.kind is EventKind.EXCEPTION
    assert isinstance(hit.payload, ExceptionRaised)
    assert hit.rank == rank


def test_a_reducer_line_wrapped_after_its_rank_keeps_it() -> None:
    hit = catalog_hit("Parameter indices which did not receive grad for rank 12: 3 4 5 6 7")
    assert hit is not None and hit.rank == 12


def test_the_hint_after_the_indices_names_no_rank() -> None:
    line = (
        " In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either "
        "INFO or DETAIL to print out information about which particular parameters did not "
        "receive gradient on this rank as part of this error"
    )
    hit = catalog_hit(line)
    assert hit is None or hit.rank is None


def test_the_rank_the_reducer_names_is_the_culprit(tmp_path: Path) -> None:
    log = tmp_path / "error.txt"
    log.write_text(
        f"RuntimeError: {_HEAD.strip()}\n"
        "Parameter indices which did not receive grad for rank 3: 10 11 12\n"
    )
    primary = diagnose(log).primary
    assert primary is not None
    assert primary.category.value == "rank_dead_or_crashed"
    assert tuple(primary.culprit_ranks) == (3,)
