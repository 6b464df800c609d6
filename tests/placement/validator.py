"""An independent witness checker for the tests: re-derives every scheduling rule from the Kubernetes docs
instead of calling the estimator's own filter code, so a bug there cannot vouch for itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from webhook.placement.model import Cluster, Component, Node


def _label_matches(op: str, key: str, values: Sequence[str], labels: Mapping[str, str]) -> bool:
    present = key in labels
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op in ("Gt", "Lt"):
        if not present:
            return False
        try:
            number = int(labels[key])
        except ValueError:
            return False
        bound = int(values[0])
        return number > bound if op == "Gt" else number < bound
    raise AssertionError(f"unknown operator {op}")


def node_accepts(comp: Component, node: Node) -> bool:
    if node.unschedulable:
        return False
    if any(node.labels.get(k) != v for k, v in comp.node_selector.items()):
        return False
    if comp.affinity_terms is not None:
        term_ok = False
        for term in comp.affinity_terms:
            if not term.requirements:
                continue  # an empty term selects nothing
            ok = True
            for req in term.requirements:
                labels = {"metadata.name": node.name} if req.field else dict(node.labels)
                if not _label_matches(req.operator, req.key, req.values, labels):
                    ok = False
            term_ok = term_ok or ok
        if not term_ok:
            return False
    for taint in node.taints:
        if taint.effect == "PreferNoSchedule":
            continue
        tolerated = False
        for tol in comp.tolerations:
            effect_ok = tol.effect in ("", taint.effect)
            if tol.operator == "Exists":
                key_ok = tol.key in ("", taint.key)
                value_ok = True
            else:
                key_ok = tol.key == taint.key
                value_ok = tol.value == taint.value
            tolerated = tolerated or (effect_ok and key_ok and value_ok)
        if not tolerated:
            return False
    return True


def check(
    cluster: Cluster, comps: Sequence[Component], sets: int, assignment: Mapping[str, Mapping[str, int]]
) -> None:
    """Raise AssertionError unless ``assignment`` places exactly ``sets`` complete sets within capacity."""
    nodes = {n.name: n for n in cluster.nodes}
    load: dict[str, dict[str, int]] = {name: {} for name in nodes}
    assert set(assignment) <= {c.name for c in comps}
    for comp in comps:
        placed = assignment.get(comp.name, {})
        assert sum(placed.values()) == sets * comp.replicas, (comp.name, sum(placed.values()), sets)
        for node_name, count in placed.items():
            assert node_name in nodes, node_name
            assert count > 0
            assert node_accepts(comp, nodes[node_name]), (comp.name, node_name)
            for resource, amount in comp.requests.items():
                load[node_name][resource] = load[node_name].get(resource, 0) + amount * count
            load[node_name]["pods"] = load[node_name].get("pods", 0) + count
    for node_name, used in load.items():
        free = nodes[node_name].free
        for resource, amount in used.items():
            if resource == "pods" and "pods" not in free:
                continue  # no pod limit reported
            assert amount <= free.get(resource, 0), (node_name, resource, amount, free.get(resource, 0))
