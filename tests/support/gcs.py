"""gcp-storage-emulator (PyPI, in the dev extra) on loopback: Google Cloud Storage's JSON API for gcsfs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from tests.support.server import free_port

PROJECT = "flink-failover-test"


class MissingServer(Exception):
    """A storage server's program is not installed here; the message says how to get it (one line)."""


def gcs_binary() -> str:
    """The emulator's console script: GCS_EMULATOR, else beside this interpreter, else on PATH."""
    named = os.environ.get("GCS_EMULATOR")
    beside = Path(sys.executable).parent / "gcp-storage-emulator"
    path = named or (str(beside) if beside.exists() else shutil.which("gcp-storage-emulator") or "")
    if not path or not Path(path).exists():
        raise MissingServer(
            f"gcp-storage-emulator not found ({path or 'not on PATH'}): "
            "install the dev extra (make venv does)"
        )
    return path


@contextmanager
def gcs_server(log_file: Path) -> Iterator[str]:
    """The emulator in memory on a free loopback port; yields its endpoint URL."""
    from tests.support.production import wait_for

    port = free_port()
    with open(log_file, "wb") as log:
        process = subprocess.Popen(
            [gcs_binary(), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:

        def answers() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"gcp-storage-emulator exited: {log_file.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{endpoint}/storage/v1/b?project={PROJECT}", timeout=1).read()
            except OSError:
                return False
            return True

        if not wait_for(answers, 30):
            raise RuntimeError(f"gcp-storage-emulator did not start: {log_file.read_text()[-2000:]}")
        yield endpoint
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)


def gcs_options(endpoint: str) -> dict[str, object]:
    """storageOptions for the gs scheme, as a policy would carry them (issue 35's new user)."""
    return {"endpoint_url": endpoint, "token": "anon", "project": PROJECT}
