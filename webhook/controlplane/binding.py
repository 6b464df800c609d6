"""A typed view of a Karmada ResourceBinding (work.karmada.io/v1alpha2): only what failover needs.

Read once from the raw object; malformed parts are skipped rather than trusted (the objects come from
the Karmada API server, but a bad status must never turn into a bad decision or an exception).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.common.flink import GROUP, KINDS, started_from
from webhook.common.untyped import as_map, as_str, str_map, strings

API_GROUP = "work.karmada.io"
API_VERSION = "v1alpha2"
PLURAL = "resourcebindings"
RUNNING = "RUNNING"
# Purge modes Karmada v1.19 removed from its API: no longer read as Directly / Gracefully, and an
# object still carrying one fails validation on its next update (read in v1.19.0-rc.0).
REMOVED_PURGE_MODES = {"Immediately": "Directly", "Graciously": "Gracefully"}


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
            **strings(
                doc,
                from_cluster="fromCluster",
                reason="reason",
                purge_mode="purgeMode",
                created="creationTimestamp",
                producer="producer",
            ),
            preserved=str_map(doc.get("preservedLabelState")),
            clusters_before=tuple(c for c in before if isinstance(c, str))
            if isinstance(before, list)
            else (),
        )


@dataclass(frozen=True)
class JobObservation:
    """One ``status.aggregatedStatus[]`` entry as the Flink operator reported it on that cluster."""

    cluster: str
    job_id: str
    state: str
    savepoint: str  # a real savepoint location, "" when none was reported
    started_from: str = ""  # the snapshot the job was started from, when the status tells (a path)
    upgrade_savepoint: str = ""  # jobStatus.upgradeSavepointPath, when a path

    @classmethod
    def from_object(cls, doc: Mapping[str, Any], kind: str = "") -> JobObservation:
        status = as_map(doc.get("status"))
        job = as_map(status.get("jobStatus"))
        return cls(
            cluster=as_str(doc.get("clusterName")),
            job_id=as_str(job.get("jobId")),
            state=as_str(job.get("state")),
            savepoint=savepoint_location(job),
            started_from=_path_or_empty(started_from(kind, status)),
            upgrade_savepoint=_path_or_empty(as_str(job.get("upgradeSavepointPath"))),
        )


def _path_or_empty(value: str) -> str:
    from webhook.common.paths import StoragePath, StoragePathError

    value = value.strip()
    try:
        StoragePath.parse(value)
    except StoragePathError:
        return ""
    return value


def savepoint_location(job_status: Mapping[str, Any]) -> str:
    """``savepointInfo.lastSavepoint.location``, else ``upgradeSavepointPath`` when it is a real path."""
    from webhook.common.paths import StoragePath, StoragePathError

    last = as_map(as_map(job_status.get("savepointInfo")).get("lastSavepoint"))
    for candidate in (as_str(last.get("location")), as_str(job_status.get("upgradeSavepointPath"))):
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
    generation: int = 0
    scheduler_observed_generation: int = 0

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Binding:
        meta = as_map(obj.get("metadata"))
        spec = as_map(obj.get("spec"))
        status = as_map(obj.get("status"))
        resource = as_map(spec.get("resource"))
        clusters = spec.get("clusters")
        tasks = spec.get("gracefulEvictionTasks")
        aggregated = status.get("aggregatedStatus")
        return cls(
            **strings(
                meta, namespace="namespace", name="name", uid="uid", resource_version="resourceVersion"
            ),
            **strings(
                resource, resource_api_version="apiVersion", resource_kind="kind", resource_name="name"
            ),
            clusters=tuple(
                as_str(c.get("name")) for c in clusters if isinstance(c, Mapping) and as_str(c.get("name"))
            )
            if isinstance(clusters, list)
            else (),
            tasks=tuple(EvictionTask.from_object(t) for t in tasks if isinstance(t, Mapping))
            if isinstance(tasks, list)
            else (),
            statuses=tuple(
                JobObservation.from_object(s, as_str(resource.get("kind")))
                for s in aggregated
                if isinstance(s, Mapping) and as_str(s.get("clusterName"))
            )
            if isinstance(aggregated, list)
            else (),
            last_scheduled=as_str(status.get("lastScheduledTime")),
            annotations=str_map(meta.get("annotations")),
            generation=_int(meta.get("generation")),
            scheduler_observed_generation=_int(status.get("schedulerObservedGeneration")),
        )

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def scheduled_time(self) -> str:
        """``lastScheduledTime`` when it belongs to the current spec, else "".

        The scheduler writes ``spec.clusters`` first and stamps the status in a later write (recorded:
        tens of ms later), so the event that shows a move still carries the previous decision's time;
        ``lastScheduledTime`` is also restamped by schedules that move nothing.
        """
        current = self.generation > 0 and self.scheduler_observed_generation >= self.generation
        return self.last_scheduled if current else ""


def removed_purge_modes(binding: Binding) -> tuple[tuple[str, str, str], ...]:
    """(cluster, purge mode, what to say) for each eviction task that still carries a purge mode Karmada
    v1.19 removed. The control plane decides nothing by the purge mode; an operator must still hear of
    it, because the policy that wrote it will not validate on its next update under v1.19."""
    return tuple(
        (
            task.from_cluster,
            task.purge_mode,
            f"eviction task from {task.from_cluster or '?'} carries purge mode {task.purge_mode!r}, "
            f"removed in Karmada v1.19 (an object carrying it fails validation there on its next "
            f"update): write {REMOVED_PURGE_MODES[task.purge_mode]!r} in the PropagationPolicy's "
            "failover instead",
        )
        for task in binding.tasks
        if task.purge_mode in REMOVED_PURGE_MODES
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def is_flink_binding(obj: Mapping[str, Any]) -> bool:
    resource = as_map(as_map(obj.get("spec")).get("resource"))
    return as_str(resource.get("apiVersion")).partition("/")[0] == GROUP and resource.get("kind") in KINDS
