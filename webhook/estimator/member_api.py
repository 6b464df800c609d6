"""List and watch a member cluster's nodes and pods, and its Deployments and ReplicaSets (the only module
here that talks to an API server).

Raw JSON throughout (``_preload_content=False``): the client's model objects would cost seconds and
hundreds of megabytes on a large pod list. Lists are paginated and handed on page by page, so only one
page of raw pods is in memory at a time. Pods are filtered server-side to the ones that can hold a
node (not Succeeded, not Failed), as Karmada's estimator does. Errors come back as values.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import Counter

from webhook.common.kubeclient import (
    ApiFailure,
    ClientConfig,
    Page,
    WatchEnded,
    WatchEvent,
    list_pages,
    new_api_client,
    watch_events,
)
from webhook.common.listwatch import ListWatch
from webhook.placement.cluster import POD_FIELD_SELECTOR

log = logging.getLogger(__name__)

NODES = "nodes"
PODS = "pods"
DEPLOYMENTS = "deployments"  # apps/v1, with REPLICASETS only for GetUnschedulableReplicas
REPLICASETS = "replicasets"
_KINDS = {NODES: "NodeList", PODS: "PodList", DEPLOYMENTS: "DeploymentList", REPLICASETS: "ReplicaSetList"}

WATCH_RESTARTS = Counter(
    "flink_failover_estimator_watch_restarts_total",
    "Node and pod watch restarts, by resource and cause",
    ["resource", "cause"],
)


class MemberApi:
    """Nodes and pods of one member cluster. Build with :meth:`connect`."""

    def __init__(self, api_client: Any, config: ClientConfig) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)
        self._apps = client.AppsV1Api(api_client)
        self.config = config

    @classmethod
    def connect(cls, config: ClientConfig) -> MemberApi | ApiFailure:
        api_client = new_api_client(config, "member cluster")
        return api_client if isinstance(api_client, ApiFailure) else cls(api_client, config)

    def _call(self, resource: str, **kwargs: Any) -> Any:
        if resource == NODES:
            return self._core.list_node(_preload_content=False, **kwargs)
        if resource == DEPLOYMENTS:
            return self._apps.list_deployment_for_all_namespaces(_preload_content=False, **kwargs)
        if resource == REPLICASETS:
            return self._apps.list_replica_set_for_all_namespaces(_preload_content=False, **kwargs)
        return self._core.list_pod_for_all_namespaces(
            field_selector=POD_FIELD_SELECTOR, _preload_content=False, **kwargs
        )

    def pages(self, resource: str) -> Iterator[Page | ApiFailure]:
        """One full list, page by page; ends after the last page or the first failure."""

        def call(**kwargs: Any) -> Any:
            return json.loads(self._call(resource, **kwargs).data)

        yield from list_pages(call, self.config, _KINDS[resource])

    def watch(self, resource: str, resource_version: str) -> Iterator[WatchEvent | WatchEnded | ApiFailure]:
        def call(**kwargs: Any) -> Any:
            return self._call(resource, **kwargs)

        yield from watch_events(call, self.config, resource_version)


def feed(
    api: MemberApi,
    resource: str,
    replace: Callable[[Iterable[Mapping[str, Any]]], None],
    apply: Callable[[str, Mapping[str, Any]], None],
    stop: threading.Event,
) -> ListWatch:
    """Keeps one resource of the state current (``common.listwatch``): list, watch, relist on 410."""
    return ListWatch(
        resource,
        pages=lambda: api.pages(resource),
        watch=lambda version: api.watch(resource, version),
        replace=replace,
        apply=apply,
        stop=stop,
        restarted=lambda cause: WATCH_RESTARTS.labels(resource, cause).inc(),
    )
