"""Issue 30, the chart on a platform engineer's first day: Flink jobs in the release's own namespace are
protected like any other, the default member install writes the Events the README promises, the
backstop covers every kind the webhook does, and an install names the image it runs instead of an
unpublished default. Each test failed on the chart before the issue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

from tests.chart.test_cel import RESTORED, RUNNING, admit, flink
from tests.chart.test_chart import (
    CHART,
    FULLNAME,
    IMAGE,
    NS,
    find,
    one,
    render,
    run_helm,
    selector_matches,
    template,
)

FAILOVER = {"flink-failover.io/failover": "true"}
OWN = {"app.kubernetes.io/name": "flink-failover", "app.kubernetes.io/instance": "ff"}


def _namespace_selected(selector: dict[str, Any], namespace: str) -> bool:
    return selector_matches(selector, {"kubernetes.io/metadata.name": namespace})


# --- item 3: a job in the chart's own namespace -------------------------------------------------------------


@pytest.mark.parametrize("namespace_flag", [["--namespace", NS], []], ids=["release-namespace", "no-n"])
def test_a_failed_over_job_in_the_release_namespace_is_sent_to_the_webhook_and_the_backstop(
    helm: str, tmp_path: Path, namespace_flag: list[str]
) -> None:
    """Before: the release namespace (``default`` under ``helm template`` without ``-n``) was excluded."""
    values = tmp_path / "v.yaml"
    values.write_text(f"image: {{repository: {IMAGE}}}\n")
    result = run_helm(helm, "template", "ff", str(CHART), *namespace_flag, "-f", str(values))
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    namespace = NS if namespace_flag else "default"
    hooks = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    sent = [h for h in hooks if _namespace_selected(h["namespaceSelector"], namespace)]
    assert [h for h in sent if selector_matches(h["objectSelector"], {**FAILOVER, "app": "orders"})]
    assert not [h for h in hooks if _namespace_selected(h["namespaceSelector"], "kube-system")]
    vap = one(docs, "ValidatingAdmissionPolicy")["spec"]
    assert _namespace_selected(vap["matchConstraints"]["namespaceSelector"], namespace)
    assert selector_matches(vap["matchConstraints"]["objectSelector"], FAILOVER)
    job = flink(FAILOVER, RUNNING)
    job["metadata"]["namespace"] = namespace
    assert admit(one(docs, "ValidatingAdmissionPolicy"), job) == "denied"


def test_only_the_products_own_objects_are_left_out(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"member": {"fencing": {"cluster": "member1"}}})
    hooks = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    for labels in (FAILOVER, {"flink-failover.io/fenced": "1"}):
        assert [h for h in hooks if selector_matches(h["objectSelector"], labels)], labels
        assert not [h for h in hooks if selector_matches(h["objectSelector"], {**labels, **OWN})], labels
    vap = one(docs, "ValidatingAdmissionPolicy")["spec"]["matchConstraints"]
    assert not selector_matches(vap["objectSelector"], {**FAILOVER, **OWN})
    # what the chart labels as its own is exactly what it renders
    pod = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert {k: pod[k] for k in OWN} == OWN


# --- item 4: Events in the default install ------------------------------------------------------------------


def test_the_default_member_install_writes_events_and_nothing_else(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path)
    name = f"{FULLNAME}-events-{NS}"
    assert one(docs, "ClusterRole", name)["rules"] == [
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}
    ]
    binding = one(docs, "ClusterRoleBinding", name)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert binding["roleRef"]["name"] == name
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": NS}
    ]
    assert pod["automountServiceAccountToken"] is True
    args = pod["containers"][0]["args"]
    assert "--events" in args and "--read-session-clusters" not in args
    # no other role reaches the API: no ClusterRole but the certificate Job's and this one
    roles = {r["metadata"]["name"] for r in find(docs, "ClusterRole")}
    assert roles == {name, f"{FULLNAME}-certgen-{NS}"}


def test_events_can_be_turned_off_and_then_no_token_is_mounted(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"member": {"events": False}})
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "--events" not in pod["containers"][0]["args"]
    assert not find(docs, "ClusterRole", f"{FULLNAME}-events-{NS}")
    hooks = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert {h["sideEffects"] for h in hooks} == {"None"}
    # fencing writes them whatever member.events says, through its own role
    fencing = render(helm, tmp_path, {"member": {"events": False, "fencing": {"cluster": "member1"}}})
    assert one(fencing, "Deployment")["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    assert not find(fencing, "ClusterRole", f"{FULLNAME}-events-{NS}")


# --- item 5: the backstop covers FlinkBlueGreenDeployment ---------------------------------------------------


def blue_green(labels: dict[str, str], job: dict[str, Any] | None) -> dict[str, Any]:
    child = flink(None, job)
    return {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkBlueGreenDeployment",
        "metadata": {"name": "orders", "namespace": "analytics", "labels": labels},
        "spec": {"template": {"spec": child["spec"]}},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (blue_green(FAILOVER, RUNNING), "denied"),
        (blue_green(FAILOVER, RESTORED), "allowed"),
        (blue_green(FAILOVER, {**RUNNING, "state": "suspended"}), "allowed"),
        (blue_green({"app": "orders"}, RUNNING), "skipped"),
        (blue_green(FAILOVER, None), "skipped"),  # a template without a job runs nothing
        ({**blue_green(FAILOVER, None), "spec": {}}, "skipped"),
    ],
)
def test_the_backstop_covers_blue_green_deployments(
    helm: str, tmp_path: Path, obj: dict[str, Any], expected: str
) -> None:
    docs = render(helm, tmp_path)
    vap = one(docs, "ValidatingAdmissionPolicy")
    (rule,) = vap["spec"]["matchConstraints"]["resourceRules"]
    webhook_kinds = one(docs, "MutatingWebhookConfiguration")["webhooks"][0]["rules"][0]["resources"]
    assert rule["resources"] == webhook_kinds
    assert admit(vap, obj) == expected


def test_the_backstop_message_names_the_blue_green_path(helm: str, tmp_path: Path) -> None:
    (validation,) = one(render(helm, tmp_path), "ValidatingAdmissionPolicy")["spec"]["validations"]
    env = celpy.Environment()
    prog = env.program(env.compile(validation["messageExpression"]))
    message = str(prog.evaluate({"object": celpy.json_to_cel(blue_green(FAILOVER, RUNNING))}))
    assert "spec.template.spec.job.initialSavepointPath" in message


# --- the image ----------------------------------------------------------------------------------------------


def test_an_install_without_an_image_says_how_to_build_and_push_one(helm: str, tmp_path: Path) -> None:
    """Before: ghcr.io/flink-failover/flink-failover:0.1.0, which is not published: the pods never started."""
    for role in ({}, {"role": "control-plane"}, {"role": "estimator", "estimator": {"cluster": "member1"}}):
        result = template(helm, tmp_path, {**role, "image": {"repository": ""}})
        assert result.returncode != 0
        assert "image.repository is required" in result.stderr and "make image" in result.stderr
    docs = render(helm, tmp_path, {"image": {"tag": "dev"}})
    assert {c["image"] for c in one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]} == {
        f"{IMAGE}:dev"
    }
    # what runs no pods needs no image: the registration on the Karmada API server
    registration = render(
        helm,
        tmp_path,
        {"role": "control-plane", "controlPlane": {"part": "registration"}, "image": {"repository": ""}},
    )
    assert one(registration, "MutatingWebhookConfiguration")
