"""The few Karmada API calls the control plane makes, errors as values (see ``common.kubeclient``).

list (paginated), watch (a stream of JSON lines), get, and a merge patch of one annotation; all on
``resourcebindings.work.karmada.io/v1alpha2``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.common.kubeclient import (
    MERGE_PATCH,
    ApiFailure,
    ClientConfig,
    Listed,
    WatchEnded,
    WatchEvent,
    api_errors,
    failure,
    list_pages,
    new_api_client,
    watch_events,
)
from webhook.controlplane.binding import API_GROUP, API_VERSION, PLURAL


class KarmadaApi:
    """ResourceBindings on the Karmada API server. Build with :meth:`connect` (kubeconfig or in-cluster)."""

    def __init__(self, api_client: Any, config: ClientConfig) -> None:
        from kubernetes import client

        self._client = api_client
        self._custom = client.CustomObjectsApi(api_client)
        self.config = config

    @property
    def api_client(self) -> Any:
        """The underlying ``kubernetes.client.ApiClient`` (shared with the leader election's Lease calls)."""
        return self._client

    @classmethod
    def connect(cls, config: ClientConfig) -> KarmadaApi | ApiFailure:
        api_client = new_api_client(config, "Karmada API")
        return api_client if isinstance(api_client, ApiFailure) else cls(api_client, config)

    def list_bindings(self) -> Listed | ApiFailure:
        items: list[Mapping[str, Any]] = []
        version = ""

        def call(**kwargs: Any) -> Any:
            return self._custom.list_cluster_custom_object(API_GROUP, API_VERSION, PLURAL, **kwargs)

        for page in list_pages(call, self.config, "ResourceBindingList"):
            if isinstance(page, ApiFailure):
                return page
            items += page.items
            version = page.resource_version or version
        return Listed(tuple(items), version)

    def watch_bindings(self, resource_version: str) -> Iterator[WatchEvent | WatchEnded | ApiFailure]:
        """Events after ``resource_version``; ends with WatchEnded, or with an ApiFailure when it broke."""

        def call(**kwargs: Any) -> Any:
            return self._custom.list_cluster_custom_object(
                API_GROUP, API_VERSION, PLURAL, _preload_content=False, **kwargs
            )

        yield from watch_events(call, self.config, resource_version)

    def get_binding(
        self, namespace: str, name: str, timeout: float | None = None
    ) -> Mapping[str, Any] | ApiFailure | None:
        try:
            obj = self._custom.get_namespaced_custom_object(
                API_GROUP,
                API_VERSION,
                namespace,
                PLURAL,
                name,
                # connect + read within the budget: the webhook's deadline covers the whole request
                _request_timeout=((timeout or self.config.request_timeout) / 2,) * 2,
            )
        except api_errors() as exc:
            problem = failure(exc)
            return None if problem.status == 404 else problem
        return obj if isinstance(obj, Mapping) else ApiFailure(0, "get answer is not an object")

    def patch_annotation(
        self, namespace: str, name: str, key: str, value: str
    ) -> Mapping[str, Any] | ApiFailure:
        body = {"metadata": {"annotations": {key: value}}}
        try:
            obj = self._custom.patch_namespaced_custom_object(
                API_GROUP,
                API_VERSION,
                namespace,
                PLURAL,
                name,
                body,
                _content_type=MERGE_PATCH,
                _request_timeout=self.config.request_timeout,
            )
        except api_errors() as exc:
            return failure(exc)
        return obj if isinstance(obj, Mapping) else ApiFailure(0, "patch answer is not an object")
