"""moto's standalone S3 server on loopback, run from its own virtual environment (.venv-moto)."""

from __future__ import annotations

import os
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.repo import REPO
from tests.support.server import free_port

CREDENTIALS = {"key": "testing", "secret": "testing"}


def moto_binary() -> str:
    path = os.environ.get("MOTO_SERVER") or str(REPO / ".venv-moto" / "bin" / "moto_server")
    if not Path(path).exists():
        raise FileNotFoundError(f"moto_server not found at {path}: run `make moto-venv` (make test does)")
    return path


@contextmanager
def moto_server(log_file: Path) -> Iterator[str]:
    port = free_port()
    with open(log_file, "wb") as log:
        process = subprocess.Popen(
            [moto_binary(), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        from tests.support.production import wait_for  # production keeps its records on this server

        def answers() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"moto server exited: {log_file.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).read()
            except OSError:
                return False
            return True

        if not wait_for(answers, 30):
            raise RuntimeError(f"moto server did not start: {log_file.read_text()[-2000:]}")
        yield endpoint
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)


def s3_options(endpoint: str) -> dict[str, object]:
    """storageOptions for the s3 scheme, as a policy would carry them."""
    return {"endpoint_url": endpoint, **CREDENTIALS}
