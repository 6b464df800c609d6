"""Issue 17 item 1: ``serve --role control-plane`` run by hand (no PROMETHEUS_MULTIPROC_DIR) counts its
admissions on /metrics (before: 0 bytes, the role had imported prometheus_client before the directory was
set), and item 13: a stopped server leaves no ``flink-failover-metrics-<pid>`` directory behind."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.controlplane import fakeapi
from tests.controlplane.server import Server


def plain_work(name: str) -> dict[str, object]:
    """A Work without a Flink workload: the Work webhook answers it without a binding lookup."""
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "analytics"}}
    return {
        "apiVersion": "work.karmada.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": name, "namespace": "karmada-es-member2"},
        "spec": {"workload": {"manifests": [manifest]}},
    }


def test_control_plane_metrics_without_a_multiprocess_dir(
    karmada: fakeapi.RunningFake, certs: Path, tmp_path: Path
) -> None:
    kubeconfig = karmada.kubeconfig(tmp_path / "kubeconfig")
    server = Server(kubeconfig, certs, tmp_path, "--no-capture", metrics_dir=False)
    try:
        server.wait_ready()
        for n in range(5):
            assert server.admit(plain_work(f"cm-{n}"))["response"]["allowed"] is True
        metrics = server.metrics()
        assert 'flink_failover_admission_duration_seconds_count{role="control-plane"} 5.0' in metrics, metrics
        pid = server.proc.pid
        own = Path(tempfile.gettempdir()) / f"flink-failover-metrics-{pid}"
        assert own.is_dir()  # the server made its own directory
    finally:
        server.stop()
    assert server.proc.returncode == 0
    assert not own.exists()


def test_a_refused_start_leaves_no_metrics_dir_nor_environment(tmp_path: Path) -> None:
    import os

    from webhook.cli import main

    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    bad = tmp_path / "policy.yaml"
    bad.write_text("onMissingState: hold\n")
    assert main(["serve", "--role", "member", "--policy", str(bad), "--cert-dir", str(tmp_path)]) == 2
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ  # a process that goes on passes nothing on
    assert not (Path(tempfile.gettempdir()) / f"flink-failover-metrics-{os.getpid()}").exists()
