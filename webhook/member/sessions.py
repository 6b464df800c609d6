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
from webhook.common.kubeclient import ApiFailure, ClientConfig, api_errors, failure, new_api_client
from webhook.member.restore import SessionCluster

VERSION = "v1beta1"
PLURAL = "flinkdeployments"


class KubeSessionClusters:
    """GETs the FlinkDeployment from the member cluster (one request per session-job failover, bounded
    by what is left of the admission deadline). The client is made on first use, in the worker."""

    def __init__(self, config: ClientConfig) -> None:
        self._config = config
        self._lock = threading.Lock()
        self._api: Any = None

    def _client(self) -> Any:
        with self._lock:
            if self._api is None:
                made = new_api_client(self._config, "member cluster")
                if isinstance(made, ApiFailure):
                    return made  # not kept: the next admission tries again (a kubeconfig being fixed)
                from kubernetes import client

                self._api = client.CustomObjectsApi(made)
            return self._api

    def __call__(self, namespace: str, name: str, timeout: float) -> SessionCluster:
        api = self._client()
        if isinstance(api, ApiFailure):
            return SessionCluster(None, api.message)
        try:
            obj = api.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _request_timeout=max(timeout, 0.05)
            )
        except api_errors() as exc:
            fail = failure(exc)
            if fail.status == 404:
                return SessionCluster(None)
            return SessionCluster(None, fail.message)
        if not isinstance(obj, Mapping):
            return SessionCluster(None, "the API server's answer is not a FlinkDeployment")
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
