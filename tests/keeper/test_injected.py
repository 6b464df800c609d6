"""The lease keeper added by the served member webhook (gunicorn, TLS, ``--cluster`` with its agent
polling a member cluster's API, whose ``/version`` says which Kubernetes it runs): every fenced
FlinkDeployment's JobManager pod gets the keeper's native sidecar at CREATE, valid against the Flink
operator 1.15.0 CRD, the user's own pod templates kept; Karmada's re-applied template gets it back, with
the restore's epoch and directory whatever the request says; the policy's switch and Kubernetes before
1.29 leave it out with an Event; a pod template that makes it impossible is refused, saying why."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane import fakeapi
from tests.support.crds import crd_validator
from tests.support.objects import JOB_ID, apply, decode_patch, flink_deployment, make_checkpoints, review
from tests.support.production import agent_polled, wait_for
from tests.support.server import RunningServer, generate_certs, serve
from webhook.keeper.inject import CONTAINER

P = "flink-failover.io"
FAILOVER, JOB_LABEL, EPOCH = f"{P}/failover", f"{P}/job-id", f"{P}/epoch"
IMAGE = "registry.example/platform/flink-failover:9.9.9"
KARMADA = "system:serviceaccount:karmada-system:karmada-agent"


@dataclass
class Served:
    server: RunningServer
    member: fakeapi.RunningFake
    root: Path

    def answer(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
        operation = "UPDATE" if old is not None else "CREATE"
        response: dict[str, Any] = self.server.client().admit(
            review(obj, operation=operation, old=old, user=KARMADA)
        )["response"]
        return response

    def admit(
        self, obj: dict[str, Any], old: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], list[str]]:
        response = self.answer(obj, old)
        assert response["allowed"] is True, response
        return apply(obj, decode_patch(response)), response.get("warnings", [])

    def events(self, name: str, reason: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []

        def written() -> bool:
            found[:] = [
                e for e in self.member.events if e["regarding"]["name"] == name and e["reason"] == reason
            ]
            return bool(found)

        assert wait_for(written, 30), [e["reason"] for e in self.member.events]
        return found


def failover(name: str = "orders", namespace: str = "analytics", count: str = "3") -> dict[str, Any]:
    """What Karmada creates on this cluster at the job's third failover: the template, the trigger labels."""
    return flink_deployment(
        name=name,
        namespace=namespace,
        labels={FAILOVER: "true", JOB_LABEL: JOB_ID, "app": name},
        annotations={f"{P}/failover-count": count},
    )


@contextmanager
def _serve(tmp: Path, kube_version: str, sidecars: str = "") -> Iterator[Served]:
    """``sidecars``: serve --native-sidecars, as the chart sets it (empty: auto, the default)."""
    root = tmp / "checkpoints"
    make_checkpoints(root / JOB_ID, [1, 2])
    policy = tmp / "policy.yaml"
    policy.write_text(
        f"defaultCheckpointDir: {root}\n"
        "fencing:\n"
        "  {leaseSeconds: 300, pollSeconds: 0.5, renewDeadlineSeconds: 100, stopMarginSeconds: 100,\n"
        "   keeper: {offNamespaces: [batch], offJobs: [analytics/ledger]}}\n",
        encoding="utf-8",
    )
    member = fakeapi.start_member_cluster(kube_version)
    try:
        kubeconfig = member.kubeconfig(tmp / "member1.kubeconfig")
        extra = ["--cluster", "member1", "--kubeconfig", str(kubeconfig), "--workers", "1"]
        env = {"FLINK_FAILOVER_KEEPER_IMAGE": IMAGE, "FLINK_FAILOVER_NATIVE_SIDECARS": sidecars}
        with serve(generate_certs(tmp / "certs"), policy, tmp / "server.log", extra=extra, env=env) as server:
            served = Served(server, member, root)
            assert wait_for(lambda: agent_polled(server))  # it vouches: nothing is held for want of it

            def version_read(n: list[int] = [0]) -> bool:  # noqa: B006 - a counter of probes
                n[0] += 1  # the worker reads /version in the background when it starts
                _, warnings = served.admit(failover(f"probe-{n[0]}", "probe"))
                return not any("version is not known" in w for w in warnings)

            assert wait_for(version_read, 30)
            yield served
    finally:
        member.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with _serve(tmp_path_factory.mktemp("keeper-injected"), "v1.31.2") as served:
        yield served


def _keeper(obj: dict[str, Any]) -> dict[str, Any]:
    pod = obj["spec"]["jobManager"]["podTemplate"]["spec"]
    (found,) = [c for c in pod["initContainers"] if c["name"] == CONTAINER]
    return found


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_a_fenced_restore_gets_the_keeper_valid_against_the_operators_crd(
    served: Served, validate: Any
) -> None:
    obj = failover()
    obj["spec"]["flinkConfiguration"]["heartbeat.timeout"] = "300000"  # the tasks would outlive the lease
    after, warnings = served.admit(obj)
    assert [f"{list(e.path)}: {e.message}" for e in validate.iter_errors(after)] == []
    assert after["metadata"]["annotations"][EPOCH] == "3"
    keeper = _keeper(after)
    assert keeper["image"] == IMAGE and keeper["restartPolicy"] == "Always"
    env = _env(keeper)
    assert env["FLINK_FAILOVER_KEEPER_EPOCH"] == "3"
    assert env["FLINK_FAILOVER_KEEPER_CHECKPOINT_DIR"].endswith(str(served.root))
    assert env["FLINK_FAILOVER_KEEPER_WORKLOAD"] == "FlinkDeployment/analytics/orders"
    assert env["FLINK_FAILOVER_CLUSTER"] == "member1"
    assert after["spec"]["jobManager"]["podTemplate"]["spec"]["shareProcessNamespace"] is True
    assert after["spec"]["flinkConfiguration"]["heartbeat.timeout"] == "100000"  # stopMarginSeconds
    assert any("heartbeat.timeout set to 100000 ms (was '300000')" in w for w in warnings), warnings
    assert any(w.startswith("lease keeper added to analytics/orders") for w in warnings), warnings
    (event,) = served.events("orders", "KeeperInjected")
    assert event["type"] == "Normal" and "epoch 3" in event["note"]


def test_the_users_own_pod_templates_are_kept(served: Served, validate: Any) -> None:
    obj = failover("payments")
    common = {"metadata": {"labels": {"team": "payments"}}, "spec": {"nodeSelector": {"pool": "flink"}}}
    main = {
        "name": "flink-main-container",
        "securityContext": {"runAsUser": 1001},
        "env": [
            {"name": "AWS_REGION", "value": "eu-west-1"},
            {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "secret"}}},
            {"name": "JAVA_TOOL_OPTIONS", "value": "-Xss2m"},
        ],
    }
    own = {
        "metadata": {"annotations": {"x": "y"}},
        "spec": {
            "initContainers": [{"name": "fetch-jar", "image": "busybox", "command": ["true"]}],
            "containers": [main, {"name": "log-shipper", "image": "fluent-bit"}],
            "volumes": [{"name": "jars", "emptyDir": {}}],
        },
    }
    obj["spec"]["podTemplate"] = copy.deepcopy(common)
    obj["spec"]["jobManager"]["podTemplate"] = copy.deepcopy(own)
    after, _ = served.admit(obj)
    assert [f"{list(e.path)}: {e.message}" for e in validate.iter_errors(after)] == []
    assert after["spec"]["podTemplate"] == common
    template = after["spec"]["jobManager"]["podTemplate"]
    assert template["metadata"] == own["metadata"]
    assert [c["name"] for c in template["spec"]["initContainers"]] == ["fetch-jar", CONTAINER]
    assert template["spec"]["containers"] == own["spec"]["containers"]
    assert template["spec"]["volumes"] == own["spec"]["volumes"]
    keeper = _keeper(after)
    assert keeper["securityContext"]["runAsUser"] == 1001  # the JobManager's user: it may signal it
    env = _env(keeper)  # the main container's storage credentials, as written; nothing else of it
    assert env["AWS_REGION"] == "eu-west-1" and env["AWS_SECRET_ACCESS_KEY"]["secretKeyRef"]["name"] == "s3"
    assert "JAVA_TOOL_OPTIONS" not in env


def test_karmadas_reapplied_template_gets_the_keeper_back_from_the_restore(served: Served) -> None:
    created, _ = served.admit(failover("reapplied"))
    # Karmada re-applies its template: none of our fields, a later failover count, no sidecar
    template = failover("reapplied", count="7")
    after, warnings = served.admit(template, created)
    assert after["spec"]["jobManager"] == created["spec"]["jobManager"]
    assert after["spec"]["flinkConfiguration"] == created["spec"]["flinkConfiguration"]
    assert _env(_keeper(after))["FLINK_FAILOVER_KEEPER_EPOCH"] == "3"  # the restore's, not the request's
    assert any(w.startswith("lease keeper put back") for w in warnings), warnings
    # an edit of the keeper's settings is put back too
    edited = copy.deepcopy(after)
    for item in _keeper(edited)["env"]:
        if item["name"] in ("FLINK_FAILOVER_KEEPER_EPOCH", "FLINK_FAILOVER_KEEPER_CHECKPOINT_DIR"):
            item["value"] = "9" if item["name"].endswith("EPOCH") else "s3://elsewhere/ckpt"
    again, _ = served.admit(edited, after)
    assert again["spec"]["jobManager"] == created["spec"]["jobManager"]
    # an UPDATE that keeps it changes nothing of it
    response = served.answer(copy.deepcopy(again), again)
    assert response["allowed"] is True
    assert not [op for op in decode_patch(response) if op["path"].startswith("/spec")], decode_patch(response)


def test_the_policy_switch_leaves_it_out_and_says_what_that_costs(served: Served) -> None:
    for namespace, name, why in (
        ("batch", "nightly", "offNamespaces names batch"),
        ("analytics", "ledger", "offJobs names analytics/ledger"),
    ):
        after, _ = served.admit(failover(name, namespace))
        assert after["metadata"]["annotations"][EPOCH] == "3"  # fenced all the same
        assert "podTemplate" not in after["spec"]["jobManager"]
        (event,) = served.events(name, "KeeperOff")
        assert event["type"] == "Warning" and why in event["note"]
        assert "stopped only by this cluster's fencing agent" in event["note"]


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ({"spec": {"hostPID": True}}, "hostPID is true"),
        (
            {"spec": {"containers": [{"name": CONTAINER, "image": "mine"}]}},
            f"a container named {CONTAINER} that is not the keeper",
        ),
        (
            {"spec": {"containers": [{"name": "sidecar", "image": "x", "ports": [{"containerPort": 8091}]}]}},
            "declares port 8091",
        ),
    ],
    ids=["host-pid", "its-name-taken", "its-port-taken"],
)
def test_a_pod_template_that_keeps_it_out_is_refused_saying_why(
    served: Served, template: dict[str, Any], said: str
) -> None:
    obj = failover("refused")
    obj["spec"]["jobManager"]["podTemplate"] = template
    response = served.answer(obj)
    assert response["allowed"] is False and response["status"]["code"] == 403
    message = response["status"]["message"]
    assert said in message and "analytics/refused" in message and "fencing.keeper.offJobs" in message


def test_no_keeper_before_kubernetes_1_29(tmp_path_factory: pytest.TempPathFactory) -> None:
    """1.28 serves no native sidecars: an init container that never exits would keep the JobManager from
    starting. The restore is admitted without it, saying so."""
    with _serve(tmp_path_factory.mktemp("keeper-1-28"), "v1.28.9") as old:
        after, warnings = old.admit(failover())
        assert after["metadata"]["annotations"][EPOCH] == "3"
        assert "podTemplate" not in after["spec"]["jobManager"]
        assert any("Kubernetes 1.28, which serves no native sidecars" in w for w in warnings), warnings
        (event,) = old.events("orders", "KeeperNotInjected")
        assert event["type"] == "Warning"


def test_a_held_copy_has_its_keeper_before_the_agent_releases_it(served: Served) -> None:
    """The release starts the JobManager through the keeper, never around it: the held copy gets the
    sidecar at every UPDATE (Karmada's re-apply included), and the agent's release keeps it."""
    path = str(served.root / JOB_ID / "chk-2")
    held = failover("held-orders")
    held["metadata"]["annotations"].update(
        {
            f"{P}/restore-decision": "held",
            f"{P}/restored-from": path,
            f"{P}/restored-job-id": JOB_ID,
            EPOCH: "3",
            f"{P}/hold": "epoch 3: waiting for member2 to stop",
        }
    )
    held["spec"]["job"].update(state="suspended", initialSavepointPath=path, upgradeMode="savepoint")
    reapplied = failover("held-orders")
    reapplied["spec"]["job"]["state"] = "running"
    kept, _ = served.admit(reapplied, held)
    assert kept["spec"]["job"]["state"] == "suspended"
    assert _env(_keeper(kept))["FLINK_FAILOVER_KEEPER_EPOCH"] == "3"
    release = copy.deepcopy(kept)  # the agent's merge patch over the stored object
    release["spec"]["job"]["state"] = "running"
    release["metadata"]["annotations"][f"{P}/released"] = "no-heartbeat at 2026-12-07T00:00:00Z"
    del release["metadata"]["annotations"][f"{P}/hold"]
    del release["spec"]["jobManager"]["podTemplate"]  # as if it had been lost meanwhile
    response = served.server.client().admit(
        review(release, operation="UPDATE", old=kept, user=fakeapi.DEFAULT_USER)
    )
    assert response["response"]["allowed"] is True, response
    started = apply(release, decode_patch(response["response"]))
    assert started["spec"]["job"]["state"] == "running"
    assert started["metadata"]["annotations"][f"{P}/restore-decision"] == "restored"  # released
    assert started["spec"]["jobManager"] == kept["spec"]["jobManager"]


def test_a_blue_green_deployment_gets_the_keeper_in_its_template_for_every_child(
    served: Served, shared_data: Path
) -> None:
    """The operator creates each child (blue, green) from the parent's template: the keeper goes there,
    keeping the parent's lease (the workload its records are kept for), and Karmada's re-apply keeps it."""
    crds = shared_data / "crds" / "flink-operator-1.15.0"
    (obj, *_rest) = yaml.safe_load_all((crds / "example-bluegreen-laststate.yaml").read_text())
    obj["metadata"] = {
        "name": "bg-orders",
        "namespace": "analytics",
        "labels": {FAILOVER: "true", JOB_LABEL: JOB_ID},
        "annotations": {f"{P}/failover-count": "3"},
    }
    conf = obj["spec"]["template"]["spec"]["flinkConfiguration"]
    conf["state.checkpoints.dir"] = f"file://{served.root}"
    conf["state.savepoints.dir"] = f"file://{served.root}/savepoints"
    template = copy.deepcopy(obj)
    after, _ = served.admit(obj)
    validate = crd_validator(crds / "flinkbluegreendeployments.flink.apache.org-v1.yml", "v1beta1")
    assert [f"{list(e.path)}: {e.message}" for e in validate.iter_errors(after)] == []
    spec = after["spec"]["template"]["spec"]
    pod = spec["jobManager"]["podTemplate"]
    # the example's own main container is kept beside the keeper
    assert [c["name"] for c in pod["spec"]["containers"]] == ["flink-main-container"]
    (keeper,) = [c for c in pod["spec"]["initContainers"] if c["name"] == CONTAINER]
    env = _env(keeper)
    assert env["FLINK_FAILOVER_KEEPER_WORKLOAD"] == "FlinkBlueGreenDeployment/analytics/bg-orders"
    assert env["FLINK_FAILOVER_KEEPER_EPOCH"] == "3"
    again, _ = served.admit(copy.deepcopy(template), after)  # Karmada re-applies: a template change
    assert again["spec"]["template"] == after["spec"]["template"]  # would start a transition: none
