"""Typed, immutable inputs of the estimator: components, nodes, clusters, and the scheduling filters.

Every parser (FlinkDeployment, ResourceBinding, snapshot, kubectl List, Karmada Cluster, live API) ends
in these types, so the estimator and the witness check see one shape whatever the source was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from webhook.placement.quantity import PODS

EMPTY: Mapping[str, str] = MappingProxyType({})
NO_UNITS: Mapping[str, int] = MappingProxyType({})
UNLIMITED_PODS = 10**9  # a node that reports no pod limit (Karmada resource-model nodes)
HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})  # PreferNoSchedule never blocks a pod


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class Toleration:
    key: str = ""  # empty key with operator Exists tolerates every taint
    operator: str = "Equal"
    value: str = ""
    effect: str = ""  # empty effect matches every effect

    def tolerates(self, taint: Taint) -> bool:
        """The Kubernetes rule: effect, then key, then value (Exists ignores the value)."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True)
class Requirement:
    """One node selector requirement (matchExpressions, or matchFields on ``metadata.name``)."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()
    field: bool = False

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        value = (node_name if self.key == "metadata.name" else None) if self.field else labels.get(self.key)
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt"):
            if value is None:
                return False
            try:
                have, want = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False


@dataclass(frozen=True)
class NodeSelectorTerm:
    """Requirements ANDed; a term without requirements matches nothing (as in Kubernetes)."""

    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        return bool(self.requirements) and all(r.matches(labels, node_name) for r in self.requirements)


@dataclass(frozen=True)
class Component:
    """One pod template of a workload: every set needs ``replicas`` pods of it, each with ``requests``.

    ``requests`` is in counting units (cpu in millicores, bytes, devices); the pod slot itself is
    counted separately against the node's ``pods``.
    """

    name: str
    replicas: int
    requests: Mapping[str, int] = field(default_factory=lambda: NO_UNITS)
    node_selector: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    tolerations: tuple[Toleration, ...] = ()
    affinity_terms: tuple[NodeSelectorTerm, ...] | None = None  # None: no required node affinity
    priority_class: str = ""

    def admits(self, node: Node) -> bool:
        """The hard filters of the scheduler that do not depend on resources."""
        if node.unschedulable:
            return False
        for key, value in self.node_selector.items():
            if node.labels.get(key) != value:
                return False
        if self.affinity_terms is not None and not any(
            t.matches(node.labels, node.name) for t in self.affinity_terms
        ):
            return False
        return all(
            any(tol.tolerates(taint) for tol in self.tolerations)
            for taint in node.taints
            if taint.effect in HARD_EFFECTS
        )


@dataclass(frozen=True)
class Node:
    """A node's identity, filters and free capacity (allocatable minus what running pods request).

    ``free`` holds counting units; a resource missing from it is not available at all, except
    ``pods``, whose absence means the source had no pod limit (Karmada resource-model nodes).
    """

    name: str
    free: Mapping[str, int]
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


@dataclass(frozen=True)
class NodeTable:
    """A cluster's nodes column by column, built once when the cluster is read (node preparation).

    ``kinds`` holds one node per distinct (labels, taints, unschedulable) signature and ``kind_of`` maps
    each node to it, so filters run once per kind instead of once per node.
    """

    names: tuple[str, ...]
    columns: Mapping[str, tuple[int, ...]]  # resource -> free per node (0 if absent; pods: UNLIMITED_PODS)
    kinds: tuple[Node, ...]
    kind_of: tuple[int, ...]

    @staticmethod
    def build(nodes: tuple[Node, ...]) -> NodeTable:
        index: dict[tuple[object, ...], int] = {}
        kinds: list[Node] = []
        kind_of = []
        resources: set[str] = set()
        for node in nodes:
            # Label order from one source is stable, so no sorting: another order only adds a kind.
            sig = (tuple(node.labels.items()), node.taints, node.unschedulable)
            at = index.get(sig)
            if at is None:
                at = index[sig] = len(kinds)
                kinds.append(node)
            kind_of.append(at)
            resources.update(node.free)
        columns = {
            r: tuple(n.free.get(r, UNLIMITED_PODS if r == PODS else 0) for n in nodes)
            for r in sorted(resources)
        }
        return NodeTable(
            tuple(n.name for n in nodes), MappingProxyType(columns), tuple(kinds), tuple(kind_of)
        )


@dataclass(frozen=True)
class Cluster:
    name: str
    nodes: tuple[Node, ...]
    not_ready: str = ""  # why the control plane would not place anything here (Karmada Ready=False)
    source: str = field(default="", compare=False)
    table: NodeTable = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "table", NodeTable.build(self.nodes))


def frozen_map(values: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(values)) if values else EMPTY


def frozen_units(values: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(values))
