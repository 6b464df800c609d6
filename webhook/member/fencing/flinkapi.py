"""The member cluster's Flink objects and Events, as the fencing agent, ``status`` and ``release`` see them.

A thin typed facade over ``common.kubeobjects.KubeObjects`` (every call with a deadline, failures as
values): list one kind, get, merge-patch, and the client the Event recorder writes through.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.common.flink import BLUE_GREEN, GROUP
from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.common.kubeobjects import KubeObjects, Resource
from webhook.member.sessions import DEPLOYMENTS, VERSION

PLURALS = {
    "FlinkDeployment": "flinkdeployments",
    "FlinkSessionJob": "flinksessionjobs",
    BLUE_GREEN: "flinkbluegreendeployments",
}
RESOURCES = {
    "FlinkDeployment": DEPLOYMENTS,
    "FlinkSessionJob": Resource(GROUP, VERSION, PLURALS["FlinkSessionJob"], "FlinkSessionJob"),
    BLUE_GREEN: Resource(GROUP, VERSION, PLURALS[BLUE_GREEN], BLUE_GREEN),
}
OPTIONAL_KINDS = (BLUE_GREEN,)  # operator 1.14+: a cluster without its CRD is usual, not a fault


class FlinkApi:
    def __init__(self, objects: KubeObjects) -> None:
        self.objects = objects

    @classmethod
    def connect(cls, config: ClientConfig) -> FlinkApi | ApiFailure:
        objects = KubeObjects.connect(config, "member cluster")
        return objects if isinstance(objects, ApiFailure) else cls(objects)

    def list_kind(self, kind: str) -> list[Mapping[str, Any]] | ApiFailure:
        """Every object of one kind in the cluster, each with its ``kind`` set. Each kind is listed on
        its own: a cluster without the FlinkSessionJob CRD (404) still has its FlinkDeployments fenced."""
        listed = self.objects.list(RESOURCES[kind])
        if isinstance(listed, ApiFailure):
            return listed
        return [{**item, "kind": kind} for item in listed.items]

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | ApiFailure | None:
        return self.objects.get(RESOURCES[kind], namespace, name)

    def patch(
        self, kind: str, namespace: str, name: str, body: Mapping[str, Any]
    ) -> Mapping[str, Any] | ApiFailure:
        return self.objects.merge_patch(RESOURCES[kind], namespace, name, body)
