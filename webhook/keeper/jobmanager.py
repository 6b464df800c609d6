"""The JobManager beside the keeper: found in the pod's shared process namespace by its main class, and
stopped with SIGKILL under a deadline.

Why a kill and not a cancel through Flink's REST API: a cancel is a globally terminal state (Flink drops
the job's HA data, the operator records the job CANCELED and does not start it again), it needs a
JobManager that answers (not one in a long GC pause or hung on its own storage), and it runs Flink's
own shutdown, which may still commit. A SIGKILL is what a crash looks like: nothing more runs in the
JobManager (no checkpoint completes, so no transactional sink commits), its HA data stays, and once the
keeper holds the lease again the restarted JobManager recovers the job from its newest checkpoint as it
would after any crash. The kernel bounds it; it needs no credentials, only the pod's shared process
namespace (``shareProcessNamespace: true``) and the JobManager's user (or CAP_KILL).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

ENTRYPOINTS = (
    "org.apache.flink.kubernetes.entrypoint.KubernetesApplicationClusterEntrypoint",
    "org.apache.flink.kubernetes.entrypoint.KubernetesSessionClusterEntrypoint",
    "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint",
    "org.apache.flink.container.entrypoint.StandaloneApplicationClusterEntrypoint",
)


@dataclass(frozen=True)
class Process:
    pid: int
    entrypoint: str


def is_jobmanager(argv: Sequence[str], marker: str = "") -> str:
    """The entrypoint class a command line runs (one of its arguments exactly), "" when it is none;
    ``marker``: a further text one argument must contain (tests on a shared machine)."""
    found = next((arg for arg in argv if arg in ENTRYPOINTS), "")
    if found and marker and not any(marker in arg for arg in argv):
        return ""
    return found


class JobManagers:
    """The JobManager processes in this process namespace (``/proc``), never the keeper itself."""

    def __init__(self, marker: str = "", proc: str = "/proc") -> None:
        self.marker = marker
        self.proc = proc
        self._own_ns = _pid_namespace(proc, "self")

    def find(self) -> list[Process]:
        found = []
        for entry in _pids(self.proc):
            if entry in (os.getpid(), 1):
                continue
            argv = _cmdline(self.proc, entry)
            if not argv:
                continue
            main = is_jobmanager(argv, self.marker)
            if not main or _dead(self.proc, entry):
                continue
            if self._own_ns and _pid_namespace(self.proc, str(entry)) not in ("", self._own_ns):
                continue
            found.append(Process(entry, main))
        return found

    def kill(
        self, processes: Iterable[Process], deadline: float, pause: Callable[[float], None] = time.sleep
    ) -> list[int]:
        """SIGKILL each, then wait until they are gone (or zombies) for at most ``deadline`` seconds; the
        pids still alive then are returned."""
        targets = list(processes)
        for process in targets:
            try:
                os.kill(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            except PermissionError:
                pass  # left alive below, said by the caller
        end = time.monotonic() + deadline
        alive = [p.pid for p in targets]
        while alive:
            alive = [pid for pid in alive if not _dead(self.proc, pid)]
            if not alive or time.monotonic() >= end:
                break
            pause(0.01)
        return alive


def _pids(proc: str) -> list[int]:
    try:
        return [int(e) for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return []


def _cmdline(proc: str, pid: int) -> list[str]:
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _dead(proc: str, pid: int) -> bool:
    """Gone, or a zombie (it runs nothing more; its parent reaps it)."""
    try:
        with open(f"{proc}/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def _pid_namespace(proc: str, pid: str) -> str:
    try:
        return os.readlink(f"{proc}/{pid}/ns/pid")
    except OSError:
        return ""
