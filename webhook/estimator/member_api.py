"""List and watch a member cluster's nodes and pods, and its Deployments and ReplicaSets (the only module
here that talks to an API server).

Raw JSON throughout (``_preload_content=False``): the client's model objects would cost seconds and
hundreds of megabytes on a large pod list. Lists are paginated and handed on page by page, so only one
page of raw pods is in memory at a time. Pods are filtered server-side to the ones that can hold a
node (not Succeeded, not Failed), as Karmada's estimator does. Errors come back as values.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import Counter

from webhook.common.kubeclient import ApiFailure, ClientConfig, Page, WatchEnded, WatchEvent
from webhook.common.kubeobjects import KubeObjects, Resource
from webhook.common.listwatch import ListWatch
from webhook.placement.cluster import POD_FIELD_SELECTOR

log = logging.getLogger(__name__)

NODES = "nodes"
PODS = "pods"
DEPLOYMENTS = "deployments"  # apps/v1, with REPLICASETS only for GetUnschedulableReplicas
REPLICASETS = "replicasets"
RESOURCES = {
    NODES: Resource("", "v1", NODES, "Node"),
    PODS: Resource("", "v1", PODS, "Pod"),
    DEPLOYMENTS: Resource("apps", "v1", DEPLOYMENTS, "Deployment"),
    REPLICASETS: Resource("apps", "v1", REPLICASETS, "ReplicaSet"),
}
# Pods that can hold a node only (not Succeeded, not Failed), as Karmada's estimator lists them.
_OPTIONS: dict[str, dict[str, str]] = {PODS: {"field_selector": POD_FIELD_SELECTOR}}

WATCH_RESTARTS = Counter(
    "flink_failover_estimator_watch_restarts_total",
    "Node and pod watch restarts, by resource and cause",
    ["resource", "cause"],
)


class EstimatorApi:
    """Nodes, pods, Deployments and ReplicaSets of one member cluster, cluster-wide: a typed facade over
    ``common.kubeobjects.KubeObjects``. Build with :meth:`connect`."""

    def __init__(self, objects: KubeObjects) -> None:
        self.objects = objects
        self.config = objects.config

    @classmethod
    def connect(cls, config: ClientConfig) -> EstimatorApi | ApiFailure:
        objects = KubeObjects.connect(config, "member cluster")
        return objects if isinstance(objects, ApiFailure) else cls(objects)

    def pages(self, resource: str) -> Iterator[Page | ApiFailure]:
        """One full list, page by page; ends after the last page or the first failure."""
        yield from self.objects.pages(RESOURCES[resource], **_OPTIONS.get(resource, {}))

    def watch(self, resource: str, resource_version: str) -> Iterator[WatchEvent | WatchEnded | ApiFailure]:
        yield from self.objects.watch(RESOURCES[resource], resource_version, **_OPTIONS.get(resource, {}))


def feed(
    api: EstimatorApi,
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
