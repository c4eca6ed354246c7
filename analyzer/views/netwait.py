"""A rank blocked on the network outside the job: its main thread inside a network client
call (``socket``, ``ssl``, ``http.client``, ``urllib3``, ``requests``) at every sample.

What the thread waits on says more than the names of the code that called it: a
``CheckpointUploader.upload`` or a ``MetricsPusher.push`` stuck in ``sendall`` is an
I/O stall on a server that does not answer (an object store, a tracking server, a proxy
that stopped reading), whatever the job calls it. The job's own collectives never wait
in these frames (gloo, NCCL and the c10d store are C++), so a rank found there is
waiting for something outside the job.

"Blocked" is the kernel's and py-spy's word together: the same Python call path at every
sample (one sample is enough when it is all there is) and the thread asleep (idle, or
next to no CPU time between samples); a transfer that is merely slow keeps the thread
running or moves it between calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from hangdoc.analyzer.model import Frame, ProcessEvidence
from hangdoc.analyzer.views.activity import classify_thread
from hangdoc.analyzer.views.catalog import Tag
from hangdoc.analyzer.views.kernel import ThreadTrack, thread_tracks


@dataclass(frozen=True, slots=True)
class NetworkWait:
    track: ThreadTrack
    call: Frame  # the network library frame it waits in (http/client.py send)
    caller: Frame | None  # the innermost frame of the job's own code above it

    def where(self) -> str:
        who = f"{self.caller.label()} → " if self.caller is not None else ""
        return f"{who}{self.call.label()}"


def network_wait(process: ProcessEvidence) -> NetworkWait | None:
    """The main thread of ``process`` blocked in a network client call; see the module doc."""
    samples = len(process.stack_samples)
    main = next((t for t in thread_tracks(process) if t.is_main), None)
    if main is None or main.latest is None or len(main.stacks) < samples:
        return None
    if samples >= 2 and not main.unmoved():
        return None
    activity = classify_thread(main.latest)
    if activity.collective is not None or not activity.tag_frames:
        return None
    tag, frame = activity.tag_frames[0]
    if tag is not Tag.NETWORK_IO or not main.asleep():
        return None
    return NetworkWait(main, frame, main.user_frame())
