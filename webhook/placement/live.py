"""Live clusters through kubeconfig contexts (the only module that talks to an API server).

Lists nodes and pods with the ``kubernetes`` client and hands the raw objects to the same reader as a
``kubectl get nodes,pods -A -o json`` file, so live and offline inputs cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webhook.common.kubeclient import ApiFailure, ClientConfig, new_api_client
from webhook.placement.cluster import POD_FIELD_SELECTOR, cluster_from_kubectl
from webhook.placement.errors import PlacementInputError
from webhook.placement.model import Cluster


def _as_items(api_client: Any, objects: Any, kind: str) -> list[dict[str, Any]]:
    items = []
    for obj in objects.items:
        raw = api_client.sanitize_for_serialization(obj)
        raw["kind"] = kind
        items.append(raw)
    return items


def cluster_from_context(context: str, kubeconfig: str | None = None) -> Cluster:
    """One cluster named after its context: nodes plus pods that are bound and not finished."""
    from kubernetes import client  # the edge dependency, imported only when used

    api_client = new_api_client(ClientConfig(kubeconfig, context, retries=True), "kubeconfig")
    if isinstance(api_client, ApiFailure):
        raise PlacementInputError(f"context {context!r}: {api_client.message}")
    core = client.CoreV1Api(api_client)
    try:
        nodes = core.list_node()
        pods = core.list_pod_for_all_namespaces(field_selector=POD_FIELD_SELECTOR)
    except Exception as exc:  # ApiException, connection errors, timeouts
        raise PlacementInputError(f"context {context!r}: cannot list nodes and pods: {exc}") from exc
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": _as_items(api_client, nodes, "Node") + _as_items(api_client, pods, "Pod"),
    }
    return cluster_from_kubectl(doc, context, f"context {context}")


def clusters_from_contexts(contexts: Sequence[str], kubeconfig: str | None = None) -> list[Cluster]:
    return [cluster_from_context(ctx, kubeconfig) for ctx in contexts]
