"""A session cluster's keeper at admission (webhook/member/firstcopy.py ``session_cluster_part``, through
the member handler): a FlinkDeployment without a job in a fenced namespace gets the keeper in session
mode, valid against the Flink operator 1.15.0 CRD as the API server would prune it, the user's own
podTemplates kept, its settings read back by ``flink-failover keeper`` itself; no storage call."""

from __future__ import annotations

import argparse
import copy
import os
from typing import Any

import pytest

from tests.member.test_first_copy_part import SETUP, Untouchable, admission
from tests.support.objects import apply, decode_patch, flink_deployment, review
from webhook.commands import keeper as command
from webhook.common.admission import parse_review
from webhook.common.flink import runs_keeper
from webhook.fencing.layout import Workload
from webhook.keeper.inject import CONTAINER
from webhook.keeper.session_keeper import SessionSettings
from webhook.member.firstcopy import first_copy_part, session_cluster_part
from webhook.member.handler import MemberHandler
from webhook.member.keeper import Kept
from webhook.policy.restore import policy_from_dict

P = "flink-failover.io"
COMMON = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"annotations": {"owner": "stream-platform"}},
    "spec": {"tolerations": [{"key": "flink", "operator": "Exists", "effect": "NoSchedule"}]},
}
JM_TEMPLATE = {
    "metadata": {"labels": {"component": "session-jm"}},
    "spec": {
        "initContainers": [{"name": "wait-for-dns", "image": "busybox", "command": ["true"]}],
        "containers": [{"name": "metrics-relay", "image": "otel/collector"}],
        "volumes": [{"name": "udfs", "emptyDir": {}}],
        "priorityClassName": "streaming",
    },
}


def session_cluster(**conf: Any) -> dict[str, Any]:
    obj = flink_deployment(name="shared", checkpoint_dir="s3://bkt/ckpt", job=None)
    obj["spec"]["podTemplate"] = copy.deepcopy(COMMON)
    obj["spec"]["jobManager"]["podTemplate"] = copy.deepcopy(JM_TEMPLATE)
    obj["spec"]["flinkConfiguration"].update(conf)
    return obj


def _admitted(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    untouchable: Any = Untouchable()
    handler = MemberHandler(policy_from_dict({}), untouchable, fencing=untouchable, keeper=lambda: SETUP)
    try:
        operation = "UPDATE" if old is not None else "CREATE"
        response = handler(parse_review(review(obj, operation=operation, old=old))).to_review()["response"]
    finally:
        handler.close()
    assert response["allowed"] is True
    return apply(obj, decode_patch(response))


def _keeper(obj: dict[str, Any]) -> dict[str, Any]:
    found = [
        c
        for c in obj["spec"]["jobManager"]["podTemplate"]["spec"]["initContainers"]
        if c["name"] == CONTAINER
    ]
    assert len(found) == 1
    return found[0]


def test_a_session_cluster_gets_the_keeper_in_session_mode_its_templates_kept(validate: Any) -> None:
    obj = session_cluster()
    created = _admitted(obj)
    assert runs_keeper(created) and created["metadata"] == obj["metadata"] and "job" not in created["spec"]
    assert [f"{list(e.path)}: {e.message}" for e in validate.iter_errors(created)] == []
    env = {e["name"]: e.get("value") for e in _keeper(created)["env"]}
    assert env["FLINK_FAILOVER_KEEPER_MODE"] == "session"
    assert env["FLINK_FAILOVER_KEEPER_WORKLOAD"] == "FlinkDeployment/analytics/shared"
    assert env["FLINK_FAILOVER_KEEPER_CHECKPOINT_DIR"] == "s3://bkt/ckpt"
    assert created["spec"]["podTemplate"] == COMMON  # the user's common template, as written
    pod = created["spec"]["jobManager"]["podTemplate"]
    assert pod["metadata"] == JM_TEMPLATE["metadata"] and pod["spec"]["shareProcessNamespace"] is True
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["wait-for-dns", CONTAINER]
    for key in ("containers", "volumes", "priorityClassName"):
        assert pod["spec"][key] == JM_TEMPLATE["spec"][key]
    # the TaskManagers stop a killed JobManager's tasks within the stop margin, as for a job's cluster
    assert created["spec"]["flinkConfiguration"]["heartbeat.timeout"] == "10000"
    again = _admitted(obj, old=created)  # Karmada's re-apply of the template without it: put back
    assert _keeper(again) == _keeper(created)


def test_the_keeper_reads_back_its_session_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    created = _admitted(session_cluster())
    for var in [k for k in os.environ if k.startswith("FLINK_FAILOVER_")]:
        monkeypatch.delenv(var)
    for item in _keeper(created)["env"]:
        if "value" in item:
            monkeypatch.setenv(item["name"], item["value"])
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    made = command._settings(parser.parse_args([]))
    assert not isinstance(made, str), made
    settings, _ = made
    assert isinstance(settings, SessionSettings)
    assert settings.session == Workload("FlinkDeployment", "analytics", "shared")
    assert str(settings.root) == "s3://bkt/ckpt/flink-failover/analytics/flinksessionjob"
    assert settings.rest == "http://127.0.0.1:8081"  # Flink's default port
    moved = _admitted(session_cluster(**{"rest.port": "8082"}))
    assert {e["name"]: e.get("value") for e in _keeper(moved)["env"]}["FLINK_FAILOVER_KEEPER_REST"] == (
        "http://127.0.0.1:8082"
    )


def _part(obj: dict[str, Any], **policy: Any) -> Any:
    return session_cluster_part(admission(obj, **policy))


def test_what_gets_a_session_keeper() -> None:
    assert _part(session_cluster()).kept is Kept.INJECTED
    job = flink_deployment(checkpoint_dir="s3://bkt/ckpt")
    assert _part(job) is None  # a job's cluster: its own keeper (the first copy's)
    assert first_copy_part(admission(session_cluster())) is None
    assert _part(flink_deployment(name="shared", job=None)) is None  # no directory: nothing to keep
    defaulted = _part(flink_deployment(name="shared", job=None), defaultCheckpointDir="s3://bkt/default")
    assert defaulted is not None and defaulted.kept is Kept.INJECTED
    off = _part(session_cluster(), fencing={"keeper": {"offNamespaces": ["analytics"]}})
    assert off.kept is Kept.OFF and [e.reason for e in off.events] == ["KeeperOff"]
    labelled = session_cluster()
    labelled["metadata"]["labels"] = {f"{P}/failover": "true"}
    assert _part(labelled) is None
    blocked = session_cluster()
    blocked["spec"]["jobManager"]["podTemplate"]["spec"]["hostPID"] = True
    assert _part(blocked).kept is Kept.REFUSED


def test_session_mode_keeps_a_session_cluster_only() -> None:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    base = ["--cluster", "member1", "--checkpoint-dir", "s3://bkt/ckpt", "--mode", "session"]
    made = command._settings(parser.parse_args([*base, "--workload", "FlinkBlueGreenDeployment/analytics/x"]))
    assert isinstance(made, str) and "session cluster's FlinkDeployment" in made
