"""policies/karmada/resourceinterpretercustomization-flink-bluegreen.yaml run in Karmada's Lua sandbox
on the operator's own blue/green example (1.15.0), and what the control plane reads from its result."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.support.karmada_lua import karmada_lua, restore_empty
from webhook.common.flink import started_from
from webhook.controlplane.binding import Binding
from webhook.controlplane.capture import observe
from webhook.controlplane.record import BindingRecord

pytestmark = pytest.mark.shared

FILE = REPO / "policies" / "karmada" / "resourceinterpretercustomization-flink-bluegreen.yaml"
BLUE_JOB = "9a8b7c6d5e4f30211203948576abcdef"
START = "s3://bucket/ck/3c653dbe4c19bb72f8eb28445541bed6/chk-42"


def script(operation: str) -> str:
    (doc,) = [d for d in yaml.safe_load_all(FILE.read_text(encoding="utf-8")) if d]
    assert doc["spec"]["target"] == {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkBlueGreenDeployment",
    }
    return str(doc["spec"]["customizations"][operation]["luaScript"])


@pytest.fixture
def example(shared_data: Path) -> dict[str, Any]:
    path = shared_data / "crds" / "flink-operator-1.15.0" / "example-bluegreen-laststate.yaml"
    obj: dict[str, Any] = next(yaml.safe_load_all(path.read_text()))
    obj["metadata"]["namespace"] = "analytics"
    return obj


def running(obj: dict[str, Any], state: str = "ACTIVE_BLUE", job_state: str = "RUNNING") -> dict[str, Any]:
    out = copy.deepcopy(obj)
    reconciled = {"spec": copy.deepcopy(obj["spec"])}
    reconciled["spec"]["template"]["spec"]["job"]["initialSavepointPath"] = START
    out["status"] = {
        "blueGreenState": state,
        "jobStatus": {
            "jobId": BLUE_JOB,
            "state": job_state,
            "checkpointInfo": {},  # empty map: must not come back as an empty table
            "savepointInfo": {"lastPeriodicSavepointTimestamp": 0, "savepointHistory": []},
        },
        "lastReconciledSpec": json.dumps(reconciled),
        "lastReconciledTimestamp": "1795960902164",
    }
    return out


def test_health(example: dict[str, Any]) -> None:
    lua = karmada_lua()
    lua.load(script("healthInterpretation"))
    assert lua.call("InterpretHealth", running(example)) is True
    assert lua.call("InterpretHealth", running(example, "TRANSITIONING_TO_GREEN")) is True
    assert lua.call("InterpretHealth", running(example, "INITIALIZING_BLUE", "RECONCILING")) is False
    failed = running(example, "INITIALIZING_BLUE", "RECONCILING")
    failed["status"]["error"] = "image not found"
    assert lua.call("InterpretHealth", failed) is True  # a user error: moving it elsewhere helps nothing
    assert lua.call("InterpretHealth", example) is False  # no status yet


def test_reflected_status_carries_the_running_childs_job_to_the_record(example: dict[str, Any]) -> None:
    reflected = karmada_lua().run(script("statusReflection"), "ReflectStatus", running(example))
    assert reflected["jobStatus"]["jobId"] == BLUE_JOB
    assert reflected["blueGreenState"] == "ACTIVE_BLUE"
    assert "checkpointInfo" not in reflected["jobStatus"]  # empty: left out, not an empty table
    assert "savepointHistory" not in reflected["jobStatus"]["savepointInfo"]
    # No status yet: an empty table (Karmada refuses anything but a table from ReflectStatus).
    assert karmada_lua().run(script("statusReflection"), "ReflectStatus", example) in ({}, [])
    binding = Binding.from_object(
        {
            "metadata": {
                "namespace": "analytics",
                "name": "basic-bg-laststate-example-flinkbluegreendeployment",
            },
            "spec": {
                "resource": {
                    "apiVersion": "flink.apache.org/v1beta1",
                    "kind": "FlinkBlueGreenDeployment",
                    "name": "basic-bg-laststate-example",
                },
                "clusters": [{"name": "member1"}],
            },
            "status": {"aggregatedStatus": [{"clusterName": "member1", "status": reflected}]},
        }
    )
    state = observe(BindingRecord(), binding, datetime(2026, 12, 1, tzinfo=UTC)).cluster("member1")
    assert state.job_id == BLUE_JOB
    assert state.started_from == START  # the first child, blue, started from the template's path


def test_only_the_first_child_started_from_the_templates_path(example: dict[str, Any]) -> None:
    assert started_from("FlinkBlueGreenDeployment", running(example)["status"]) == START
    green = running(example, "ACTIVE_GREEN")["status"]
    assert started_from("FlinkBlueGreenDeployment", green) == ""  # from a savepoint its status does not name


def test_aggregation_takes_the_cluster_that_reports(example: dict[str, Any]) -> None:
    reflected = karmada_lua().run(script("statusReflection"), "ReflectStatus", running(example))
    items = [{"clusterName": "member1"}, {"clusterName": "member2", "status": reflected}]
    out = karmada_lua().run(script("statusAggregation"), "AggregateStatus", copy.deepcopy(example), items)
    assert out["status"]["jobStatus"]["jobId"] == BLUE_JOB


def test_retention_keeps_the_restored_template(example: dict[str, Any]) -> None:
    observed = copy.deepcopy(example)
    observed["spec"]["template"]["spec"]["job"]["initialSavepointPath"] = START
    observed["metadata"]["annotations"] = {
        "flink-failover.io/restore-decision": "restored",
        "flink-failover.io/restored-from": START,
        "operator.example/other": "not ours",
    }
    result = karmada_lua().run(script("retention"), "Retain", copy.deepcopy(example), observed)
    result = restore_empty(result, example, observed)
    assert result["spec"]["template"]["spec"]["job"]["initialSavepointPath"] == START
    assert result["metadata"]["annotations"] == {
        "flink-failover.io/restore-decision": "restored",
        "flink-failover.io/restored-from": START,
    }
    mine = copy.deepcopy(example)
    mine["spec"]["template"]["spec"]["job"]["initialSavepointPath"] = (
        "s3://bucket/sp/savepoint-000000-0123456789ab"
    )
    kept = karmada_lua().run(script("retention"), "Retain", mine, observed)
    assert kept["spec"]["template"]["spec"]["job"]["initialSavepointPath"].endswith("0123456789ab")


def test_components_of_the_template(example: dict[str, Any]) -> None:
    lua = karmada_lua()
    lua.load(script("componentResource"))
    jm, tm = lua.call("GetComponents", example)
    assert jm == {
        "name": "jobmanager",
        "replicas": 1,
        "replicaRequirements": {"resourceRequest": {"cpu": "1000m", "memory": "1048576Ki"}},
    }
    assert tm["name"] == "taskmanager" and tm["replicas"] == 1
    assert tm["replicaRequirements"]["resourceRequest"] == {"cpu": "1000m", "memory": "2097152Ki"}
    tolerated = copy.deepcopy(example)
    spec = tolerated["spec"]["template"]["spec"]
    spec["podTemplate"] = {"spec": {"tolerations": [{"key": "flink", "operator": "Exists"}]}}
    spec["job"]["parallelism"] = 3
    spec["flinkConfiguration"]["taskmanager.numberOfTaskSlots"] = "2"
    jm, tm = lua.call("GetComponents", tolerated)
    assert tm["replicas"] == 2
    # the same toleration in both components, each its own table (gopher-json refuses one placed twice)
    assert jm["replicaRequirements"]["nodeClaim"]["tolerations"] == [{"key": "flink", "operator": "Exists"}]
    assert tm["replicaRequirements"]["nodeClaim"]["tolerations"] == [{"key": "flink", "operator": "Exists"}]
