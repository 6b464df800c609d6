"""Kubeconfig files for the local fake API servers the tests run."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
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
