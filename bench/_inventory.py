"""A large member cluster's inventory for the estimators, as etcd keys and the JSON a kube-apiserver reads.

The recorded 1,000-node cluster (../shared/data/karmada-estimator) tiled: tile 0 is the recording itself,
tile t > 0 the same nodes and pods renamed ``t<t>-<name>`` with their own uids, so 10 tiles are 10,000
nodes at the recording's pod density (34 a node). Pure: objects in, (key, object) pairs out; the bench
writes them (``estimator_scale``).

Writing into etcd directly is what makes 340,000 pods a minute's work rather than an hour's of creates:
kube-apiserver decodes JSON from its storage as it does protobuf (it applies the defaults on read), and
the key layout is its own (``<prefix>/minions/<node>``, ``<prefix>/pods/<namespace>/<pod>``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any

Obj = dict[str, Any]


def _tile_name(tile: int, name: str) -> str:
    return name if tile == 0 else f"t{tile}-{name}"


def _tile_uid(tile: int, uid: str) -> str:
    """A uid unique per tile: the recording's uids are UUID-shaped, the tile goes into the first group."""
    _, sep, rest = uid.partition("-")
    return f"{tile:08x}{sep}{rest}" if tile else uid


def tiled(
    nodes: Sequence[Obj], pods: Sequence[Obj], tiles: int, pods_per_node: int | None = None
) -> Iterator[tuple[str, Obj]]:
    """(key under the API server's prefix, object) for ``tiles`` copies of the cluster; nodes first.

    ``pods_per_node`` keeps only the first so many pods of each node (a lighter load); ``None`` keeps all.
    """
    for tile in range(tiles):
        for node in nodes:
            obj = copy.deepcopy(node)
            obj.setdefault("apiVersion", "v1")
            obj.setdefault("kind", "Node")
            meta = obj["metadata"]
            meta["name"] = _tile_name(tile, meta["name"])
            if "uid" in meta:
                meta["uid"] = _tile_uid(tile, meta["uid"])
            meta.pop("resourceVersion", None)  # etcd's revision is the object's version
            yield f"/minions/{meta['name']}", obj
    for tile in range(tiles):
        seen: dict[str, int] = {}
        for pod in pods:
            node_name = pod.get("spec", {}).get("nodeName", "")
            if pods_per_node is not None:
                seen[node_name] = seen.get(node_name, 0) + 1
                if seen[node_name] > pods_per_node:
                    continue
            obj = copy.deepcopy(pod)
            obj.setdefault("apiVersion", "v1")
            obj.setdefault("kind", "Pod")
            meta = obj["metadata"]
            meta["name"] = _tile_name(tile, meta["name"])
            if "uid" in meta:
                meta["uid"] = _tile_uid(tile, meta["uid"])
            meta.pop("resourceVersion", None)
            if node_name:
                obj["spec"]["nodeName"] = _tile_name(tile, node_name)
            yield f"/pods/{meta.get('namespace', 'default')}/{meta['name']}", obj
