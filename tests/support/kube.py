"""Kubeconfig files for the local fake API servers the tests run."""

from __future__ import annotations

import json
from pathlib import Path


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
