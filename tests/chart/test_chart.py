"""The Helm chart, rendered and linted by a real helm, every manifest validated against Kubernetes schemas."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from webhook.policy.load import DEFAULT_POLICY_FILE, load_policy
from webhook.policy.restore import policy_from_dict

CHART = REPO / "charts" / "flink-failover"
NS = "flink-failover"
RELEASE = "ff"
FULLNAME = "ff-flink-failover"
FAILOVER = "flink-failover.io/failover"
JOB_ID_LABELS = [
    "flink-failover.io/job-id",
    "application.karmada.io/failover-jobid",
    "application.karmada.io/cluster-failover-jobid",
    "resourcebinding.karmada.io/failover-jobid",
]
TRIGGERS = [FAILOVER, *JOB_ID_LABELS]

CP = {"role": "control-plane"}
COMBOS: dict[str, dict[str, Any]] = {
    "member-default": {},
    "member-cert-manager": {"certificates": {"mode": "cert-manager"}},
    "member-vap-off": {"member": {"validatingAdmissionPolicy": {"enabled": False}}},
    "member-servicemonitor": {
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}}
    },
    "member-no-pdb-no-netpol": {
        "member": {"podDisruptionBudget": {"enabled": False}},
        "networkPolicy": {"enabled": False},
    },
    "control-plane": CP,
    "control-plane-cert-manager": {**CP, "certificates": {"mode": "cert-manager"}},
    "control-plane-workload": {
        **CP,
        "controlPlane": {"part": "workload", "kubeconfigSecret": "karmada-kubeconfig"},
    },
    "control-plane-registration": {**CP, "controlPlane": {"part": "registration"}},
    # issue 17: OpenShift's restricted-v2 (no fixed UID), a pinned image, the alerts
    "member-openshift-digest-alerts": {
        "image": {"digest": "sha256:" + "ab" * 32},
        "podSecurityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containerSecurityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "metrics": {"prometheusRule": {"enabled": True, "labels": {"release": "prom"}}},
    },
    "control-plane-alerts": {**CP, "metrics": {"prometheusRule": {"enabled": True}}},
    "member-platform-extras": {
        "member": {
            "replicaCount": 1,
            "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/ckpt"}},
            "extraVolumes": [{"name": "minio-ca", "configMap": {"name": "minio-ca"}}],
            "extraVolumeMounts": [{"name": "minio-ca", "mountPath": "/etc/ssl/minio", "readOnly": True}],
            "extraEnv": [{"name": "AWS_CA_BUNDLE", "value": "/etc/ssl/minio/ca.crt"}],
            "podAnnotations": {"example.com/team": "platform"},
            "priorityClassName": "system-cluster-critical",
            "hostNetwork": True,
        }
    },
    "member-fencing": {"member": {"fencing": {"cluster": "member1"}}},
    "member-sessions": {"member": {"readSessionClusters": True}},
    "member-fencing-alerts": {
        "member": {"fencing": {"cluster": "member1"}},
        "metrics": {"prometheusRule": {"enabled": True, "fencing": {"heldSeconds": 600}}},
    },
    "control-plane-existing-account": {
        **CP,
        "controlPlane": {"serviceAccount": {"create": False, "name": "karmada-flink-failover"}},
    },
}


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], capture_output=True, text=True, timeout=120, check=False)


# The chart publishes no image: every install names the one the user built and pushed.
IMAGE = "registry.example.com/platform/flink-failover"


def with_image(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with ``image.repository`` set unless they set it themselves."""
    image = dict(values.get("image") or {})
    image.setdefault("repository", IMAGE)
    return {**values, "image": image}


def write_values(tmp_path: Path, values: dict[str, Any]) -> Path:
    values = with_image(values)
    path = tmp_path / f"values-{abs(hash(json.dumps(values, sort_keys=True)))}.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return path


def template(
    helm: str, tmp_path: Path, values: dict[str, Any], *extra: str
) -> subprocess.CompletedProcess[str]:
    return run_helm(
        helm,
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        NS,
        "-f",
        str(write_values(tmp_path, values)),
        *extra,
    )


def render(helm: str, tmp_path: Path, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    result = template(helm, tmp_path, values or {})
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, f"{len(found)} x {kind} {name or ''}"
    return found[0]


def selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Kubernetes label selector semantics (matchLabels AND every matchExpression)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


@pytest.fixture(scope="module")
def rendered(helm: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("render")
    return {name: render(helm, tmp, values) for name, values in COMBOS.items()}


# --- lint and schemas -------------------------------------------------------------------------------


@pytest.mark.parametrize("combo", list(COMBOS))
def test_helm_lint(helm: str, tmp_path: Path, combo: str) -> None:
    result = run_helm(
        helm,
        "lint",
        "--strict",
        str(CHART),
        "--namespace",
        NS,
        "-f",
        str(write_values(tmp_path, COMBOS[combo])),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("combo", list(COMBOS))
def test_every_manifest_validates(rendered: dict[str, list[dict[str, Any]]], combo: str) -> None:
    from tests.chart.validate import validate

    docs = rendered[combo]
    assert docs
    for doc in docs:
        validate(doc)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicas": 2}, "additional properties 'replicas' not allowed"),
        ({"replicaCount": 2}, "additional properties 'replicaCount' not allowed"),
        (
            {"member": {"webhook": {"failurPolicy": "Fail"}}},
            "additional properties 'failurPolicy' not allowed",
        ),
        ({"policy": {"onMissingStat": "suspend"}}, "additional properties 'onMissingStat' not allowed"),
        ({"member": {"replicaCount": "two"}}, "/member/replicaCount"),
        ({"controlPlane": {"workers": 0}}, "/controlPlane/workers"),
        ({"policy": {"deadlineSeconds": "5"}}, "/policy/deadlineSeconds"),
        ({"policy": {"onMissingState": "ignore"}}, "/policy/onMissingState"),
        ({"policy": {"deadlineSeconds": 30}}, "/policy/deadlineSeconds"),
        ({"role": "both"}, "/role"),
        ({"certificates": {"mode": "vault"}}, "/certificates/mode"),
        ({"member": {"webhook": {"timeoutSeconds": 31}}}, "/member/webhook/timeoutSeconds"),
        ({"controlPlane": {"webhook": {"failurePolicy": "fail"}}}, "/controlPlane/webhook/failurePolicy"),
        (
            {"member": {"validatingAdmissionPolicy": {"enabled": "yes"}}},
            "/member/validatingAdmissionPolicy/enabled",
        ),
        ({"policy": {"jobIdLabels": ["not a label"]}}, "/policy/jobIdLabels/0"),
        ({"member": {"hostNetwork": "yes"}}, "/member/hostNetwork"),
        (
            {"member": {"serviceAccount": {"annotation": {}}}},
            "additional properties 'annotation' not allowed",
        ),
        ({"member": {"extraVolumeMounts": [{"name": "ca"}]}}, "/member/extraVolumeMounts/0"),
        (
            {"member": {"extraVolumeMounts": [{"name": "ca", "mountPath": "etc"}]}},
            "/member/extraVolumeMounts/0",
        ),
        ({"member": {"extraVolumes": [{"configMap": {"name": "x"}}]}}, "/member/extraVolumes/0"),
        ({"controlPlane": {"priorityClassName": "Not_A_Name"}}, "/controlPlane/priorityClassName"),
        ({"controlPlane": {"leaderElection": {"leaseDurationSeconds": 0}}}, "/controlPlane/leaderElection"),
        ({"member": {"fencing": {"cluster": "Member_1"}}}, "/fencing/cluster"),
        ({"policy": {"fencing": {"leaseSecond": 30}}}, "additional properties 'leaseSecond' not allowed"),
        ({"policy": {"fencing": {"onStorageError": "retry"}}}, "/policy/fencing/onStorageError"),
    ],
)
def test_schema_rejects_unknown_and_mistyped_values(
    helm: str, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    result = template(helm, tmp_path, values)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    lint = run_helm(helm, "lint", str(CHART), "-f", str(write_values(tmp_path, values)))
    assert lint.returncode != 0


# --- member (defaults) --------------------------------------------------------------------------------


def test_member_default_objects(rendered: dict[str, list[dict[str, Any]]]) -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in rendered["member-default"])
    assert kinds == sorted(
        [
            ("NetworkPolicy", FULLNAME),
            ("PodDisruptionBudget", FULLNAME),
            ("ServiceAccount", FULLNAME),
            ("ConfigMap", f"{FULLNAME}-policy"),
            ("Service", FULLNAME),
            ("Deployment", FULLNAME),
            ("MutatingWebhookConfiguration", f"{FULLNAME}-{NS}"),
            ("ValidatingAdmissionPolicy", f"{FULLNAME}-{NS}-backstop"),
            ("ValidatingAdmissionPolicyBinding", f"{FULLNAME}-{NS}-backstop"),
            # Events of the restore decisions (issue 30: the default install wrote none)
            ("ClusterRole", f"{FULLNAME}-events-{NS}"),
            ("ClusterRoleBinding", f"{FULLNAME}-events-{NS}"),
            # self-managed certificates
            ("ServiceAccount", f"{FULLNAME}-certgen"),
            ("Role", f"{FULLNAME}-certgen"),
            ("RoleBinding", f"{FULLNAME}-certgen"),
            ("ClusterRole", f"{FULLNAME}-certgen-{NS}"),
            ("ClusterRoleBinding", f"{FULLNAME}-certgen-{NS}"),
            ("Job", f"{FULLNAME}-certgen"),
            ("Job", f"{FULLNAME}-cainject"),
            ("ServiceAccount", f"{FULLNAME}-certrenew"),
            ("Role", f"{FULLNAME}-certrenew"),
            ("RoleBinding", f"{FULLNAME}-certrenew"),
            ("CronJob", f"{FULLNAME}-certrenew"),
        ]
    )


def test_deployment_is_hardened_and_probed(rendered: dict[str, list[dict[str, Any]]]) -> None:
    dep = one(rendered["member-default"], "Deployment")
    spec = dep["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True  # for Events only (test_chart_install)
    assert pod["serviceAccountName"] == FULLNAME
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    spread = pod["topologySpreadConstraints"]
    assert len(spread) == 1 and spread[0]["topologyKey"] == "kubernetes.io/hostname"
    assert spread[0]["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["runAsNonRoot"] is True and sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    res = container["resources"]
    assert set(res["requests"]) == {"cpu", "memory"} and set(res["limits"]) == {"cpu", "memory"}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get == {"path": path, "port": "probes", "scheme": "HTTPS"}  # their own port (issue 17)
    assert container["ports"] == [
        {"name": "https", "containerPort": 8443, "protocol": "TCP"},
        {"name": "probes", "containerPort": 8081, "protocol": "TCP"},
    ]
    assert "--probe-bind=0.0.0.0:8081" in container["args"]
    assert container["args"][:2] == ["serve", "--role=member"]
    assert "--workers=2" in container["args"]
    assert "--require-storage-backends" in container["args"]  # the image carries the default backends
    assert "--cert-dir=/etc/flink-failover/certs" in container["args"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["tmp"]["mountPath"] == "/tmp" and "emptyDir" in volumes["tmp"]
    assert {"name": "TMPDIR", "value": "/tmp"} in container["env"]
    assert mounts["certs"]["readOnly"] is True
    assert volumes["certs"]["secret"]["secretName"] == f"{FULLNAME}-tls"
    assert {i["key"] for i in volumes["certs"]["secret"]["items"]} == {"tls.crt", "tls.key", "ca.crt"}
    policy_arg = next(a for a in container["args"] if a.startswith("--policy="))
    assert policy_arg.startswith("--policy=" + mounts["policy"]["mountPath"] + "/")
    assert volumes["policy"]["configMap"]["name"] == f"{FULLNAME}-policy"


def test_service_pdb_and_network_policy(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["member-default"]
    dep = one(docs, "Deployment")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    svc = one(docs, "Service")
    assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}]
    assert selector_matches({"matchLabels": svc["spec"]["selector"]}, labels)
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1 and selector_matches(pdb["spec"]["selector"], labels)
    netpol = one(docs, "NetworkPolicy")
    assert selector_matches(netpol["spec"]["podSelector"], labels)
    assert netpol["spec"]["policyTypes"] == ["Ingress"]
    ports = [{"port": 8443, "protocol": "TCP"}, {"port": 8081, "protocol": "TCP"}]  # webhook, probes
    assert netpol["spec"]["ingress"] == [{"ports": ports}]
    assert not find(docs, "ServiceMonitor")
    assert not find(rendered["member-no-pdb-no-netpol"], "PodDisruptionBudget")
    assert not find(rendered["member-no-pdb-no-netpol"], "NetworkPolicy")


def test_policy_configmap_is_the_default_policy(rendered: dict[str, list[dict[str, Any]]]) -> None:
    cm = one(rendered["member-default"], "ConfigMap")
    doc = yaml.safe_load(cm["data"]["restore-policy.yaml"])
    assert policy_from_dict(doc) == load_policy(DEFAULT_POLICY_FILE)


def test_policy_values_reach_the_configmap_and_the_pods(helm: str, tmp_path: Path) -> None:
    values = {
        "policy": {
            "onMissingState": "deny",
            "deadlineSeconds": 8,
            "defaultCheckpointDir": "s3://b/chk",
            "storageOptions": {"s3": {"endpoint_url": "http://minio:9000"}},
        }
    }
    docs = render(helm, tmp_path, values)
    policy = policy_from_dict(yaml.safe_load(one(docs, "ConfigMap")["data"]["restore-policy.yaml"]))
    assert policy.on_missing_state == "deny" and policy.deadline_seconds == 8
    assert policy.storage_options == {"s3": {"endpoint_url": "http://minio:9000"}}
    default = render(helm, tmp_path)
    checksum = "checksum/policy"
    a = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"][checksum]
    b = one(default, "Deployment")["spec"]["template"]["metadata"]["annotations"][checksum]
    assert a != b  # a policy change rolls the pods


# --- member webhook registration ------------------------------------------------------------------------


def test_member_webhook_registration(rendered: dict[str, list[dict[str, Any]]]) -> None:
    mwc = one(rendered["member-default"], "MutatingWebhookConfiguration")
    hooks = mwc["webhooks"]
    assert len(hooks) == len(TRIGGERS)
    assert len({h["name"] for h in hooks}) == len(hooks)
    for hook in hooks:
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "NoneOnDryRun"  # it writes Events, never on a dry run
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["timeoutSeconds"] == 10  # deadline 5 + margin 5
        assert hook["clientConfig"]["service"] == {
            "name": FULLNAME,
            "namespace": NS,
            "path": "/mutate",
            "port": 443,
        }
        assert hook["rules"] == [
            {
                "apiGroups": ["flink.apache.org"],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["flinkdeployments", "flinksessionjobs", "flinkbluegreendeployments"],
                "scope": "Namespaced",
            }
        ]
        assert hook["matchConditions"] == [
            {"name": "not-being-deleted", "expression": "!has(object.metadata.deletionTimestamp)"}
        ]
        assert hook["namespaceSelector"] == {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
            ]
        }
    first = hooks[0]["objectSelector"]["matchExpressions"]
    assert first == [{"key": FAILOVER, "operator": "In", "values": ["true"]}]  # no opt-out label (issue 45)
    for hook, label in zip(hooks[1:], JOB_ID_LABELS, strict=True):
        assert {"key": label, "operator": "Exists"} in hook["objectSelector"]["matchExpressions"]


def test_each_labelled_object_is_sent_exactly_once(rendered: dict[str, list[dict[str, Any]]]) -> None:
    hooks = one(rendered["member-default"], "MutatingWebhookConfiguration")["webhooks"]
    for failover in (None, "true", "false", ""):
        for n in range(len(JOB_ID_LABELS) + 1):
            for subset in itertools.combinations(JOB_ID_LABELS, n):
                labels = {key: "0123456789abcdef0123456789abcdef" for key in subset}
                labels["app"] = "pipeline"
                if failover is not None:
                    labels[FAILOVER] = failover
                triggered = failover == "true" or bool(subset)
                hits = [h["name"] for h in hooks if selector_matches(h["objectSelector"], labels)]
                assert len(hits) == (1 if triggered else 0), (labels, hits)


def test_fencing_gives_the_member_its_agent_rbac_and_keeps_fenced_copies_stopped(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    plain, fencing = rendered["member-default"], rendered["member-fencing"]
    name = f"{FULLNAME}-fencing-flink-failover"
    assert not find(plain, "ClusterRole", name)
    role = one(fencing, "ClusterRole", name)
    assert role["rules"] == [
        {
            "apiGroups": ["flink.apache.org"],
            "resources": ["flinkdeployments", "flinksessionjobs", "flinkbluegreendeployments"],
            "verbs": ["get", "list", "watch", "patch"],
        },
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        # the agent's own identity (whose release markers a held job accepts): a SelfSubjectReview
        {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
    ]
    binding = one(fencing, "ClusterRoleBinding", name)
    pod = one(fencing, "Deployment")["spec"]["template"]["spec"]
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]
    assert pod["automountServiceAccountToken"] is True
    assert "--cluster=member1" in pod["containers"][0]["args"]
    plain_pod = one(plain, "Deployment")["spec"]["template"]["spec"]
    assert plain_pod["automountServiceAccountToken"] is True  # Events only: member.events
    assert not any(a.startswith("--cluster") for a in plain_pod["containers"][0]["args"])

    hooks = one(fencing, "MutatingWebhookConfiguration")["webhooks"]
    # a restore writes its fence; a first copy's admission its Events; a stopped copy's nothing
    stopped = "flink-failover-io-fenced.flink-failover.io"
    assert {h["sideEffects"] for h in hooks if h["name"] != stopped} == {"NoneOnDryRun"}
    assert {h["sideEffects"] for h in one(plain, "MutatingWebhookConfiguration")["webhooks"]} == {
        "NoneOnDryRun"  # it writes Events
    }
    fenced = {"flink-failover.io/fenced": "2", "app": "orders"}
    hits = [h["name"] for h in hooks if selector_matches(h["objectSelector"], fenced)]
    assert hits == ["flink-failover-io-fenced.flink-failover.io"]
    # Still exactly one entry for an object that carries a trigger label as well.
    both = {**fenced, FAILOVER: "true"}
    assert len([h for h in hooks if selector_matches(h["objectSelector"], both)]) == 1


def test_session_cluster_reads_without_fencing_get_a_token_and_get_on_flinkdeployments(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    """Issue 24: without fencing no value let the member read a session job's FlinkDeployment."""
    docs = rendered["member-sessions"]
    name = f"{FULLNAME}-sessions-flink-failover"
    role = one(docs, "ClusterRole", name)
    assert role["rules"] == [
        {"apiGroups": ["flink.apache.org"], "resources": ["flinkdeployments"], "verbs": ["get"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    hooks = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert {h["sideEffects"] for h in hooks[:-1]} == {"NoneOnDryRun"}  # it writes Events
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert one(docs, "ClusterRoleBinding", name)["subjects"][0]["name"] == pod["serviceAccountName"]
    assert pod["automountServiceAccountToken"] is True
    args = pod["containers"][0]["args"]
    assert "--read-session-clusters" in args and not any(a.startswith("--cluster") for a in args)
    # fencing reads them already: no second role, no second flag
    fencing = rendered["member-fencing"]
    assert not find(fencing, "ClusterRole", name)
    assert (
        "--read-session-clusters"
        not in one(fencing, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    assert not find(rendered["member-default"], "ClusterRole", name)


def test_namespaces_and_timeout_are_configurable(helm: str, tmp_path: Path) -> None:
    docs = render(
        helm,
        tmp_path,
        {"member": {"webhook": {"excludeNamespaces": ["flink-system"]}}, "policy": {"deadlineSeconds": 27.5}},
    )
    for hook in one(docs, "MutatingWebhookConfiguration")["webhooks"]:
        assert hook["timeoutSeconds"] == 30  # ceil(27.5) + 5, capped
        assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "flink-system"]
    vap = one(docs, "ValidatingAdmissionPolicy")
    assert vap["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system",
        "flink-system",
    ]
    # an explicit timeout that does not leave room for the deadline is refused
    result = template(
        helm, tmp_path, {"member": {"webhook": {"timeoutSeconds": 5}}, "policy": {"deadlineSeconds": 5}}
    )
    assert result.returncode != 0 and "must be above policy.deadlineSeconds" in result.stderr
    ok = render(helm, tmp_path, {"member": {"webhook": {"timeoutSeconds": 12}}})
    assert {h["timeoutSeconds"] for h in one(ok, "MutatingWebhookConfiguration")["webhooks"]} == {12}


def test_custom_job_id_labels_and_prefix(helm: str, tmp_path: Path) -> None:
    docs = render(
        helm, tmp_path, {"policy": {"prefix": "failover.example.com", "jobIdLabels": ["example.com/old-job"]}}
    )
    hooks = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert [h["objectSelector"]["matchExpressions"][0]["key"] for h in hooks] == [
        "failover.example.com/failover",
        "example.com/old-job",
    ]
    cond = one(docs, "ValidatingAdmissionPolicy")["spec"]["matchConditions"][0]["expression"]
    assert "'failover.example.com/failover'" in cond and "'example.com/old-job'" in cond


# --- ValidatingAdmissionPolicy backstop ---------------------------------------------------------------


def test_backstop_policy(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["member-default"]
    vap = one(docs, "ValidatingAdmissionPolicy")
    binding = one(docs, "ValidatingAdmissionPolicyBinding")
    assert vap["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert binding["spec"] == {"policyName": vap["metadata"]["name"], "validationActions": ["Deny"]}
    spec = vap["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["flinkdeployments", "flinksessionjobs", "flinkbluegreendeployments"]
    assert rule["apiGroups"] == ["flink.apache.org"]
    conditions = {c["name"]: c["expression"] for c in spec["matchConditions"]}
    for label in TRIGGERS:
        assert f"'{label}'" in conditions["has-trigger-label"]
    assert "has(object.spec.job)" in conditions["runs-a-job"]  # evaluated in tests/chart/test_cel.py
    assert conditions["not-being-deleted"] == "!has(object.metadata.deletionTimestamp)"
    (validation,) = spec["validations"]
    assert "initialSavepointPath" in validation["expression"] and "'suspended'" in validation["expression"]
    # The default policy never lets a job start empty, but for one that declares no state at all
    # (upgradeMode stateless, no directory: evaluated in tests/chart/test_cel.py).
    expression = validation["expression"]
    _, _, declared = expression.partition("restore-decision'] == 'stateless' &&")
    assert declared and "restore-decision'] == 'stateless'" not in declared, expression
    assert "upgradeMode == 'stateless'" in declared and "'execution.checkpointing.dir' in" in declared
    assert not find(rendered["member-vap-off"], "ValidatingAdmissionPolicy")
    assert not find(rendered["member-vap-off"], "ValidatingAdmissionPolicyBinding")
    assert not find(rendered["control-plane"], "ValidatingAdmissionPolicy")


def test_backstop_honours_a_policy_that_allows_empty_starts(helm: str, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"policy": {"onMissingState": "allow"}})
    (validation,) = one(docs, "ValidatingAdmissionPolicy")["spec"]["validations"]
    assert "'flink-failover.io/restore-decision' in object.metadata.annotations" in validation["expression"]


# --- certificates ---------------------------------------------------------------------------------------


def hook(doc: dict[str, Any]) -> set[str]:
    return set(doc["metadata"].get("annotations", {}).get("helm.sh/hook", "").split(",")) - {""}


def test_self_managed_certificates(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["member-default"]
    svc = one(docs, "Service")
    gen = one(docs, "Job", f"{FULLNAME}-certgen")
    assert hook(gen) == {"pre-install", "pre-upgrade"}
    (container,) = gen["spec"]["template"]["spec"]["containers"]
    assert container["args"] == [
        "certs",
        "generate",
        f"--service={svc['metadata']['name']}",
        f"--namespace={svc['metadata']['namespace']}",
        "--out=/tmp/certs",
        "--days=365",
        "--ca-days=3650",
        "--before-days=30",
        f"--secret={FULLNAME}-tls",
        f"--ca-secret={FULLNAME}-ca",
    ]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    inject = one(docs, "Job", f"{FULLNAME}-cainject")
    assert hook(inject) == {"post-install", "post-upgrade"}
    (container,) = inject["spec"]["template"]["spec"]["containers"]
    mwc = one(docs, "MutatingWebhookConfiguration")
    assert container["args"] == [
        "certs",
        "inject",
        f"--webhook-config={mwc['metadata']['name']}",
        "--out=/etc/flink-failover/ca",
    ]
    (ca_volume,) = inject["spec"]["template"]["spec"]["volumes"]
    assert ca_volume["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}]  # no private key in this Job
    cron = one(docs, "CronJob")
    (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["args"][:2] == ["certs", "renew"] and f"--secret={FULLNAME}-tls" in container["args"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    # least privilege: Secrets by name (create cannot be), the webhook configuration by name
    role = one(docs, "Role", f"{FULLNAME}-certgen")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [f"{FULLNAME}-tls", f"{FULLNAME}-ca"],
            "verbs": ["get", "patch"],
        },
    ]
    crole = one(docs, "ClusterRole", f"{FULLNAME}-certgen-{NS}")
    assert crole["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations"],
            "resourceNames": [mwc["metadata"]["name"]],
            "verbs": ["get", "patch"],
        }
    ]
    renew_role = one(docs, "Role", f"{FULLNAME}-certrenew")
    assert renew_role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [f"{FULLNAME}-tls", f"{FULLNAME}-ca"],
            "verbs": ["get", "patch"],
        }
    ]
    for name in (f"{FULLNAME}-certgen",):
        for kind in ("ServiceAccount", "Role", "RoleBinding"):
            doc = one(docs, kind, name)
            assert hook(doc) == {"pre-install", "pre-upgrade", "post-install", "post-upgrade"}
            assert int(doc["metadata"]["annotations"]["helm.sh/hook-weight"]) < 0
    # the serving pods themselves get no API access and no RBAC
    assert not [d for d in docs if d["kind"] in ("Role", "ClusterRole") and d["metadata"]["name"] == FULLNAME]


def test_cert_manager_certificates(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["member-cert-manager"]
    assert not find(docs, "Job") and not find(docs, "CronJob")
    tls = one(docs, "Certificate", f"{FULLNAME}-tls")
    ca = one(docs, "Certificate", f"{FULLNAME}-ca")
    assert ca["spec"]["isCA"] is True and ca["spec"]["issuerRef"]["name"] == f"{FULLNAME}-selfsigned"
    assert one(docs, "Issuer", f"{FULLNAME}-selfsigned")["spec"] == {"selfSigned": {}}
    assert one(docs, "Issuer", f"{FULLNAME}-ca")["spec"] == {"ca": {"secretName": ca["spec"]["secretName"]}}
    assert tls["spec"]["issuerRef"]["name"] == f"{FULLNAME}-ca"
    assert tls["spec"]["dnsNames"] == [
        FULLNAME,
        f"{FULLNAME}.{NS}",
        f"{FULLNAME}.{NS}.svc",
        f"{FULLNAME}.{NS}.svc.cluster.local",
    ]
    assert set(tls["spec"]["usages"]) == {"server auth", "digital signature", "key encipherment"}
    dep = one(docs, "Deployment")
    certs = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "certs")
    assert certs["secret"]["secretName"] == tls["spec"]["secretName"]
    mwc = one(docs, "MutatingWebhookConfiguration")
    assert (
        mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NS}/{tls['metadata']['name']}"
    )
    assert tls["metadata"]["namespace"] == NS


def test_service_monitor(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["member-servicemonitor"]
    sm = one(docs, "ServiceMonitor")
    svc = one(docs, "Service")
    assert sm["metadata"]["labels"]["release"] == "prom"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["port"] == "https" and endpoint["scheme"] == "https" and endpoint["path"] == "/metrics"
    assert endpoint["tlsConfig"]["serverName"] == f"{FULLNAME}.{NS}.svc"
    assert endpoint["tlsConfig"]["ca"]["secret"] == {"name": f"{FULLNAME}-tls", "key": "ca.crt"}


# --- control plane --------------------------------------------------------------------------------------


def test_control_plane_all_in_one(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["control-plane"]
    dep = one(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][:2] == ["serve", "--role=control-plane"] and "--workers=1" in container["args"]
    assert pod["automountServiceAccountToken"] is True  # in-cluster access to the Karmada API
    mwc = one(docs, "MutatingWebhookConfiguration")
    (hook_,) = mwc["webhooks"]
    assert hook_["failurePolicy"] == "Fail" and hook_["sideEffects"] == "None"
    assert hook_["clientConfig"] == {"url": f"https://{FULLNAME}.{NS}.svc:443/mutate-work"}
    assert hook_["rules"] == [
        {
            "apiGroups": ["work.karmada.io"],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["works"],
            "scope": "Namespaced",
        }
    ]
    conditions = {c["name"]: c["expression"] for c in hook_["matchConditions"]}
    assert conditions["execution-namespace"] == "request.namespace.startsWith('karmada-es-')"
    assert "spec.workload.manifests" in conditions["flink-workload"]
    assert "startsWith('flink.apache.org/')" in conditions["flink-workload"]
    role = one(docs, "ClusterRole", f"{FULLNAME}-{NS}")
    assert role["rules"] == [
        {
            "apiGroups": ["work.karmada.io"],
            "resources": ["resourcebindings"],
            "verbs": ["get", "list", "watch", "patch"],
        },
    ]
    binding = one(docs, "ClusterRoleBinding", f"{FULLNAME}-{NS}")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NS}]
    # leader election: every replica serves, the Lease holder captures; the Lease by name only
    assert pod["containers"][0]["args"][-6:] == [
        "--leader-elect",
        f"--lease-name={FULLNAME}-leader",
        f"--lease-namespace={NS}",
        "--lease-duration=15",
        "--renew-deadline=10",
        "--retry-period=2",
    ]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert dep["spec"]["replicas"] == 2
    lease_role = one(docs, "Role", f"{FULLNAME}-leader")
    assert lease_role["metadata"]["namespace"] == NS
    assert lease_role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [f"{FULLNAME}-leader"],
            "verbs": ["get", "update"],
        },
    ]
    lease_binding = one(docs, "RoleBinding", f"{FULLNAME}-leader")
    assert lease_binding["roleRef"]["name"] == lease_role["metadata"]["name"]
    assert lease_binding["subjects"] == binding["subjects"]
    assert one(docs, "Job", f"{FULLNAME}-cainject")


def test_control_plane_split_between_host_and_karmada(rendered: dict[str, list[dict[str, Any]]]) -> None:
    host = rendered["control-plane-workload"]
    assert not find(host, "MutatingWebhookConfiguration") and not find(host, "ClusterRoleBinding")
    pod = one(host, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--kubeconfig=/etc/flink-failover/kubeconfig/kubeconfig" in container["args"]
    assert pod["automountServiceAccountToken"] is False
    assert {
        "name": "kubeconfig",
        "secret": {"secretName": "karmada-kubeconfig", "defaultMode": 0o440},
    } in pod["volumes"]
    inject = one(host, "Job", f"{FULLNAME}-cainject")
    (container,) = inject["spec"]["template"]["spec"]["containers"]
    assert "--kubeconfig=/etc/flink-failover/kubeconfig/kubeconfig" in container["args"]

    karmada = rendered["control-plane-registration"]
    assert sorted(d["kind"] for d in karmada) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ]
    assert not find(host, "Role", f"{FULLNAME}-leader")  # the Lease lives on the Karmada API server
    (server,) = one(host, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "--leader-elect" in server["args"]
    role = one(karmada, "ClusterRole")
    assert role["rules"][-1] == {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations"],
        "resourceNames": [f"{FULLNAME}-{NS}"],
        "verbs": ["get", "patch"],
    }


def test_control_plane_with_cert_manager(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["control-plane-cert-manager"]
    mwc = one(docs, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NS}/{FULLNAME}-tls"
    assert one(docs, "Certificate", f"{FULLNAME}-tls")


def test_explicit_ca_bundle_replaces_injection(helm: str, tmp_path: Path) -> None:
    docs = render(
        helm, tmp_path, {**CP, "controlPlane": {"part": "registration", "webhook": {"caBundle": "Zm9v"}}}
    )
    (hook_,) = one(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook_["clientConfig"]["caBundle"] == "Zm9v"


# --- every command line the chart renders is one the CLI accepts ---------------------------------------


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc["spec"]
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return list(spec["template"]["spec"]["containers"])


@pytest.mark.parametrize("combo", list(COMBOS))
def test_rendered_command_lines_parse(rendered: dict[str, list[dict[str, Any]]], combo: str) -> None:
    from webhook.cli import build_parser

    parser = build_parser()
    workloads = [d for d in rendered[combo] if d["kind"] in ("Deployment", "Job", "CronJob")]
    for doc in workloads:
        for container in containers(doc):
            args = parser.parse_args(container["args"])  # exits (fails the test) on an unknown option
            assert callable(args._run)
            if doc["kind"] == "Deployment":
                assert args.role == (COMBOS[combo].get("role") or "member")
                assert args.bind == "0.0.0.0:8443" and args.cert_dir == "/etc/flink-failover/certs"


def test_chart_requires_kubernetes_1_28(helm: str, tmp_path: Path) -> None:
    """Webhook matchConditions are beta (on by default) from 1.28 on."""
    old = template(helm, tmp_path, {}, "--kube-version", "1.27.9")
    assert old.returncode != 0 and "kubeVersion" in old.stderr
    assert template(helm, tmp_path, {}, "--kube-version", "1.28.0").returncode == 0


BACKSTOP_V1BETA1 = "admissionregistration.k8s.io/v1beta1/ValidatingAdmissionPolicy"


@pytest.mark.parametrize(
    ("flags", "served"),
    [
        (("--kube-version", "1.30.0"), "admissionregistration.k8s.io/v1"),
        (
            ("--kube-version", "1.28.4", "--api-versions", BACKSTOP_V1BETA1),
            "admissionregistration.k8s.io/v1beta1",
        ),
        (("--kube-version", "1.28.4"), None),
    ],
    ids=["1.30", "1.28-with-v1beta1", "1.28-without"],
)
def test_the_backstop_speaks_the_api_version_the_cluster_serves(
    helm: str, tmp_path: Path, flags: tuple[str, ...], served: str | None
) -> None:
    """v1 from 1.30, v1beta1 where a 1.28/1.29 API server serves it, else left out (NOTES warns: helm
    renders NOTES only at install, against the cluster it installs into)."""
    out = template(helm, tmp_path, {}, *flags)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    versions = {d["apiVersion"] for d in docs if d["kind"].startswith("ValidatingAdmissionPolicy")}
    assert versions == ({served} if served else set())


def test_leader_election_can_be_turned_off_and_its_timings_are_checked(helm: str, tmp_path: Path) -> None:
    off = render(helm, tmp_path, {**CP, "controlPlane": {"leaderElection": {"enabled": False}}})
    (container,) = one(off, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert not [a for a in container["args"] if a.startswith("--lease") or a == "--leader-elect"]
    assert not find(off, "Role", f"{FULLNAME}-leader")
    no_capture = render(helm, tmp_path, {**CP, "controlPlane": {"capture": False}})
    (container,) = one(no_capture, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "--no-capture" in container["args"] and "--leader-elect" not in container["args"]
    bad = template(helm, tmp_path, {**CP, "controlPlane": {"leaderElection": {"renewDeadlineSeconds": 20}}})
    assert bad.returncode != 0 and "renewDeadlineSeconds" in bad.stderr
    named = render(helm, tmp_path, {**CP, "controlPlane": {"leaderElection": {"leaseName": "capture"}}})
    (container,) = one(named, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "--lease-name=capture" in container["args"]
    assert one(named, "Role", f"{FULLNAME}-leader")["rules"][1]["resourceNames"] == ["capture"]


# --- platform settings: identity, extra volumes, host network, disruption budget --------------------------


def test_platform_settings_reach_the_pods(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["member-platform-extras"]
    sa = one(docs, "ServiceAccount", FULLNAME)
    assert sa["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/ckpt"}
    pod = one(docs, "Deployment")["spec"]["template"]
    assert pod["metadata"]["annotations"]["example.com/team"] == "platform"
    spec = pod["spec"]
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert {"name": "minio-ca", "configMap": {"name": "minio-ca"}} in spec["volumes"]
    (container,) = spec["containers"]
    assert {"name": "minio-ca", "mountPath": "/etc/ssl/minio", "readOnly": True} in container["volumeMounts"]
    assert {"name": "AWS_CA_BUNDLE", "value": "/etc/ssl/minio/ca.crt"} in container["env"]
    assert container["resources"]["requests"]["memory"] == "256Mi"  # the measured footprint


def test_disruption_budget_only_with_more_than_one_replica(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """minAvailable 1 with one replica blocks every node drain (it used to be rendered)."""
    assert one(rendered["member-platform-extras"], "Deployment")["spec"]["replicas"] == 1
    assert not find(rendered["member-platform-extras"], "PodDisruptionBudget")
    assert one(rendered["member-default"], "PodDisruptionBudget")["spec"]["minAvailable"] == 1


def test_existing_service_account(
    helm: str, rendered: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    docs = rendered["control-plane-existing-account"]
    assert not find(docs, "ServiceAccount", FULLNAME)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "karmada-flink-failover"
    subjects = [{"kind": "ServiceAccount", "name": "karmada-flink-failover", "namespace": NS}]
    assert one(docs, "ClusterRoleBinding", f"{FULLNAME}-{NS}")["subjects"] == subjects
    assert one(docs, "RoleBinding", f"{FULLNAME}-leader")["subjects"] == subjects
    unnamed = template(helm, tmp_path, {"member": {"serviceAccount": {"create": False}}})
    assert unnamed.returncode != 0 and "member.serviceAccount.name is required" in unnamed.stderr


def test_fencing_gives_the_lease_keeper_the_charts_image_and_the_policy_its_switch(
    helm: str, tmp_path: Path, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    """The webhook adds the keeper to each fenced JobManager pod with the chart's own image; the policy's
    fencing.keeper switch reaches the ConfigMap the server reads, and a malformed job name stops helm."""

    def env(docs: list[dict[str, Any]]) -> tuple[dict[str, str], str]:
        container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
        return {e["name"]: e.get("value", "") for e in container["env"]}, container["image"]

    fenced, image = env(rendered["member-fencing"])
    assert fenced["FLINK_FAILOVER_KEEPER_IMAGE"] == image and image.startswith(IMAGE)
    assert "FLINK_FAILOVER_KEEPER_IMAGE" not in env(rendered["member-default"])[0]  # no fencing, no keeper

    keeper = {"enabled": True, "offNamespaces": ["batch"], "offJobs": ["analytics/ledger"]}
    values = {"member": {"fencing": {"cluster": "member1"}}, "policy": {"fencing": {"keeper": keeper}}}
    docs = render(helm, tmp_path, values)
    policy = yaml.safe_load(one(docs, "ConfigMap")["data"]["restore-policy.yaml"])
    assert policy_from_dict(policy).fencing.keeper.off_for("analytics", "ledger") == (
        "fencing.keeper.offJobs names analytics/ledger"
    )
    bad = {"policy": {"fencing": {"keeper": {**keeper, "offJobs": ["ledger"]}}}}
    result = template(helm, tmp_path, bad)
    assert result.returncode != 0 and "offJobs" in result.stderr, result.stderr


def test_native_sidecars_are_declared_to_the_webhook_for_a_128_cluster_with_the_feature_gate(
    helm: str, tmp_path: Path, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    """member.keeper.nativeSidecars reaches the server as FLINK_FAILOVER_NATIVE_SIDECARS (serve
    --native-sidecars): auto (from /version) by default, on for Kubernetes 1.28 whose platform enabled
    SidecarContainers; anything else stops helm."""

    def sidecars(docs: list[dict[str, Any]]) -> str | None:
        container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        return env.get("FLINK_FAILOVER_NATIVE_SIDECARS")

    assert sidecars(rendered["member-fencing"]) == "auto"
    assert sidecars(rendered["member-default"]) is None  # no fencing, no keeper
    on = {"member": {"fencing": {"cluster": "member1"}, "keeper": {"nativeSidecars": "on"}}}
    assert sidecars(render(helm, tmp_path, on)) == "on"
    result = template(helm, tmp_path, {"member": {"keeper": {"nativeSidecars": "yes"}}})
    assert result.returncode != 0 and "nativeSidecars" in result.stderr, result.stderr
