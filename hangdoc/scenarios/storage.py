"""Storage that stops answering, for the I/O-stall scenario: a small ext4 file system on
a loop device, frozen with ``FIFREEZE`` so that writers block in uninterruptible sleep
(state ``D``, wait channel ``percpu_rwsem_wait``) exactly as on a dead NFS server.

A thread in D state cannot be killed, so a frozen file system must always be thawed: a
guard process, detached from the job (so that killing the job's process tree does not
kill it), thaws and unmounts it as soon as the rank has a SIGKILL pending or is gone, or
at a deadline. Needs root (mount, FIFREEZE); ``python -m hangdoc.scenarios.storage guard
PID MOUNT IMAGE DEADLINE`` is the guard's entry point.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIFREEZE = 0xC0045877
FITHAW = 0xC0045878
SIGKILL_BIT = 1 << 8  # bit of signal 9 in /proc/PID/status pending masks
IMAGE_MB = 64


class StorageUnavailable(RuntimeError):
    """This machine cannot host the scenario (not root, no loop devices)."""


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0:
        raise StorageUnavailable(f"{' '.join(cmd)} failed: {done.stderr.strip()}")


def mount_stuck_storage(deadline_s: float, name: str = "ckpt") -> Path:
    """Mount a fresh ext4 image in a directory of its own (not the job's: that one is
    removed while the guard may still be unmounting), at ``name`` inside it, and start the
    thaw guard."""
    if os.geteuid() != 0:
        raise StorageUnavailable("the I/O-stall scenario needs root (mount, FIFREEZE)")
    base = Path(tempfile.mkdtemp(prefix="hangdoc-stuck-storage-"))
    image, mount = base / "storage.img", base / name
    mount.mkdir()
    with image.open("wb") as handle:
        handle.truncate(IMAGE_MB * 2**20)
    _run(["mkfs.ext4", "-q", "-F", str(image)])
    _run(["mount", "-o", "loop", str(image), str(mount)])
    start_guard(os.getpid(), mount, image, time.time() + deadline_s)
    return mount


def freeze(mount: Path) -> None:
    fd = os.open(mount, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, FIFREEZE, 0)
    finally:
        os.close(fd)


def thaw(mount: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(mount, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, FITHAW, 0)
        finally:
            os.close(fd)


def start_guard(pid: int, mount: Path, image: Path, deadline: float) -> None:
    """Start the guard detached (double fork): it outlives a kill of the job's tree."""
    cmd = [sys.executable, "-m", "hangdoc.scenarios.storage", "guard", str(pid), str(mount),
           str(image), str(deadline)]  # fmt: skip
    subprocess.run(cmd, check=True, timeout=30, stdin=subprocess.DEVNULL)


def kill_pending(pid: int) -> bool:
    """The process is gone, a zombie, or one of its threads has SIGKILL pending."""
    task = Path(f"/proc/{pid}/task")
    try:
        tids = os.listdir(task)
    except OSError:
        return True
    for tid in tids:
        try:
            status = (task / tid / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            name, _, value = line.partition(":")
            if name == "State" and value.strip().startswith(("Z", "X")):
                return True
            if name in ("SigPnd", "ShdPnd") and int(value.strip(), 16) & SIGKILL_BIT:
                return True
    return False


def guard(pid: int, mount: Path, image: Path, deadline: float) -> None:
    """Wait until the rank is being killed (or the deadline), then thaw and clean up."""
    while time.time() < deadline and not kill_pending(pid):
        time.sleep(0.05)
    thaw(mount)
    for _ in range(100):  # the rank dies once its write returns; then the mount is free
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.05)
    subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False, timeout=60)
    with contextlib.suppress(OSError):
        image.unlink()
    with contextlib.suppress(OSError):
        mount.rmdir()
        mount.parent.rmdir()


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[0] != "guard":
        print("usage: python -m hangdoc.scenarios.storage guard PID MOUNT IMAGE DEADLINE")
        return 2
    if os.fork() != 0:
        return 0  # the parent returns at once; the child is re-parented away from the job
    os.setsid()
    guard(int(argv[1]), Path(argv[2]), Path(argv[3]), float(argv[4]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
