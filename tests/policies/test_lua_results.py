"""Every shipped Lua script's result, converted the way karmada-controller-manager converts it.

A script that runs is not yet a script that works in Karmada: Karmada encodes its result with
gopher-json (one visited set over the whole result, ``[]`` for an empty table, ...) and decodes that
into the Go type of the operation (``../shared/DESIGN.md`` §10). Twice a shipped script passed the
suite and failed there (``string.gsub``; then the same toleration table in both components), and no
ResourceBinding was built for any FlinkDeployment. So every ResourceInterpreterCustomization under
``policies/`` (found by file glob: a new one is covered the day it lands) runs here, every operation it
customizes, on every recorded object of its target kind in ``../shared/data`` and the repository's
samples, and its result is converted by ``tests/support/karmada_results.py``. The planted scripts at
the end show that the check fails where Karmada fails.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.support.crds import crd_validator
from tests.support.karmada_lua import NESTED, SPARSE, EncodeError, KarmadaLua, karmada_lua
from tests.support.karmada_results import ENTRY_POINTS, convert
from tests.support.karmada_shapes import DecodeError
from tests.support.objects import JOB_ID, flink_deployment
from tests.support.repo import shared_data_dir

pytestmark = pytest.mark.shared

POLICIES = REPO / "policies"
COMPONENTS_FILE = "resourceinterpretercustomization-flink-components.yaml"
# The CRD (under ../shared/data/crds) and version an object of each kind is validated against.
CRDS = {
    "FlinkDeployment": ("flink/flinkdeployments.flink.apache.org-v1.yml", "v1beta1"),
    "FlinkSessionJob": ("flink/flinksessionjobs.flink.apache.org-v1.yml", "v1beta1"),
    "FlinkBlueGreenDeployment": (
        "flink-operator-1.15.0/flinkbluegreendeployments.flink.apache.org-v1.yml",
        "v1beta1",
    ),
}
RESTORE = {
    "flink-failover.io/restore-decision": "restored",
    "flink-failover.io/restored-from": f"s3://bucket/checkpoints/{JOB_ID}/chk-42",
    "flink-failover.io/restored-job-id": JOB_ID,
    "flink-failover.io/epoch": "1",
}


def customizations() -> list[tuple[str, str, str, str]]:
    """(file, target kind, operation, script) of every Lua script shipped under policies/."""
    out = []
    for path in sorted(POLICIES.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not doc or doc.get("kind") != "ResourceInterpreterCustomization":
                continue
            for operation, body in doc["spec"]["customizations"].items():
                if isinstance(body, dict) and "luaScript" in body:
                    out.append((path.name, doc["spec"]["target"]["kind"], operation, body["luaScript"]))
    return out


def _flink_objects(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        if str(value.get("apiVersion", "")).startswith("flink.apache.org/") and isinstance(
            value.get("spec"), dict
        ):
            yield value
        for child in value.values():
            yield from _flink_objects(child)
    elif isinstance(value, list):
        for child in value:
            yield from _flink_objects(child)


def _documents(path: Path) -> list[Any]:
    text = path.read_text(encoding="utf-8")
    return [json.loads(text)] if path.suffix == ".json" else list(yaml.safe_load_all(text))


@cache
def recorded() -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Flink objects by kind: everything recorded in ../shared/data (Works' manifests, member objects,
    Karmada's interpreter test objects, the operator's examples) and in the repository's samples,
    plus FlinkSessionJobs built here (none is recorded)."""
    out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    seen: set[str] = set()
    roots = [shared_data_dir(), REPO / "tests" / "samples", REPO / "tests" / "fixtures"]
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix not in (".json", ".yaml", ".yml") or path.stat().st_size > 3_000_000:
                continue
            if "crds" in path.parts and "example" not in path.name:
                continue  # the CRDs themselves
            for doc in _documents(path):
                for obj in _flink_objects(doc):
                    key = json.dumps(obj, sort_keys=True)
                    if key not in seen:
                        seen.add(key)
                        out.setdefault(obj["kind"], []).append((path.name, obj))
    for i, job in enumerate((True, None, {"jarURI": "https://jars.example/j.jar", "state": "running"})):
        obj = flink_deployment(kind="FlinkSessionJob", job=job, annotations={"team": "a"} if i else None)
        out.setdefault("FlinkSessionJob", []).append((f"built-{i}", obj))
    return out


def observed_variants(desired: dict[str, Any]) -> list[dict[str, Any] | None]:
    """What a member cluster may hold when Karmada re-applies ``desired``: nothing, the same object,
    a restored one, a held one, a fenced one, one with empty maps and lists."""
    out: list[dict[str, Any] | None] = [None, copy.deepcopy(desired)]
    restored = copy.deepcopy(desired)
    restored.setdefault("metadata", {}).setdefault("annotations", {}).update(RESTORE)
    if isinstance(restored["spec"].get("job"), dict):
        restored["spec"]["job"]["initialSavepointPath"] = RESTORE["flink-failover.io/restored-from"]
    restored["status"] = {"jobStatus": {"state": "RUNNING", "jobId": JOB_ID}}
    out.append(restored)
    held = copy.deepcopy(restored)
    held["metadata"]["annotations"]["flink-failover.io/hold"] = "epoch 1: waiting for member1 to stop"
    if isinstance(held["spec"].get("job"), dict):
        held["spec"]["job"]["state"] = "suspended"
    out.append(held)
    fenced = copy.deepcopy(held)
    del fenced["metadata"]["annotations"]["flink-failover.io/hold"]
    fenced["metadata"].setdefault("labels", {})["flink-failover.io/fenced"] = "2"
    fenced["metadata"]["annotations"]["flink-failover.io/fenced-by"] = "member3 at epoch 2"
    if isinstance(fenced["spec"].get("job"), dict):
        fenced["spec"]["job"]["upgradeMode"] = "stateless"
    out.append(fenced)
    bare = copy.deepcopy(restored)
    bare["metadata"]["labels"] = {}
    bare["spec"]["flinkConfiguration"] = {}
    bare["status"]["conditions"] = []
    out.append(bare)
    return out


@cache
def _validator(kind: str) -> Any:
    crd, version = CRDS[kind]
    return crd_validator(shared_data_dir() / "crds" / crd, version)


def schema_errors(obj: dict[str, Any]) -> list[str]:
    if obj.get("kind") not in CRDS:
        return []
    body = {k: v for k, v in obj.items() if k != "status"}
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in _validator(obj["kind"]).iter_errors(body)
    ]


def leaves(value: Any, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The paths of a JSON value's leaves (an empty map or list is a leaf too)."""
    if isinstance(value, dict) and value:
        return {leaf for k, v in value.items() for leaf in leaves(v, (*path, k))}
    if isinstance(value, list) and value:
        return {leaf for i, v in enumerate(value) for leaf in leaves(v, (*path, str(i)))}
    return {path}


def paths(value: Any, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every path in a JSON value, inner ones included."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return {path}.union(*(paths(v, (*path, str(k))) for k, v in items))


def check_customization(sandbox: KarmadaLua, kind: str, operation: str, objects: list[dict[str, Any]]) -> int:
    """Run ``operation`` on every object as Karmada would and convert each result; raises on the first
    result Karmada could not use. The number of results converted."""
    converted = 0
    for obj in objects:
        desired = {k: v for k, v in obj.items() if k != "status"}
        if operation == "retention":
            for observed in observed_variants(obj):
                retained = convert(
                    sandbox, operation, copy.deepcopy(desired), observed=copy.deepcopy(observed)
                )
                assert retained["kind"] == kind and retained["apiVersion"] == desired["apiVersion"]
                lost = leaves(desired) - paths(retained)  # retention keeps; it never drops the template
                assert not lost, f"{obj['metadata'].get('name')}: the retained object lost {sorted(lost)}"
                if not schema_errors(desired):  # what the API server took, re-applied, is taken again
                    assert schema_errors(retained) == [], (
                        f"{obj['metadata'].get('name')}: {schema_errors(retained)}"
                    )
                converted += 1
        elif operation == "statusAggregation":
            items = [
                {
                    "clusterName": "member1",
                    "status": obj.get("status", {}),
                    "applied": True,
                    "health": "Healthy",
                }
            ]
            convert(sandbox, operation, copy.deepcopy(obj), items=items)
            converted += 1
        else:
            convert(sandbox, operation, copy.deepcopy(obj))
            converted += 1
    return converted


def _id(value: Any) -> str:
    return str(value)[:48]


@pytest.mark.parametrize(("name", "kind", "operation", "script"), customizations(), ids=_id)
def test_every_shipped_script_converts_as_karmada_converts(
    name: str, kind: str, operation: str, script: str
) -> None:
    assert operation in ENTRY_POINTS, f"{name}: no conversion known for operation {operation}"
    objects = [obj for _, obj in recorded().get(kind, [])]
    assert objects, f"{name}: no recorded {kind} to run {operation} on (add one under tests/samples)"
    sandbox = karmada_lua()
    sandbox.load(script)
    assert check_customization(sandbox, kind, operation, objects) >= len(objects)


def test_the_recorded_objects_cover_what_matters() -> None:
    """The corpus is not empty by accident: FlinkDeployments from Karmada's own interpreter tests and
    from the recorded runs, with pod templates, and the operator's FlinkBlueGreenDeployment examples."""
    corpus = recorded()
    deployments = corpus["FlinkDeployment"]
    assert len(deployments) >= 40
    assert any("podTemplate" in obj["spec"] for _, obj in deployments)
    assert {"FlinkSessionJob", "FlinkBlueGreenDeployment"} <= set(corpus)


def test_every_shipped_script_is_covered() -> None:
    found = {(name, operation) for name, _, operation, _ in customizations()}
    assert (COMPONENTS_FILE, "componentResource") in found
    assert ("resourceinterpretercustomization-flink-retention.yaml", "retention") in found


# --- the check fails where Karmada fails ---------------------------------------------------------------

SHARED_TEMPLATE = {
    "apiVersion": "flink.apache.org/v1beta1",
    "kind": "FlinkDeployment",
    "metadata": {"name": "orders", "namespace": "analytics"},
    "spec": {
        "podTemplate": {
            "spec": {
                "nodeSelector": {"pool": "flink"},
                "tolerations": [
                    {"key": "dedicated", "operator": "Equal", "value": "flink", "effect": "NoSchedule"}
                ],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "In", "values": ["a", "b"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            }
        },
        "jobManager": {"resource": {"cpu": 1, "memory": "2048m"}},
        "taskManager": {"resource": {"cpu": 2, "memory": "4Gi"}, "replicas": 3},
    },
}


def shipped(name: str, operation: str, kind: str = "FlinkDeployment") -> str:
    (script,) = [s for file, k, op, s in customizations() if (file, k, op) == (name, kind, operation)]
    return script


def planted(script: str, old: str, new: str) -> str:
    assert old in script, f"the mutation's anchor {old!r} is gone from the shipped script"
    return script.replace(old, new)


def run_check(script: str, kind: str, operation: str, extra: list[dict[str, Any]]) -> int:
    sandbox = karmada_lua()
    sandbox.load(script)
    objects = [obj for _, obj in recorded().get(kind, [])] + extra
    return check_customization(sandbox, kind, operation, objects)


def test_the_shipped_components_convert_for_a_shared_template() -> None:
    """The case that built no ResourceBinding on v1.18.2 and v1.19.0-rc.0: one pod template with
    tolerations, a node selector and a required affinity, shared by both components."""
    sandbox = karmada_lua()
    sandbox.load(shipped(COMPONENTS_FILE, "componentResource"))
    jm, tm = convert(sandbox, "componentResource", copy.deepcopy(SHARED_TEMPLATE))
    template = SHARED_TEMPLATE["spec"]["podTemplate"]["spec"]  # type: ignore[index]
    for comp in (jm, tm):
        claim = comp["replicaRequirements"]["nodeClaim"]
        assert claim["tolerations"] == template["tolerations"]
        assert claim["nodeSelector"] == template["nodeSelector"]
        assert (
            claim["hardNodeAffinity"]
            == template["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        )
    assert (jm["replicas"], tm["replicas"]) == (1, 3)
    assert jm["replicaRequirements"]["resourceRequest"] == {"cpu": "1000m", "memory": "2Gi"}
    assert tm["replicaRequirements"]["resourceRequest"] == {"cpu": "2000m", "memory": "4Gi"}


@pytest.mark.parametrize(
    ("old", "new", "error", "message"),
    [
        # the bug of v1.18.2: the tolerations list copied, the toleration tables in it shared
        (
            "claim.tolerations = deepCopy(tolerations)",
            "claim.tolerations = {}; for i, t in ipairs(tolerations) do claim.tolerations[i] = t end",
            EncodeError,
            NESTED,
        ),
        # the same for an affinity's values list
        ("copy[k] = deepCopy(v)", "copy[k] = v", EncodeError, NESTED),
        # an empty map: a node selector emitted even when there is none ([] is not a map[string]string)
        ("if next(nodeSelector) ~= nil then", "if true then", DecodeError, "map[string]string"),
        # an empty struct: a node claim emitted even when there is nothing to claim
        ("if anyClaim then", "if true then", DecodeError, "workv1alpha2.NodeClaim"),
        # a number where Karmada reads an int32
        (
            "local out = { name = name, replicas = replicas }",
            "local out = { name = name, replicas = replicas + 0.5 }",
            DecodeError,
            "int32",
        ),
    ],
)
def test_a_planted_defect_in_the_components_script_fails_the_check(
    old: str, new: str, error: type[Exception], message: str
) -> None:
    script = planted(shipped(COMPONENTS_FILE, "componentResource"), old, new)
    with pytest.raises(error, match=re.escape(message)):
        run_check(script, "FlinkDeployment", "componentResource", [copy.deepcopy(SHARED_TEMPLATE)])


@pytest.mark.parametrize(
    ("old", "new", "error", "message"),
    [
        # a table placed twice: the desired object's labels also set as its annotations
        (
            "  return desiredObj\nend\n",
            "  desiredObj.metadata.labels = desiredObj.metadata.annotations\n  return desiredObj\nend\n",
            EncodeError,
            NESTED,
        ),
        # a map emptied: Karmada encodes it [] and drops it, so the template loses spec.job
        (
            "  return desiredObj\nend\n",
            "  desiredObj.spec.job = {}\n  return desiredObj\nend\n",
            AssertionError,
            "the retained object lost",
        ),
    ],
)
def test_a_planted_defect_in_the_retention_script_fails_the_check(
    old: str, new: str, error: type[Exception], message: str
) -> None:
    script = planted(shipped("resourceinterpretercustomization-flink-retention.yaml", "retention"), old, new)
    with pytest.raises(error, match=re.escape(message)):
        run_check(script, "FlinkDeployment", "retention", [])


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        (
            "local t = {key = 'a'} return {{name = 'a', replicas = 1, x = t}, {name = 'b', x = t}}",
            EncodeError,
            NESTED,
        ),
        ("local t = {} t.self = t return {t}", EncodeError, NESTED),
        ("return {[1] = {name = 'a', replicas = 1}, [3] = {name = 'b', replicas = 1}}", EncodeError, SPARSE),
        ("return {{name = 'a', replicas = 1}, x = 1}", EncodeError, "mixed or invalid key types"),
        ("return {{name = 'a', replicas = 1, f = print}}", EncodeError, "cannot encode function"),
        ("return {{name = 'a', replicas = 0/0}}", EncodeError, "unsupported value: NaN"),
        ("return {{name = 'a', replicas = 1e21}}", DecodeError, "int32"),
        ("return {{name = 'a', replicas = 2^31}}", DecodeError, "int32"),
        ("return {{name = 'a', replicas = '1'}}", DecodeError, "cannot unmarshal string"),
        ("return {{name = 'a', replicas = 1, replicaRequirements = {}}}", DecodeError, "ReplicaRequirements"),
        (
            "return {{name = 'a', replicas = 1, replicaRequirements = {resourceRequest = {cpu = 'x'}}}}",
            DecodeError,
            "quantities",
        ),
        ("return {{name = 'a', Replicas = 1}}", DecodeError, "unknown field 'Replicas'"),
        (
            "return {{name = 'a', replicas = 1, replicaRequirements = {nodeClaim = {tolerations = {{}}}}}}",
            DecodeError,
            "corev1.Toleration",
        ),
        ("return {{name = 'a', replicas = 1}, {name = 'a', replicas = 1}}", DecodeError, "unique"),
        ("return 'jobmanager'", DecodeError, "but got string"),
    ],
)
def test_the_check_refuses_what_karmada_refuses(body: str, error: type[Exception], message: str) -> None:
    sandbox = karmada_lua()
    sandbox.load(f"function GetComponents(obj) {body} end")
    with pytest.raises(error, match=re.escape(message)):
        convert(sandbox, "componentResource", {"spec": {}})


def test_the_check_takes_what_karmada_takes() -> None:
    """Empty lists are fine where Go wants a list, numbers print as Go prints a float64."""
    sandbox = karmada_lua()
    sandbox.load(
        "function GetComponents(obj) return {{name = 'a', replicas = 3, replicaRequirements = {"
        "nodeClaim = {tolerations = {}, hardNodeAffinity = {nodeSelectorTerms = {{matchExpressions = {}}}}},"
        "resourceRequest = {cpu = '500m'}}}} end"
    )
    (comp,) = convert(sandbox, "componentResource", {"spec": {}})
    assert comp["replicas"] == 3 and isinstance(comp["replicas"], int)
    assert comp["replicaRequirements"]["nodeClaim"]["tolerations"] == []
    assert sandbox.encode_text(sandbox.runtime.eval("{1.5, 1e21, 1e-7, 0.000001, 123456789012, -0.25}")) == (
        "[1.5,1e+21,1e-7,0.000001,123456789012,-0.25]"
    )
