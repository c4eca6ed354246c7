"""A rank blocked on the network outside the job: its main thread waits on a socket to a
server that does not answer, at every sample.

What the thread waits on says more than the names of the code that called it: a
``CheckpointUploader.upload`` or a ``MetricsPusher.push`` stuck in ``sendall`` is an
I/O stall on a server that does not answer (an object store, a tracking server, a proxy
that stopped reading), whatever the job calls it. Two signs, either is enough:

* **frames**: the thread's innermost frames are a network client (``socket``, ``ssl``,
  ``http.client``, ``urllib3``, ``requests``; the catalog's ``network_io``);
* **the kernel**: /proc shows the thread asleep in a system call on a socket at every
  sample (``sendto``, ``recvfrom``, ``connect``…; collectors/waits.py), which also
  catches ``sock.sendall()`` called straight from the job's code (a C call, no frame).

The job's own waits are not this: a thread in a collective or a rendezvous (its frames
say so), and a socket to the job's store (MASTER_PORT: ``store.wait`` from the job's
code) are waits for other ranks. "Blocked" is the kernel's and py-spy's word together:
the same Python call path at every sample (one sample is enough when it is all there is)
and the thread asleep; a transfer that is merely slow keeps it running or moving.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.model import Frame, ProcessEvidence, WaitKind
from hangdoc.analyzer.views.activity import classify_thread
from hangdoc.analyzer.views.activity_table import Activity
from hangdoc.analyzer.views.kernel import ThreadTrack, thread_tracks
from hangdoc.analyzer.views.wait_frames import INNERMOST, frames_wait

_JOB_WAITS = frozenset({Activity.COLLECTIVE, Activity.RENDEZVOUS})


@dataclass(frozen=True, slots=True)
class NetworkWait:
    track: ThreadTrack
    call: Frame | None  # the network library frame it waits in (http/client.py send)
    caller: Frame | None  # the innermost frame of the job's own code
    syscall: str | None  # "sendto", from /proc
    socket: str | None  # "socket tcp 127.0.0.1:41234 -> 127.0.0.1:43121 established"

    def where(self) -> str:
        frames = [f.label() for f in (self.caller, self.call) if f is not None]
        text = " → ".join(dict.fromkeys(frames)) or "its main thread"
        peer = self.peer()
        if self.syscall and peer:
            text += f", in {self.syscall} to {peer}"
        return text

    def peer(self) -> str | None:
        """The remote end of the socket ("10.0.0.7:443"), when /proc named it."""
        if self.socket is None or " -> " not in self.socket:
            return None
        return self.socket.split(" -> ", 1)[1].split()[0]


def network_wait(process: ProcessEvidence) -> NetworkWait | None:
    """The main thread of ``process`` blocked on a socket outside the job; see the module doc."""
    main = next((t for t in thread_tracks(process) if t.is_main), None)
    return _track_network_wait(process, main) if main is not None else None


def _track_network_wait(process: ProcessEvidence, track: ThreadTrack) -> NetworkWait | None:
    """``track`` blocked on a socket outside the job (the module doc's two signs)."""
    samples = len(process.stack_samples)
    if track.latest is None or len(track.stacks) < samples:
        return None
    if samples >= 2 and not track.unmoved():
        return None
    activity = classify_thread(track.latest)
    if activity.collective is not None or _JOB_WAITS & set(activity.tags):
        return None
    if not track.asleep():
        return None
    sockets = [s.waits_on for s in track.states if s.waits_on]
    in_socket = bool(track.states) and len(sockets) == len(track.states)
    in_socket = in_socket and all(w.startswith("socket") for w in sockets)
    latest = track.states[-1] if track.states else None
    syscall = latest.syscall if latest is not None and in_socket else None
    socket = sockets[-1] if in_socket else None
    wait = NetworkWait(track, None, track.user_frame(), syscall, socket)
    if in_socket and _to_the_jobs_store(wait, process):
        return None
    first_tag = activity.tag_frames[0] if activity.tag_frames else None
    if first_tag is not None and first_tag[0] is Activity.NETWORK_IO:
        return NetworkWait(track, first_tag[1], track.user_frame(), syscall, socket)
    return wait if in_socket else None


# Appended for issue 21 (live hangs at first sight): a main thread that waits on a Python
# primitive (a future's result, a queue, an event) for a thread of its own that is blocked
# on the network: telemetry SDKs (wandb.log) and prefetchers hand their I/O to a thread.
def helper_network_wait(process: ProcessEvidence) -> tuple[Frame | None, NetworkWait] | None:
    """(the frame the main thread waits in, the one other Python thread of the process
    blocked on a socket outside the job) when the main thread, asleep at the same place at
    every sample, waits on a threading or queue primitive (wait_frames.py: a futex) and
    exactly one of its Python threads is blocked on the network; else None."""
    tracks = thread_tracks(process)
    main = next((t for t in tracks if t.is_main), None)
    if main is None or main.latest is None or not main.asleep():
        return None
    if len(process.stack_samples) >= 2 and not main.unmoved():
        return None
    activity = classify_thread(main.latest)
    if activity.collective is not None or _JOB_WAITS & set(activity.tags):
        return None
    waits = frames_wait(main.latest)
    if waits is None or waits[0] is not WaitKind.FUTEX:
        return None
    helpers = [
        wait
        for t in tracks
        if not t.is_main and t.latest is not None and t.latest.frames
        and (wait := _track_network_wait(process, t)) is not None and not _serves(wait)
    ]  # fmt: skip
    return (waits[1], helpers[0]) if len(helpers) == 1 else None


def _serves(wait: NetworkWait) -> bool:
    """A thread in ``accept`` waits for clients of a server of its own (a metrics or debug
    endpoint, a hook): nobody it waits for fails to answer."""
    if wait.syscall is not None and wait.syscall.startswith("accept"):
        return True
    frames = wait.track.latest.frames if wait.track.latest is not None else ()
    return any(f.function_leaf in ("accept", "accept4") for f in frames[:INNERMOST])


def _to_the_jobs_store(wait: NetworkWait, process: ProcessEvidence) -> bool:
    port = process.env.get("MASTER_PORT")
    peer = wait.peer()
    return bool(port) and peer is not None and peer.rsplit(":", 1)[-1] == port
