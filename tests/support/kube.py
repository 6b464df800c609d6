"""Kubeconfig files, merge patches and answers for the local fake API servers the tests run."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any


def write_kubeconfig(path: Path, server: str, token: str = "test-token", name: str = "fake") -> Path:
    """A kubeconfig with one cluster/user/context pointing at ``server`` (JSON is valid YAML)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as kube-apiserver applies ``application/merge-patch+json``."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def send_json(handler: BaseHTTPRequestHandler, code: int, body: Any) -> None:
    """One JSON answer with its length, as kube-apiserver sends it."""
    data = json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def failure_status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A v1 Status of a failed request."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "code": code,
        "message": message,
    }
