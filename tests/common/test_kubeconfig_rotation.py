"""Issue 17 item 11: a token rotated in the mounted kubeconfig Secret is used without a restart.

A real ``kubernetes`` ApiClient from ``new_api_client`` against a loopback HTTP server that records the
Authorization header of every request; the kubeconfig (or the tokenFile it names) is rewritten the way
kubelet updates a Secret volume (a new file swapped in). Before: the first token was sent forever.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.common.kubeclient import ApiFailure, ClientConfig, new_api_client


@pytest.fixture
def api() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            body = json.dumps({"kind": "NamespaceList", "apiVersion": "v1", "items": []}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            return

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def kubeconfig(server: str, user: dict[str, str]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "karmada", "cluster": {"server": server}}],
            "users": [{"name": "ff", "user": user}],
            "contexts": [{"name": "karmada", "context": {"cluster": "karmada", "user": "ff"}}],
            "current-context": "karmada",
        }
    )


def swap(path: Path, text: str) -> None:
    """Replace the file as kubelet updates a Secret volume: a new file renamed over the old."""
    new = path.with_name(path.name + ".new")
    new.write_text(text)
    os.replace(new, path)


def call(client: Any) -> None:
    from kubernetes import client as k8s

    k8s.CoreV1Api(client).list_namespace(_request_timeout=5)


def test_a_rotated_token_in_the_kubeconfig_is_used_without_a_restart(
    api: tuple[str, list[str]], tmp_path: Path
) -> None:
    server, seen = api
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server, {"token": "first"}))
    client = new_api_client(ClientConfig(str(path), credentials_check_seconds=0), "Karmada")
    assert not isinstance(client, ApiFailure)
    call(client)
    swap(path, kubeconfig(server, {"token": "second"}))
    call(client)
    assert seen == ["Bearer first", "Bearer second"]


def test_a_rotated_token_file_is_used_without_a_restart(api: tuple[str, list[str]], tmp_path: Path) -> None:
    server, seen = api
    (tmp_path / "token").write_text("one")
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server, {"tokenFile": "token"}))
    client = new_api_client(ClientConfig(str(path), credentials_check_seconds=0), "Karmada")
    assert not isinstance(client, ApiFailure)
    call(client)
    swap(tmp_path / "token", "two")
    call(client)
    swap(path, "not: [a kubeconfig")  # half-written: the last good token stays
    call(client)
    assert seen == ["Bearer one", "Bearer two", "Bearer two"]
