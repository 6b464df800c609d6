"""A member cluster's free capacity, kept current from listed and watched nodes and pods (no I/O here).

Memory-lean by design: a pod is kept as (node name, requests) with the requests tuple interned, since
thousands of pods share a handful of shapes; a node keeps only its labels, taints, cordon and
allocatable. Reads take a snapshot (a placement ``Cluster``) that is rebuilt only after a change, and
only for the nodes that changed; ``refresh_s`` bounds how often a busy cluster's snapshot is rebuilt
(building the node table of 10,000 nodes costs tens of milliseconds).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.estimator.workloads import PendingPod, Workloads, pending_pod
from webhook.placement.cluster import NodeInfo, bound_pod, node_info
from webhook.placement.errors import PlacementInputError
from webhook.placement.model import Cluster, Node, frozen_units
from webhook.placement.quantity import PODS

log = logging.getLogger(__name__)

Requests = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class PodInfo:
    node: str
    requests: Requests


def pod_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return ""
    uid = meta.get("uid")
    return str(uid) if uid else f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class ClusterState:
    """Nodes and the pods bound to them; thread-safe (one writer per resource, many readers)."""

    def __init__(
        self, name: str, clock: Callable[[], float] = time.monotonic, refresh_s: float = 0.0
    ) -> None:
        self.name = name
        self._clock = clock
        self.refresh_s = refresh_s  # a snapshot younger than this is reused even after changes
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, PodInfo] = {}
        self._used: dict[str, dict[str, int]] = {}
        self._shapes: dict[Requests, Requests] = {}
        self._version = 0
        self._snapshot: tuple[int, float, Cluster] | None = None
        self._built: dict[str, Node] = {}  # the last snapshot's nodes, reused while unchanged
        self._dirty: set[str] | None = None  # nodes changed since; None: all
        self._synced: set[str] = set()
        self._changed_at = clock()
        self.skipped = 0  # objects we could not read (logged)
        # Deployments, ReplicaSets and the unschedulable pods, for GetUnschedulableReplicas
        self.workloads = Workloads()

    # --- writers -------------------------------------------------------------------------------------
    def replace_nodes(self, objs: Iterable[Mapping[str, Any]]) -> None:
        """A full list: afterwards exactly these nodes exist."""
        fresh: dict[str, NodeInfo] = {}
        for obj in objs:
            info = self._read_node(obj)
            if info is not None:
                fresh[info.name] = info
        with self._lock:
            self._nodes = fresh
            self._dirty = None
            self._touch("nodes")

    def replace_pods(self, objs: Iterable[Mapping[str, Any]]) -> None:
        fresh: dict[str, PodInfo] = {}
        waiting: list[tuple[str, PendingPod]] = []
        for obj in objs:
            key = pod_key(obj)
            info = self._read_pod(obj)
            if info is not None:
                fresh[key] = info
            unschedulable = pending_pod(obj)
            if unschedulable is not None:
                waiting.append((key, unschedulable))
        self.workloads.replace_pods(waiting)
        with self._lock:
            self._pods = {}
            self._used = {}
            for key, info in fresh.items():
                self._add(key, info)
            self._dirty = None
            self._touch("pods")

    def node_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        if kind == "DELETED":
            name = str((obj.get("metadata") or {}).get("name", ""))
            with self._lock:
                if self._nodes.pop(name, None) is not None:
                    self._mark(name)
                    self._touch()
            return
        info = self._read_node(obj)
        if info is None:
            return
        with self._lock:
            if self._nodes.get(info.name) != info:
                self._nodes[info.name] = info
                self._mark(info.name)
                self._touch()

    def pod_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        key = pod_key(obj)
        self.workloads.pod_event(kind, key, None if kind == "DELETED" else pending_pod(obj))
        info = None if kind == "DELETED" else self._read_pod(obj)
        with self._lock:
            old = self._pods.get(key)
            if old == info:
                return
            if old is not None:
                self._remove(key, old)
            if info is not None:
                self._add(key, info)
            self._touch()

    # --- readers -------------------------------------------------------------------------------------
    @property
    def synced(self) -> bool:
        """Both nodes and pods have been listed in full at least once."""
        with self._lock:
            return self._synced >= {"nodes", "pods"}

    def age(self) -> float:
        """Seconds since the state last changed (or was last relisted)."""
        return max(0.0, self._clock() - self._changed_at)

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return len(self._nodes), len(self._pods)

    def snapshot(self) -> Cluster:
        """Every node with its free capacity (allocatable minus bound pods' requests, floored at 0)."""
        now = self._clock()
        with self._lock:
            if self._snapshot is not None:
                version, built_at, cluster = self._snapshot
                if version == self._version or now - built_at < self.refresh_s:
                    return cluster
            version = self._version
            dirty, self._dirty = self._dirty, set()
            nodes = []
            for info in self._nodes.values():
                node = self._built.get(info.name)
                if node is None or dirty is None or info.name in dirty:
                    used = self._used.get(info.name, {})
                    free = {r: max(0, have - used.get(r, 0)) for r, have in info.allocatable.items()}
                    node = Node(info.name, frozen_units(free), info.labels, info.taints, info.unschedulable)
                nodes.append(node)
            self._built = {n.name: n for n in nodes}
        cluster = Cluster(self.name, tuple(nodes), source="watched nodes and pods")
        with self._lock:
            if self._snapshot is None or self._snapshot[0] < version:
                self._snapshot = (version, now, cluster)
        return cluster

    # --- internals -----------------------------------------------------------------------------------
    def _touch(self, synced: str = "") -> None:
        self._version += 1
        self._changed_at = self._clock()
        if synced:
            self._synced.add(synced)

    def _mark(self, node: str) -> None:
        if self._dirty is not None:
            self._dirty.add(node)

    def _add(self, key: str, info: PodInfo) -> None:
        self._pods[key] = info
        self._mark(info.node)
        used = self._used.setdefault(info.node, {})
        for r, v in info.requests:
            used[r] = used.get(r, 0) + v

    def _remove(self, key: str, info: PodInfo) -> None:
        del self._pods[key]
        self._mark(info.node)
        used = self._used.get(info.node)
        if used is None:
            return
        for r, v in info.requests:
            used[r] = used.get(r, 0) - v
        if not used.get(PODS):
            del self._used[info.node]

    def _read_node(self, obj: Mapping[str, Any]) -> NodeInfo | None:
        try:
            return node_info(obj)
        except PlacementInputError as exc:
            self.skipped += 1
            log.warning("node ignored: %s", exc)
            return None

    def _read_pod(self, obj: Mapping[str, Any]) -> PodInfo | None:
        """A pod that holds a node (bound, not finished), or None."""
        try:
            held = bound_pod(obj, f"pod {pod_key(obj)}")
        except PlacementInputError as exc:
            self.skipped += 1
            log.warning("pod ignored: %s", exc)
            return None
        if held is None:
            return None
        node, requests = held
        shape = tuple(sorted(requests.items()))
        shape = self._shapes.setdefault(shape, shape)
        return PodInfo(sys.intern(node), shape)
