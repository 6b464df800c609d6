from __future__ import annotations

from webhook.placement.estimate import estimate
from webhook.placement.model import Cluster, Component, Node
from webhook.placement.select import select

JM = Component("jm", 1, {"cpu": 1000})
TM = Component("tm", 2, {"cpu": 1000})


def c(name: str, *cpus: int, not_ready: str = "") -> Cluster:
    return Cluster(
        name, tuple(Node(f"{name}-{i}", {"cpu": cpu, "pods": 10}) for i, cpu in enumerate(cpus)), not_ready
    )


def test_most_sets_wins_and_losers_explained() -> None:
    estimates = [estimate(cl, (JM, TM)) for cl in (c("a", 3000), c("b", 6000, 3000), c("z", 500))]
    assert [e.sets for e in estimates] == [1, 3, 0]
    chosen = select(estimates)
    assert chosen.selected == "b"
    assert chosen.reasons["a"] == "fewer sets than b (1 < 3)"
    assert chosen.reasons["z"].startswith("no complete set fits: component jm: no eligible node has room")
    assert "b" not in chosen.reasons


def test_tie_on_sets_goes_to_capacity_left_then_name() -> None:
    estimates = [estimate(cl, (JM, TM)) for cl in (c("b", 3000), c("c", 3000, 500), c("a", 3000))]
    assert [e.sets for e in estimates] == [1, 1, 1]
    chosen = select(estimates)
    assert chosen.selected == "c"  # same sets, 500m more cpu left after one set
    assert "less capacity left after one set" in chosen.reasons["a"]
    chosen = select([e for e in estimates if e.cluster != "c"])
    assert chosen.selected == "a"
    assert "name sorts later" in chosen.reasons["b"]


def test_not_ready_cluster_never_selected() -> None:
    estimates = [
        estimate(c("a", 9000, not_ready="cluster not Ready (down)"), (JM, TM)),
        estimate(c("b", 3000), (JM, TM)),
    ]
    chosen = select(estimates)
    assert chosen.selected == "b"
    assert chosen.reasons["a"] == "cluster not Ready (down)"


def test_nothing_fits() -> None:
    chosen = select([estimate(c("a", 100), (JM, TM))])
    assert chosen.selected is None and "a" in chosen.reasons
