"""A typed view of a Karmada ResourceBinding (work.karmada.io/v1alpha2): only what failover needs.

Read once from the raw object; malformed parts are skipped rather than trusted (the objects come from
the Karmada API server, but a bad status must never turn into a bad decision or an exception).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.flink import GROUP, KINDS

API_GROUP = "work.karmada.io"
API_VERSION = "v1alpha2"
PLURAL = "resourcebindings"
RUNNING = "RUNNING"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): v for k, v in _map(value).items() if isinstance(v, str)}


@dataclass(frozen=True)
class EvictionTask:
    from_cluster: str
    reason: str
    purge_mode: str
    created: str  # RFC 3339 creationTimestamp of the task, "" when Karmada did not set one
    preserved: Mapping[str, str] = field(default_factory=dict)
    clusters_before: tuple[str, ...] = ()
    producer: str = ""

    @classmethod
    def from_object(cls, doc: Mapping[str, Any]) -> EvictionTask:
        before = doc.get("clustersBeforeFailover")
        return cls(
            from_cluster=_str(doc.get("fromCluster")),
            reason=_str(doc.get("reason")),
            purge_mode=_str(doc.get("purgeMode")),
            created=_str(doc.get("creationTimestamp")),
            preserved=_str_map(doc.get("preservedLabelState")),
            clusters_before=tuple(c for c in before if isinstance(c, str))
            if isinstance(before, list)
            else (),
            producer=_str(doc.get("producer")),
        )


@dataclass(frozen=True)
class JobObservation:
    """One ``status.aggregatedStatus[]`` entry as the Flink operator reported it on that cluster."""

    cluster: str
    job_id: str
    state: str
    savepoint: str  # a real savepoint location, "" when none was reported

    @classmethod
    def from_object(cls, doc: Mapping[str, Any]) -> JobObservation:
        status = _map(doc.get("status"))
        job = _map(status.get("jobStatus"))
        return cls(
            cluster=_str(doc.get("clusterName")),
            job_id=_str(job.get("jobId")),
            state=_str(job.get("state")),
            savepoint=savepoint_location(job),
        )


def savepoint_location(job_status: Mapping[str, Any]) -> str:
    """``savepointInfo.lastSavepoint.location``, else ``upgradeSavepointPath`` when it is a real path."""
    from webhook.paths import StoragePath, StoragePathError

    last = _map(_map(job_status.get("savepointInfo")).get("lastSavepoint"))
    for candidate in (_str(last.get("location")), _str(job_status.get("upgradeSavepointPath"))):
        candidate = candidate.strip()
        if not candidate:
            continue
        try:
            StoragePath.parse(candidate)
        except StoragePathError:
            continue
        return candidate
    return ""


@dataclass(frozen=True)
class Binding:
    namespace: str
    name: str
    uid: str
    resource_version: str
    resource_api_version: str
    resource_kind: str
    resource_name: str
    clusters: tuple[str, ...]
    tasks: tuple[EvictionTask, ...]
    statuses: tuple[JobObservation, ...]
    last_scheduled: str
    annotations: Mapping[str, str]

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Binding:
        meta = _map(obj.get("metadata"))
        spec = _map(obj.get("spec"))
        status = _map(obj.get("status"))
        resource = _map(spec.get("resource"))
        clusters = spec.get("clusters")
        tasks = spec.get("gracefulEvictionTasks")
        aggregated = status.get("aggregatedStatus")
        return cls(
            namespace=_str(meta.get("namespace")),
            name=_str(meta.get("name")),
            uid=_str(meta.get("uid")),
            resource_version=_str(meta.get("resourceVersion")),
            resource_api_version=_str(resource.get("apiVersion")),
            resource_kind=_str(resource.get("kind")),
            resource_name=_str(resource.get("name")),
            clusters=tuple(
                _str(c.get("name")) for c in clusters if isinstance(c, Mapping) and _str(c.get("name"))
            )
            if isinstance(clusters, list)
            else (),
            tasks=tuple(EvictionTask.from_object(t) for t in tasks if isinstance(t, Mapping))
            if isinstance(tasks, list)
            else (),
            statuses=tuple(
                JobObservation.from_object(s)
                for s in aggregated
                if isinstance(s, Mapping) and _str(s.get("clusterName"))
            )
            if isinstance(aggregated, list)
            else (),
            last_scheduled=_str(status.get("lastScheduledTime")),
            annotations=_str_map(meta.get("annotations")),
        )

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def is_flink(self) -> bool:
        group = self.resource_api_version.partition("/")[0]
        return group == GROUP and self.resource_kind in KINDS


def is_flink_binding(obj: Mapping[str, Any]) -> bool:
    resource = _map(_map(obj.get("spec")).get("resource"))
    return _str(resource.get("apiVersion")).partition("/")[0] == GROUP and resource.get("kind") in KINDS
