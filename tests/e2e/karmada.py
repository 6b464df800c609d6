"""A real Karmada control plane on loopback, with two member kube-apiservers joined in push mode.

What each piece needs is in ../shared/e2e/README.md (and docs/development.md): the Karmada API server is a
plain kube-apiserver with Karmada's CRDs; ``cluster.karmada.io`` is served by the aggregated API server
behind an APIService whose Service is an ExternalName to localhost; Karmada's webhook configuration is
rewritten to loopback URLs; the controller manager and scheduler run with the failover feature gates and
short timings. Each member's API endpoint in its Cluster object goes through a TCP proxy the tests can cut:
a partition between Karmada and a member whose own components keep talking to it.
"""

from __future__ import annotations

import base64
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.apiserver import ADMIN_TOKEN, ApiServer, Etcd, start_apiserver
from tests.e2e.assets import Assets, KarmadaSet
from tests.e2e.pki import StackPki
from tests.e2e.procs import Process, Processes, wait_until
from tests.support.repo import shared_data_dir
from tests.support.server import free_port
from tests.support.tcpproxy import TcpProxy

FEATURE_GATES = (
    "Failover=true,GracefulEviction=true,StatefulFailoverInjection=true,MultiplePodTemplatesScheduling=true"
)
MEMBERS = ("member1", "member2")
GRACEFUL_EVICTION_TIMEOUT = "30s"
# Cluster health as the README's short timings: NotReady about 10 s after its API server stops answering.
CONTROLLER_TIMINGS = (
    "--cluster-status-update-frequency=2s",
    "--cluster-monitor-period=2s",
    "--cluster-monitor-grace-period=10s",
    "--cluster-failure-threshold=6s",
    "--cluster-success-threshold=6s",
    f"--graceful-eviction-timeout={GRACEFUL_EVICTION_TIMEOUT}",
    "--resource-eviction-rate=1000",
)


@dataclass
class Member:
    name: str
    api: ApiServer
    proxy: TcpProxy  # Karmada's way to this member: cut it for a partition

    @property
    def kubeconfig(self) -> Path:
        return self.api.kubeconfig


@dataclass
class Karmada:
    version: str
    api: ApiServer
    members: dict[str, Member]
    components: dict[str, Process] = field(default_factory=dict)
    estimator_port: int = 0

    @property
    def kubeconfig(self) -> Path:
        return self.api.kubeconfig


def flink_crds() -> str:
    """The Flink operator's four CRDs (FlinkDeployment, FlinkSessionJob, FlinkStateSnapshot,
    FlinkBlueGreenDeployment), as release 1.15.0 ships them."""
    folder = shared_data_dir() / "crds" / "flink-operator-1.15.0"
    return "\n---\n".join(path.read_text() for path in sorted(folder.glob("flink*.flink.apache.org-v1.yml")))


def kubectl(
    kubectl_bin: Path, kubeconfig: Path, *args: str, stdin: str | None = None, check: bool = True
) -> str:
    out = subprocess.run(
        [str(kubectl_bin), f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check and out.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


def apply(kubectl_bin: Path, kubeconfig: Path, documents: list[dict[str, Any]] | str | Path) -> str:
    """Server-side apply (some Karmada CRDs are too large for kubectl's last-applied annotation; and a
    v1.19 aggregated API server breaks /openapi/v2, which client-side validation needs)."""
    args = ["apply", "--server-side", "--force-conflicts", "--validate=false", "--field-manager=e2e"]
    if isinstance(documents, Path):
        return kubectl(kubectl_bin, kubeconfig, *args, "-R", "-f", str(documents))
    text = documents if isinstance(documents, str) else yaml.safe_dump_all(documents)
    return kubectl(kubectl_bin, kubeconfig, *args, "-f", "-", stdin=text)


def start_karmada(
    procs: Processes,
    assets: Assets,
    karmada_set: KarmadaSet,
    etcd: Etcd,
    certs: StackPki,
    folder: Path,
    kubectl_bin: Path,
    estimator_port: int,
) -> Karmada:
    api = start_apiserver(
        procs, assets.kube_apiserver, "karmada-apiserver", etcd, certs, folder / "karmada-apiserver"
    )
    apply(kubectl_bin, api.kubeconfig, karmada_set.namespace)
    apply(kubectl_bin, api.kubeconfig, karmada_set.crds)
    apply(kubectl_bin, api.kubeconfig, flink_crds())
    karmada = Karmada(karmada_set.version, api, {}, estimator_port=estimator_port)
    _aggregated_apiserver(procs, karmada, karmada_set, etcd, certs, kubectl_bin)
    _webhook(procs, karmada, karmada_set, certs, folder, kubectl_bin)
    kubectl(kubectl_bin, api.kubeconfig, "create", "namespace", "karmada-cluster")
    for name in MEMBERS:
        member_api = start_apiserver(procs, assets.kube_apiserver, name, etcd, certs, folder / name)
        apply(kubectl_bin, member_api.kubeconfig, flink_crds())
        proxy = TcpProxy(member_api.port)
        karmada.members[name] = Member(name, member_api, proxy)
    _controllers(procs, karmada, karmada_set, folder)
    for member in karmada.members.values():
        _join(kubectl_bin, karmada, member, certs)
    wait_until(
        "members Ready in Karmada",
        lambda: all(_cluster_ready(karmada, name) for name in MEMBERS),
        120,
        list(karmada.components.values()),
    )
    return karmada


def _aggregated_apiserver(
    procs: Processes,
    karmada: Karmada,
    karmada_set: KarmadaSet,
    etcd: Etcd,
    certs: StackPki,
    kubectl_bin: Path,
) -> None:
    port = free_port()
    kubeconfig = str(karmada.api.kubeconfig)
    karmada.components["aggregated-apiserver"] = procs.start(
        "karmada-aggregated-apiserver",
        [
            str(karmada_set.binary("karmada-aggregated-apiserver")),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--etcd-servers={etcd.url}",
            "--etcd-prefix=/karmada-aggregated",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--tls-cert-file={certs.serving_cert}",
            f"--tls-private-key-file={certs.serving_key}",
            f"--requestheader-client-ca-file={certs.front_proxy_ca}",
            "--requestheader-allowed-names=front-proxy-client",
            "--audit-log-maxage=0",
            f"--feature-gates={FEATURE_GATES}",
            "-v=1",
        ],
    )
    apply(
        kubectl_bin,
        karmada.api.kubeconfig,
        [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "karmada-aggregated-apiserver", "namespace": "karmada-system"},
                "spec": {"type": "ExternalName", "externalName": "localhost", "ports": [{"port": port}]},
            },
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": "v1alpha1.cluster.karmada.io"},
                "spec": {
                    "group": "cluster.karmada.io",
                    "version": "v1alpha1",
                    "groupPriorityMinimum": 2000,
                    "versionPriority": 10,
                    "service": {
                        "name": "karmada-aggregated-apiserver",
                        "namespace": "karmada-system",
                        "port": port,
                    },
                    "caBundle": base64.b64encode(certs.ca.read_bytes()).decode(),
                },
            },
        ],
    )
    wait_until(
        "cluster.karmada.io served",
        lambda: bool(karmada.api.get("/apis/cluster.karmada.io/v1alpha1/clusters") is not None),
        90,
        [karmada.components["aggregated-apiserver"]],
    )


def _webhook(
    procs: Processes,
    karmada: Karmada,
    karmada_set: KarmadaSet,
    certs: StackPki,
    folder: Path,
    kubectl_bin: Path,
) -> None:
    port = free_port()
    karmada.components["webhook"] = procs.start(
        "karmada-webhook",
        [
            str(karmada_set.binary("karmada-webhook")),
            f"--kubeconfig={karmada.api.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={certs.serving_dir('karmada-webhook')}",
            f"--health-probe-bind-address=127.0.0.1:{free_port()}",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            "--allow-no-execute-taint-policy=true",
            f"--feature-gates={FEATURE_GATES}",
            "-v=1",
        ],
    )
    text = karmada_set.webhook_configuration.read_text()
    text = text.replace("https://karmada-webhook.karmada-system.svc:443/", f"https://127.0.0.1:{port}/")
    text = text.replace("{{caBundle}}", base64.b64encode(certs.ca.read_bytes()).decode())
    wait_until("karmada-webhook serving", lambda: _listening(port), 60, [karmada.components["webhook"]])
    apply(kubectl_bin, karmada.api.kubeconfig, text)


def _controllers(procs: Processes, karmada: Karmada, karmada_set: KarmadaSet, folder: Path) -> None:
    kubeconfig = f"--kubeconfig={karmada.api.kubeconfig}"
    karmada.components["controller-manager"] = procs.start(
        "karmada-controller-manager",
        [
            str(karmada_set.binary("karmada-controller-manager")),
            kubeconfig,
            "--controllers=*",
            "--leader-elect=false",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{free_port()}",
            f"--feature-gates={FEATURE_GATES}",
            "--enable-no-execute-taint-eviction=true",
            *CONTROLLER_TIMINGS,
            "-v=2",
        ],
    )
    karmada.components["scheduler"] = procs.start(
        "karmada-scheduler",
        [
            str(karmada_set.binary("karmada-scheduler")),
            kubeconfig,
            "--leader-elect=false",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{free_port()}",
            f"--feature-gates={FEATURE_GATES}",
            "--enable-scheduler-estimator=true",
            f"--scheduler-estimator-port={karmada.estimator_port}",
            "-v=2",
        ],
    )


def _join(kubectl_bin: Path, karmada: Karmada, member: Member, certs: StackPki) -> None:
    """What ``karmadactl join`` does for a push-mode member: its credentials in Secrets, then the Cluster."""
    kube_system = member.api.get("/api/v1/namespaces/kube-system")
    ca = base64.b64encode(certs.ca.read_bytes()).decode()
    token = base64.b64encode(ADMIN_TOKEN.encode()).decode()
    apply(
        kubectl_bin,
        karmada.api.kubeconfig,
        [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": member.name, "namespace": "karmada-cluster"},
                "data": {"caBundle": ca, "token": token},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{member.name}-impersonator", "namespace": "karmada-cluster"},
                "data": {"token": token},
            },
            {
                "apiVersion": "cluster.karmada.io/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": member.name},
                "spec": {
                    "syncMode": "Push",
                    "apiEndpoint": f"https://127.0.0.1:{member.proxy.port}",
                    "id": kube_system["metadata"]["uid"],
                    "secretRef": {"namespace": "karmada-cluster", "name": member.name},
                    "impersonatorSecretRef": {
                        "namespace": "karmada-cluster",
                        "name": f"{member.name}-impersonator",
                    },
                },
            },
        ],
    )


def _cluster_ready(karmada: Karmada, name: str) -> bool:
    cluster = karmada.api.get(f"/apis/cluster.karmada.io/v1alpha1/clusters/{name}")
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def cluster(karmada: Karmada, name: str) -> dict[str, Any]:
    return dict(karmada.api.get(f"/apis/cluster.karmada.io/v1alpha1/clusters/{name}"))


def dump(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True)
