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
from tests.conftest import REPO

FAILOVER = {"flink-failover.io/failover": "true"}


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
    assert selector_matches(vap["matchConstraints"].get("objectSelector") or {}, FAILOVER)
    job = flink(FAILOVER, RUNNING)
    job["metadata"]["namespace"] = namespace
    assert admit(one(docs, "ValidatingAdmissionPolicy"), job) == "denied"


# Issue 30 left the objects labelled app.kubernetes.io/name: flink-failover out of every member entry and
# policy; issue 45 removed that opt-out (a user could set it on a held job): tests/chart/test_chart_guards.py.


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


# --- item 6: the docs say what the code does ---------------------------------------------------------------


def test_install_md_names_the_dockerfile_s_extras_default() -> None:
    import re

    dockerfile = (REPO / "Dockerfile").read_text()
    default = re.search(r"^ARG EXTRAS=(\S*)$", dockerfile, re.M)
    assert default is not None
    claimed = re.search(
        r"build argument\s+`EXTRAS`, default `([^`]*)`", (REPO / "docs" / "install.md").read_text()
    )
    assert claimed is not None and claimed.group(1) == default.group(1)


def test_install_md_names_the_registration_s_rules_as_rendered(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"role": "control-plane", "controlPlane": {"part": "registration"}})
    granted = {
        (resource, tuple(rule["verbs"]))
        for kind in ("ClusterRole", "Role")
        for role in find(docs, kind)
        for rule in role["rules"]
        for resource in rule["resources"]
    }
    text = (REPO / "docs" / "install.md").read_text()
    start = text.index("# 1. on the Karmada API server")
    comment = " ".join(line.strip("# ") for line in text[start:].split("helm install", 1)[0].splitlines())
    assert "works" not in comment  # it said "works get"; the registration grants nothing on works
    assert ("resourcebindings", ("get", "list", "watch", "patch")) in granted
    assert "resourcebindings get/list/watch/patch" in comment
    assert (
        "mutatingwebhookconfigurations",
        ("get", "patch"),
    ) in granted and "get/patch of this webhook" in comment
    assert {r for r, _ in granted} == {"resourcebindings", "mutatingwebhookconfigurations", "leases"}
    assert "Lease" in comment


DOCS_THAT_SEND_ON_CALL = [
    "README.md",
    "charts/flink-failover/README.md",
    "charts/flink-failover/templates/NOTES.txt",
    "charts/flink-failover/templates/common/prometheusrule.yaml",
    "docs/failover.md",
    "docs/install.md",
]


@pytest.mark.parametrize("name", DOCS_THAT_SEND_ON_CALL)
def test_no_doc_sends_on_call_to_describe_for_the_events(name: str) -> None:
    """``describe`` lists only Events with the object's uid; the webhook's on a CREATE have none
    (failover.md says so): the docs said ``describe`` shows them."""
    text = (REPO / name).read_text()
    assert "kubectl describe" not in text and "describe flinkdeployment" not in text


def test_the_notes_say_the_release_namespace_is_protected(helm: str, tmp_path: Path) -> None:
    values = tmp_path / "v.yaml"
    values.write_text(f"image: {{repository: {IMAGE}}}\n")
    done = run_helm(helm, "install", "ff", str(CHART), "--dry-run", "-n", "flink-jobs", "-f", str(values))
    assert done.returncode == 0, done.stderr
    notes = " ".join(done.stdout.split("NOTES:", 1)[1].split())
    assert "this release's namespace (flink-jobs) included" in notes
    assert "get events --field-selector involvedObject.name=NAME" in notes


def test_the_makefile_names_only_files_that_exist() -> None:
    import re

    text = (REPO / "Makefile").read_text()
    named = set(re.findall(r"\b((?:webhook|tests|charts|docs)/[\w/.-]+\.(?:py|yaml|md|json))\b", text))
    assert named and sorted(n for n in named if not (REPO / n).exists()) == []


# --- item 7: a storageOptions typo --------------------------------------------------------------------------


def _typos() -> dict[str, dict[str, str]]:
    """Near misses of real option names, in several backends: one letter dropped, doubled, swapped for
    another, camelCase, a hyphen; and a name near nothing."""
    from webhook.common.paths import FSSPEC_PROTOCOL
    from webhook.policy.backend_options import STORAGE_OPTIONS

    out: dict[str, dict[str, str]] = {}
    for scheme in ("s3", "gs", "abfs", "oss", "file", "hdfs"):
        names = STORAGE_OPTIONS[FSSPEC_PROTOCOL[scheme]]
        typos = {"totally_unrelated_thing": "x"}
        for i, name in enumerate(names[:6]):
            variant = (
                name[:-1],
                name + name[-1],
                name[:1] + "x" + name[2:],
                "".join(p.capitalize() if k else p for k, p in enumerate(name.split("_"))),
                name.replace("_", "-"),
                name.upper(),
            )[i % 6]
            if variant not in names:
                typos[variant] = "x"
        out[scheme] = dict(sorted(typos.items()))
    return dict(sorted(out.items()))


def test_a_storage_option_typo_gets_the_servers_message_and_hint(helm: str, tmp_path: Path) -> None:
    """Before: ``at ''`` and a list of thirty names, where the server says "did you mean endpoint_url"."""
    from webhook.policy.restore import PolicyError, policy_from_dict

    typos = _typos()
    with pytest.raises(PolicyError) as server:
        policy_from_dict({"storageOptions": typos})
    expected = str(server.value).split("storageOptions: ", 1)[1]
    assert "did you mean" in expected and expected.count("is not an option") == sum(map(len, typos.values()))
    result = template(helm, tmp_path, {"policy": {"storageOptions": typos}})
    assert result.returncode != 0
    assert f"policy.storageOptions: {expected}\n" in result.stderr, result.stderr
    assert "at ''" not in result.stderr
    single = template(
        helm, tmp_path, {"policy": {"storageOptions": {"s3": {"endpoint_ur": "http://minio:9000"}}}}
    )
    assert "s3.endpoint_ur is not an option of the s3 backend (did you mean endpoint_url?)" in single.stderr


def test_the_committed_option_names_are_the_generated_ones() -> None:
    from tests.chart.schema import OPTIONS_PATH, render_options

    assert OPTIONS_PATH.read_text(encoding="utf-8") == render_options(), "run: python -m tests.chart.schema"
