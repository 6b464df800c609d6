"""moto's standalone S3 server on loopback, run from its own virtual environment (.venv-moto)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.repo import REPO
from tests.support.server import free_port
from tests.support.storage_process import storage_process, url_answers

CREDENTIALS = {"key": "testing", "secret": "testing"}


def moto_binary() -> str:
    path = os.environ.get("MOTO_SERVER") or str(REPO / ".venv-moto" / "bin" / "moto_server")
    if not Path(path).exists():
        raise FileNotFoundError(f"moto_server not found at {path}: run `make moto-venv` (make test does)")
    return path


@contextmanager
def moto_server(log_file: Path) -> Iterator[str]:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    argv = [moto_binary(), "-H", "127.0.0.1", "-p", str(port)]
    with storage_process("moto server", argv, log_file, url_answers(f"{endpoint}/moto-api/")):
        yield endpoint


def s3_options(endpoint: str) -> dict[str, object]:
    """storageOptions for the s3 scheme, as a policy would carry them."""
    return {"endpoint_url": endpoint, **CREDENTIALS}
