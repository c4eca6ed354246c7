"""A rank named inside a line (analyzer/parsers/logs/mentions.py), and what attribution
and the log comparison make of it.

Hand-written lines of documented formats: DeepSpeed's ``log_dist`` tag ``[Rank N]``
(deepspeed/utils/logging.py), Lightning's ``rank_prefixed_message`` ``[rank: N]`` and its
``GLOBAL_RANK: N, MEMBER: i/n`` / ``LOCAL_RANK: N - CUDA_VISIBLE_DEVICES: […]`` lines
(lightning/fabric/utilities/rank_zero.py, lightning/fabric/strategies/ddp.py,
lightning/pytorch/accelerators/cuda.py), SGLang's scheduler stamp ``[time PP1 TP3]``
(sglang/srt/managers/scheduler.py ``run_scheduler_process``), torchelastic's failure
report (elastic/multiprocessing/errors/__init__.py), Open MPI's ``mpirun noticed that
process rank N …`` report; and a job's own ``print(f"rank {rank}: …")`` lines, as the
casebook's consoles show them. The paste manglings (Markdown emphasis, quoting,
indentation) are those of parsers/unmangle.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.model import Strength
from hangdoc.analyzer.parsers.logs.mentions import Mention, coordinate_rank, find_mention
from hangdoc.analyzer.parsers.logs.window import UNATTRIBUTED, read_line_window
from hangdoc.analyzer.vocabulary import EventKind, RankFrom
from hangdoc.api import diagnose
from tests.unit.logs.helpers import events, parse

G, L, D = RankFrom.MENTION, RankFrom.MENTION_LOCAL, RankFrom.MENTION_DEVICE


@pytest.mark.parametrize(
    ("line", "how", "number"),
    [
        ("rank=3 loaded shard with 4096 records", G, 3),
        ("Rank 3: 1248 batches", G, 3),
        ("Rank 3, world_size 8: epoch 0 step 12", G, 3),
        ("[Rank 3] saving checkpoint", G, 3),  # DeepSpeed log_dist
        ("[rank: 3] Epoch 1: 100%", G, 3),  # Lightning rank_prefixed_message
        ("[RANK 3] ready", G, 3),
        ("(rank 3) ready", G, 3),
        ("dataset ready on rank=3", G, 3),
        ("initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/8", G, 3),
        ("global_rank 3 joined", G, 3),
        ("Running basic all-reduce on global rank 4.", G, 4),
        ("rank_id=3 ok", G, 3),
        ("local_rank 3 ready", L, 3),
        ("Local rank 3 ready", L, 3),
        ("LOCAL_RANK: 3 - CUDA_VISIBLE_DEVICES: [0,1,2,3]", L, 3),
        ("localRank=3", L, 3),
        ("[GPU 3] allocated 12 GB", D, 3),
        ("GPU 3: starting warmup", D, 3),
        ("[cuda:3] ready", D, 3),
    ],
)
def test_each_form_of_a_rank_named_in_a_line(line: str, how: RankFrom, number: int) -> None:
    mention = find_mention(line)
    assert mention is not None and mention.how is how
    assert (mention.rank if how is G else mention.local_rank) == number


@pytest.mark.parametrize(
    "line",
    [
        "**Rank 3**: len(loader) = **1248**",  # Markdown emphasis
        "> Rank 3: len(loader) = 1248",  # a quoted paste
        ">     Rank 3: len(loader) = 1248",  # a quoted code block
        "    Rank 3: len(loader) = 1248",  # an indented code block
        "`rank=3` len(loader) = 1248",  # a code span
    ],
)
def test_a_mention_survives_the_pastes_manglings(line: str) -> None:
    assert find_mention(line) == Mention(G, rank=3)


@pytest.mark.parametrize(
    "line",
    [
        # counts, never ranks
        "world_size 8",
        "world_size=8, nnodes=1",
        "GPU memory 8 GB",
        "8 ranks joined the rendezvous",
        "num_ranks 8",
        "ranks: 8",
        "Tried to allocate 20.00 MiB (GPU 0; 79.15 GiB total capacity)",
        "rank 3.5 of the matrix",  # a fraction
        "rank 0-3 ready",  # a range
        "rank 3/8 ready",  # a ratio, not a name
        "see /logs/rank3/stderr.log",  # a path
        "lora rank 8, alpha 16",  # a LoRA adapter's rank
        "tensor rank 2",
        # a peer's rank, not the line's own
        "recv from rank 0 timed out",
        "connection to rank 5 closed",
        "waiting for rank 3",
        "waiting for [rank 3]",
        "send -> rank 2",
        "peer rank 7 unreachable",
        # two ranks: their relation, nobody's own
        "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 4f000",
        "Rank 1 is running collective: BROADCAST, but Rank 0 is running collective: ALLREDUCE",
        # another's report about a rank
        "mpirun noticed that process rank 2 with PID 0 on node n7 exited on signal 9",
        "rank 3 was killed by signal 9",
        "host1: rank 0 died from signal 15",
        # no rank at all
        "epoch 0 step 12 loss 0.51",
    ],
)
def test_what_is_no_rank_of_the_lines_own(line: str) -> None:
    assert find_mention(line) is None


def test_parallel_coordinates_and_the_rank_they_make() -> None:
    one_stage = find_mention("TP3] Scheduler hit an exception")
    assert one_stage == Mention(RankFrom.COORDINATES, tensor=3)
    assert coordinate_rank(one_stage, None) == 3
    staged = find_mention("PP1 TP3] Prefill batch")
    assert staged is not None and (staged.pipeline, staged.tensor) == (1, 3)
    assert coordinate_rank(staged, None) is None  # the tensor-parallel size is not known
    assert coordinate_rank(staged, 4) == 7
    assert find_mention("DP0 EP3] moe ready") is None  # neither a stage nor a TP rank


def test_a_console_whose_ranks_name_themselves_gives_each_its_counts(tmp_path: Path) -> None:
    # GIVEN one console, no launcher prefix: every rank prints its loader's length, quoted
    # and emphasised by the reporter, and rank 2's differs
    console = tmp_path / "console.txt"
    console.write_text(
        "".join(
            f"> Rank {r}, world_size 4: len(train_loader) = **{1248 if r == 2 else 1250}**\n"
            for r in range(4)
        ),
        encoding="utf-8",
    )
    # WHEN it is parsed
    counts = events(parse(console), EventKind.DATA_COUNT)
    # THEN each rank has its own count, read from the words of its line
    assert sorted((rank, e.payload.value) for rank, e in counts) == [  # type: ignore[union-attr]
        (0, 1250),
        (1, 1250),
        (2, 1248),
        (3, 1250),
    ]
    assert {e.rank_from for _, e in counts} == {RankFrom.MENTION}
    # AND the diagnosis names rank 2, the one that differs
    primary = diagnose([console]).findings[0]
    assert (primary.category, primary.culprit_ranks) == ("uneven_data_drop_last", (2,))


def test_a_number_no_vocabulary_knows_is_compared_by_its_template(tmp_path: Path) -> None:
    # GIVEN one console where each rank names itself and the size of its shard
    console = tmp_path / "console.txt"
    console.write_text(
        "".join(
            f"rank={r} loaded shard with {4000 if r == 3 else 4096} records\n" for r in range(4)
        )
        + "".join(f"rank={r} starting epoch 0\n" for r in range(4)),
        encoding="utf-8",
    )
    # WHEN it is diagnosed
    diagnosis = diagnose([console])
    # THEN HD060 names rank 3, whose amount of data differs, as a signal (one source: the log)
    primary = diagnosis.findings[0]
    assert (primary.rule, primary.category, primary.culprit_ranks) == (
        "HD060",
        "uneven_data_drop_last",
        (3,),
    )
    assert primary.strength is Strength.SIGNAL


def test_a_size_that_differs_is_a_size_mismatch_and_progress_a_divergence(
    tmp_path: Path,
) -> None:
    sizes = tmp_path / "sizes.txt"
    sizes.write_text(
        "".join(f"[rank: {r}] histogram bins: {9 if r == 2 else 10}\n" for r in range(4)),
        encoding="utf-8",
    )
    found = diagnose([sizes]).findings[0]
    assert (found.category, found.culprit_ranks) == ("collective_size_or_dtype_mismatch", (2,))
    steps = tmp_path / "steps.txt"
    steps.write_text(
        "".join(f"[rank: {r}] reached step {97 if r == 1 else 100}, syncing\n" for r in range(4)),
        encoding="utf-8",
    )
    progress = [f for f in diagnose([steps]).findings if f.rule == "HD060"]
    assert [(f.category, f.culprit_ranks, f.strength) for f in progress] == [
        ("rank_divergence_collective_vs_noncollective", (1,), Strength.HINT)
    ]


def test_counts_of_the_world_are_not_ranks_and_name_no_culprit(tmp_path: Path) -> None:
    # GIVEN a console that speaks of the world's size and the GPUs' memory, not of a rank
    console = tmp_path / "console.txt"
    console.write_text(
        "world_size 8, 8 ranks joined\nGPU memory 8 GB\nnum_ranks 8\n", encoding="utf-8"
    )
    # WHEN its lines are read
    window = read_line_window(console, "console.txt", None)
    # THEN they stay unattributed: no rank 8 appears
    assert list(window) == [UNATTRIBUTED]


def test_a_ranks_own_file_stays_its_own_when_it_speaks_of_another(tmp_path: Path) -> None:
    # GIVEN rank 3's own file, which reports on rank 0 ("Rank 0, …" in its words)
    own = tmp_path / "rank3.log"
    own.write_text("Rank 0 owns the store; len(train_loader) = 1250\n", encoding="utf-8")
    # WHEN it is parsed
    counts = events(parse(own), EventKind.DATA_COUNT)
    # THEN the file's name, stronger than a mention, gives the count to rank 3
    assert [(rank, e.rank_from) for rank, e in counts] == [(3, RankFrom.FILE_NAME)]


def test_a_local_rank_named_maps_like_a_launcher_prefix_on_one_node(tmp_path: Path) -> None:
    console = tmp_path / "console.txt"
    console.write_text(
        "".join(f"local_rank {r}: {1250 if r else 1240} batches\n" for r in range(4)),
        encoding="utf-8",
    )
    counts = events(parse(console), EventKind.DATA_COUNT)
    assert sorted((rank, e.rank_from) for rank, e in counts) == [
        (r, RankFrom.MENTION_LOCAL) for r in range(4)
    ]


def test_a_torch_message_keeps_the_ranks_its_payload_names(tmp_path: Path) -> None:
    # GIVEN torch's monitored barrier report (c10d's "[Rank N]:" is the rank in the
    # barrier's process group) and an NCCL init line of a sub-communicator ("rank 1 nranks
    # 2" is the rank in that communicator), neither under a prefix
    console = tmp_path / "console.txt"
    console.write_text(
        "RuntimeError: [Rank 0]: Ranks 1, 2 failed to pass monitoredBarrier in 30000 ms\n"
        "NCCL INFO comm 0x5581c0a0 rank 1 nranks 2 cudaDev 1 busId 1d000 - Init COMPLETE\n",
        encoding="utf-8",
    )
    # WHEN it is parsed
    parsed = parse(console)
    # THEN no event takes a rank from those words
    assert not [e for p in parsed.processes for e in p.log_events if e.rank_from in (G, L, D)]


@pytest.mark.parametrize(
    "form",
    [
        "rank {r} has {n} batches",
        "Rank {r} - number of batches: **{n}**",
        "GPU {r}: num_samples = {n}",
        "local_rank={r} steps per epoch: {n}",  # the rank's number is no count of steps
        "INFO:root:rank: {r}, len(train_dataset) = {n}",
        "[RANK {r}] Total samples: {n}",
        "on rank {r}, the dataloader has {n} batches",
    ],
)
def test_the_rank_whose_count_differs_is_the_culprit(form: str, tmp_path: Path) -> None:
    # GIVEN one console where every rank prints its amount of data in the job's own words
    console = tmp_path / "console.txt"
    console.write_text(
        "".join(form.format(r=r, n=1248 if r == 2 else 1250) + "\n" for r in range(4)),
        encoding="utf-8",
    )
    # WHEN it is diagnosed
    primary = diagnose([console]).findings[0]
    # THEN the rank whose count differs is named
    assert (primary.category, primary.culprit_ranks) == ("uneven_data_drop_last", (2,))


def test_an_nccl_line_is_its_headers_process_whatever_rank_it_names(tmp_path: Path) -> None:
    # GIVEN NCCL's bootstrap root reporting about another rank (bootstrap.cc's WARN, its
    # host:pid:tid header naming the root's process, which no init line maps to a rank)
    console = tmp_path / "console.txt"
    console.write_text(
        "hpc-25-14:18569:18835 [0] bootstrap.cc:131 NCCL WARN Bootstrap Root : rank 1 of 8 "
        "ranks has already checked in\n",
        encoding="utf-8",
    )
    # WHEN it is parsed
    parsed = parse(console)
    # THEN the rank it speaks of is not taken for its writer's
    assert not [e for p in parsed.processes for e in p.log_events if e.rank_from is G]
