"""NCCL communicator initialisation (or the store rendezvous) never completed

## What it means
Some ranks logged `ncclCommInitRank … - Init START` for a communicator but never
`Init COMPLETE`, while others completed it or never started it; or the TCPStore
rendezvous that precedes it timed out ("Timed out after 900 seconds waiting for
clients. 7/8 clients joined", "client socket has timed out … while trying to connect to
(host, port)"). The job is stuck setting up communication, before any training
collective.

## Why it hangs
Creating a communicator is itself collective: every member must start it and reach
every other member's bootstrap socket. A rank that never starts (crashed, stuck in
model loading, a different number of processes than expected) or that cannot be
reached (firewall, wrong interface, wrong MASTER_ADDR) keeps all others waiting.

## Evidence used
NCCL init lines (`comm 0x… rank R nranks N … commId 0x… - Init START|Init COMPLETE`),
grouped by `commId` (else by size and creation order), and TCPStore / rendezvous
timeout messages: clients missing, store waits (`wait timeout after …ms, keys: …`),
torch < 2.1's store based barrier (`Timed out initializing process group in store based
barrier on rank: R … (world_size=N, worker_count=M …)`), a store connection that failed
(`DistNetworkError`, `recvValue failed on SocketImpl(…): Connection reset by peer`,
`Socket Timeout`, `failed to recv, got 0 bytes`, torch 1.x's bare `RuntimeError: Broken
pipe` of its socket layer, whose traceback gives it its stage), a store read that got no
answer (c10d
socket.cpp `waitForInput: socket SocketImpl(…, remote=[host]:port) timed out after Nms`),
c10d's socket layer giving up (`The client socket has failed to
connect to any network address of (host, port)`, one of the store's addresses that
timed out or has no route (`The client socket has failed to connect to [host]:port
(errno: 110 - Connection timed out)`, weaker: another address may still answer),
`connect() timed out`, c10d's FileStore failing to open its file (`open(<path>): No such
file or directory`, FileStore.cpp's error after it retried until the store's timeout),
`The server socket
has failed to listen on any local network address` / `Address already in use`, a store
host name that does not resolve: `The network addresses of (host, port) cannot be
retrieved (gai error: …)`, and the IPv6 try's warning too where the host is no host name
at all (a file path, an unexpanded `${MASTER_ADDR}`, a URL: no family resolves it), older
torch's `ValueError: host not found: Name or service not
known` from c10d's tcputil::connect), gloo failing to build its mesh (`connect [addr]:port:
Connection refused` from `gloo/transport/tcp/pair.cc`, or newer gloo's `timed out
connecting: SO_ERROR: Connection refused, remote=[addr]:port`, or gloo 2023–2025's
`[…/pair.cc:144] no error`, a failed connect whose error its callback sliced; the ranks
that report it are named, their ProcessGroupGloo's construction failed), torch.distributed.rpc's
TensorPipe agent failing to connect to a peer (`connect: Resource temporarily unavailable
(this error originated at tensorpipe/common/socket.cc:114)`, or the agent's warning that a
request could not be sent because the uv transport's connect was refused or found no
route: `RPC agent for worker0 encountered error when sending outgoing request #0 to
worker1: ECONNREFUSED: connection refused`, a pipe connecting on its first message),
read as the store errors that do not say their use are: before anything ran, or with
set-up in its traceback) and elastic `RendezvousTimeoutError` / `RendezvousClosedError`.
When a rank is known to have died first, HD030 names it instead: these are then its echo.
A store wait, read timeout or broken store connection (or a store timeout of no known
kind) that comes after collectives ran or training logged progress, or whose traceback
(the one Python prints right after c10d's warning, its frames kept when the paste cuts it)
shows the training loop, is not read here: the store then served something
else (an object collective, a barrier, the job's own data exchange), and the logs do not
show why it timed out. One whose traceback shows set-up (init_process_group, new_group, a
rendezvous) is set-up wherever it comes. Nor is a store failure that ProcessGroupNCCL's
heartbeat monitor reports (`Failed to check the "should dump" flag on TCPStore, (maybe
TCPStore server has shut down too early), with error: …`), nor the same process's store
failures from that report on (c10d's `sendBytes failed on SocketImpl(…)` of the same lost
connection): only a group already constructed runs that thread, so its set-up had
completed and the store's host went away later. Nor is the elastic agent's failed
keep-alive (`The node '…' has failed to send a keep-alive heartbeat to the rendezvous '…'
due to an error of type RendezvousConnectionError`): torch's DynamicRendezvousHandler
starts its heartbeats only after the node's join completed (next_rendezvous), so the
rendezvous had completed and its store became unreachable afterwards. And a store
connection lost at the server's end (`recvValue failed on SocketImpl(…): Connection reset
by peer`, a broken pipe, 0 bytes read) says the client had connected: the store was up
and its host went away. That is set-up only where its traceback shows set-up (its own
frames under init_process_group, the line right after c10d's warning), not merely because
nothing ran before it. Last, with low confidence: a log
whose last words are the framework's distributed-init markers (Lightning `Initializing
distributed: GLOBAL_RANK: …`, Ray Train `Setting up process group for: …`, DeepSpeed
`Initializing TorchBackend in DeepSpeed …`, Megatron `> initializing torch distributed`)
with nothing but NCCL setup lines around them; not when a rank's entry into torch's
store-based barrier (`Added key: … to store for rank: R`) is followed by none of the
"Waiting in store based barrier" lines that torch logs every 10 s while a rank waits there:
the text ends before a stuck set-up could show. Nor when those waits were logged glued
after another process's live progress bar (tqdm ends no state with a newline) that shows a
rate and an elapsed time past the barrier's own timeout: the ranks not counted were busy
with work of their own and it advanced while the barrier waited, slow, not a set-up stuck
(HD039; views/barrier_work.py).

## How to confirm
List which ranks logged Init START and COMPLETE for the communicator; look at the
logs of the ranks that never started. Check connectivity from every node to
MASTER_ADDR:MASTER_PORT and between nodes on the interface NCCL uses (`Bootstrap :
Using …` line).

## How to fix
Start the same number of processes as the world size everywhere; make every rank reach
`init_process_group`/the first collective (no rank-0-only setup that takes longer than
the timeout); open the ports; set `NCCL_SOCKET_IFNAME` to the interface that connects
the nodes; set MASTER_ADDR to an address every node can reach.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from hangdoc.analyzer.model import Category, Finding, Severity, Strength
from hangdoc.analyzer.payloads.nccl import NcclInit, NcclInitState
from hangdoc.analyzer.payloads.progress import PhaseMarker
from hangdoc.analyzer.payloads.torch_pg import StoreError, StoreTimeout
from hangdoc.analyzer.views.barrier_work import barrier_keys_on_work
from hangdoc.analyzer.views.nccl_setup import first_running
from hangdoc.analyzer.views.timeline import Placed, Timeline, wave
from hangdoc.analyzer.vocabulary import EventKind, Phase
from hangdoc.rules.base import Need, Rule, RuleContext
from hangdoc.rules.refs import limited_refs, ranks_text
from hangdoc.rules.strength import Shift, shifted


def _init(p: Placed) -> NcclInit:
    found = p.event.payload_as(NcclInit)
    return found if found is not None else NcclInit()


def _store_of(p: Placed) -> StoreTimeout:
    found = p.event.payload_as(StoreTimeout)
    return found if found is not None else StoreTimeout()


def _marker(p: Placed) -> PhaseMarker:
    found = p.event.payload_as(PhaseMarker)
    return found if found is not None else PhaseMarker()


def init_groups(tl: Timeline) -> dict[str, list[tuple[Placed, NcclInit]]]:
    """NCCL init events per communicator: commId, else (nranks, creation order); each
    with its payload, read once (a job's init lines are most of its events)."""
    groups: dict[str, list[tuple[Placed, NcclInit]]] = {}
    order: dict[tuple[str | None, int | None, str], list[str]] = {}
    for p in tl.of(EventKind.NCCL_INIT):
        init = _init(p)
        nranks = str(init.nranks) if init.nranks else "?"
        comm_id = init.comm_id
        if comm_id:
            key = f"commId {comm_id}"
        else:
            seen = order.setdefault((p.event.host, p.event.pid, nranks), [])
            comm = init.comm or "?"
            if comm not in seen:
                seen.append(comm)
            key = f"nranks {nranks} #{seen.index(comm)}"
        groups.setdefault(key, []).append((p, init))
    return groups


class NcclInitIncomplete(Rule):
    __doc__ = __doc__
    id = "HD201"
    name = "nccl-init-incomplete"
    summary = "NCCL communicator init or the store rendezvous never completed"
    categories = (Category.NCCL_INIT,)
    severity = Severity.ERROR
    requires = frozenset({Need.LOGS})

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        tl = ctx.timeline
        symptoms = bool(wave(tl))
        groups = init_groups(tl)
        world = max((i.nranks or 0 for ev in groups.values() for _, i in ev), default=0)
        found = False
        for key, events in sorted(groups.items()):
            finding = self._group(key, events, symptoms, world)
            if finding is not None:
                found = True
                yield finding
        stores = _before_training(tl, _unfinished(tl, tl.of(EventKind.STORE_TIMEOUT)))
        if stores:
            yield self._store(stores)
        elif not found and (ends := _ends_in_init(tl)):
            yield self._ends_in_init(ends)

    def _ends_in_init(self, markers: list[Placed]) -> Finding:
        ranks = sorted({p.rank for p in markers if p.rank is not None})
        world = max((_marker(p).world_size or 0 for p in markers), default=0)
        said = f" ({len(ranks)} of {world} ranks announced it)" if world and ranks else ""
        return Finding(
            rule=self.id,
            category=Category.NCCL_INIT,
            severity=Severity.ERROR,
            title=f"the logs end while the job sets up distributed communication{said}",
            explanation=(
                f"The last thing the job logged is its distributed setup "
                f"('{markers[-1].event.text.strip()[:120]}'){said}, and nothing after it: no "
                "NCCL init completion, no training progress, no error. A job that hangs there "
                "waits for a rank that never joined or cannot be reached. This rests on the "
                "log's silence alone: a paste cut short looks the same."
            ),
            fix=(
                "Check that every node started its processes with the same world size and "
                "MASTER_ADDR/MASTER_PORT and can reach them; rerun with NCCL_DEBUG=INFO and "
                "TORCH_DISTRIBUTED_DEBUG=DETAIL to see which step of the setup waits; try the "
                "gloo backend to tell a network problem from an NCCL one."
            ),
            evidence=tuple(limited_refs(markers, limit=6)),
            strength=Strength.ABSENCE,  # the log's silence alone
        )

    def _group(
        self, key: str, events: list[tuple[Placed, NcclInit]], symptoms: bool, world: int
    ) -> Finding | None:
        started: dict[int, Placed] = {}
        completed: set[int] = set()
        nranks = max((init.nranks or 0) for _, init in events)
        for p, init in events:
            comm_rank = init.rank
            if comm_rank is None:
                continue
            state = init.state
            if state == NcclInitState.START:
                started.setdefault(comm_rank, p)
            elif state in (NcclInitState.COMPLETE, NcclInitState.ABORT, NcclInitState.DESTROY):
                completed.add(comm_rank)
                started.setdefault(comm_rank, p)
        stuck = sorted(set(started) - completed)
        if not stuck:
            return None
        enough = len(started) >= max(2, nranks / 2)  # a one-process log says nothing of the others
        never = sorted(set(range(nranks)) - set(started)) if enough else []
        if not completed and not symptoms and not never:
            return None  # every rank still in init and nothing else: a truncated log, not proof
        culprits = never or stuck
        title = (
            f"NCCL communicator init ({key}, {nranks} ranks) never completed on comm "
            f"{ranks_text(stuck)}"
        )
        if never:
            title += f"; comm {ranks_text(never)} never started it"
        explanation = (
            f"Init START without Init COMPLETE on comm {ranks_text(stuck)}"
            + (f" while comm {ranks_text(sorted(completed))} completed it" if completed else "")
            + (
                f"; no init line at all from comm {ranks_text(never)}, the ranks everyone waits "
                f"for."
                if never
                else "."
            )
            + " Communicator ranks are global ranks for the default process group."
        )
        return Finding(
            rule=self.id,
            category=Category.NCCL_INIT,
            severity=Severity.ERROR if (completed or symptoms or never) else Severity.WARNING,
            title=title,
            explanation=explanation,
            fix=(
                "Make every rank reach this communicator's creation (look at the logs of the ranks "
                "that never started it) and check that all nodes can reach each other on the "
                "interface NCCL uses (NCCL_SOCKET_IFNAME)."
            ),
            culprit_ranks=tuple(culprits) if nranks == world else (),
            waiting_ranks=tuple(sorted(completed)),
            evidence=tuple(limited_refs([started[r] for r in stuck], limit=6)),
            # The others' init lines show who never started (or only that some got stuck).
            strength=Strength.STATED if never else Strength.SIGNAL,
        )

    def _store(self, stores: list[Placed]) -> Finding:
        # An address that could not be reached is one try of a connect that may go on to
        # another address: the error that says the connect gave up speaks first.
        stores = sorted(stores, key=lambda p: _store_of(p).error == StoreError.STORE_UNREACHABLE)
        first = _store_of(stores[0])
        error = first.error or StoreError.RENDEZVOUS
        if error == StoreError.CLIENTS_MISSING:
            what = (
                f"the TCPStore waited {first.waited_s} s for {first.expected} "
                f"clients and only {first.joined} joined"
            )
        elif error == StoreError.STORE_CONNECT:
            where = f" at {first.peer}:{first.port}" if first.peer else ""
            why = f" ({first.message})" if first.message else ""
            what = f"ranks could not connect to the store{where}{why}"
        elif error == StoreError.STORE_LISTEN:
            what = (
                "the store server could not listen on its port (another job or a leftover "
                f"process holds MASTER_PORT?): {first.message or 'address in use'}"
            )
        elif error == StoreError.STORE_RESOLVE:
            host = f"host {first.peer}" if first.peer else "host (MASTER_ADDR)"
            what = f"the store's {host} could not be resolved ({first.message})"
        elif error == StoreError.STORE_UNREACHABLE:
            what = (
                f"the store's address {first.peer}:{first.port} could not be reached "
                f"({first.message}): a wrong MASTER_ADDR, a firewall or the wrong interface"
            )
        elif error == StoreError.GLOO_CONNECT:
            peer = f" {first.peer}:{first.port}" if first.peer else ""
            what = (
                f"gloo could not connect to its peer{peer} ({first.message}) while building "
                "the process group"
            )
        elif error == StoreError.RPC_CONNECT:
            what = (
                f"torch.distributed.rpc's TensorPipe agent could not connect to a peer "
                f"({first.message}) while its workers set up"
            )
        elif error == StoreError.NCCL_UNIQUE_ID:
            what = (f"ranks waited for the NCCL unique id that rank {first.root} publishes "
                    f"through the store and got '{first.message}'")  # fmt: skip
        elif error == StoreError.STORE_WAIT:
            what = f"a store wait timed out (keys {first.keys})"
        elif error == StoreError.STORE_BARRIER_WAIT:
            what = (
                f"ranks were still waiting in init_process_group's store barrier with "
                f"{first.joined} of {first.expected} ranks counted when the log ends"
            )
        elif error == StoreError.STORE_BARRIER:
            limit = first.barrier_timeout_ms
            after = timedelta(milliseconds=limit) if limit is not None else None
            what = (
                f"init_process_group's store barrier timed out after {after} with "
                f"{first.joined} of {first.expected} ranks counted"
            )
        elif error == StoreError.STORE_READ_TIMEOUT:
            where = f" {first.peer}:{first.port}" if first.peer else ""
            within = f" within {first.timeout_ms} ms" if first.timeout_ms is not None else ""
            what = (
                f"a read from the store{where} got no answer{within} "
                "(the store exchange of the setup never completed)"
            )
        elif error == StoreError.STORE_CONNECTION:
            what = f"the connection to the TCPStore failed ({first.message})"
        elif error == StoreError.STORE_FILE:
            what = (
                f"the FileStore could not open its file ({first.message}): the store file of "
                "the file:// init method, or its directory, is missing or not shared by every "
                "rank"
            )
        elif error == StoreError.RENDEZVOUS_CONNECTION:
            what = "the elastic agents could not connect to the c10d rendezvous store"
        elif error == StoreError.RENDEZVOUS_CLOSED:
            what = "the rendezvous was closed (another agent gave up or the job was stopped)"
        else:
            what = "the rendezvous failed: it timed out, was closed or raised"
        waiting = sorted({p.rank for p in stores if p.rank is not None})
        return Finding(
            rule=self.id,
            category=Category.NCCL_INIT,
            severity=Severity.ERROR,
            title=f"process-group setup did not complete: {what}",
            explanation=(
                f"{what[0].upper()}{what[1:]}. Some processes never started, started "
                "with a different world size, or cannot reach MASTER_ADDR:MASTER_PORT."
            ),
            fix=(
                "Check that every node starts its processes with the same world size and "
                "MASTER_ADDR/MASTER_PORT, that the port is open from every node, and that no "
                "rank is stuck before init_process_group."
            ),
            culprit_ranks=_roots(stores) or _gloo_unconnected(stores),
            waiting_ranks=tuple(waiting),
            evidence=tuple(limited_refs(stores, limit=4)),
            # A failed name lookup is retried until the connect timeout, and an address
            # that could not be reached may be followed by one that can: weaker alone.
            strength=(
                shifted(Strength.SIGNAL, Shift.OTHER_READINGS)
                if error in (StoreError.STORE_RESOLVE, StoreError.STORE_UNREACHABLE)
                else Strength.SIGNAL
            ),
        )


# What a log may hold and still be "in setup": framework init markers and NCCL's own
# setup INFO lines (version, interfaces, init START, channel set-up).
_SETUP_KINDS = frozenset(
    {
        EventKind.PHASE,
        EventKind.NCCL_VERSION,
        EventKind.NCCL_NETWORK,
        EventKind.NCCL_INIT,
        EventKind.NCCL_TRANSPORT,
    }
)


def _ends_in_init(tl: Timeline) -> list[Placed]:
    """The framework's distributed-init markers (Lightning "Initializing distributed:
    GLOBAL_RANK: …", Ray Train "Setting up process group for: …", DeepSpeed "Initializing
    TorchBackend …", Megatron "> initializing torch distributed"), when they are the last
    phase the log reached and nothing but NCCL setup lines follows or surrounds them."""
    markers = [p for p in tl.of(EventKind.PHASE) if _marker(p).phase == Phase.INIT]
    if not markers or _barrier_not_waited(tl):
        return []
    for p in tl.events:
        if p.kind not in _SETUP_KINDS:
            return []
        if p.kind == EventKind.PHASE and _marker(p).phase != Phase.INIT:
            return []
        if p.kind == EventKind.NCCL_INIT and _init(p).state == NcclInitState.COMPLETE:
            return []
    return markers


def _barrier_not_waited(tl: Timeline) -> bool:
    """A rank entered torch's store-based barrier ("Added key: K to store for rank: R")
    and the text shows neither its wait nor its end for that key. The release that prints
    the entry logs "Waiting in store based barrier …" at the same level every 10 s while it
    waits (distributed_c10d._store_based_barrier), so the text stops within seconds of
    the entry, before a rank held there could show it: the silence after it is where the
    text ends, not a set-up that stays stuck."""
    entered = {
        key for p in tl.of(EventKind.PHASE) if (key := _marker(p).store_key_added) is not None
    }
    if not entered:
        return False
    seen = {key for p in tl.of(EventKind.PHASE) if (key := _marker(p).store_key) is not None}
    seen |= {
        key
        for p in tl.of(EventKind.STORE_TIMEOUT)
        if _store_of(p).error in (StoreError.STORE_BARRIER_WAIT, StoreError.STORE_BARRIER)
        and (key := _store_of(p).keys) is not None
    }
    if "" in entered:
        return not seen  # a key a wrap cut off: any wait or end the text shows may be its
    return bool(entered - seen)


_BARRIERS = (StoreError.STORE_BARRIER_WAIT, StoreError.STORE_BARRIER)


def _unfinished(tl: Timeline, stores: list[Placed]) -> list[Placed]:
    """Store events minus the barrier waits that a "Completed store-based barrier" for the
    same key ends: waiting is normal until the last rank arrives; and minus a store-based
    barrier (its waits and its timeout) whose waits were logged as another process's
    progress bar advanced past the barrier's own timeout (views/barrier_work.py): the
    ranks not counted were busy with work of their own, slow, not a set-up stuck (HD039)."""
    done = {key for p in tl.of(EventKind.PHASE) if (key := _marker(p).store_key) is not None}
    on_work = barrier_keys_on_work(tl)
    return [
        p
        for p in stores
        if (_store_of(p).error != StoreError.STORE_BARRIER_WAIT or _store_of(p).keys not in done)
        and not (_store_of(p).error in _BARRIERS and _store_of(p).keys in on_work)
    ]


# Store errors that do not say what the store was used for: during setup they are the
# rendezvous; once collectives ran or training logged steps, the store serves something
# else (an object collective, a barrier, a checkpoint's coordination) and its timeout is
# not an init hang. Barriers of group creation and the NCCL unique-id exchange name the
# setup themselves and stay.
_GENERIC_STORE = frozenset(
    {
        StoreError.STORE_WAIT,
        StoreError.STORE_CONNECTION,
        StoreError.STORE_READ_TIMEOUT,
        StoreError.STORE_UNREACHABLE,
        StoreError.STORE_FILE,
        # TensorPipe connects to a peer on the first message to it, during init_rpc or
        # later: set-up only before anything ran, or where its traceback shows it.
        StoreError.RPC_CONNECT,
    }
)


def _before_training(tl: Timeline, stores: list[Placed]) -> list[Placed]:
    """The store events, less generic store errors that come after the job already ran
    collectives or logged training (views/nccl_setup.first_running) or whose traceback
    shows the training loop (StoreTimeout.stage), and less addresses that could not be
    reached when the job ran at all: the connect then went on to an address that
    answered. A store timeout of no known class (a catalog row's, ``error`` None) names no
    use of the store either: it is generic too. A generic store error whose traceback
    shows set-up (init_process_group, new_group, a rendezvous) is set-up wherever it
    comes.

    Never the elastic agent's keep-alive heartbeat (StoreTimeout.keep_alive): torch sends
    it only after the node joined the rendezvous. A store connection lost at the server's
    end (StoreTimeout.lost: reset by peer, a broken pipe, 0 bytes) is set-up only where its
    traceback shows set-up: the client had connected, so the store was up and its host
    went away, which a text with nothing run yet does not place in set-up."""
    running_from = first_running(tl)
    ran = running_from < len(tl.events)
    monitored = _monitored_from(stores)
    return [
        p
        for p in stores
        if not _store_of(p).keep_alive  # sent only after the node joined: not set-up
        and (
            ((error := _store_of(p).error) is not None and error not in _GENERIC_STORE)
            or (
                _store_of(p).stage != Phase.TRAIN
                and not _after_monitor(p, monitored)
                # a lost connection says the store was up: set-up only where shown so
                and (not _store_of(p).lost or _store_of(p).stage == Phase.INIT)
                and (
                    _store_of(p).stage == Phase.INIT
                    or (
                        p.index < running_from
                        and not (ran and error == StoreError.STORE_UNREACHABLE)
                    )
                )
            )
        )
    ]


def _monitored_from(stores: list[Placed]) -> dict[int | None, int]:
    """The index of each rank's first store failure that ProcessGroupNCCL's heartbeat
    monitor reported (StoreTimeout.by_monitor; None: a line that names no rank)."""
    first: dict[int | None, int] = {}
    for p in stores:
        if _store_of(p).by_monitor:
            first.setdefault(p.rank, p.index)
    return first


def _after_monitor(p: Placed, monitored: dict[int | None, int]) -> bool:
    """A store failure the heartbeat monitor reported, or one of the same process from
    that report on (c10d's own "sendBytes failed on SocketImpl(…)" of the same lost
    connection): only a constructed group runs the monitor, so its set-up had completed
    and the store's host went away later. A line that names no rank goes with any."""
    if _store_of(p).by_monitor:
        return True
    starts = [monitored.get(p.rank), monitored.get(None)]
    if p.rank is None:
        starts.extend(monitored.values())
    return any(start is not None and p.index >= start for start in starts)


def _roots(stores: list[Placed]) -> tuple[int, ...]:
    """The rank that never published the NCCL unique id (it was late, stuck or gone)."""
    return tuple(sorted({r for p in stores if (r := _store_of(p).root) is not None}))


def _gloo_unconnected(stores: list[Placed]) -> tuple[int, ...]:
    """The ranks whose Gloo process group could not connect its full mesh: the
    ProcessGroupGloo constructor raised on them ("Gloo connectFullMesh failed with …"),
    so their set-up failed and the other ranks wait for them in theirs."""
    return tuple(
        sorted(
            {
                p.rank
                for p in stores
                if p.rank is not None and _store_of(p).error == StoreError.GLOO_CONNECT
            }
        )
    )


RULE = NcclInitIncomplete
