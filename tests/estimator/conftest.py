"""Karmada v1.18.2's recorded estimator traffic and the 1,000-node cluster it was answered on.

The 34,079-pod list is read once per session: it is the slow part (about a second).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from webhook.estimator.state import ClusterState

CLUSTER = "c-1000"
WORKLOADS = ("small", "medium", "large", "ha")


@pytest.fixture(scope="session")
def karmada_data(shared_data: Path) -> Path:
    path = shared_data / "karmada-estimator"
    if not path.is_dir():
        pytest.fail(f"{path} missing from the shared reference data")
    return path


@pytest.fixture(scope="session")
def recorded_objects(karmada_data: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = json.loads((karmada_data / "cluster-c-1000-nodes.json").read_text())["items"]
    with gzip.open(karmada_data / "cluster-c-1000-pods.json.gz") as fh:
        pods = json.load(fh)["items"]
    return nodes, pods


@pytest.fixture(scope="session")
def recorded_state(recorded_objects: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> ClusterState:
    nodes, pods = recorded_objects
    state = ClusterState(CLUSTER)
    state.replace_nodes(nodes)
    state.replace_pods(pods)
    return state
