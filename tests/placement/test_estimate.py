from __future__ import annotations

import itertools

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.placement import validator
from tests.placement.strategies import instances, shared_instances
from tests.support.exact import exact_sets
from tests.support.karmada_first_fit import karmada_first_fit
from tests.support.witness import witness_problems
from webhook.placement.bounds import LimitCode
from webhook.placement.estimate import estimate
from webhook.placement.firstfit import first_fit
from webhook.placement.model import Cluster, Component, Node, NodeSelectorTerm, Requirement, Taint, Toleration
from webhook.placement.prepare import prepare

SETTINGS = settings(
    max_examples=int(__import__("os").environ.get("PLACEMENT_EXAMPLES", "150")),
    deadline=None,
    derandomize=True,  # the same examples on every run: a failure here reproduces
    suppress_health_check=[HealthCheck.too_slow],
)


def cluster(*nodes: Node) -> Cluster:
    return Cluster("c", nodes)


def node(name: str, cpu: int, pods: int = 110, **kw: object) -> Node:
    free = {"cpu": cpu, "pods": pods}
    extra = kw.pop("free", {})
    assert isinstance(extra, dict)
    free.update(extra)
    return Node(name, free, **kw)  # type: ignore[arg-type]


def comp(name: str, replicas: int, cpu: int, **kw: object) -> Component:
    extra = kw.pop("requests", {})
    assert isinstance(extra, dict)
    return Component(name, replicas, {"cpu": cpu, **extra}, **kw)  # type: ignore[arg-type]


def sets(c: Cluster, *comps: Component, max_sets: int | None = None) -> int:
    result = estimate(c, comps, max_sets)
    validator.check(c, comps, result.sets, result.assignment)
    assert result.sets <= result.upper_bound
    return result.sets


def first_fit_sets(c: Cluster, comps: tuple[Component, ...]) -> int:
    return first_fit(prepare(c, comps), 10**6)[0]


def test_disjoint_components_exact() -> None:
    c = cluster(
        node("g1", 4000, labels={"pool": "general"}),
        node("f1", 8000, labels={"pool": "flink"}, taints=(Taint("dedicated", "flink"),)),
        node("f2", 5000, labels={"pool": "flink"}, taints=(Taint("dedicated", "flink"),)),
    )
    jm = comp("jm", 1, 1000)
    tm = comp(
        "tm",
        4,
        1000,
        node_selector={"pool": "flink"},
        tolerations=(Toleration("dedicated", "Equal", "flink", "NoSchedule"),),
    )
    assert sets(c, jm, tm) == 3  # 13 TM slots -> 3 sets; JM room for 4
    assert sets(c, jm, tm, max_sets=2) == 2


def test_beats_first_fit_where_order_matters() -> None:
    c = cluster(node("big", 4000), node("small", 2000))
    a, b = comp("a", 2, 1000), comp("b", 1, 4000)
    assert first_fit_sets(c, (a, b)) == 0  # Karmada puts both a's on "big", then b fits nowhere
    result = estimate(c, (a, b))
    assert result.sets == 1 and result.upper_bound == 1
    assert dict(result.assignment["b"]) == {"big": 1}
    assert dict(result.assignment["a"]) == {"small": 2}


def test_taints_and_tolerations() -> None:
    no_sched = node("ns", 1000, taints=(Taint("dedicated", "flink", "NoSchedule"),))
    no_exec = node("ne", 1000, taints=(Taint("evict", "", "NoExecute"),))
    prefer = node("pf", 1000, taints=(Taint("spot", "true", "PreferNoSchedule"),))
    c = cluster(no_sched, no_exec, prefer)
    assert sets(c, comp("plain", 1, 1000)) == 1  # only PreferNoSchedule admits an intolerant pod
    assert (
        sets(c, comp("t", 1, 1000, tolerations=(Toleration("dedicated", "Equal", "flink", "NoSchedule"),)))
        == 2
    )
    assert (
        sets(c, comp("t", 1, 1000, tolerations=(Toleration("dedicated", "Equal", "batch", "NoSchedule"),)))
        == 1
    )
    assert sets(c, comp("t", 1, 1000, tolerations=(Toleration("dedicated", "Exists", "", "NoExecute"),))) == 1
    assert sets(c, comp("t", 1, 1000, tolerations=(Toleration("", "Exists", "", ""),))) == 3
    assert sets(c, comp("t", 1, 1000, tolerations=(Toleration("evict", "Exists", "", ""),))) == 2


def test_unschedulable_selector_and_affinity() -> None:
    c = cluster(
        node("a1", 1000, labels={"zone": "a", "rank": "5"}),
        node("a2", 1000, labels={"zone": "a"}, unschedulable=True),
        node("b1", 1000, labels={"zone": "b", "rank": "2", "ssd": "true"}),
        node("x1", 1000),
    )

    def with_affinity(*terms: tuple[Requirement, ...]) -> int:
        return sets(c, comp("p", 1, 1000, affinity_terms=tuple(NodeSelectorTerm(t) for t in terms)))

    assert sets(c, comp("p", 1, 1000)) == 3
    assert sets(c, comp("p", 1, 1000, node_selector={"zone": "a"})) == 1
    assert with_affinity((Requirement("zone", "In", ("a", "b")),)) == 2
    assert with_affinity((Requirement("zone", "NotIn", ("a",)),)) == 2  # b1 and the unlabelled x1
    assert with_affinity((Requirement("ssd", "Exists"),)) == 1
    assert with_affinity((Requirement("ssd", "DoesNotExist"),)) == 2
    assert with_affinity((Requirement("rank", "Gt", ("3",)),)) == 1
    assert with_affinity((Requirement("rank", "Lt", ("3",)),)) == 1
    assert (
        with_affinity((Requirement("rank", "Gt", ("3",)),), (Requirement("ssd", "Exists"),)) == 2
    )  # terms OR
    assert with_affinity((Requirement("zone", "In", ("a",)), Requirement("rank", "Lt", ("3",)))) == 0  # AND
    assert with_affinity((Requirement("metadata.name", "In", ("x1",), field=True),)) == 1
    assert with_affinity(()) == 0  # an empty term matches nothing


def test_extended_resources_and_pod_slots() -> None:
    c = cluster(
        node("gpu", 8000, free={"nvidia.com/gpu": 2}),
        node("cpu-only", 8000),
        node("few-pods", 8000, pods=1),
    )
    assert sets(c, comp("g", 1, 1000, requests={"nvidia.com/gpu": 1})) == 2
    assert sets(c, comp("p", 1, 1000)) == 17  # 8 + 8 + 1 (one pod slot left)
    assert sets(c, comp("a", 3, 1000), comp("b", 1, 500, requests={"nvidia.com/gpu": 2})) == 1


def test_unlimited_pods_and_empty_requests_stay_bounded() -> None:
    c = cluster(Node("virtual", {"cpu": 4000}))  # no pod limit (a Karmada resource model)
    assert sets(c, Component("free", 2), max_sets=7) == 7
    assert sets(c, comp("a", 1, 1000)) == 4


def test_empty_cluster_and_limit_text() -> None:
    result = estimate(cluster(), (comp("a", 1, 1000),))
    assert result.sets == 0 and result.upper_bound == 0
    assert "no nodes" in result.limit.message
    assert result.limit.code is LimitCode.NO_NODES
    tainted = estimate(cluster(node("t", 4000, taints=(Taint("k", "v"),))), (comp("a", 1, 1000),))
    assert "no node passes its filters" in tainted.limit.message
    assert tainted.limit.code is LimitCode.NO_ELIGIBLE_NODE
    full = estimate(cluster(node("f", 500)), (comp("a", 1, 1000),))
    assert "no eligible node has room" in full.limit.message
    assert full.limit.code is LimitCode.NO_ROOM
    capped = estimate(cluster(node("n", 4000)), (comp("a", 1, 1000),), max_sets=2)
    assert capped.sets == 2 and capped.limit.code is LimitCode.MAX_SETS
    alone = estimate(cluster(node("n", 2500)), (comp("a", 1, 1000),))
    assert alone.sets == 2 and alone.limit.code is LimitCode.COMPONENT_CAPACITY


def test_zero_replica_component_is_ignored() -> None:
    c = cluster(node("n", 2000))
    result = estimate(c, (comp("a", 1, 1000), comp("none", 0, 10**6)))
    assert result.sets == 2 and dict(result.assignment["none"]) == {}


def test_package_witness_checker_agrees() -> None:
    c = cluster(node("n", 2000))
    a = comp("a", 1, 1000)
    assert witness_problems(c, (a,), 2, {"a": {"n": 2}}) == []
    assert witness_problems(c, (a,), 3, {"a": {"n": 3}})  # over capacity
    assert witness_problems(c, (a,), 1, {"a": {"m": 1}})  # unknown node


@SETTINGS
@given(instances())
def test_random_instances_sound_and_optimal(case: tuple[Cluster, tuple[Component, ...]]) -> None:
    c, comps = case
    prep = prepare(c, comps)
    for ci, component in enumerate(comps):
        for i, n in enumerate(c.nodes):
            assert prep.eligible[ci][i] == validator.node_accepts(component, n)
    result = estimate(c, comps)
    validator.check(c, comps, result.sets, result.assignment)
    assert result.sets <= result.upper_bound
    assert result.sets >= first_fit_sets(c, comps)
    assert result.sets == exact_sets(c, comps)


# Found by a random run before the examples were fixed: both greedy fills put whole fits on the first
# nodes of a class; the optimum needs the rest spread evenly (c0 1 + c1 2 on each large node).
SPREAD_CASE = (
    Cluster(
        "shared",
        tuple(
            Node(f"n{i}", {"cpu": cpu, "memory": mem, "pods": mem})
            for i, (cpu, mem) in enumerate([(3000, 3), (3000, 3), (1500, 1), (1500, 1)])
        ),
    ),
    (Component("c0", 1, {"cpu": 1500, "memory": 1}), Component("c1", 1, {"cpu": 250, "memory": 1})),
)


@SETTINGS
@given(shared_instances())
@example(SPREAD_CASE)
def test_shared_nodes_sound_and_optimal(case: tuple[Cluster, tuple[Component, ...]]) -> None:
    c, comps = case
    # A clock that stands still: the search is never cut short, whatever the machine's load (with the
    # wall clock a loaded machine could stop it before the optimum and fail this for no fault of its own).
    result = estimate(c, comps, clock=lambda: 0.0)
    validator.check(c, comps, result.sets, result.assignment)
    assert first_fit_sets(c, comps) <= result.sets <= result.upper_bound
    assert result.sets == exact_sets(c, comps)
    ticks = itertools.count()  # a second passes at every look: out of time after the first variant
    hurried = estimate(c, comps, budget_s=0.5, clock=lambda: float(next(ticks)))
    validator.check(c, comps, hurried.sets, hurried.assignment)
    assert first_fit_sets(c, comps) <= hurried.sets <= result.sets
    if result.sets:
        capped = estimate(c, comps, max_sets=result.sets - 1, clock=lambda: 0.0)
        validator.check(c, comps, capped.sets, capped.assignment)
        assert capped.sets == result.sets - 1


def test_shared_nodes_without_requests_or_pod_limits_stay_fast_and_sound() -> None:
    c = cluster(Node("v1", {"cpu": 4000}), Node("v2", {"cpu": 2000}))  # Karmada virtual nodes: no pod limit
    comps = (Component("a", 1), Component("b", 2))  # nothing requested: only pod slots, which are unlimited
    result = estimate(c, comps, max_sets=1000)
    assert result.sets == 1000
    validator.check(c, comps, result.sets, result.assignment)
    with_cpu = (comp("a", 1, 1000), Component("b", 2))
    result = estimate(c, with_cpu, max_sets=50)
    assert result.sets == 6  # a is limited by cpu: 4 + 2
    validator.check(c, with_cpu, result.sets, result.assignment)


@SETTINGS
@given(st.one_of(instances(), shared_instances()))
def test_first_fit_is_karmadas(case: tuple[Cluster, tuple[Component, ...]]) -> None:
    """The floor (a cursor per component, linear) counts what Karmada's SimulateScheduling counts
    (re-walking the nodes for every component, transcribed in tests/support/karmada_first_fit.py)."""
    c, comps = case
    assert first_fit_sets(c, comps) == karmada_first_fit(c, comps, 10**6)
