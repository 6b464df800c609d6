"""A storage server (moto, gcp-storage-emulator, Azurite) as a process of its own on loopback: started in
its own process group with its output in a log file, waited for until it answers, stopped with its group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


def url_answers(url: str) -> Callable[[], bool]:
    """Ready when ``url`` answers a GET."""

    def answers() -> bool:
        try:
            urllib.request.urlopen(url, timeout=1).read()
        except OSError:
            return False
        return True

    return answers


def port_accepts(port: int) -> Callable[[], bool]:
    """Ready when loopback ``port`` accepts a connection."""

    def accepts() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    return accepts


@contextmanager
def storage_process(
    name: str,
    argv: list[str],
    log_file: Path,
    ready: Callable[[], bool],
    start_seconds: float = 30,
    cwd: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` running until the block ends; RuntimeError with the log's tail when it exits or is not
    ``ready`` within ``start_seconds``."""
    from tests.support.production import wait_for  # production keeps its records on these servers

    with open(log_file, "wb") as log:
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd
        )
    try:

        def up() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited: {log_file.read_text()[-2000:]}")
            return ready()

        if not wait_for(up, start_seconds):
            raise RuntimeError(f"{name} did not start: {log_file.read_text()[-2000:]}")
        yield process
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:  # a server holding a fleet's objects on a loaded machine
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
