"""The tier's processes: each in its own process group, logged to a file, stopped on every exit path.

A :class:`Processes` owns what it started and stops it in reverse order (SIGTERM to the group, SIGKILL
after a grace period). Its ``stop_all`` also runs at interpreter exit and on SIGTERM/SIGHUP to pytest, so
an interrupted or timed-out run leaves no kube-apiserver behind.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

_LIVE: list[Processes] = []
_LOCK = threading.Lock()


@dataclass
class Process:
    name: str
    argv: list[str]
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)

    def stop(self, grace: float = 10.0) -> None:
        if self.alive():
            self.signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(grace)
        # the group may outlive its leader (gunicorn workers): kill whatever is left
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(5)


@dataclass
class Processes:
    logs: Path
    started: list[Process] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        with _LOCK:
            _LIVE.append(self)

    def start(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Process:
        log = self.logs / f"{name}.log"
        with log.open("ab") as out:
            out.write(f"$ {' '.join(argv)}\n".encode())
            out.flush()
            popen = subprocess.Popen(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,
            )
        process = Process(name, list(argv), popen, log)
        self.started.append(process)
        return process

    def stop(self, process: Process, grace: float = 10.0) -> None:
        process.stop(grace)
        if process in self.started:
            self.started.remove(process)

    def stop_all(self) -> None:
        while self.started:
            self.started.pop().stop()
        with _LOCK:
            if self in _LIVE:
                _LIVE.remove(self)

    def dead(self) -> list[Process]:
        return [p for p in self.started if not p.alive()]


def wait_until(
    what: str,
    predicate: Callable[[], bool],
    timeout: float,
    processes: Sequence[Process] = (),
    interval: float = 0.2,
) -> None:
    """Until ``predicate()`` holds; a process of ``processes`` exiting, or the timeout, fails with its log."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
        for process in processes:
            if not process.alive():
                raise RuntimeError(
                    f"{process.name} exited with {process.popen.returncode} while waiting for {what}:\n"
                    f"{process.tail()}"
                )
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {p.name}\n{p.tail(15)}" for p in processes)
            raise TimeoutError(f"{what}: not within {timeout:.0f} s\n{logs}")
        time.sleep(interval)


def _stop_everything() -> None:
    with _LOCK:
        live = list(_LIVE)
    for processes in live:
        processes.stop_all()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _stop_everything()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


atexit.register(_stop_everything)
for _sig in (signal.SIGTERM, signal.SIGHUP):
    if threading.current_thread() is threading.main_thread():
        signal.signal(_sig, _on_signal)
