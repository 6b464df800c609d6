"""role estimator: one release per member cluster, found by Karmada's scheduler as <prefix>-<cluster>."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

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


def test_in_member_cluster_reads_nodes_and_pods_only(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["estimator-in-member"]
    args, _container, pod = _args(one(docs, "Deployment"))
    assert args.kubeconfig is None and pod["automountServiceAccountToken"] is True
    assert "volumes" not in pod
    role = one(docs, "ClusterRole")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]}
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


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"role": "estimator"}, "needs estimator.cluster"),
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
