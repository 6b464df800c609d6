"""The Python API behind the CLI and ``POST /placement``: components and clusters in, one JSON answer out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.placement import fields as f
from webhook.placement.cluster import clusters_from_snapshot, load_clusters
from webhook.placement.components import load_workload
from webhook.placement.errors import PlacementInputError
from webhook.placement.estimate import Estimate, estimate
from webhook.placement.model import Cluster, Component
from webhook.placement.quantity import format_quantity
from webhook.placement.select import select

REQUEST_FIELDS = ("workload", "clusters", "maxSets", "witness")


def estimate_all(
    components: Sequence[Component], clusters: Sequence[Cluster], max_sets: int | None = None
) -> list[Estimate]:
    names = [c.name for c in clusters]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise PlacementInputError(f"clusters: duplicate cluster name {duplicates[0]!r}")
    return [estimate(cluster, components, max_sets) for cluster in clusters]


def result_json(
    components: Sequence[Component], estimates: Sequence[Estimate], witness: bool = False
) -> dict[str, Any]:
    """The answer's JSON shape: components, clusters (with reasons for losers), selected."""
    selection = select(estimates)
    clusters = []
    for e in estimates:
        row: dict[str, Any] = {
            "name": e.cluster,
            "sets": e.sets,
            "upperBound": e.upper_bound,
            "elapsedMs": e.elapsed_ms,
        }
        if witness:
            row["assignment"] = {comp: dict(nodes) for comp, nodes in e.assignment.items()}
        if e.cluster in selection.reasons:
            row["reason"] = selection.reasons[e.cluster]
        # what stops one more set, as data: the scarcest requested resource and the words for it
        row["limit"] = {
            "code": e.limit.code.value,
            "resource": e.scarcest or None,
            "message": e.limit.message,
        }
        clusters.append(row)
    return {
        "components": [
            {
                "name": c.name,
                "replicas": c.replicas,
                "requests": {k: format_quantity(k, v) for k, v in sorted(c.requests.items())},
            }
            for c in components
        ],
        "clusters": clusters,
        "selected": selection.selected,
    }


def place(
    components: Sequence[Component],
    clusters: Sequence[Cluster],
    max_sets: int | None = None,
    witness: bool = False,
) -> dict[str, Any]:
    return result_json(components, estimate_all(components, clusters, max_sets), witness)


def clusters_from_json(raw: Any, where: str = "clusters") -> list[Cluster]:
    """The ``clusters`` of a request: one cluster document, a list of them, or a list of snapshot clusters."""
    if isinstance(raw, list):
        if all(isinstance(item, Mapping) and "kind" not in item for item in raw):
            return clusters_from_snapshot({"clusters": raw}, "request")
        result = []
        for i, item in enumerate(raw):
            result.extend(load_clusters(item, f"{where}[{i}]", f"cluster-{i + 1}"))
        return result
    return load_clusters(raw, where, "cluster")


def place_request(body: Any) -> dict[str, Any]:
    """``{"workload": ..., "clusters": ..., "maxSets"?: N, "witness"?: bool}`` -> the answer."""
    request = f.mapping(body, "request", REQUEST_FIELDS)
    if request.get("workload") is None:
        raise PlacementInputError("request.workload: required")
    if request.get("clusters") is None:
        raise PlacementInputError("request.clusters: required")
    components = load_workload(request["workload"], "workload")
    clusters = clusters_from_json(request["clusters"])
    max_sets = (
        f.integer(request["maxSets"], "request.maxSets") if request.get("maxSets") is not None else None
    )
    return place(components, clusters, max_sets, f.boolean(request.get("witness"), "request.witness"))


def format_table(result: Mapping[str, Any]) -> str:
    """A plain-text rendering of the answer for people."""
    lines = []
    for comp in result["components"]:
        reqs = ", ".join(f"{k}={v}" for k, v in comp["requests"].items()) or "no requests"
        lines.append(f"component {comp['name']}: {comp['replicas']} x ({reqs})")
    lines.append("")
    header = ("cluster", "sets", "upper bound", "ms", "")
    rows = [header]
    for row in result["clusters"]:
        mark = "selected" if row["name"] == result["selected"] else row.get("reason", "")
        rows.append((row["name"], str(row["sets"]), str(row["upperBound"]), f"{row['elapsedMs']:.1f}", mark))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in (1, 2, 3)] + [r[4]]
        lines.append("  ".join(cells).rstrip())
    lines.append("")
    lines.append(f"selected: {result['selected'] or 'none (no cluster fits a complete set)'}")
    for row in result["clusters"]:
        for comp, nodes in (row.get("assignment") or {}).items():
            spread = ", ".join(f"{n}={c}" for n, c in nodes.items())
            lines.append(f"  {row['name']} {comp}: {spread or '-'}")
    return "\n".join(lines)
