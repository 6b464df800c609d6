"""role estimator: one release per member cluster, found by Karmada's scheduler as <prefix>-<cluster>."""

from __future__ import annotations

import re
import shlex
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.test_chart import (
    CHART,
    find,
    one,
    render,
    run_helm,
    selector_matches,
    template,
    write_values,
)
from tests.conftest import REPO

SERVICE = "karmada-scheduler-estimator-member1"
BASE = {"role": "estimator", "estimator": {"cluster": "member1", "kubeconfigSecret": "member1-kubeconfig"}}
COMBOS: dict[str, dict[str, Any]] = {
    "estimator": BASE,
    "estimator-tls": {
        "role": "estimator",
        "estimator": {
            "cluster": "member1",
            "kubeconfigSecret": "member1-kubeconfig",
            "tls": {"secretName": "estimator-tls", "clientCAKey": "ca.crt"},
        },
    },
    "estimator-in-member": {"role": "estimator", "estimator": {"cluster": "member1", "replicaCount": 1}},
    "estimator-servicemonitor": {
        **BASE,
        "metrics": {"serviceMonitor": {"enabled": True}},
        "networkPolicy": {"from": [{"namespaceSelector": {"matchLabels": {"name": "karmada-system"}}}]},
    },
    "estimator-platform-extras": {
        "role": "estimator",
        "estimator": {
            "cluster": "member1",
            "kubeconfigSecret": "member1-kubeconfig",
            "replicaCount": 3,
            "grpcWorkers": 16,
            "stateRefreshSeconds": 2,
            "resources": {
                "requests": {"cpu": "250m", "memory": "300Mi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
            "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                        ]
                    }
                }
            },
            "priorityClassName": "system-cluster-critical",
            "topologySpread": {"maxSkew": 2, "whenUnsatisfiable": "DoNotSchedule"},
            "podDisruptionBudget": {"minAvailable": "50%"},
            "podAnnotations": {"example.com/team": "platform"},
            "podLabels": {"example.com/tier": "scheduling"},
            "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/member1"}},
            "extraEnv": [{"name": "AWS_REGION", "value": "eu-west-1"}],
            "extraVolumes": [{"name": "aws-cli", "configMap": {"name": "aws-config"}}],
            "extraVolumeMounts": [{"name": "aws-cli", "mountPath": "/etc/aws", "readOnly": True}],
        },
    },
    "estimator-existing-account": {
        "role": "estimator",
        "estimator": {
            "cluster": "member1",
            "serviceAccount": {"create": False, "name": "estimator-reader"},
            "podDisruptionBudget": {"enabled": False},
        },
    },
    "estimator-externalname": {
        "role": "estimator",
        "estimator": {
            "cluster": "member1",
            "externalName": "estimator.member1.example.com",
            "externalPort": 443,
        },
    },
}


@pytest.fixture(scope="module")
def rendered(helm: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("render-estimator")
    return {name: render(helm, tmp, values) for name, values in COMBOS.items()}


@pytest.mark.parametrize("combo", list(COMBOS))
def test_lint_and_strict_validation(
    helm: str, tmp_path: Path, rendered: dict[str, list[dict[str, Any]]], combo: str
) -> None:
    from tests.chart.validate import validate

    lint = run_helm(helm, "lint", "--strict", str(CHART), "-f", str(write_values(tmp_path, COMBOS[combo])))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    for doc in rendered[combo]:
        validate(doc)
        assert doc["metadata"]["labels"]["app.kubernetes.io/component"] == "estimator"


def test_estimator_release_renders_only_the_estimator(rendered: dict[str, list[dict[str, Any]]]) -> None:
    kinds = sorted(d["kind"] for d in rendered["estimator"])
    assert kinds == ["Deployment", "NetworkPolicy", "PodDisruptionBudget", "Service", "ServiceAccount"]
    assert sorted(d["kind"] for d in rendered["estimator-externalname"]) == ["Service"]


def test_service_is_what_the_scheduler_dials(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["estimator"]
    service = one(docs, "Service", SERVICE)
    deployment = one(docs, "Deployment", SERVICE)
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector_matches({"matchLabels": service["spec"]["selector"]}, pod_labels)
    grpc_port = next(p for p in service["spec"]["ports"] if p["name"] == "grpc")
    assert grpc_port["port"] == 10352 and grpc_port["targetPort"] == "grpc"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert {"name": "grpc", "containerPort": 10352, "protocol": "TCP"} in container["ports"]


def _args(doc: dict[str, Any]) -> Any:
    from webhook.cli import build_parser

    (container,) = doc["spec"]["template"]["spec"]["containers"]
    return build_parser().parse_args(container["args"]), container, doc["spec"]["template"]["spec"]


def test_command_line_kubeconfig_and_plaintext(rendered: dict[str, list[dict[str, Any]]]) -> None:
    args, container, pod = _args(one(rendered["estimator"], "Deployment"))
    assert (args.role, args.cluster, args.server_port) == ("estimator", "member1", 10352)
    assert args.kubeconfig == "/etc/flink-failover/kubeconfig/kubeconfig"
    assert not args.grpc_auth_cert_file  # plaintext by default, like Karmada's estimator
    assert pod["automountServiceAccountToken"] is False
    (volume,) = pod["volumes"]
    assert volume["secret"]["secretName"] == "member1-kubeconfig"
    assert container["volumeMounts"][0]["mountPath"] == str(Path(args.kubeconfig).parent)
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_tls_and_client_certificates(rendered: dict[str, list[dict[str, Any]]]) -> None:
    args, container, pod = _args(one(rendered["estimator-tls"], "Deployment"))
    mount = next(m for m in container["volumeMounts"] if m["name"] == "grpc-tls")
    assert args.grpc_auth_cert_file == f"{mount['mountPath']}/tls.crt"
    assert args.grpc_auth_key_file == f"{mount['mountPath']}/tls.key"
    assert args.grpc_client_ca_file == f"{mount['mountPath']}/ca.crt"
    volume = next(v for v in pod["volumes"] if v["name"] == "grpc-tls")
    assert volume["secret"]["secretName"] == "estimator-tls"


def test_metrics_scrape_and_network_policy(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["estimator-servicemonitor"]
    monitor = one(docs, "ServiceMonitor", SERVICE)
    service = one(docs, "Service", SERVICE)
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert selector_matches(monitor["spec"]["selector"], service["metadata"]["labels"])
    policy = one(docs, "NetworkPolicy", SERVICE)
    assert {p["port"] for p in policy["spec"]["ingress"][0]["ports"]} == {10352, 10351}
    assert policy["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"] == {
        "name": "karmada-system"
    }
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selector_matches(policy["spec"]["podSelector"], pod_labels)


def test_in_member_cluster_reads_nodes_pods_and_deployments_only(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = rendered["estimator-in-member"]
    args, _container, pod = _args(one(docs, "Deployment"))
    assert args.kubeconfig is None and pod["automountServiceAccountToken"] is True
    assert "volumes" not in pod
    role = one(docs, "ClusterRole")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["apps"],
            "resources": ["deployments", "replicasets"],
            "verbs": ["get", "list", "watch"],
        },
    ]
    binding = one(docs, "ClusterRoleBinding")
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]
    assert not find(docs, "PodDisruptionBudget")  # one replica


def test_external_name_service_for_a_remote_karmada_api_server(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    service = one(rendered["estimator-externalname"], "Service", SERVICE)
    assert service["spec"]["type"] == "ExternalName"
    assert service["spec"]["externalName"] == "estimator.member1.example.com"
    # the scheduler needs a port equal to its --scheduler-estimator-port and a numeric targetPort
    assert service["spec"]["ports"] == [{"name": "grpc", "port": 10352, "targetPort": 443, "protocol": "TCP"}]


def test_pod_settings_come_from_the_estimator_block(rendered: dict[str, list[dict[str, Any]]]) -> None:
    values = COMBOS["estimator-platform-extras"]["estimator"]
    docs = rendered["estimator-platform-extras"]
    deployment = one(docs, "Deployment", SERVICE)
    assert deployment["spec"]["replicas"] == 3
    template_ = deployment["spec"]["template"]
    assert template_["metadata"]["annotations"] == values["podAnnotations"]
    assert template_["metadata"]["labels"]["example.com/tier"] == "scheduling"
    assert deployment["spec"]["selector"]["matchLabels"].items() <= template_["metadata"]["labels"].items()
    args, container, pod = _args(deployment)
    assert (args.grpc_workers, args.state_refresh_seconds) == (16, 2.0)
    assert container["resources"] == values["resources"]
    for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName"):
        assert pod[key] == values[key], key
    (spread,) = pod["topologySpreadConstraints"]
    assert (spread["maxSkew"], spread["whenUnsatisfiable"]) == (2, "DoNotSchedule")
    assert selector_matches(spread["labelSelector"], template_["metadata"]["labels"])
    assert "hostNetwork" not in pod  # the scheduler (a pod) calls the estimator, not the API server
    assert {"name": "AWS_REGION", "value": "eu-west-1"} in container["env"]
    assert {"name": "aws-cli", "configMap": {"name": "aws-config"}} in pod["volumes"]
    assert {"name": "aws-cli", "mountPath": "/etc/aws", "readOnly": True} in container["volumeMounts"]
    assert {v["name"] for v in pod["volumes"]} == {"kubeconfig", "aws-cli"}
    account = one(docs, "ServiceAccount", pod["serviceAccountName"])
    assert account["metadata"]["annotations"] == values["serviceAccount"]["annotations"]
    pdb = one(docs, "PodDisruptionBudget", SERVICE)
    assert pdb["spec"]["minAvailable"] == "50%"
    assert selector_matches(pdb["spec"]["selector"], template_["metadata"]["labels"])
    # the estimator's own defaults, not the webhook roles' (requests 256Mi)
    default_pod = one(rendered["estimator"], "Deployment")["spec"]["template"]["spec"]
    (default_container,) = default_pod["containers"]
    assert default_container["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert "nodeSelector" not in default_pod and "priorityClassName" not in default_pod


def test_existing_service_account_gets_the_read_permissions(
    helm: str, tmp_path: Path, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    docs = rendered["estimator-existing-account"]
    assert not find(docs, "ServiceAccount")
    assert not find(docs, "PodDisruptionBudget")  # disabled, although two replicas
    assert one(docs, "Deployment")["spec"]["replicas"] == 2
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "estimator-reader"
    subjects = one(docs, "ClusterRoleBinding")["subjects"]
    assert subjects == [{"kind": "ServiceAccount", "name": "estimator-reader", "namespace": "flink-failover"}]
    unnamed = template(
        helm,
        tmp_path,
        {"role": "estimator", "estimator": {"cluster": "m", "serviceAccount": {"create": False}}},
    )
    assert unnamed.returncode != 0 and "estimator.serviceAccount.name is required" in unnamed.stderr


def test_service_name_is_never_shortened(helm: str, tmp_path: Path) -> None:
    """karmada-scheduler looks up exactly <prefix>-<cluster>: a truncated name would never be found."""
    cluster = "c" * 35  # karmada-scheduler-estimator- (28) + 35 = 63
    docs = render(helm, tmp_path, {"role": "estimator", "estimator": {"cluster": cluster}})
    assert one(docs, "Service")["metadata"]["name"] == f"karmada-scheduler-estimator-{cluster}"
    result = template(helm, tmp_path, {"role": "estimator", "estimator": {"cluster": cluster + "c"}})
    assert result.returncode != 0 and "longer than 63 characters" in result.stderr, result.stderr
    external = {"cluster": cluster + "c", "externalName": "e.example.com"}
    result = template(helm, tmp_path, {"role": "estimator", "estimator": external})
    assert result.returncode != 0 and "longer than 63 characters" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"role": "estimator"}, "needs estimator.cluster"),
        (
            {"role": "estimator", "estimator": {"externalName": "e.example.com"}},
            "needs estimator.cluster",
        ),
        (
            {"role": "estimator", "estimator": {"cluster": "m", "port": 9000, "metricsPort": 9000}},
            "must differ",
        ),
        ({"role": "estimator", "estimator": {"cluster": "c" * 49}}, "/estimator/cluster"),
        ({"role": "estimator", "estimator": {"cluster": "m", "nodeSelectr": {}}}, "nodeSelectr"),
        ({"role": "estimator", "estimator": {"cluster": "m", "workers": 2}}, "'workers' not allowed"),
        (
            {"role": "estimator", "estimator": {"cluster": "m", "hostNetwork": True}},
            "'hostNetwork' not allowed",
        ),
        ({"role": "estimator", "estimator": {"cluster": "m", "replicaCount": 0}}, "/estimator/replicaCount"),
        ({"role": "estimator", "estimator": {"cluster": "m", "grpcWorkers": 0}}, "/estimator/grpcWorkers"),
        (
            {"role": "estimator", "estimator": {"cluster": "m", "serviceType": "ExternalName"}},
            "/estimator/serviceType",
        ),
        (
            {"role": "estimator", "estimator": {"cluster": "m", "externalName": "http://e.example.com"}},
            "/estimator/externalName",
        ),
        (
            {"role": "estimator", "estimator": {"cluster": "m", "kubeconfigSecret": "Member1_Kubeconfig"}},
            "/estimator/kubeconfigSecret",
        ),
        (
            {"role": "estimator", "estimator": {"cluster": "m", "tls": {"clientCAKey": "ca/crt"}}},
            "/estimator/tls/clientCAKey",
        ),
        (
            {"role": "estimator", "estimator": {"cluster": "m", "resources": {"limits": {"memory": "lots"}}}},
            "/estimator/resources/limits/memory",
        ),
        (
            {"role": "estimator", "estimator": {"cluster": "m", "extraVolumeMounts": [{"name": "x"}]}},
            "/estimator/extraVolumeMounts/0",
        ),
        ({"role": "estimator", "estimator": {"cluster": "m", "tls": None}}, "missing propert"),
        # the flat layout the estimator was first written against
        ({"role": "estimator", "estimator": {"cluster": "m"}, "resources": {}}, "'resources' not allowed"),
        (
            {"role": "estimator", "estimator": {"cluster": "m"}, "nodeSelector": {}},
            "'nodeSelector' not allowed",
        ),
        ({"role": "estimator", "estimator": {"cluster": "m"}, "podDisruptionBudget": {}}, "not allowed"),
        ({"role": "estimator", "estimator": {"cluster": "m", "clusterName": "m"}}, "clusterName"),
        ({"role": "estimator", "estimator": {"cluster": "Member_1"}}, "/estimator/cluster"),
        ({"role": "estimator", "estimator": {"cluster": "m", "port": "10352"}}, "/estimator/port"),
        ({"role": "estimator", "estimator": {"cluster": "m", "tls": {"secret": "x"}}}, "secret"),
    ],
)
def test_bad_values_are_refused(helm: str, tmp_path: Path, values: dict[str, Any], message: str) -> None:
    result = template(helm, tmp_path, values)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("combo", "expected"),
    [
        ("estimator-tls", f"Service {SERVICE}:10352 (TLS)"),
        ("estimator", f"deployment/{SERVICE}"),
        ("estimator-externalname", f"ExternalName Service {SERVICE} -> estimator.member1.example.com"),
    ],
)
def test_install_notes(helm: str, tmp_path: Path, combo: str, expected: str) -> None:
    values = write_values(tmp_path, COMBOS[combo])
    result = run_helm(
        helm, "install", "e", str(CHART), "-n", "karmada-system", "--dry-run=client", "-f", str(values)
    )
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "role estimator" in notes and expected in notes, notes


# --- the values docs/placement.md shows render as it says -----------------------------------------------

PLACEMENT_DOC = REPO / "docs" / "placement.md"


def _doc_blocks(lang: str) -> list[str]:
    text = PLACEMENT_DOC.read_text(encoding="utf-8")
    pattern = rf"^( *)```{lang}\n(.*?)^\1```"
    return [textwrap.dedent(body) for _indent, body in re.findall(pattern, text, re.M | re.S)]


def _doc_helm_sets() -> list[list[str]]:
    """The --set options of every estimator helm command in the doc."""
    commands = []
    for block in _doc_blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line.split("|")[0])
            if words[:1] == ["helm"] and "role=estimator" in words:
                commands.append([w for i, w in enumerate(words) if i and words[i - 1] == "--set"])
    return commands


def _doc_values() -> list[dict[str, Any]]:
    blocks = [yaml.safe_load(b) for b in _doc_blocks("yaml")]
    return [b for b in blocks if isinstance(b, dict) and b.get("role") == "estimator"]


def test_the_doc_shows_estimator_values() -> None:
    assert len(_doc_helm_sets()) == 2 and len(_doc_values()) == 1


@pytest.mark.parametrize("index", range(2))
def test_doc_helm_commands_render(helm: str, index: int) -> None:
    from tests.chart.validate import validate

    sets = _doc_helm_sets()[index]
    result = run_helm(
        helm,
        "template",
        "estimator-member1",
        str(CHART),
        "-n",
        "karmada-system",
        *(arg for kv in sets for arg in ("--set", kv)),
    )
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    for doc in docs:
        validate(doc)
    assert one(docs, "Service", SERVICE)


def test_doc_values_file_renders(helm: str, tmp_path: Path) -> None:
    from tests.chart.validate import validate

    (values,) = _doc_values()
    docs = render(helm, tmp_path, values)
    for doc in docs:
        validate(doc)
    pod = one(docs, "Deployment", SERVICE)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == values["estimator"]["nodeSelector"]
    assert pod["priorityClassName"] == "system-cluster-critical"
