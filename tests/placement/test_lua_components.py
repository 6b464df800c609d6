"""The componentResource customization, run in a sandbox with Karmada's Lua library set (gopher-lua's,
restricted as karmada-controller-manager restricts it), and the Python component parser agree on
every generated FlinkDeployment: same components, and quantities that Karmada's general estimator
counts as the parser does."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO
from tests.support.karmada_lua import KarmadaLua, karmada_lua
from tests.support.karmada_quantity import general_estimator_units
from tests.support.karmada_results import convert
from webhook.placement.components import components_from_flink, components_from_karmada
from webhook.placement.errors import PlacementInputError
from webhook.placement.model import Component
from webhook.placement.quantity import CPU, is_bytes

POLICY = REPO / "policies" / "karmada" / "resourceinterpretercustomization-flink-components.yaml"


def script() -> str:
    doc = yaml.safe_load(POLICY.read_text(encoding="utf-8"))
    assert set(doc["spec"]["customizations"]) == {"componentResource"}
    assert doc["spec"]["target"] == {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment"}
    text: str = doc["spec"]["customizations"]["componentResource"]["luaScript"]
    return text


@pytest.fixture(scope="module")
def lua() -> KarmadaLua:
    sandbox = karmada_lua()
    sandbox.load(script())
    return sandbox


def run_lua(lua: KarmadaLua, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """GetComponents as Karmada runs it: the result encoded by gopher-json's rules and decoded strictly
    into []workv1alpha2.Component (a shared table or an empty map fails here as it fails there)."""
    out: list[dict[str, Any]] = convert(lua, "componentResource", copy.deepcopy(obj))
    return out


def general_estimator_view(comp: Component) -> dict[str, int]:
    """What Karmada's general estimator should count for the parser's requests: cpu in millicores,
    bytes as bytes (BinarySI), every other resource x1000 (DecimalSI, as in the cluster summary)."""
    return {
        name: units if name == CPU or is_bytes(name) else units * 1000
        for name, units in comp.requests.items()
    }


def check_agree(lua: KarmadaLua, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Lua's components, read back by Karmada's rules (Kubernetes quantities), equal the Python parser's,
    and Karmada's general estimator counts every emitted quantity as the parser counts it."""
    try:
        expected = components_from_flink(obj)
    except PlacementInputError as exc:
        with pytest.raises(lua.error):
            lua.call_raw("GetComponents", copy.deepcopy(obj))
        return [{"error": str(exc)}]
    emitted = run_lua(lua, obj)
    assert components_from_karmada(emitted, "lua") == expected
    for comp, want in zip(emitted, expected, strict=True):
        request = comp.get("replicaRequirements", {}).get("resourceRequest", {})
        for value in request.values():  # strings: Karmada would misread a Lua number
            assert isinstance(value, str)
        assert {name: general_estimator_units(v) for name, v in request.items()} == general_estimator_view(
            want
        )
    return emitted


# --- generated FlinkDeployments ---------------------------------------------------------------------

cores = st.one_of(
    st.integers(0, 64),
    st.decimals(0, 64, places=3).map(lambda d: float(d)),
    st.sampled_from(["1", "500m", "0.25", "2.5", "1e0", "100m"]),
)
memory_units = st.sampled_from(
    ["", "b", "k", "kb", "m", "mb", "g", "gb", "t", "M", "G", "Mb", "bytes", "mebibytes"]
)
k8s_memory = st.builds(
    lambda n, s: f"{n}{s}", st.integers(1, 4096), st.sampled_from(["Ki", "Mi", "Gi", "k", "M", "G", "", "e3"])
)
memory = st.one_of(
    st.builds(
        lambda n, u, sp: f"{n}{' ' if sp else ''}{u}", st.integers(0, 65536), memory_units, st.booleans()
    ),
    k8s_memory,
    st.integers(0, 1 << 40),
    st.sampled_from(["1.5Gi", "0.5Gi", "1536Mi", "2048m", "1g", "100000"]),
)
quantities = st.one_of(st.integers(0, 16), st.sampled_from(["1", "2", "500m", "1k", "1Ki", "0.5"]))
labels = st.dictionaries(
    st.sampled_from(["pool", "zone", "disk"]), st.sampled_from(["a", "b", "flink"]), max_size=2
)
tolerations = st.lists(
    st.one_of(
        st.builds(
            lambda k, v, e: {"key": k, "operator": "Equal", "value": v, "effect": e},
            st.sampled_from(["dedicated", "gpu"]),
            st.sampled_from(["flink", "yes"]),
            st.sampled_from(["NoSchedule", "NoExecute", ""]),
        ),
        st.just({"operator": "Exists"}),
    ),
    max_size=2,
)
requirement = st.builds(
    lambda k, op, vs: (
        {"key": k, "operator": op, "values": vs}
        if op in ("In", "NotIn")
        else {"key": k, "operator": op, **({"values": []} if len(vs) > 1 else {})}  # [] as users write it
    ),
    st.sampled_from(["zone", "pool"]),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2),
)
affinity = st.builds(
    lambda terms: {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    },
    # Kubernetes rejects a required node affinity without terms: there is always one
    st.lists(
        st.builds(lambda r: {"matchExpressions": r}, st.lists(requirement, min_size=1, max_size=2)),
        min_size=1,
        max_size=2,
    ),
)


@st.composite
def pod_templates(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(labels)
    if draw(st.booleans()):
        spec["tolerations"] = draw(tolerations)
    if draw(st.booleans()):
        spec["affinity"] = draw(affinity)
    if draw(st.booleans()):
        spec["priorityClassName"] = draw(st.sampled_from(["", "high", "low"]))
    if draw(st.booleans()):
        resources = {
            key: draw(
                st.dictionaries(
                    st.sampled_from(["nvidia.com/gpu", "example.com/fpga", "cpu"]), quantities, max_size=2
                )
            )
            for key in draw(st.sets(st.sampled_from(["limits", "requests"])))
        }
        name = draw(st.sampled_from(["flink-main-container", "sidecar"]))
        spec["containers"] = [{"name": name, "resources": resources}]
    return {"spec": spec} if spec or draw(st.booleans()) else {}


k8s_requests = st.fixed_dictionaries(
    {},
    optional={
        "cpu": cores.map(str),
        "memory": memory.map(str),
        "ephemeral-storage": k8s_memory,
        "nvidia.com/gpu": quantities,
    },
)


@st.composite
def components_spec(draw: st.DrawFn, replicas: bool) -> dict[str, Any]:
    """A component with the FLINK-33548 ``resources``, the older ``resource``, or both (one per field)."""
    out: dict[str, Any] = {}
    style = draw(st.sampled_from(["resources", "resource", "both"]))
    if style != "resource":
        out["resources"] = {
            part: draw(k8s_requests) for part in draw(st.sets(st.sampled_from(["requests", "limits"])))
        }
    if style != "resources":
        out["resource"] = draw(
            st.fixed_dictionaries(
                {}, optional={"cpu": cores, "memory": memory, "ephemeralStorage": k8s_memory}
            )
        )
    if replicas and draw(st.booleans()):
        out["replicas"] = draw(st.one_of(st.integers(0, 50), st.integers(0, 50).map(str)))
    if draw(st.booleans()):
        out["podTemplate"] = draw(pod_templates())
    return out


@st.composite
def flink_deployments(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "jobManager": draw(components_spec(True)),
        "taskManager": draw(components_spec(True)),
    }
    if draw(st.booleans()):
        spec["podTemplate"] = draw(pod_templates())
    if draw(st.booleans()):
        spec["job"] = {"parallelism": draw(st.one_of(st.integers(0, 200), st.integers(0, 200).map(str)))}
    slots = draw(st.one_of(st.none(), st.integers(-1, 16), st.integers(0, 16).map(str), st.just("x")))
    if slots is not None:
        if draw(st.booleans()):
            spec["flinkConfiguration"] = {"taskmanager.numberOfTaskSlots": slots}
        else:
            spec["flinkConfiguration"] = {"taskmanager": {"numberOfTaskSlots": slots}}
    return {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": {"name": "f"},
        "spec": spec,
    }


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(obj=flink_deployments())
@example(  # a whole number must read as digits ("10", not "1e+01")
    obj={
        "spec": {"job": {"parallelism": 25}, "flinkConfiguration": {"taskmanager": {"numberOfTaskSlots": 10}}}
    }
)
@example(  # one shared template with tolerations and affinity: the same tables must not reach both components
    obj={
        "spec": {
            "podTemplate": {
                "spec": {
                    "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                    "nodeSelector": {"pool": "flink"},
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": "zone", "operator": "In", "values": ["a"]}
                                        ]
                                    },
                                    {},  # a term without requirements: still a NodeSelectorTerm for Go
                                ]
                            }
                        }
                    },
                }
            },
            "taskManager": {"podTemplate": {"spec": {"nodeSelector": {"disk": "ssd"}}}},
        }
    }
)
def test_lua_and_python_agree(lua: KarmadaLua, obj: dict[str, Any]) -> None:
    check_agree(lua, obj)


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ({"cpu": 1, "memory": "2048m"}, {"cpu": "1000m", "memory": "2Gi"}),
        ({"cpu": 0.5, "memory": "1536m"}, {"cpu": "500m", "memory": "1536Mi"}),
        ({"cpu": 0.1, "memory": "2g"}, {"cpu": "100m", "memory": "2Gi"}),
        ({"cpu": "250m", "memory": "4Gi"}, {"cpu": "250m", "memory": "4Gi"}),  # Kubernetes units
        ({"cpu": 2, "memory": "4096Mi"}, {"cpu": "2000m", "memory": "4Gi"}),
        ({"memory": 1000}, {"memory": "1Ki"}),  # bytes: a whole KiB, never the DecimalSI "1000"
        ({"memory": 1048577}, {"memory": "1025Ki"}),
        ({"memory": "1G"}, {"memory": "1Gi"}),  # Flink: G is GiB, not 10^9
        ({"memory": "1.5Gi"}, {"memory": "1536Mi"}),
        ({"memory": "4G "}, {"memory": "4Gi"}),
        ({"ephemeralStorage": "10G"}, {"ephemeral-storage": "9765625Ki"}),  # 10^10 bytes
        ({"ephemeralStorage": "2Gi"}, {"ephemeral-storage": "2Gi"}),
    ],
)
def test_emitted_quantities(lua: KarmadaLua, resource: dict[str, Any], expected: dict[str, str]) -> None:
    """Flink units and Kubernetes units alike come out BinarySI (bytes) and in millicores (cpu)."""
    obj = {"spec": {"jobManager": {"resource": resource}, "taskManager": {"resource": resource}}}
    jm, tm = check_agree(lua, obj)
    assert (
        jm["replicaRequirements"]["resourceRequest"]
        == expected
        == tm["replicaRequirements"]["resourceRequest"]
    )


@pytest.mark.parametrize(
    ("component", "expected"),
    [
        # FLINK-33548: resources.requests first, then resources.limits, then the older resource
        (
            {
                "resources": {"requests": {"cpu": "2", "memory": "4Gi"}},
                "resource": {"cpu": 1, "memory": "1g"},
            },
            {"cpu": "2000m", "memory": "4Gi"},
        ),
        (
            {
                "resources": {"limits": {"cpu": "3", "memory": "2048m"}},
                "resource": {"cpu": 1, "memory": "1g"},
            },
            {"cpu": "3000m", "memory": "2Gi"},
        ),
        (
            {"resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "2", "memory": "8Gi"}}},
            {"cpu": "500m", "memory": "8Gi"},
        ),
        (
            {
                "resources": {"requests": {"memory": "2g"}},
                "resource": {"cpu": 1.5, "ephemeralStorage": "1Gi"},
            },
            {"cpu": "1500m", "memory": "2Gi", "ephemeral-storage": "1Gi"},
        ),
        (
            {
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                "podTemplate": {
                    "spec": {
                        "containers": [
                            {"name": "flink-main-container", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                        ]
                    }
                },
            },
            {"cpu": "1000m", "memory": "1Gi", "nvidia.com/gpu": "1"},
        ),
    ],
)
def test_flink_33548_resources(lua: KarmadaLua, component: dict[str, Any], expected: dict[str, str]) -> None:
    obj = {"kind": "FlinkDeployment", "spec": {"jobManager": component, "taskManager": component}}
    jm, tm = check_agree(lua, obj)
    assert (
        jm["replicaRequirements"]["resourceRequest"]
        == expected
        == tm["replicaRequirements"]["resourceRequest"]
    )


@pytest.mark.parametrize(
    "spec",
    [
        {"jobManager": {"resource": {"memory": "2 GiB"}}},
        {"jobManager": {"resource": {"cpu": "-1"}}},
        {"jobManager": {"replicas": -1}},
        {"jobManager": {"replica": 1}},
        {"taskManager": {"resource": {"memory": True}}},
        {"job": {"parallelism": 4}, "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "two"}},
        {"jobManager": {"resources": {"requests": {"pods": "1"}}}},
    ],
)
def test_malformed_deployments_fail_in_both(lua: KarmadaLua, spec: dict[str, Any]) -> None:
    (result,) = check_agree(lua, {"spec": spec})[:1]
    assert "error" in result


@pytest.mark.shared
def test_karmada_interpreter_cases(lua: KarmadaLua, shared_data: Path) -> None:
    """Karmada's own FlinkDeployment test objects: same replicas and names, memory read Flink's way."""
    path = shared_data / "karmada-interpreter" / "interpretcomponent-test.yaml"
    cases = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert cases
    for case in cases:
        emitted = check_agree(lua, case["desiredObj"])
        karmada = case["output"]["components"]
        assert [(c["name"], c["replicas"]) for c in emitted] == [(c["name"], c["replicas"]) for c in karmada]
        for ours in emitted:
            assert ours["replicaRequirements"]["resourceRequest"]["memory"] == "2Gi"  # Karmada: "2048m"


def test_no_two_customizations_of_one_kind_share_an_operation() -> None:
    """karmada-webhook refuses a ResourceInterpreterCustomization whose operation another one for the
    same kind already customizes; ours (retention, componentResource) must be installable together."""
    seen: dict[tuple[str, str, str], str] = {}
    for path in sorted(POLICY.parent.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not doc or doc.get("kind") != "ResourceInterpreterCustomization":
                continue
            target = doc["spec"]["target"]
            for operation in doc["spec"]["customizations"]:
                key = (target["apiVersion"], target["kind"], operation)
                assert key not in seen, f"{doc['metadata']['name']} and {seen[key]} both customize {key}"
                seen[key] = doc["metadata"]["name"]
    assert ("flink.apache.org/v1beta1", "FlinkDeployment", "componentResource") in seen
    assert ("flink.apache.org/v1beta1", "FlinkDeployment", "retention") in seen
