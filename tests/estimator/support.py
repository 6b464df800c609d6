"""Builders shared by the estimator tests and its benchmark: Node and Pod objects, the serve command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.server import executable


def node(name: str, cpu: str, memory: str, pods: int = 110, **labels: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        # Not Ready on purpose: Karmada's estimator (and ours) ignores the condition
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "False"}],
        },
    }


def pod(name: str, node_name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        },
        "status": {"phase": "Running"},
    }


def serve_command(cluster: str, kubeconfig: Path, port: int, side: int, *extra: str) -> list[str]:
    """``flink-failover serve --role estimator`` on loopback ports."""
    return [
        executable(),
        "serve",
        "--role",
        "estimator",
        "--cluster",
        cluster,
        "--kubeconfig",
        str(kubeconfig),
        "--server-address",
        "127.0.0.1",
        "--server-port",
        str(port),
        "--metrics-bind",
        f"127.0.0.1:{side}",
        *extra,
    ]
