"""The few Karmada API calls the control plane makes, errors as values: a typed facade over
``common.kubeobjects.KubeObjects``.

list (paginated), watch (a stream of JSON lines), get, and a merge patch of one annotation; all on
``resourcebindings.work.karmada.io/v1alpha2``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.common.kubeclient import ApiFailure, ClientConfig, Listed, WatchEnded, WatchEvent
from webhook.common.kubeobjects import KubeObjects, Resource
from webhook.controlplane.binding import API_GROUP, API_VERSION, PLURAL

BINDINGS = Resource(API_GROUP, API_VERSION, PLURAL, "ResourceBinding")


class KarmadaApi:
    """ResourceBindings on the Karmada API server. Build with :meth:`connect` (kubeconfig or in-cluster)."""

    def __init__(self, objects: KubeObjects) -> None:
        self.objects = objects  # shared with the leader election's Lease calls
        self.config = objects.config

    @property
    def api_client(self) -> Any:
        """The underlying ``kubernetes.client.ApiClient`` (its user agent names the replica)."""
        return self.objects.api_client

    @classmethod
    def connect(cls, config: ClientConfig) -> KarmadaApi | ApiFailure:
        objects = KubeObjects.connect(config, "Karmada API")
        return objects if isinstance(objects, ApiFailure) else cls(objects)

    def list_bindings(self) -> Listed | ApiFailure:
        return self.objects.list(BINDINGS)

    def watch_bindings(self, resource_version: str) -> Iterator[WatchEvent | WatchEnded | ApiFailure]:
        """Events after ``resource_version``; ends with WatchEnded, or with an ApiFailure when it broke."""
        yield from self.objects.watch(BINDINGS, resource_version)

    def get_binding(
        self, namespace: str, name: str, timeout: float | None = None
    ) -> Mapping[str, Any] | ApiFailure | None:
        # connect + read within the budget: the webhook's deadline covers the whole request
        budget = (timeout or self.config.request_timeout) / 2
        return self.objects.get(BINDINGS, namespace, name, timeout=(budget, budget))

    def patch_annotation(
        self, namespace: str, name: str, key: str, value: str
    ) -> Mapping[str, Any] | ApiFailure:
        body = {"metadata": {"annotations": {key: value}}}
        return self.objects.merge_patch(BINDINGS, namespace, name, body)
