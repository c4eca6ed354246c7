"""The stage torch's own check sites show (parsers/catalog/torch_stages.py over the table
that scripts/catalog/torch_stages.py generates from torch's release tags).

The table's provenance is in its data file (``data/stages/torch.json``, "releases": each
version's tag and commit as github.com/jasperzhong/swift, a fork with pytorch's history,
holds them; "source" says what was read). The places below are real: each is copied from
the casebook artifact named beside it (the form ``NCCL error in: <path>:<line>, …`` of
c10d's ``C10D_NCCL_CHECK``, NCCLUtils.hpp), and the function named in the comment is the
one that holds the line in those tags.
"""

from __future__ import annotations

import json

from hangdoc.analyzer.parsers.catalog.torch_stages import TABLE_FILE, site_stage
from hangdoc.analyzer.parsers.logs.nccl_stage import mark_stages
from hangdoc.analyzer.payloads.nccl import NcclError, SourceStage

# (casebook case, the place its "NCCL error in:" line prints): every one a check in
# ProcessGroupNCCL::getNCCLComm (the communicator's creation) of the releases with a
# check at that line.
GET_NCCL_COMM = (
    (
        "pytorch-14870",
        "/opt/conda/conda-bld/pytorch_1544081127912/work/torch/lib/c10d/ProcessGroupNCCL.cpp:260",
    ),
    ("pytorch-23363", "/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:272"),
    ("fairseq-2924", "../torch/lib/c10d/ProcessGroupNCCL.cpp:514"),
    ("ray-13480", "/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:518"),
    ("transformers-11658", "/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:784"),
    (
        "lightning-8139",
        "/opt/conda/conda-bld/pytorch_1614378062065/work/torch/lib/c10d/ProcessGroupNCCL.cpp:825",
    ),
)


def test_getnccl_comm_checks_of_the_held_releases_are_set_up() -> None:
    for case, place in GET_NCCL_COMM:
        assert site_stage(place) is SourceStage.SETUP, case


def test_a_later_release_or_a_bare_name_shows_nothing() -> None:
    # nccl-1514 (torch 2.0.1, NCCL 2.14.3): c10d's later folder; no release of it is held,
    # and a 1.x release's line 1275 would be another function.
    assert site_stage("../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275") is None
    # A bare file name could be any release's.
    assert site_stage("ProcessGroupNCCL.cpp:272") is None
    assert site_stage(None) is None
    assert site_stage("not a place") is None


def test_a_line_with_no_check_in_any_held_release_shows_nothing() -> None:
    assert site_stage("/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:273") is None
    assert site_stage("/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:999999") is None


def test_the_table_says_where_it_came_from() -> None:
    data = json.loads(TABLE_FILE.read_text(encoding="utf-8"))
    assert data["source"]["generator"] == "scripts/catalog/torch_stages.py"
    assert data["versions"][0] <= "1.0.0" and data["versions"][-1] == "1.9.0"
    for version in data["versions"]:
        release = data["releases"][version]
        assert release["tag"] == f"v{version}" and len(release["commit"]) == 40
    functions = dict(data["files"]["ProcessGroupNCCL.cpp"]["functions"])
    assert functions["getNCCLComm"] == "setup"
    assert functions["ncclCommWatchdogInternal"] == "data"


class _Event:
    def __init__(self, payload: NcclError) -> None:
        self.payload = payload


def test_mark_stages_puts_the_site_stage_on_torch_nccl_errors() -> None:
    held = _Event(NcclError(where="/pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:272"))
    later = _Event(NcclError(where="../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275"))
    mark_stages([held, later])
    assert held.payload.stage is SourceStage.SETUP
    assert later.payload.stage is None
