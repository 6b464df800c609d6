"""Karmada's recorded requests and answers decode with our .proto, and read into the right components."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from tests.estimator.conftest import WORKLOADS
from tests.support.scheduler_wire import component_pb
from webhook.estimator import wire
from webhook.estimator.proto import estimator_pb2 as pb
from webhook.estimator.proto import k8s_core_v1_pb2 as core
from webhook.estimator.proto import k8s_resource_pb2 as resource
from webhook.estimator.proto import service_pb2
from webhook.placement.model import Toleration

REQUESTS = [f"request-components-{w}" for w in (*WORKLOADS, "small-assumed")]
ANSWERS = {
    "response-components-small": 204,
    "response-components-medium": 16,
    "response-components-large": 1,
    "response-components-ha": 4,
    "response-components-small-assumed": 202,
    "response-components-small-assumed-gate-off": 204,
}

pytestmark = pytest.mark.shared


def _request(path: Path) -> Any:
    cls = pb.MaxAvailableReplicasRequest if "replicas" in path.name else pb.MaxAvailableComponentSetsRequest
    return cls.FromString(path.read_bytes())


@pytest.mark.parametrize("name", [*REQUESTS, "request-replicas-taskmanager"])
def test_requests_decode_to_their_json_rendering(karmada_data: Path, name: str) -> None:
    message = _request(karmada_data / f"{name}.bin")
    decoded = json_format.MessageToDict(message, preserving_proto_field_name=True)
    assert decoded == json.loads((karmada_data / f"{name}.json").read_text())


@pytest.mark.parametrize("name", [*REQUESTS, "request-replicas-taskmanager"])
def test_deterministic_serialization_reproduces_the_recorded_bytes(karmada_data: Path, name: str) -> None:
    raw = (karmada_data / f"{name}.bin").read_bytes()
    assert _request(karmada_data / f"{name}.bin").SerializeToString(deterministic=True) == raw


@pytest.mark.parametrize(("name", "sets"), sorted(ANSWERS.items()))
def test_recorded_answers_decode_and_encode_identically(karmada_data: Path, name: str, sets: int) -> None:
    raw = (karmada_data / f"{name}.bin").read_bytes()
    assert pb.MaxAvailableComponentSetsResponse.FromString(raw).maxSets == sets
    assert pb.MaxAvailableComponentSetsResponse(maxSets=sets).SerializeToString() == raw


def test_replicas_answer(karmada_data: Path) -> None:
    raw = (karmada_data / "response-replicas-taskmanager.bin").read_bytes()
    assert pb.MaxAvailableReplicasResponse.FromString(raw).maxReplicas == 817
    assert pb.MaxAvailableReplicasResponse(maxReplicas=817).SerializeToString() == raw


def test_service_names_are_karmadas() -> None:
    service = service_pb2.DESCRIPTOR.services_by_name["Estimator"]
    assert service.full_name == "github.com.karmada_io.karmada.pkg.estimator.service.Estimator"
    assert sorted(m.name for m in service.methods) == [
        "GetUnschedulableReplicas",
        "MaxAvailableComponentSets",
        "MaxAvailableReplicas",
    ]
    assert pb.DESCRIPTOR.package == "github.com.karmada_io.karmada.pkg.estimator.pb"


def test_bytes_fields_match_the_readme_examples() -> None:
    assert resource.Quantity(string="2").SerializeToString() == bytes.fromhex("0a0132")
    tol = core.Toleration(key="dedicated", operator="Equal", value="flink", effect="NoSchedule")
    assert len(tol.SerializeToString()) == 37


def test_small_request_reads_into_components(karmada_data: Path) -> None:
    request = _request(karmada_data / "request-components-small.bin")
    jm, tm = wire.components(request.components)  # type: ignore[misc]
    assert (jm.name, jm.replicas, dict(jm.requests)) == ("jobmanager", 1, {"cpu": 1000, "memory": 4 << 30})
    assert (tm.name, tm.replicas, dict(tm.requests)) == ("taskmanager", 4, {"cpu": 2000, "memory": 8 << 30})
    assert dict(tm.node_selector) == {"pool": "flink"}
    assert tm.tolerations == (Toleration("dedicated", "Equal", "flink", "NoSchedule"),)


def _one(**claim: Any) -> pb.Component:
    return pb.Component(
        name="c",
        replicas=1,
        replicaRequirements=pb.ComponentReplicaRequirements(nodeClaim=pb.NodeClaim(**claim)),
    )


def test_bytes_fields_win_over_deprecated_ones() -> None:
    comp = pb.Component(name="c", replicas=2)
    req = comp.replicaRequirements
    req.resourceRequest["cpu"].string = "1"
    req.resourceRequestBytes["cpu"] = resource.Quantity(string="3").SerializeToString()
    term = core.NodeSelectorTerm(
        matchExpressions=[core.NodeSelectorRequirement(key="zone", operator="In", values=["a"])]
    )
    other = core.NodeSelectorTerm(
        matchExpressions=[core.NodeSelectorRequirement(key="zone", operator="In", values=["b"])]
    )
    req.nodeClaim.nodeAffinity.CopyFrom(core.NodeSelector(nodeSelectorTerms=[other]))
    req.nodeClaim.nodeAffinityBytes = core.NodeSelector(nodeSelectorTerms=[term]).SerializeToString()
    req.nodeClaim.tolerations.add(key="old", operator="Exists")
    req.nodeClaim.tolerationsBytes.append(core.Toleration(key="new", operator="Exists").SerializeToString())
    (c,) = wire.components([comp])  # type: ignore[misc]
    assert c.requests["cpu"] == 3000
    assert c.affinity_terms is not None and c.affinity_terms[0].requirements[0].values == ("a",)
    assert c.tolerations == (Toleration("new", "Exists"),)


def test_deprecated_fields_alone_are_read() -> None:
    comp = pb.Component(name="c", replicas=1)
    comp.replicaRequirements.resourceRequest["memory"].string = "2Gi"
    comp.replicaRequirements.nodeClaim.tolerations.add(
        key="k", operator="Equal", value="v", effect="NoExecute"
    )
    (c,) = wire.components([comp])  # type: ignore[misc]
    assert c.requests["memory"] == 2 << 30
    assert c.tolerations == (Toleration("k", "Equal", "v", "NoExecute"),)


@pytest.mark.parametrize(
    ("component", "error"),
    [
        (pb.Component(name="c", replicas=-1), "replicas: must be >= 0"),
        (_one(nodeAffinityBytes=b"\xff\xff"), "not a NodeSelector"),
        (_one(tolerationsBytes=[b"\x0a\x05ab"]), "not a Toleration"),
        (
            pb.Component(
                name="c",
                replicas=1,
                replicaRequirements=pb.ComponentReplicaRequirements(
                    resourceRequestBytes={"cpu": b"\x0a\x02zz"}
                ),
            ),
            "malformed quantity",
        ),
        (
            _one(tolerationsBytes=[core.Toleration(operator="Equal").SerializeToString()]),
            "needs operator Exists",
        ),
    ],
)
def test_bad_requests_are_values_with_a_reason(component: pb.Component, error: str) -> None:
    result = wire.components([component])
    assert isinstance(result, wire.Invalid)
    assert error in result.message


def test_base64_of_a_toleration_element_is_the_37_byte_message(karmada_data: Path) -> None:
    doc = json.loads((karmada_data / "request-components-small.json").read_text())
    raw = base64.b64decode(doc["components"][1]["replicaRequirements"]["nodeClaim"]["tolerationsBytes"][0])
    assert core.Toleration.FromString(raw).key == "dedicated"
    assert len(raw) == 37


@pytest.mark.parametrize("workload", WORKLOADS)
def test_encoding_components_gives_karmadas_request(karmada_data: Path, workload: str) -> None:
    """Our encoder fills the message as Karmada's scheduler client does: the recorded bytes exactly."""
    raw = (karmada_data / f"request-components-{workload}.bin").read_bytes()
    comps = wire.components(pb.MaxAvailableComponentSetsRequest.FromString(raw).components)
    assert not isinstance(comps, wire.Invalid)
    request = pb.MaxAvailableComponentSetsRequest(
        cluster="c-1000", components=[component_pb(c) for c in comps], namespace="analytics"
    )
    assert request.SerializeToString(deterministic=True) == raw
    assert wire.components(request.components) == comps


def test_affinity_round_trips() -> None:
    from webhook.placement.model import Component, NodeSelectorTerm, Requirement

    comp = Component(
        "c",
        3,
        {"cpu": 500, "nvidia.com/gpu": 1},
        {"pool": "gpu"},
        (Toleration("gpu", "Exists", "", "NoSchedule"),),
        (
            NodeSelectorTerm(
                (Requirement("zone", "In", ("a", "b")), Requirement("metadata.name", "NotIn", ("n1",), True))
            ),
        ),
        "high",
    )
    assert wire.components([component_pb(comp)]) == (comp,)
