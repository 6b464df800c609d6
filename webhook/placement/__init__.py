"""Component-fit placement: how many complete sets of a multi-pod-template workload fit each cluster.

The answer is sound: every reported count comes with an assignment of every replica to a node (the
witness) and an upper bound no packing can beat. See docs/placement.md.
"""

from __future__ import annotations

from webhook.placement.api import place, place_request
from webhook.placement.cluster import load_cluster_file, load_clusters
from webhook.placement.components import components_from_flink, components_from_karmada, load_workload
from webhook.placement.errors import PlacementInputError
from webhook.placement.estimate import Estimate, estimate
from webhook.placement.model import Cluster, Component, Node
from webhook.placement.select import Selection, select

__all__ = [
    "Cluster",
    "Component",
    "Estimate",
    "Node",
    "PlacementInputError",
    "Selection",
    "components_from_flink",
    "components_from_karmada",
    "estimate",
    "load_cluster_file",
    "load_clusters",
    "load_workload",
    "place",
    "place_request",
    "select",
]
