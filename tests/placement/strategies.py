"""Hypothesis strategies for small clusters and workloads that exercise every filter and resource."""

from __future__ import annotations

from hypothesis import strategies as st

from webhook.placement.model import Cluster, Component, Node, NodeSelectorTerm, Requirement, Taint, Toleration

TAINTS = [
    Taint("dedicated", "flink", "NoSchedule"),
    Taint("dedicated", "batch", "NoSchedule"),
    Taint("spot", "true", "PreferNoSchedule"),
    Taint("evict", "", "NoExecute"),
]
TOLERATIONS = [
    Toleration("dedicated", "Equal", "flink", "NoSchedule"),
    Toleration("dedicated", "Exists", "", ""),
    Toleration("evict", "Exists", "", "NoExecute"),
    Toleration("evict", "Equal", "x", "NoExecute"),
    Toleration("", "Exists", "", ""),
    Toleration("", "Exists", "", "NoSchedule"),
]


@st.composite
def nodes(draw: st.DrawFn, index: int) -> Node:
    labels = {}
    if draw(st.booleans()):
        labels["zone"] = draw(st.sampled_from(["a", "b"]))
    if draw(st.booleans()):
        labels["rank"] = str(draw(st.integers(0, 5)))
    if draw(st.booleans()):
        labels["ssd"] = "true"
    free = {"cpu": draw(st.integers(0, 16)) * 250, "memory": draw(st.integers(0, 12))}
    if draw(st.integers(0, 4)):
        free["pods"] = draw(st.integers(0, 6))
    if draw(st.booleans()):
        free["nvidia.com/gpu"] = draw(st.integers(0, 2))
    taints = tuple(draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique=True)))
    return Node(f"n{index}", free, labels, taints, draw(st.integers(0, 9)) == 0)


REQUIREMENTS = st.one_of(
    st.builds(
        Requirement,
        st.just("zone"),
        st.sampled_from(["In", "NotIn"]),
        st.sampled_from([("a",), ("b",), ("a", "b")]),
    ),
    st.builds(Requirement, st.sampled_from(["ssd", "rank"]), st.sampled_from(["Exists", "DoesNotExist"])),
    st.builds(Requirement, st.just("rank"), st.sampled_from(["Gt", "Lt"]), st.sampled_from([("1",), ("3",)])),
    st.builds(
        Requirement,
        st.just("metadata.name"),
        st.just("In"),
        st.sampled_from([("n0",), ("n1", "n2")]),
        st.just(True),
    ),
)


@st.composite
def components(draw: st.DrawFn, index: int) -> Component:
    requests = {"cpu": draw(st.integers(1, 8)) * 250}
    if draw(st.booleans()):
        requests["memory"] = draw(st.integers(1, 6))
    if draw(st.integers(0, 3)) == 0:
        requests["nvidia.com/gpu"] = 1
    selector = {"zone": draw(st.sampled_from(["a", "b"]))} if draw(st.integers(0, 3)) == 0 else {}
    affinity = None
    if draw(st.integers(0, 3)) == 0:
        terms = draw(st.lists(st.lists(REQUIREMENTS, min_size=0, max_size=2), min_size=1, max_size=2))
        affinity = tuple(NodeSelectorTerm(tuple(t)) for t in terms)
    tolerations = tuple(draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2, unique=True)))
    return Component(f"c{index}", draw(st.integers(0, 3)), requests, selector, tolerations, affinity)


@st.composite
def instances(
    draw: st.DrawFn, max_nodes: int = 4, max_components: int = 3
) -> tuple[Cluster, tuple[Component, ...]]:
    n = draw(st.integers(0, max_nodes))
    m = draw(st.integers(1, max_components))
    cluster = Cluster("random", tuple(draw(nodes(i)) for i in range(n)))
    comps = [draw(components(j)) for j in range(m)]
    if not any(c.replicas for c in comps):
        first = comps[0]
        comps[0] = Component(
            first.name, 1, first.requests, first.node_selector, first.tolerations, first.affinity_terms
        )
    return cluster, tuple(comps)


@st.composite
def shared_instances(draw: st.DrawFn) -> tuple[Cluster, tuple[Component, ...]]:
    """No filters: components compete for the same nodes, where packing order matters most."""
    n = draw(st.integers(1, 5))
    nodes_ = tuple(
        Node(
            f"n{i}",
            {
                "cpu": draw(st.integers(0, 16)) * 250,
                "memory": draw(st.integers(0, 16)),
                "pods": draw(st.integers(1, 8)),
            },
        )
        for i in range(n)
    )
    comps = tuple(
        Component(
            f"c{j}",
            draw(st.integers(1, 3)),
            {"cpu": draw(st.integers(1, 8)) * 250, "memory": draw(st.integers(1, 8))},
        )
        for j in range(draw(st.integers(2, 3)))
    )
    return Cluster("shared", nodes_), comps
