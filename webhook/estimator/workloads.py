"""Unschedulable replicas of a Deployment, answered as Karmada's estimator answers
``GetUnschedulableReplicas`` (karmada-descheduler's question), from watched objects (no I/O here).

Karmada's estimator (v1.18.2, ``pkg/estimator/server/replica``) supports exactly one kind, apps/v1
Deployment: it finds the Deployment's current ReplicaSet (among the ReplicaSets in its namespace that
its selector matches and that it controls, the oldest, by creation time then name, whose pod template
equals the Deployment's apart from the ``pod-template-hash`` label), takes the pods in the namespace
that the selector matches and that ReplicaSet controls, and counts those whose ``PodScheduled``
condition is ``False`` with reason ``Unschedulable`` since longer than the request's threshold. Any
other kind is an error (``kind(...) of workload(...) is not supported``), and so is a Deployment it
does not have (``deployments.apps "name" not found``).

Memory stays small: Deployments and ReplicaSets are kept as their selector or labels, owner and a
digest of their pod template; of the pods only the unschedulable ones are kept (namespace, labels,
controller, since when).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from webhook.common.untyped import strings
from webhook.placement.errors import PlacementInputError
from webhook.placement.quantity import parse_decimal

HASH_LABEL = "pod-template-hash"
_QUANTITY_MAPS = ("limits", "requests", "overhead", "capacity", "allocatable")
_QUANTITY_FIELDS = ("sizeLimit",)


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str]


@dataclass(frozen=True, slots=True)
class Selector:
    """A metav1.LabelSelector; ``None`` requirements: the nil selector, which matches nothing."""

    labels: tuple[tuple[str, str], ...]
    requirements: tuple[SelectorRequirement, ...] | None

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.requirements is None:
            return False
        if any(labels.get(k) != v for k, v in self.labels):
            return False
        for req in self.requirements:
            present = req.key in labels
            if req.operator == "In" and not (present and labels[req.key] in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
        return True


@dataclass(frozen=True, slots=True)
class DeploymentInfo:
    namespace: str
    name: str
    uid: str
    selector: Selector | None  # None: a selector Kubernetes would not accept (an error, as in Karmada)
    template: str  # digest of the pod template without the hash label


@dataclass(frozen=True, slots=True)
class ReplicaSetInfo:
    namespace: str
    name: str
    uid: str
    created: str  # RFC 3339, compared as time then name
    controller: str  # uid of the controlling owner
    labels: Mapping[str, str]
    template: str


@dataclass(frozen=True, slots=True)
class PendingPod:
    """A pod the scheduler could not place: PodScheduled False, reason Unschedulable, since ``since``."""

    namespace: str
    labels: Mapping[str, str]
    controller: str
    since: float  # seconds since the epoch


@dataclass(frozen=True)
class Unanswerable:
    """Karmada's answer is an error: its text."""

    message: str


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _labels(meta: Mapping[str, Any]) -> dict[str, str]:
    raw = meta.get("labels")
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def controller_of(meta: Mapping[str, Any]) -> str:
    """The uid of the owner reference marked ``controller: true`` (metav1.GetControllerOf), or ""."""
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return str(ref.get("uid", ""))
    return ""


def selector(raw: Any) -> Selector | None:
    """A LabelSelector as metav1.LabelSelectorAsSelector reads it; None when it is not a valid one."""
    if raw is None:
        return Selector((), None)
    if not isinstance(raw, Mapping):
        return None
    match = raw.get("matchLabels") or {}
    exprs = raw.get("matchExpressions") or []
    if not isinstance(match, Mapping) or not isinstance(exprs, list):
        return None
    requirements = []
    for expr in exprs:
        if not isinstance(expr, Mapping):
            return None
        operator, values = expr.get("operator"), expr.get("values") or []
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist") or not isinstance(values, list):
            return None
        if (operator in ("In", "NotIn")) != bool(values):
            return None
        key = str(expr.get("key", ""))
        requirements.append(SelectorRequirement(key, operator, frozenset(map(str, values))))
    return Selector(tuple(sorted((str(k), str(v)) for k, v in match.items())), tuple(requirements))


def _canonical(value: Any, key: str = "") -> Any:
    """apimachinery's Semantic.DeepEqual as a normal form: nil equals empty, quantities by value."""
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            scalar = isinstance(v, str | int | float) and not isinstance(v, bool)
            if scalar and (key in _QUANTITY_MAPS or k in _QUANTITY_FIELDS):
                v = _quantity(v)
            else:
                v = _canonical(v, str(k))
            if v is not None:
                out[str(k)] = v
        return out or None
    if isinstance(value, list):
        items = [_canonical(v, key) for v in value]
        return items or None
    return value


def _quantity(value: str | int | float) -> str:
    try:
        return f"q:{parse_decimal(value, 'quantity').normalize()}"
    except PlacementInputError:
        return str(value)


def template_digest(template: Any) -> str:
    """What FindNewReplicaSet compares: the pod template without ``pod-template-hash``."""
    tpl = dict(template) if isinstance(template, Mapping) else {}
    meta = dict(tpl.get("metadata") or {}) if isinstance(tpl.get("metadata"), Mapping) else {}
    labels = dict(meta.get("labels") or {}) if isinstance(meta.get("labels"), Mapping) else {}
    labels.pop(HASH_LABEL, None)
    meta["labels"] = labels
    tpl["metadata"] = meta
    text = json.dumps(_canonical(tpl), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _time(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _identity(meta: Mapping[str, Any]) -> dict[str, str]:
    """Namespace, name and uid: what a Deployment and a ReplicaSet are found and owned by."""
    return strings(meta, namespace="namespace", name="name", uid="uid")


def deployment_info(obj: Mapping[str, Any]) -> DeploymentInfo:
    meta = _meta(obj)
    spec = _spec(obj)
    return DeploymentInfo(
        **_identity(meta),
        selector=selector(spec.get("selector")),
        template=template_digest(spec.get("template")),
    )


def replicaset_info(obj: Mapping[str, Any]) -> ReplicaSetInfo:
    meta = _meta(obj)
    spec = _spec(obj)
    return ReplicaSetInfo(
        **_identity(meta),
        created=str(meta.get("creationTimestamp") or ""),
        controller=controller_of(meta),
        labels=_labels(meta),
        template=template_digest(spec.get("template")),
    )


def pending_pod(obj: Mapping[str, Any]) -> PendingPod | None:
    """The pod if its PodScheduled condition is False with reason Unschedulable, else None."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled":
            if cond.get("status") != "False" or cond.get("reason") != "Unschedulable":
                return None
            since = _time(cond.get("lastTransitionTime"))
            meta = _meta(obj)
            return PendingPod(
                namespace=str(meta.get("namespace", "")),
                labels=_labels(meta),
                controller=controller_of(meta),
                since=since if since is not None else float("-inf"),  # Go's zero time: long ago
            )
    return None


def unsupported(api_version: str, kind: str, namespace: str, name: str) -> Unanswerable | None:
    """Karmada's error for a kind it does not count (every kind but apps/v1 Deployment), else None."""
    if kind == "Deployment" and api_version == "apps/v1":
        return None
    obj = f"{namespace}/{name}" if namespace else name
    return Unanswerable(f"kind({kind}) of workload({obj}) is not supported")


def _key(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    return str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")


def _created_order(rs: ReplicaSetInfo) -> tuple[float, str]:
    created = _time(rs.created)
    return (created if created is not None else float("-inf"), rs.name)


class Workloads:
    """Deployments, ReplicaSets and unschedulable pods; thread-safe (one writer per resource)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deployments: dict[tuple[str, str], DeploymentInfo] = {}
        self._deployment_keys: dict[str, tuple[str, str]] = {}
        self._replicasets: dict[str, ReplicaSetInfo] = {}
        self._pending: dict[str, PendingPod] = {}
        self._synced: set[str] = set()

    # --- writers -------------------------------------------------------------------------------------
    def replace_deployments(self, objs: Iterable[Mapping[str, Any]]) -> None:
        fresh = {_key(o): deployment_info(o) for o in objs}
        with self._lock:
            self._deployments = {(d.namespace, d.name): d for d in fresh.values()}
            self._deployment_keys = {k: (d.namespace, d.name) for k, d in fresh.items()}
            self._synced.add("deployments")

    def deployment_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        with self._lock:
            old = self._deployment_keys.pop(key, None)
            if old is not None:
                self._deployments.pop(old, None)
            if kind != "DELETED":
                info = deployment_info(obj)
                self._deployments[(info.namespace, info.name)] = info
                self._deployment_keys[key] = (info.namespace, info.name)

    def replace_replicasets(self, objs: Iterable[Mapping[str, Any]]) -> None:
        fresh = {_key(o): replicaset_info(o) for o in objs}
        with self._lock:
            self._replicasets = fresh
            self._synced.add("replicasets")

    def replicaset_event(self, kind: str, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        with self._lock:
            if kind == "DELETED":
                self._replicasets.pop(key, None)
            else:
                self._replicasets[key] = replicaset_info(obj)

    def replace_pods(self, pending: Iterable[tuple[str, PendingPod]]) -> None:
        fresh = dict(pending)
        with self._lock:
            self._pending = fresh

    def pod_event(self, kind: str, key: str, pod: PendingPod | None) -> None:
        with self._lock:
            if kind == "DELETED" or pod is None:
                self._pending.pop(key, None)
            else:
                self._pending[key] = pod

    # --- readers -------------------------------------------------------------------------------------
    @property
    def synced(self) -> bool:
        with self._lock:
            return self._synced >= {"deployments", "replicasets"}

    def counts(self) -> tuple[int, int, int]:
        with self._lock:
            return len(self._deployments), len(self._replicasets), len(self._pending)

    def unschedulable(
        self, api_version: str, kind: str, namespace: str, name: str, threshold_ns: int, now: float
    ) -> int | Unanswerable:
        """How many pods of the workload's current ReplicaSet have been unschedulable longer than
        ``threshold_ns`` at ``now`` (seconds since the epoch); Karmada's error for anything else."""
        obj = f"{namespace}/{name}" if namespace else name
        refused = unsupported(api_version, kind, namespace, name)
        if refused is not None:
            return refused
        threshold = max(0, threshold_ns) / 1e9
        with self._lock:
            deployment = self._deployments.get((namespace, name))
            if deployment is None:
                return Unanswerable(f'deployments.apps "{name}" not found')
            if deployment.selector is None:
                return Unanswerable(f"invalid label selector of deployment {obj}")
            current = self._current_replicaset(deployment, deployment.selector)
            if current is None:
                return 0
            return sum(
                1
                for pod in self._pending.values()
                if pod.namespace == namespace
                and pod.controller == current.uid
                and deployment.selector.matches(pod.labels)
                and pod.since + threshold < now
            )

    def _current_replicaset(self, deployment: DeploymentInfo, sel: Selector) -> ReplicaSetInfo | None:
        owned = [
            rs
            for rs in self._replicasets.values()
            if rs.namespace == deployment.namespace
            and rs.controller == deployment.uid
            and sel.matches(rs.labels)
        ]
        for rs in sorted(owned, key=_created_order):
            if rs.template == deployment.template:
                return rs
        return None
