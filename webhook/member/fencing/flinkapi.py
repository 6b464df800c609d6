"""The member cluster's FlinkDeployments and FlinkSessionJobs: list each kind, get and merge-patch one.

The agent's only Kubernetes edge; errors as values (``common.kubeclient.ApiFailure``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.common.flink import GROUP
from webhook.common.kubeclient import (
    MERGE_PATCH,
    ApiFailure,
    ClientConfig,
    api_errors,
    failure,
    list_pages,
    new_api_client,
)

VERSION = "v1beta1"
PLURALS = {"FlinkDeployment": "flinkdeployments", "FlinkSessionJob": "flinksessionjobs"}


class FlinkApi:
    def __init__(self, api_client: Any, config: ClientConfig) -> None:
        from kubernetes import client

        self._custom = client.CustomObjectsApi(api_client)
        self.config = config

    @classmethod
    def connect(cls, config: ClientConfig) -> FlinkApi | ApiFailure:
        api_client = new_api_client(config, "member cluster")
        return api_client if isinstance(api_client, ApiFailure) else cls(api_client, config)

    def list_kind(self, kind: str) -> list[Mapping[str, Any]] | ApiFailure:
        """Every object of one kind in the cluster, each with its ``kind`` set. Each kind is listed on
        its own: a cluster without the FlinkSessionJob CRD (404) still has its FlinkDeployments fenced."""
        plural = PLURALS[kind]

        def call(**kwargs: Any) -> Any:
            return self._custom.list_cluster_custom_object(GROUP, VERSION, plural, **kwargs)

        items: list[Mapping[str, Any]] = []
        for page in list_pages(call, self.config, f"{kind}List"):
            if isinstance(page, ApiFailure):
                return page
            items += [{**item, "kind": kind} for item in page.items]
        return items

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | ApiFailure | None:
        try:
            obj = self._custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURALS[kind], name, _request_timeout=self.config.request_timeout
            )
        except api_errors() as exc:
            problem = failure(exc)
            return None if problem.status == 404 else problem
        return obj if isinstance(obj, Mapping) else ApiFailure(0, "get answer is not an object")

    def patch(
        self, kind: str, namespace: str, name: str, body: Mapping[str, Any]
    ) -> Mapping[str, Any] | ApiFailure:
        try:
            obj = self._custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                PLURALS[kind],
                name,
                dict(body),
                _content_type=MERGE_PATCH,
                _request_timeout=self.config.request_timeout,
            )
        except api_errors() as exc:
            return failure(exc)
        return obj if isinstance(obj, Mapping) else ApiFailure(0, "patch answer is not an object")
