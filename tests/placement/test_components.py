from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.placement.components import (
    components_from_flink,
    components_from_karmada,
    load_workload,
    taskmanager_replicas,
)
from webhook.placement.errors import PlacementInputError
from webhook.placement.model import Requirement, Toleration

MI = 1024 * 1024
GI = 1024 * MI


def fd(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": {"name": "x"},
        "spec": spec,
    }


def test_flink_basic_components_and_memory() -> None:
    jm, tm = components_from_flink(
        fd(
            {
                "jobManager": {"resource": {"cpu": 0.5, "memory": "2048m"}},
                "taskManager": {
                    "replicas": 3,
                    "resource": {"cpu": 2, "memory": "4g", "ephemeralStorage": "10Gi"},
                },
            }
        )
    )
    assert (jm.name, jm.replicas, dict(jm.requests)) == ("jobmanager", 1, {"cpu": 500, "memory": 2 * GI})
    assert (tm.name, tm.replicas) == ("taskmanager", 3)
    assert dict(tm.requests) == {"cpu": 2000, "memory": 4 * GI, "ephemeral-storage": 10 * GI}


@pytest.mark.parametrize(
    ("spec", "replicas"),
    [
        ({"taskManager": {"replicas": 7}, "job": {"parallelism": 100}}, 7),
        ({"job": {"parallelism": 10}, "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "3"}}, 4),
        ({"job": {"parallelism": 10}, "flinkConfiguration": {"taskmanager": {"numberOfTaskSlots": 4}}}, 3),
        ({"job": {"parallelism": 5}}, 5),  # Flink's default: one slot per task manager
        ({"job": {"parallelism": 10}, "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "0"}}, 1),
        ({}, 1),
        ({"flinkConfiguration": {"taskmanager.numberOfTaskSlots": "2"}}, 1),
    ],
)
def test_taskmanager_replicas(spec: dict[str, Any], replicas: int) -> None:
    assert taskmanager_replicas(spec) == replicas


def test_jobmanager_replicas_and_pod_template_override() -> None:
    jm, tm = components_from_flink(
        fd(
            {
                "podTemplate": {
                    "spec": {
                        "nodeSelector": {"disk": "ssd", "zone": "a"},
                        "tolerations": [
                            {
                                "key": "dedicated",
                                "operator": "Equal",
                                "value": "flink",
                                "effect": "NoSchedule",
                            }
                        ],
                        "priorityClassName": "low",
                        "affinity": {
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [
                                        {
                                            "matchExpressions": [
                                                {"key": "arch", "operator": "In", "values": ["amd64"]}
                                            ]
                                        }
                                    ]
                                }
                            }
                        },
                    }
                },
                "jobManager": {"replicas": 2, "resource": {"cpu": 1, "memory": "1g"}},
                "taskManager": {
                    "replicas": 1,
                    "resource": {"cpu": 1, "memory": "1g"},
                    "podTemplate": {
                        "spec": {
                            "nodeSelector": {"zone": "b"},
                            "tolerations": [{"operator": "Exists"}],
                            "priorityClassName": "high",
                            "containers": [
                                {
                                    "name": "flink-main-container",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                },
                                {"name": "sidecar", "resources": {"requests": {"example.com/foo": "5"}}},
                            ],
                        }
                    },
                },
            }
        )
    )
    assert jm.replicas == 2
    assert dict(jm.node_selector) == {"disk": "ssd", "zone": "a"}
    assert jm.tolerations == (Toleration("dedicated", "Equal", "flink", "NoSchedule"),)
    assert jm.priority_class == "low"
    assert jm.affinity_terms is not None
    assert jm.affinity_terms[0].requirements == (Requirement("arch", "In", ("amd64",)),)
    # the component's own template wins field by field; maps merge
    assert dict(tm.node_selector) == {"disk": "ssd", "zone": "b"}
    assert tm.tolerations == (Toleration("", "Exists", "", ""),)
    assert tm.priority_class == "high"
    assert tm.affinity_terms == jm.affinity_terms
    assert dict(tm.requests) == {"cpu": 1000, "memory": GI, "nvidia.com/gpu": 1}


def test_resources_requests_win_over_resource() -> None:
    _, tm = components_from_flink(
        fd(
            {
                "taskManager": {
                    "resource": {"cpu": 1, "memory": "1g"},
                    "resources": {"requests": {"cpu": "3", "memory": "6Gi", "nvidia.com/gpu": "2"}},
                }
            }
        )
    )
    assert dict(tm.requests) == {"cpu": 3000, "memory": 6 * GI, "nvidia.com/gpu": 2}


@pytest.mark.parametrize(
    ("component", "expected"),
    [
        # FLINK-33548, per resource: resources.requests, then resources.limits, then resource
        (
            {"resources": {"limits": {"cpu": "2", "memory": "4Gi"}}, "resource": {"cpu": 1}},
            {"cpu": 2000, "memory": 4 * GI},
        ),
        (
            {"resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "1", "memory": "2048m"}}},
            {"cpu": 250, "memory": 2 * GI},
        ),
        (
            {
                "resources": {"requests": {"memory": "2g"}},
                "resource": {"cpu": 0.5, "ephemeralStorage": "1Gi"},
            },
            {"cpu": 500, "memory": 2 * GI, "ephemeral-storage": GI},
        ),
        ({"resources": {"claims": [{"name": "gpu"}]}, "resource": {"memory": "1g"}}, {"memory": GI}),
        # bytes are asked for in whole KiB, as the components customization emits them
        ({"resource": {"memory": 1000}}, {"memory": 1024}),
        ({"resources": {"requests": {"ephemeral-storage": "1025"}}}, {"ephemeral-storage": 2048}),
    ],
)
def test_resources_field_precedence(component: dict[str, Any], expected: dict[str, int]) -> None:
    _, tm = components_from_flink(fd({"taskManager": component}))
    assert dict(tm.requests) == expected


def test_resources_keep_the_main_containers_extended_resources() -> None:
    template = {
        "spec": {
            "containers": [{"name": "flink-main-container", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
        }
    }
    _, tm = components_from_flink(
        fd(
            {
                "taskManager": {
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    "podTemplate": template,
                }
            }
        )
    )
    assert dict(tm.requests) == {"cpu": 1000, "memory": GI, "nvidia.com/gpu": 1}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"taskManager": {"resource": {"cpu": 1, "memory": "2 GiB"}}}, "spec.taskManager.resource.memory"),
        ({"taskManager": {"resource": {"cpu": 1, "memry": "2g"}}}, "unknown field 'memry'"),
        ({"jobManager": {"replica": 1}}, "unknown field 'replica'"),
        ({"jobManager": {"replicas": -1}}, "spec.jobManager.replicas"),
        ({"taskManager": {"resource": {"cpu": "x"}}}, "spec.taskManager.resource.cpu"),
        (
            {"podTemplate": {"spec": {"tolerations": [{"key": "a", "operator": "Maybe"}]}}},
            "spec.jobManager.podTemplate.spec.tolerations[0].operator",
        ),
    ],
)
def test_flink_errors_name_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(PlacementInputError, match=message.replace("[", "\\[").replace("]", "\\]")):
        components_from_flink(fd(spec))


def test_karmada_components() -> None:
    comps = components_from_karmada(
        [
            {
                "name": "jm",
                "replicas": 1,
                "replicaRequirements": {"resourceRequest": {"cpu": "1", "memory": "4Gi"}},
            },
            {
                "name": "tm",
                "replicas": 5,
                "replicaRequirements": {
                    "resourceRequest": {"cpu": "2", "memory": "2048m", "nvidia.com/gpu": "1"},
                    "nodeClaim": {
                        "nodeSelector": {"pool": "flink"},
                        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                        "hardNodeAffinity": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "rank", "operator": "Gt", "values": ["3"]}]},
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "In", "values": ["n1"]}
                                    ]
                                },
                            ]
                        },
                    },
                    "priorityClassName": "p",
                },
            },
        ],
        "spec.components",
    )
    jm, tm = comps
    assert dict(jm.requests) == {"cpu": 1000, "memory": 4 * GI}
    assert dict(tm.requests) == {"cpu": 2000, "memory": 3, "nvidia.com/gpu": 1}  # a Kubernetes quantity here
    assert tm.affinity_terms is not None and len(tm.affinity_terms) == 2
    assert tm.affinity_terms[1].requirements[0].field
    assert tm.priority_class == "p"


def test_resource_binding_of_a_flinkdeployment_reads_flink_memory() -> None:
    rb = {
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "spec": {
            "resource": {"kind": "FlinkDeployment", "name": "x"},
            "components": [
                {
                    "name": "taskmanager",
                    "replicas": 2,
                    "replicaRequirements": {"resourceRequest": {"memory": "2048m"}},
                }
            ],
        },
    }
    (tm,) = load_workload(rb)
    assert tm.requests["memory"] == 2048 * MI


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([{"name": "a", "replicas": 1, "replicaRequirement": {}}], "unknown field 'replicaRequirement'"),
        (
            [{"name": "a", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "1x"}}}],
            "resourceRequest.cpu",
        ),
        ([{"name": "a"}, {"name": "a"}], "duplicate component"),
        ([], "no components"),
        (
            [
                {
                    "name": "a",
                    "replicaRequirements": {
                        "nodeClaim": {
                            "hardNodeAffinity": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]}
                                ]
                            }
                        }
                    },
                }
            ],
            "needs exactly one integer",
        ),
        (
            [{"name": "a", "replicaRequirements": {"resourceRequest": {"pods": "1"}}}],
            "pods cannot be requested",
        ),
    ],
)
def test_karmada_errors(raw: Any, message: str) -> None:
    with pytest.raises(PlacementInputError, match=message):
        load_workload({"components": raw})


def test_unknown_workload_kind() -> None:
    with pytest.raises(PlacementInputError, match="not a workload"):
        load_workload({"kind": "Deployment"})


def test_zero_replicas_everywhere_is_bad_input() -> None:
    with pytest.raises(PlacementInputError, match="nothing to place"):
        load_workload({"components": [{"name": "a", "replicas": 0}]})


def _interpreter_cases(shared: Path) -> list[dict[str, Any]]:
    path = shared / "karmada-interpreter" / "interpretcomponent-test.yaml"
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.mark.shared
def test_karmada_interpreter_component_data(shared_data: Path) -> None:
    """Karmada's expected components, with the memory Karmada writes ("2048m") read as Flink means it."""
    cases = _interpreter_cases(shared_data)
    assert len(cases) >= 5
    for case in cases:
        ours = components_from_flink(case["desiredObj"])
        expected = components_from_karmada(case["output"]["components"], "output", flink_memory=True)
        assert [(c.name, c.replicas) for c in ours] == [(c.name, c.replicas) for c in expected], case["name"]
        for mine, theirs in zip(ours, expected, strict=True):
            assert dict(mine.requests) == dict(theirs.requests), case["name"]
            assert mine.requests["memory"] == 2048 * MI  # 2 GiB, not Karmada's 2.048 bytes
            assert dict(mine.node_selector) == dict(theirs.node_selector)
            assert mine.tolerations == theirs.tolerations
            assert mine.priority_class == theirs.priority_class


@pytest.mark.shared
def test_karmada_interpreter_replica_data(shared_data: Path) -> None:
    """The replica totals in Karmada's InterpretReplica cases are job manager + task manager replicas."""
    path = shared_data / "karmada-interpreter" / "interpretreplica-test.yaml"
    cases = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert cases
    for case in cases:
        jm, tm = components_from_flink(case["desiredObj"])
        assert jm.replicas + tm.replicas == case["output"]["replica"], case["name"]
