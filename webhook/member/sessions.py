"""Where a FlinkSessionJob's session cluster comes from: the member cluster's API server, or a file.

A session job usually leaves its checkpoint directory to the session cluster's FlinkDeployment
(``spec.deploymentName``, same namespace); the restore decision is handed one of these lookups and
stays pure. Errors are values (:class:`Parent` ``error``), never exceptions.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from webhook.common import documents
from webhook.common.flink import GROUP, FlinkResource
from webhook.common.flinkresources import BLUE_GREENS as BLUE_GREENS
from webhook.common.flinkresources import DEPLOYMENTS
from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.common.kubeobjects import KubeObjects, Resource
from webhook.restore.decide import Parent


class KubeSessionClusters:
    """GETs the FlinkDeployment from the member cluster (one request per session-job failover, bounded
    by what is left of the admission deadline), through ``common.kubeobjects``. The client is made on
    first use, in the worker."""

    def __init__(self, config: ClientConfig, resource: Resource = DEPLOYMENTS) -> None:
        self._config = config
        self._resource = resource  # BLUE_GREENS: a blue/green child's parent, read the same way
        self._lock = threading.Lock()
        self._api: KubeObjects | None = None

    def _client(self) -> KubeObjects | ApiFailure:
        with self._lock:
            if self._api is None:
                made = KubeObjects.connect(self._config, "member cluster")
                if isinstance(made, ApiFailure):
                    return made  # not kept: the next admission tries again (a kubeconfig being fixed)
                self._api = made
            return self._api

    def __call__(self, namespace: str, name: str, timeout: float) -> Parent:
        api = self._client()
        if isinstance(api, ApiFailure):
            return Parent(None, api.message)
        obj = api.get(self._resource, namespace, name, timeout=max(timeout, 0.05))
        if obj is None:
            return Parent(None)
        if isinstance(obj, ApiFailure):
            return Parent(None, obj.message)
        return Parent(FlinkResource.from_object(obj))


class StaticSessionClusters:
    """FlinkDeployments from files standing in for the cluster (``review --objects FILE``, and the
    reviewed FILE itself: a session cluster beside its jobs)."""

    def __init__(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self._by_name: dict[tuple[str, str], FlinkResource] = {}
        for obj in objects:
            resource = FlinkResource.from_object(obj)
            self._by_name[(resource.namespace or "default", resource.name)] = resource

    def __call__(self, namespace: str, name: str, _timeout: float) -> Parent:
        return Parent(self.get(namespace, name))

    def get(self, namespace: str, name: str) -> FlinkResource | None:
        return self._by_name.get((namespace or "default", name))


def is_flink_deployment(obj: Mapping[str, Any]) -> bool:
    """A FlinkDeployment (what a FlinkSessionJob's ``spec.deploymentName`` names)."""
    group = str(obj.get("apiVersion", "")).partition("/")[0]
    return group == GROUP and obj.get("kind") == "FlinkDeployment"


def is_session_cluster(obj: Mapping[str, Any]) -> bool:
    """A FlinkDeployment without ``spec.job``: a session cluster, no job of its own (the webhook skips it)."""
    spec = obj.get("spec")
    return is_flink_deployment(obj) and not (isinstance(spec, Mapping) and spec.get("job"))


def flink_deployments(docs: Iterable[Any]) -> list[Mapping[str, Any]]:
    """The FlinkDeployments among ``docs`` (a ``List``'s items included); anything else is passed over."""
    return [obj for obj in _flatten(docs) if is_flink_deployment(obj)]


def load_session_clusters(path: str, limit: int | None = None) -> list[Mapping[str, Any]]:
    """The FlinkDeployments in FILE (a YAML stream or a List, of any kinds: a session cluster and its
    FlinkSessionJobs in one file, ``kubectl get flinkdeployment,flinksessionjob -o yaml``); the other
    objects are passed over. A file without one is a ValueError naming it (exit 2)."""
    objects = list(_flatten(documents.load(path, limit=limit)))
    found = [obj for obj in objects if is_flink_deployment(obj)]
    if not found:
        shown = documents.display_name(path)
        if not objects:
            raise ValueError(f"{shown}: no objects, and no FlinkDeployment for the session clusters")
        other = objects[0]
        raise ValueError(
            f"{shown}: no FlinkDeployment in it ({other.get('kind')!r} ({other.get('apiVersion')!r}) is not "
            f"a FlinkDeployment{f', nor are the {len(objects) - 1} others' if len(objects) > 1 else ''}): "
            "--objects holds the session clusters' FlinkDeployments a FlinkSessionJob names"
        )
    return found


def review_session_clusters(
    reviewed: Iterable[Any], objects: str | None = None, limit: int | None = None
) -> StaticSessionClusters:
    """What ``review`` reads session clusters from: the FlinkDeployments of the reviewed FILE itself (a
    session cluster beside its jobs) and of ``--objects FILE``; on a clash (one namespace and name in
    both) the one in ``--objects`` is used."""
    own = flink_deployments(reviewed)
    given = load_session_clusters(objects, limit) if objects else []
    return StaticSessionClusters([*own, *given])


def _flatten(docs: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    for doc in docs:
        if isinstance(doc, Mapping) and isinstance(doc.get("items"), list):
            yield from _flatten(doc["items"])
        elif isinstance(doc, Mapping):
            yield doc
