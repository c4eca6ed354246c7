"""How a rank died, as the first-sight batch 2026-11-28j showed it unread or misread, each
read from the source that prints it (issue 21: recognition), and kept when the paste is
mangled.

Every input here is hand-written in a documented format, cited at each test: torch's
elastic agent (torch/distributed/elastic/multiprocessing/api.py ``SubprocessContext._poll``),
NCCL's proxy service thread (src/proxy.cc ``ncclProxyService``), torch's ProcessGroupNCCL
watchdog, Text Generation Inference's launcher (launcher/src/main.rs), CPython's traceback,
shutil.rmtree and urllib.request.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangdoc.analyzer.model import Category
from hangdoc.analyzer.parsers.logs.errors import signs_of
from hangdoc.analyzer.parsers.logs.process import SAVE_FRAME
from hangdoc.analyzer.parsers.logs.tgi import match_tgi
from hangdoc.analyzer.payloads.base import Sign
from hangdoc.analyzer.payloads.launch import Launcher, LauncherReport
from hangdoc.analyzer.vocabulary import EventKind
from tests.unit.recognition_kit import MANGLINGS, Mangle
from tests.unit.recognition_kit import answer as _answer


# ---- 1. torchrun's first failure: an abort, printed after the survivors' teardown ---------
# SubprocessContext._poll collects the workers that ended with a non-zero code, close()s the
# others (SIGTERM), then logs "failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s"
# for the earliest. NCCL's proxy service thread logs INFO "[Service thread] Connection closed
# by localRank %d" as each local peer's socket closes (its header "host:pid:tid [dev]").
def _closed(pid: int, peer: int) -> str:
    return (
        f"node-0:{pid}:{pid + 400} [{peer}] NCCL INFO [Service thread] Connection closed "
        f"by localRank {peer}\n"
    )


_AGENT_ABORT = (
    "[2024-11-14 06:04:09,095] torch.distributed.elastic.multiprocessing.api: [ERROR] "
    "failed (exitcode: -6) local_rank: 3 (pid: 7103) of binary: /usr/bin/python\n"
)
_TIMEOUT = (
    "[rank{rank}]:[E1114 06:03:59.000000000 ProcessGroupNCCL.cpp:629] [Rank {rank}] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=8, "
    "NumelOut=8, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"
)


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_the_agents_first_failure_an_abort_after_the_teardown_is_the_culprit(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    text = _closed(7100, 0) + _closed(7101, 2) + _closed(7102, 1) + _AGENT_ABORT
    category, rule, culprits = _answer(tmp_path, mangle(text))
    assert (category, rule, culprits) == (Category.RANK_DEAD, "HD030", (3,)), how


def test_an_abort_where_a_watchdog_fired_is_not_named_the_first_fault(tmp_path: Path) -> None:
    text = _TIMEOUT.format(rank=1) + _closed(7100, 0) + _AGENT_ABORT
    _, rule, culprits = _answer(tmp_path, text)
    assert not (rule == "HD030" and culprits == (3,))


def test_an_abort_of_a_rank_that_timed_out_itself_is_its_teardown(tmp_path: Path) -> None:
    text = _TIMEOUT.format(rank=3) + _closed(7100, 0) + _AGENT_ABORT
    _, rule, culprits = _answer(tmp_path, text)
    assert not (rule == "HD030" and culprits == (3,))


# ---- 2. TGI's launcher names the shard that ended -----------------------------------------
# launcher/src/main.rs: start_shards' tracing::error!("Shard {rank} failed to start"), main's
# tracing::error!("Shard {rank} crashed"); the shard's RANK is its index (shard_manager).
# tracing's compact format: "<time> ERROR text_generation_launcher: <message>"; --json-output
# puts the message in "fields".
@pytest.mark.parametrize(
    ("line", "rank"),
    [
        ("2023-07-24T02:39:20.704629Z ERROR text_generation_launcher: Shard 1 failed to start", 1),
        ("2024-02-01T10:00:00.000000Z ERROR text_generation_launcher: Shard 3 crashed", 3),
        (
            '{"timestamp":"2024-02-01T10:00:00.000000Z","level":"ERROR","fields":{"message":'
            '"Shard 2 failed to start"},"target":"text_generation_launcher"}',
            2,
        ),
    ],
)
def test_tgis_launcher_names_the_shard_that_ended(line: str, rank: int) -> None:
    hit = match_tgi(line)
    assert hit is not None and hit.kind is EventKind.WORKER_FAILED and hit.rank == rank
    assert isinstance(hit.payload, LauncherReport) and hit.payload.launcher is Launcher.TGI


def test_tgis_other_shard_lines_name_no_failure() -> None:
    head = "2023-07-24T02:39:20Z INFO shard-manager: text_generation_launcher:"
    assert match_tgi(f"{head} Shard ready in 12s rank=0") is None
    assert match_tgi(f"{head} Shard terminated rank=1") is None


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_a_shards_unranked_traceback_is_the_shard_the_launcher_names(
    tmp_path: Path, how: str, mangle: Mangle
) -> None:
    text = (
        "2023-07-24T02:39:18.100000Z  INFO text_generation_launcher: Sharding model on 2 "
        "processes\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.9/site-packages/text_generation_server/server.py", '
        "line 137, in serve_inner\n"
        "    model = get_model(\n"
        "ValueError: unsupported head size 80\n"
        " rank=1\n"
        "2023-07-24T02:39:20.704629Z ERROR text_generation_launcher: Shard 1 failed to start\n"
        "2023-07-24T02:39:20.704663Z  INFO text_generation_launcher: Shutting down shards\n"
        "2023-07-24T02:39:20.781260Z  INFO shard-manager: text_generation_launcher: Shard "
        "terminated rank=0\n"
    )
    category, _, culprits = _answer(tmp_path, mangle(text))
    assert (category, culprits) == (Category.RANK_DEAD, (1,)), how


# ---- 3. a save's file-system call, its frame padded with spaces ---------------------------
# CPython's traceback: '  File "<file>", line <n>, in <function>'; shutil.rmtree calls
# onerror(os.rmdir, path, sys.exc_info()), which re-raises FileNotFoundError (errno 2).
_RMTREE = (
    '  File "/w/train_utils/trainer.py", line 644, in train_epoch{pad}\n'
    "    self.save_checkpoint({pad}\n"
    '  File "/w/train_utils/trainer.py", line 290, in save_checkpoint{pad}\n'
    "    misc.smart_remove(filename){pad}\n"
    '  File "/w/utils/misc.py", line 118, in smart_remove{pad}\n'
    "    shutil.rmtree(path){pad}\n"
    '  File "/usr/lib/python3.10/shutil.py", line 729, in rmtree{pad}\n'
    "    os.rmdir(path){pad}\n"
    "FileNotFoundError: [Errno 2] No such file or directory: './out/model.pt.ep0.5000'{pad}\n"
)


@pytest.mark.parametrize("pad", ["", "    ", " " * 60, "\t"])
def test_a_save_frame_padded_with_spaces_is_still_a_save(pad: str) -> None:
    line = f'  File "/w/trainer.py", line 290, in save_checkpoint{pad}'
    assert SAVE_FRAME.search(line)
    assert not SAVE_FRAME.search(f'  File "/w/trainer.py", line 290, in load_checkpoint{pad}')


@pytest.mark.parametrize("pad", ["", " " * 40])
def test_a_removal_racing_inside_a_save_is_the_storages(tmp_path: Path, pad: str) -> None:
    category, rule, _ = _answer(tmp_path, _RMTREE.format(pad=pad))
    assert (category, rule) == (Category.IO_STALL, "HD110")


# ---- 4. urllib's URLError: a URL's server unreachable, the rank's own failure ------------
# CPython Lib/urllib/request.py AbstractHTTPHandler.do_open: "except OSError as err: raise
# URLError(err)" around h.request(); URLError.__str__: "<urlopen error %s>" % self.reason.
# requests/adapters.py HTTPAdapter.send: ConnectTimeoutError -> requests' ConnectTimeout.
@pytest.mark.parametrize(
    ("exc_type", "message"),
    [
        ("urllib.error.URLError", "<urlopen error [Errno 110] Connection timed out>"),
        ("URLError", "<urlopen error [Errno 104] Connection reset by peer>"),
        (
            "requests.exceptions.ConnectTimeout",
            "HTTPSConnectionPool(host='dl.example.com', port=443): Max retries exceeded with "
            "url: /w.pth (Caused by ConnectTimeoutError(…, 'Connection to dl.example.com "
            "timed out. (connect timeout=10)'))",
        ),
    ],
)
def test_a_urls_server_unreachable_is_no_consequence(exc_type: str, message: str) -> None:
    assert Sign.CONSEQUENCE not in signs_of(exc_type, message)


@pytest.mark.parametrize(
    ("exc_type", "message"),
    [
        ("TimeoutError", "[Errno 110] Connection timed out"),
        ("RuntimeError", "<urlopen error [Errno 110] Connection timed out>"),
        ("requests.exceptions.ReadTimeout", "Read timed out. (read timeout=600)"),
    ],
)
def test_other_timeouts_stay_consequences(exc_type: str, message: str) -> None:
    assert Sign.CONSEQUENCE in signs_of(exc_type, message)


@pytest.mark.parametrize(("how", "mangle"), MANGLINGS)
def test_a_rank_dying_on_a_download_is_a_death(tmp_path: Path, how: str, mangle: Mangle) -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/w/main.py", line 120, in train\n'
        "    state = torch.hub.load_state_dict_from_url(url)\n"
        '  File "/usr/lib/python3.8/urllib/request.py", line 1357, in do_open\n'
        "    raise URLError(err)\n"
        "urllib.error.URLError: <urlopen error [Errno 110] Connection timed out>\n"
    )
    category, rule, _ = _answer(tmp_path, mangle(text))
    assert (category, rule) == (Category.RANK_DEAD, "HD030"), how
