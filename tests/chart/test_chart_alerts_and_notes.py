"""Issue 17, chart items: what a platform engineer needed that the chart did not give (11, 14), the
probes on their own port (9), and storageOptions typos refused at install (7). Each failed before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.chart.test_chart import COMBOS, FULLNAME, IMAGE, NS, find, one, render, rendered, template

__all__ = ["rendered"]  # the module-scoped fixture of test_chart, shared


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return c


def test_workload_part_without_a_karmada_kubeconfig_is_refused(helm: str, tmp_path: Path) -> None:
    result = template(helm, tmp_path, {"role": "control-plane", "controlPlane": {"part": "workload"}})
    assert result.returncode != 0
    assert "kubeconfigSecret" in result.stderr, result.stderr
    ok = render(helm, tmp_path, COMBOS["control-plane-workload"])
    c = container(ok)
    assert "--kubeconfig=/etc/flink-failover/kubeconfig/kubeconfig" in c["args"]
    volumes = {v["name"]: v for v in one(ok, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    # The whole Secret (no items, no subPath): a rotated token reaches the pod, and a tokenFile beside it.
    assert volumes["kubeconfig"]["secret"] == {"secretName": "karmada-kubeconfig", "defaultMode": 0o440}
    assert not any("subPath" in m for m in c["volumeMounts"])


def test_image_digest_and_security_context_overrides(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["member-openshift-digest-alerts"]
    pods = [d for d in docs if d["kind"] in ("Deployment", "Job", "CronJob")]
    assert pods
    for doc in pods:
        spec = doc["spec"]["template"]["spec"] if doc["kind"] != "CronJob" else None
        if spec is None:
            spec = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        assert spec["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
        for c in spec["containers"]:
            assert c["image"] == f"{IMAGE}@sha256:" + "ab" * 32
            assert "runAsUser" not in c["securityContext"] and c["securityContext"]["readOnlyRootFilesystem"]


def test_prometheus_rule_has_the_documented_alerts(rendered: dict[str, list[dict[str, Any]]]) -> None:
    member = one(rendered["member-openshift-digest-alerts"], "PrometheusRule")
    assert member["metadata"]["labels"]["release"] == "prom"
    alerts = {r["alert"]: r for g in member["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) == {
        "FlinkFailoverDown",
        "FlinkFailoverInternalErrors",
        "FlinkFailoverStorageErrors",
        "FlinkFailoverJobHeld",
        "FlinkFailoverCertificateRenewalStale",
    }
    assert f'job="{FULLNAME}"' in alerts["FlinkFailoverStorageErrors"]["expr"]
    cp = one(rendered["control-plane-alerts"], "PrometheusRule")
    cp_alerts = {r["alert"] for g in cp["spec"]["groups"] for r in g["rules"]}
    assert {"FlinkFailoverBindingUnavailable", "FlinkFailoverWatchRestarting"} <= cp_alerts
    assert not find(rendered["member-default"], "PrometheusRule")
    install = (Path(__file__).parents[2] / "docs" / "install.md").read_text()
    for alert in set(alerts) | cp_alerts:
        assert alert in install, f"{alert} is not described in docs/install.md"


# The metrics the fencing agent exports (fencing/metrics.py), one alert each at least.
FENCING_METRICS = {
    "FlinkFailoverFencingAgentNotPolling": "flink_failover_fencing_last_poll_timestamp_seconds",
    "FlinkFailoverFencingAgentNotReady": "flink_failover_fencing_agent_ready",
    "FlinkFailoverJobHeldTooLong": "flink_failover_fencing_oldest_hold_seconds",
    "FlinkFailoverFencingStorageErrors": "flink_failover_fencing_storage_errors_total",
    "FlinkFailoverFencingWaitingForOperator": "flink_failover_fencing_waiting_for_operator",
    "FlinkFailoverFencingSteppedDown": "flink_failover_fencing_step_downs_total",
    "FlinkFailoverFencingKeeperSilent": "flink_failover_fencing_keeper_takebacks_total",
}


def test_fencing_alerts_and_fenced_holds(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """Issue 24 item 7: no fencing alert, and FlinkFailoverJobHeld counted only decision="suspended"."""
    rule = one(rendered["member-fencing-alerts"], "PrometheusRule")
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    for alert, metric in FENCING_METRICS.items():
        assert metric in alerts[alert]["expr"] and f'job="{FULLNAME}"' in alerts[alert]["expr"], alert
    held = alerts["FlinkFailoverJobHeld"]["expr"]
    assert 'decision=~"suspended|held"' in held and "flink_failover_fencing_holds_total" in held
    assert alerts["FlinkFailoverFencingAgentNotPolling"]["expr"].endswith("> 30")  # the lease
    assert alerts["FlinkFailoverJobHeldTooLong"]["expr"].endswith("> 600")
    assert "{{ $labels.where }}" in alerts["FlinkFailoverFencingStorageErrors"]["annotations"]["summary"]
    # without fencing the agent's metrics never exist: no alert on them
    plain = one(rendered["member-openshift-digest-alerts"], "PrometheusRule")
    plain_alerts = {r["alert"] for g in plain["spec"]["groups"] for r in g["rules"]}
    assert not plain_alerts & set(FENCING_METRICS)
    install = (Path(__file__).parents[2] / "docs" / "install.md").read_text()
    for alert in FENCING_METRICS:
        assert alert in install, f"{alert} is not described in docs/install.md"


def test_notes_tell_how_to_verify(helm: str, tmp_path: Path) -> None:
    result = template(helm, tmp_path, {}, "--show-only", "templates/NOTES.txt")
    notes = result.stdout if result.returncode == 0 else ""
    if not notes:  # helm template does not render NOTES.txt with --show-only: install --dry-run does
        from tests.chart.test_chart import CHART, run_helm, write_values

        done = run_helm(helm, "install", "ff", str(CHART), "--dry-run", "--namespace", NS,
                        "-f", str(write_values(tmp_path, {})))  # fmt: skip
        assert done.returncode == 0, done.stderr
        notes = done.stdout.split("NOTES:", 1)[1]
    assert "Verify:" in notes and "/readyz" in notes and "--as-failover" in notes


def test_storage_option_typo_is_refused_at_install(helm: str, tmp_path: Path) -> None:
    bad = {"policy": {"storageOptions": {"s3": {"endpointUrl": "http://minio:9000"}}}}
    result = template(helm, tmp_path, bad)
    assert result.returncode != 0 and "endpointUrl" in result.stderr, result.stderr
    good = render(
        helm, tmp_path, {"policy": {"storageOptions": {"s3": {"endpoint_url": "http://minio:9000"}}}}
    )
    cm = one(good, "ConfigMap", f"{FULLNAME}-policy")
    policy = yaml.safe_load(cm["data"]["restore-policy.yaml"])
    assert policy["storageOptions"] == {"s3": {"endpoint_url": "http://minio:9000"}}


def test_probe_port_is_open_in_the_network_policy(rendered: dict[str, list[dict[str, Any]]]) -> None:
    netpol = one(rendered["member-default"], "NetworkPolicy")
    ports = {p["port"] for rule in netpol["spec"]["ingress"] for p in rule["ports"]}
    assert ports == {8443, 8081}


def _notes(helm: str, tmp_path: Path, values: dict[str, Any]) -> str:
    from tests.chart.test_chart import CHART, run_helm, write_values

    done = run_helm(helm, "install", "ff", str(CHART), "--dry-run", "--namespace", NS,
                    "-f", str(write_values(tmp_path, values)))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split("NOTES:", 1)[1]


def test_notes_cover_fencing_and_the_on_call_procedure(helm: str, tmp_path: Path) -> None:
    """Issue 24 item 7: NOTES said nothing of member.fencing.cluster, its write access, the retention
    customization or release."""
    notes = _notes(helm, tmp_path, {"member": {"fencing": {"cluster": "member1"}}})
    assert "as cluster member1" in notes and "WRITING below <checkpoint-dir>/flink-failover/" in notes
    assert "resourceinterpretercustomization-flink-retention.yaml" in notes
    assert "flink-failover release NAMESPACE/NAME" in notes and "kubectl -n NAMESPACE wait" in notes
    assert (
        Path(__file__).parents[2] / "policies/karmada/resourceinterpretercustomization-flink-retention.yaml"
    ).is_file()
    plain = _notes(helm, tmp_path, {})
    assert "Fencing is off" in plain and "member.readSessionClusters: false" in plain
