"""The keeper's native sidecar in a FlinkDeployment (webhook/keeper/inject.py, pure; through the served
webhook: test_injected.py): valid against the Flink operator 1.15.0 CRD as the API server would prune
it, the user's own podTemplates kept, idempotent, and its settings read back by ``flink-failover
keeper`` itself."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import pytest

from webhook.commands import keeper as command
from webhook.fencing.layout import Workload
from webhook.keeper.inject import CONTAINER, PORT, KeeperPod, with_keeper

FENCING = {"leaseSeconds": 30, "pollSeconds": 5, "renewDeadlineSeconds": 10, "stopMarginSeconds": 10}
POD = KeeperPod(
    image="registry.example/flink-failover:1.0",
    cluster="member1",
    checkpoint_dir="s3://bkt/checkpoints",
    workload=Workload("FlinkDeployment", "analytics", "orders"),
    epoch=3,
    fencing=FENCING,
    storage_options={"s3": {"endpoint_url": "https://s3.example"}},
    job_id="a" * 32,
)


def _deployment(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": {"name": "orders", "namespace": "analytics"},
        "spec": {
            "image": "flink:1.20",
            "flinkVersion": "v1_20",
            "serviceAccount": "flink",
            "jobManager": {"resource": {"memory": "2048m", "cpu": 1}},
            "taskManager": {"resource": {"memory": "2048m", "cpu": 1}},
            "job": {"jarURI": "local:///opt/flink/job.jar", "upgradeMode": "last-state", "state": "running"},
            **spec,
        },
    }


def _errors(validate: Any, obj: dict[str, Any]) -> list[str]:
    return [f"{list(e.path)}: {e.message}" for e in validate.iter_errors(obj)]


def test_a_plain_deployment_gets_the_sidecar_in_its_jobmanager_pod_only(validate: Any) -> None:
    before = _deployment()
    after, notes = with_keeper(before, POD)
    assert _errors(validate, after) == [] and len(notes) == 1 and "heartbeat.timeout" in notes[0]
    pod = after["spec"]["jobManager"]["podTemplate"]["spec"]
    assert pod["shareProcessNamespace"] is True
    (keeper,) = pod["initContainers"]
    assert keeper["name"] == CONTAINER and keeper["restartPolicy"] == "Always"
    assert keeper["startupProbe"]["httpGet"] == {"path": "/readyz", "port": PORT}
    assert keeper["securityContext"]["runAsUser"] == 9999
    assert "podTemplate" not in after["spec"]["taskManager"] and "podTemplate" not in after["spec"]
    assert before == _deployment()  # the input is not changed


def test_the_users_own_pod_templates_are_kept(validate: Any) -> None:
    common = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": {"team": "payments"}},
        "spec": {"containers": [{"name": "flink-main-container", "env": [{"name": "A", "value": "1"}]}]},
    }
    jm_template = {
        "metadata": {"annotations": {"x": "y"}},
        "spec": {
            "initContainers": [{"name": "fetch-jar", "image": "busybox", "command": ["true"]}],
            "containers": [{"name": "log-shipper", "image": "fluent-bit"}],
            "volumes": [{"name": "jars", "emptyDir": {}}],
            "nodeSelector": {"pool": "flink"},
        },
    }
    before = _deployment(podTemplate=common)
    before["spec"]["jobManager"]["podTemplate"] = jm_template
    after, _ = with_keeper(before, POD)
    assert _errors(validate, after) == []
    assert after["spec"]["podTemplate"] == common
    pod = after["spec"]["jobManager"]["podTemplate"]
    assert pod["metadata"] == {"annotations": {"x": "y"}}
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["fetch-jar", CONTAINER]
    for key in ("containers", "volumes", "nodeSelector"):
        assert pod["spec"][key] == jm_template["spec"][key]


def test_applying_it_twice_changes_nothing_and_a_false_share_is_said(validate: Any) -> None:
    before = _deployment()
    before["spec"]["jobManager"]["podTemplate"] = {"spec": {"shareProcessNamespace": False}}
    once, notes = with_keeper(before, POD)
    assert "shareProcessNamespace" in notes[0]
    twice, again = with_keeper(once, POD)
    assert twice == once and again == [] and _errors(validate, twice) == []


@pytest.mark.parametrize(
    ("given", "timeout", "interval", "said"),
    [
        ({}, "10000", "2500", ["heartbeat.timeout set to 10000 ms (was Flink's default 50000)"]),
        (
            {"heartbeat.timeout": "50000", "heartbeat.interval": "10000"},
            "10000",
            "2500",
            ["timeout", "interval"],
        ),
        ({"heartbeat.timeout": "8000"}, "8000", "2000", []),  # within the margin: kept
        ({"heartbeat.timeout": "6000", "heartbeat.interval": "1000"}, "6000", "1000", []),
        ({"heartbeat.timeout": "30 s"}, "10000", "2500", ["was '30 s'"]),  # a unit: not read, replaced
    ],
)
def test_the_taskmanagers_heartbeat_of_the_jobmanager_times_out_within_the_stop_margin(
    validate: Any, given: dict[str, str], timeout: str, interval: str, said: list[str]
) -> None:
    """A killed JobManager's tasks run on their TaskManagers until this timeout (bench/keeper_flink.py)."""
    before = _deployment(flinkConfiguration={"state.checkpoints.dir": "s3://bkt/checkpoints", **given})
    after, notes = with_keeper(before, POD)
    conf = after["spec"]["flinkConfiguration"]
    assert (conf["heartbeat.timeout"], conf["heartbeat.interval"]) == (timeout, interval)
    assert conf["state.checkpoints.dir"] == "s3://bkt/checkpoints"
    assert len(notes) == len(said) and all(part in note for part, note in zip(said, notes, strict=True))
    assert _errors(validate, after) == []


def test_the_keeper_reads_back_the_settings_the_sidecar_carries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The container's environment, read by ``flink-failover keeper``'s own parser and settings."""
    after, _ = with_keeper(_deployment(), POD)
    (keeper,) = after["spec"]["jobManager"]["podTemplate"]["spec"]["initContainers"]
    for var in [k for k in os.environ if k.startswith("FLINK_FAILOVER_")]:
        monkeypatch.delenv(var)
    for item in keeper["env"]:
        monkeypatch.setenv(item["name"], item["value"])
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    made = command._settings(parser.parse_args([]))
    assert not isinstance(made, str), made
    settings, storage_options = made
    assert (settings.cluster, settings.workload, settings.epoch, settings.job_id) == (
        "member1",
        POD.workload,
        3,
        "a" * 32,
    )
    assert str(settings.checkpoint_dir) == "s3://bkt/checkpoints"
    assert settings.policy.lease_seconds == 30 and settings.policy.renew_deadline_seconds == 10
    assert storage_options == {"s3": {"endpoint_url": "https://s3.example"}}
    assert json.loads(POD.policy_json())["fencing"] == FENCING


def test_flinks_own_heartbeat_defaults_are_kept_where_the_stop_margin_is_longer() -> None:
    """With stopMarginSeconds above Flink's 50 s timeout nothing is raised, nothing is written."""
    pod = KeeperPod(**{**POD.__dict__, "fencing": {**FENCING, "stopMarginSeconds": 100}})
    after, notes = with_keeper(_deployment(), pod)
    assert "heartbeat.timeout" not in after["spec"]["flinkConfiguration"] and notes == []
    after, notes = with_keeper(_deployment(flinkConfiguration={"heartbeat.timeout": "80000"}), pod)
    assert after["spec"]["flinkConfiguration"] == {"heartbeat.timeout": "80000"} and notes == []
