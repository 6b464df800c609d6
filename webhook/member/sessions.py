"""Where a FlinkSessionJob's session cluster comes from: the member cluster's API server, or a file.

A session job usually leaves its checkpoint directory to the session cluster's FlinkDeployment
(``spec.deploymentName``, same namespace); the restore decision is handed one of these lookups and
stays pure. Errors are values (:class:`SessionCluster` ``error``), never exceptions.
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
from webhook.restore.decide import SessionCluster


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

    def __call__(self, namespace: str, name: str, timeout: float) -> SessionCluster:
        api = self._client()
        if isinstance(api, ApiFailure):
            return SessionCluster(None, api.message)
        obj = api.get(self._resource, namespace, name, timeout=max(timeout, 0.05))
        if obj is None:
            return SessionCluster(None)
        if isinstance(obj, ApiFailure):
            return SessionCluster(None, obj.message)
        return SessionCluster(FlinkResource.from_object(obj))


class StaticSessionClusters:
    """FlinkDeployments from a file standing in for the cluster (``review --objects FILE``)."""

    def __init__(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self._by_name: dict[tuple[str, str], FlinkResource] = {}
        for obj in objects:
            resource = FlinkResource.from_object(obj)
            self._by_name[(resource.namespace or "default", resource.name)] = resource

    def __call__(self, namespace: str, name: str, _timeout: float) -> SessionCluster:
        return SessionCluster(self._by_name.get((namespace or "default", name)))


def load_session_clusters(path: str) -> StaticSessionClusters:
    """The FlinkDeployments in FILE (a YAML stream or a List); anything else is a ValueError (exit 2)."""
    found = []
    for obj in _flatten(documents.load(path)):
        group = str(obj.get("apiVersion", "")).partition("/")[0]
        if group != GROUP or obj.get("kind") != "FlinkDeployment":
            raise ValueError(
                f"{path}: {obj.get('kind')!r} ({obj.get('apiVersion')!r}) is not a FlinkDeployment"
            )
        found.append(obj)
    return StaticSessionClusters(found)


def _flatten(docs: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    for doc in docs:
        if isinstance(doc, Mapping) and isinstance(doc.get("items"), list):
            yield from _flatten(doc["items"])
        elif isinstance(doc, Mapping):
            yield doc
