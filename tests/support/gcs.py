"""gcp-storage-emulator (PyPI, in the dev extra) on loopback: Google Cloud Storage's JSON API for gcsfs."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.server import free_port
from tests.support.storage_process import storage_process, url_answers

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
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    argv = [gcs_binary(), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"]
    ready = url_answers(f"{endpoint}/storage/v1/b?project={PROJECT}")
    with storage_process("gcp-storage-emulator", argv, log_file, ready):
        yield endpoint


def gcs_options(endpoint: str) -> dict[str, object]:
    """storageOptions for the gs scheme, as a policy would carry them (issue 35's new user)."""
    return {"endpoint_url": endpoint, "token": "anon", "project": PROJECT}
