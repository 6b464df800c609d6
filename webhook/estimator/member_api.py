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
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter

from webhook.common.kubeclient import (
    ApiFailure,
    Backoff,
    ClientConfig,
    Page,
    WatchEnded,
    WatchEvent,
    list_pages,
    new_api_client,
    watch_events,
)

log = logging.getLogger(__name__)

NODES = "nodes"
PODS = "pods"
DEPLOYMENTS = "deployments"  # apps/v1, with REPLICASETS only for GetUnschedulableReplicas
REPLICASETS = "replicasets"
_KINDS = {NODES: "NodeList", PODS: "PodList", DEPLOYMENTS: "DeploymentList", REPLICASETS: "ReplicaSetList"}
POD_FIELDS = "status.phase!=Succeeded,status.phase!=Failed"

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
            field_selector=POD_FIELDS, _preload_content=False, **kwargs
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


class _ListFailed(Exception):
    def __init__(self, failure: ApiFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass
class Feed:
    """Keeps one resource of the state current: list, then watch from the list's version; relist on 410."""

    api: MemberApi
    resource: str
    replace: Callable[[Iterable[Mapping[str, Any]]], None]
    apply: Callable[[str, Mapping[str, Any]], None]
    stop: threading.Event
    backoff: Backoff = field(default_factory=Backoff)
    resource_version: str = ""

    def run(self) -> None:
        while not self.stop.is_set():
            if not self.resource_version and not self._relist():
                self._pause("list-failed")
                continue
            self._watch_once()

    def _pause(self, cause: str) -> None:
        WATCH_RESTARTS.labels(self.resource, cause).inc()
        self.stop.wait(self.backoff.next())

    def _relist(self) -> bool:
        version = ""

        def items() -> Iterator[Mapping[str, Any]]:
            nonlocal version
            for page in self.api.pages(self.resource):
                if isinstance(page, ApiFailure):
                    raise _ListFailed(page)
                version = page.resource_version or version
                yield from page.items

        try:
            self.replace(items())  # the state swaps only after the last page arrived
        except _ListFailed as exc:
            log.warning("listing %s failed: %s", self.resource, exc.failure.message)
            return False
        self.resource_version = version
        self.backoff.reset()
        log.info("%s listed", self.resource, extra={"fields": {"rv": version}})
        return True

    def _watch_once(self) -> None:
        for item in self.api.watch(self.resource, self.resource_version):
            if self.stop.is_set():
                return
            if isinstance(item, WatchEnded):
                return
            if isinstance(item, ApiFailure):
                if item.gone:
                    self._gone()
                else:
                    log.warning("%s watch broke: %s", self.resource, item.message)
                    self._pause("disconnected")
                return
            if item.type == "ERROR":
                if item.object.get("code") == 410:
                    self._gone()
                else:
                    log.warning("%s watch error event: %s", self.resource, item.object.get("message"))
                    self._pause("error-event")
                return
            if item.type in ("ADDED", "MODIFIED", "DELETED"):
                self.apply(item.type, item.object)
            meta = item.object.get("metadata")
            if isinstance(meta, Mapping) and meta.get("resourceVersion"):
                self.resource_version = str(meta["resourceVersion"])
            self.backoff.reset()

    def _gone(self) -> None:
        log.info("%s watch expired (410 Gone): relisting", self.resource)
        WATCH_RESTARTS.labels(self.resource, "gone").inc()
        self.resource_version = ""
