"""Cluster inputs: the snapshot format, ``kubectl get nodes,pods -A -o json``, and Karmada Cluster objects.

Each ends as a ``Cluster`` of nodes with free capacity (allocatable minus the requests of the pods that
hold a node), so the estimator never needs to know where the numbers came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.placement import fields as f
from webhook.placement.errors import PlacementInputError
from webhook.placement.model import Cluster, Node, Taint, frozen_map, frozen_units
from webhook.placement.quantity import PODS, capacity_units, request_units

_CLUSTER_FIELDS = ("name", "nodes")
_NODE_FIELDS = ("name", "labels", "taints", "unschedulable", "allocatable", "requested")
_TAINT_FIELDS = ("key", "value", "effect", "timeAdded")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
FINISHED_PHASES = ("Succeeded", "Failed")  # a pod in these phases holds no node (kube-scheduler, Karmada)
POD_FIELD_SELECTOR = ",".join(f"status.phase!={phase}" for phase in FINISHED_PHASES)  # the same, server-side


def parse_taints(raw: Any, where: str) -> tuple[Taint, ...]:
    result = []
    for i, item in enumerate(f.sequence(raw, where)):
        at = f"{where}[{i}]"
        taint = f.mapping(item, at, _TAINT_FIELDS)
        effect = f.string(taint.get("effect"), f"{at}.effect")
        if effect not in _EFFECTS:
            raise PlacementInputError(f"{at}.effect: unknown taint effect {effect!r}")
        key = f.string(taint.get("key"), f"{at}.key")
        if not key:
            raise PlacementInputError(f"{at}.key: a taint needs a key")
        result.append(Taint(key, f.string(taint.get("value"), f"{at}.value"), effect))
    return tuple(result)


def free_capacity(allocatable: Mapping[str, Any], requested: Mapping[str, int], where: str) -> dict[str, int]:
    """Allocatable (rounded down) minus requested (already in units), never below zero."""
    free = {}
    for name, value in allocatable.items():
        resource = str(name)
        have = capacity_units(resource, value, f"{where}.{resource}")
        free[resource] = max(0, have - requested.get(resource, 0))
    return free


def _snapshot_node(raw: Any, where: str) -> Node:
    node = f.mapping(raw, where, _NODE_FIELDS)
    name = f.string(node.get("name"), f"{where}.name")
    if not name:
        raise PlacementInputError(f"{where}.name: a node needs a name")
    requested = {
        str(k): request_units(str(k), v, f"{where}.requested.{k}")
        for k, v in f.mapping(node.get("requested"), f"{where}.requested").items()
    }
    allocatable = f.mapping(node.get("allocatable"), f"{where}.allocatable")
    return Node(
        name=name,
        free=frozen_units(free_capacity(allocatable, requested, f"{where}.allocatable")),
        labels=frozen_map(f.string_map(node.get("labels"), f"{where}.labels")),
        taints=parse_taints(node.get("taints"), f"{where}.taints"),
        unschedulable=f.boolean(node.get("unschedulable"), f"{where}.unschedulable"),
    )


def _unique(nodes: list[Node], where: str) -> tuple[Node, ...]:
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise PlacementInputError(f"{where}: duplicate node name {node.name!r}")
        seen.add(node.name)
    return tuple(nodes)


def clusters_from_snapshot(doc: Mapping[str, Any], where: str) -> list[Cluster]:
    """The snapshot format: ``clusters: [{name, nodes: [{name, labels, taints, ...}]}]``."""
    top = f.mapping(doc, where, ("clusters",))
    result = []
    for i, item in enumerate(f.sequence(top.get("clusters"), f"{where}.clusters")):
        at = f"{where}.clusters[{i}]"
        raw = f.mapping(item, at, _CLUSTER_FIELDS)
        name = f.string(raw.get("name"), f"{at}.name")
        if not name:
            raise PlacementInputError(f"{at}.name: a cluster needs a name")
        nodes = [
            _snapshot_node(n, f"{at}.nodes[{j}]") for j, n in enumerate(f.sequence(raw.get("nodes"), at))
        ]
        result.append(Cluster(name, _unique(nodes, at), source=where))
    return result


def _container_requests(container: Any, where: str) -> dict[str, int]:
    spec = f.mapping(container, where)
    resources = f.mapping(spec.get("resources"), f"{where}.resources")
    requests = dict(f.mapping(resources.get("limits"), f"{where}.resources.limits"))
    requests.update(f.mapping(resources.get("requests"), f"{where}.resources.requests"))
    return {str(k): request_units(str(k), v, f"{where}.resources.{k}") for k, v in requests.items()}


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def pod_requests(pod_spec: Mapping[str, Any], where: str) -> dict[str, int]:
    """What the scheduler charges a pod: max(regular containers + sidecars, each init step) + overhead.

    Restartable init containers (sidecars, ``restartPolicy: Always``) keep running, so they add to
    every later init container and to the regular containers, as in the kube-scheduler.
    """
    total: dict[str, int] = {}
    for i, c in enumerate(f.sequence(pod_spec.get("containers"), f"{where}.containers")):
        _add(total, _container_requests(c, f"{where}.containers[{i}]"))
    sidecars: dict[str, int] = {}
    peak: dict[str, int] = {}
    for i, c in enumerate(f.sequence(pod_spec.get("initContainers"), f"{where}.initContainers")):
        req = _container_requests(c, f"{where}.initContainers[{i}]")
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always":
            _add(sidecars, req)
            step = dict(sidecars)
        else:
            step = dict(sidecars)
            _add(step, req)
        for k, v in step.items():
            peak[k] = max(peak.get(k, 0), v)
    _add(total, sidecars)
    for k, v in peak.items():
        total[k] = max(total.get(k, 0), v)
    overhead = {
        str(k): request_units(str(k), v, f"{where}.overhead.{k}")
        for k, v in f.mapping(pod_spec.get("overhead"), f"{where}.overhead").items()
    }
    _add(total, overhead)
    return total


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What placement uses of a v1 Node; like Karmada's estimator, the Ready condition is not read."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: Mapping[str, int]  # counting units, rounded down


def node_info(obj: Mapping[str, Any], where: str = "") -> NodeInfo:
    """The one reader of a v1 Node (kubectl files, live contexts, the estimator's watch); raises
    :class:`PlacementInputError` naming the field, ``where`` defaulting to ``node <name>``."""
    meta = f.mapping(obj.get("metadata"), f"{where or 'node'}.metadata")
    name = f.string(meta.get("name"), f"{where or 'node'}.metadata.name")
    where = where or f"node {name}"
    spec = f.mapping(obj.get("spec"), f"{where}.spec")
    status = f.mapping(obj.get("status"), f"{where}.status")
    allocatable = f.mapping(status.get("allocatable"), f"{where}.status.allocatable")
    taints = [
        {
            k: v
            for k, v in f.mapping(t, f"{where}.spec.taints[{i}]").items()
            if k in ("key", "value", "effect")
        }
        for i, t in enumerate(f.sequence(spec.get("taints"), f"{where}.spec.taints"))
    ]
    return NodeInfo(
        name=name,
        labels=frozen_map(f.string_map(meta.get("labels"), f"{where}.metadata.labels")),
        taints=parse_taints(taints, f"{where}.spec.taints"),
        unschedulable=bool(spec.get("unschedulable", False)),
        allocatable=frozen_units(
            {
                str(k): capacity_units(str(k), v, f"{where}.status.allocatable.{k}")
                for k, v in allocatable.items()
            }
        ),
    )


def bound_pod(obj: Mapping[str, Any], where: str) -> tuple[str, dict[str, int]] | None:
    """The one reader of a v1 Pod: the node it holds and what it charges there (``pods`` included), or
    None when it holds none (not bound, or finished); raises :class:`PlacementInputError`."""
    spec = f.mapping(obj.get("spec"), f"{where}.spec")
    status = f.mapping(obj.get("status"), f"{where}.status")
    node_name = spec.get("nodeName")
    if not node_name or status.get("phase") in FINISHED_PHASES:
        return None
    charged = pod_requests(spec, f"{where}.spec")
    charged[PODS] = charged.get(PODS, 0) + 1
    return str(node_name), charged


def cluster_from_kubectl(doc: Mapping[str, Any], name: str, where: str) -> Cluster:
    """A v1 List of Nodes and Pods: pods bound to a node and not finished hold their requests there."""
    used: dict[str, dict[str, int]] = {}
    infos = []
    for i, item in enumerate(f.sequence(doc.get("items"), f"{where}.items")):
        at = f"{where}.items[{i}]"
        obj = f.mapping(item, at)
        kind = obj.get("kind")
        if kind == "Node":
            infos.append(node_info(obj, at))
        elif kind == "Pod":
            held = bound_pod(obj, at)
            if held is not None:
                _add(used.setdefault(held[0], {}), held[1])
        else:
            raise PlacementInputError(f"{at}.kind: expected Node or Pod in a kubectl List, got {kind!r}")
    nodes = [
        Node(
            name=info.name,
            free=frozen_units(_free(info.allocatable, used.get(info.name, {}))),
            labels=info.labels,
            taints=info.taints,
            unschedulable=info.unschedulable,
        )
        for info in infos
    ]
    return Cluster(name, _unique(nodes, where), source=where)


def _free(allocatable: Mapping[str, int], used: Mapping[str, int]) -> dict[str, int]:
    return {r: max(0, have - used.get(r, 0)) for r, have in allocatable.items()}


def _ready_problem(status: Mapping[str, Any]) -> str:
    for cond in f.sequence(status.get("conditions"), "status.conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == "Ready" and cond.get("status") != "True":
            why = ": ".join(str(x) for x in (cond.get("reason"), cond.get("message")) if x)
            return f"cluster not Ready ({why or cond.get('status')})"
    return ""


def cluster_from_karmada(doc: Mapping[str, Any], where: str) -> Cluster:
    """A Karmada Cluster: each resource-model grade's minimums, as ``count`` virtual nodes.

    A grade's minimum is the least any of its nodes has free, so these virtual nodes never overstate a
    cluster. Resource models carry no labels, taints or pod limits, so none are applied.
    """
    meta = f.mapping(doc.get("metadata"), f"{where}.metadata")
    name = f.string(meta.get("name"), f"{where}.metadata.name")
    spec = f.mapping(doc.get("spec"), f"{where}.spec")
    status = f.mapping(doc.get("status"), f"{where}.status")
    grades: dict[int, dict[str, int]] = {}
    for i, model in enumerate(f.sequence(spec.get("resourceModels"), f"{where}.spec.resourceModels")):
        at = f"{where}.spec.resourceModels[{i}]"
        m = f.mapping(model, at, ("grade", "ranges"))
        minimums = {}
        for j, rng in enumerate(f.sequence(m.get("ranges"), f"{at}.ranges")):
            r = f.mapping(rng, f"{at}.ranges[{j}]", ("name", "min", "max"))
            resource = f.string(r.get("name"), f"{at}.ranges[{j}].name")
            minimums[resource] = capacity_units(resource, r.get("min", 0), f"{at}.ranges[{j}].min")
        grades[f.integer(m.get("grade"), f"{at}.grade")] = minimums
    summary = f.mapping(status.get("resourceSummary"), f"{where}.status.resourceSummary")
    nodes: list[Node] = []
    for i, item in enumerate(
        f.sequence(
            summary.get("allocatableModelings"), f"{where}.status.resourceSummary.allocatableModelings"
        )
    ):
        at = f"{where}.status.resourceSummary.allocatableModelings[{i}]"
        modeling = f.mapping(item, at, ("grade", "count"))
        grade = f.integer(modeling.get("grade"), f"{at}.grade")
        count = f.integer(modeling.get("count", 0), f"{at}.count")
        if count and grade not in grades:
            raise PlacementInputError(
                f"{at}.grade: grade {grade} has no resource model in spec.resourceModels"
            )
        free = frozen_units(grades.get(grade, {}))
        nodes.extend(Node(f"{name}/grade-{grade}/{k}", free) for k in range(count))
    return Cluster(name, tuple(nodes), not_ready=_ready_problem(status), source=where)


def load_clusters(doc: Any, where: str, default_name: str = "cluster") -> list[Cluster]:
    """Clusters from one document of any accepted shape (snapshot, kubectl List, Karmada Cluster(s))."""
    obj = f.mapping(doc, where)
    kind = obj.get("kind")
    if kind is None and "clusters" in obj:
        return clusters_from_snapshot(obj, where)
    if kind == "Cluster":
        return [cluster_from_karmada(obj, where)]
    if kind in ("List", "ClusterList", "NodeList"):
        items = f.sequence(obj.get("items"), f"{where}.items")
        kinds = {item.get("kind") for item in items if isinstance(item, Mapping)}
        if kinds == {"Cluster"}:
            return [cluster_from_karmada(item, f"{where}.items[{i}]") for i, item in enumerate(items)]
        return [cluster_from_kubectl(obj, default_name, where)]
    raise PlacementInputError(
        f"{where}: not a cluster input (expected a snapshot with 'clusters', a kubectl List of Nodes and "
        f"Pods, or Karmada Cluster objects), got kind {kind!r}"
    )


def load_cluster_file(path: str | Path) -> list[Cluster]:
    """Every cluster in a file; a kubectl List is named after the file (``NAME=PATH`` overrides)."""
    text = str(path)
    name = None
    if "=" in text and not Path(text).exists():
        name, text = text.split("=", 1)
    file = Path(text)
    clusters: list[Cluster] = []
    for i, doc in enumerate(f.load_documents(file)):
        where = str(file) if i == 0 else f"{file}#{i}"
        clusters.extend(load_clusters(doc, where, name or file.stem))
    if not clusters:
        raise PlacementInputError(f"{file}: no clusters")
    return clusters
