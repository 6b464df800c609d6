"""etcd and real kube-apiservers on loopback: one etcd, each API server under its own prefix.

Clients authenticate with static tokens (``--token-auth-file``): an administrator in ``system:masters``
and ordinary users the scenarios act as; service accounts get real tokens from the TokenRequest API,
so the chart's RBAC is what the product runs under. Authorization is RBAC.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.pki import StackPki
from tests.e2e.procs import Process, Processes, wait_until
from tests.support.server import free_port

ADMIN_TOKEN = "e2e-admin-token"
ALICE_TOKEN = "e2e-alice-token"  # an ordinary user (group flink-users) who edits Flink jobs
USERS = {  # token -> (user, groups): who the scenarios act as
    ADMIN_TOKEN: ("e2e-admin", "system:masters"),
    ALICE_TOKEN: ("alice", "flink-users"),
}


AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    verbs: [get, list, watch]
  - level: Metadata
"""


@dataclass
class Etcd:
    url: str
    process: Process


def etcd_argv(etcd: Path, data: Path, client: int, peer: int, quota: int = 4 << 30) -> list[str]:
    """One etcd member on loopback ``client`` and ``peer`` ports, its data in ``data``, ``quota`` bytes."""
    url = f"http://127.0.0.1:{client}"
    return [
        str(etcd),
        f"--data-dir={data}",
        f"--listen-client-urls={url}",
        f"--advertise-client-urls={url}",
        f"--listen-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-cluster=default=http://127.0.0.1:{peer}",
        "--unsafe-no-fsync",  # a test's data need not survive a power cut
        f"--quota-backend-bytes={quota}",
        "--log-level=warn",
    ]


def start_etcd(procs: Processes, etcd: Path, data: Path) -> Etcd:
    client, peer = free_port(), free_port()
    url = f"http://127.0.0.1:{client}"
    process = procs.start("etcd", etcd_argv(etcd, data, client, peer))
    wait_until("etcd health", lambda: _get(f"{url}/health", None, None)["health"] == "true", 60, [process])
    return Etcd(url, process)


@dataclass
class ApiServer:
    name: str
    port: int
    ca: Path
    process: Process
    kubeconfig: Path

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def get(self, path: str, token: str = ADMIN_TOKEN) -> Any:
        return _get(self.url + path, self.ca, token)

    def kubeconfig_for(self, path: Path, token: str, user: str) -> Path:
        return write_kubeconfig(path, self.url, self.ca, token, user)


def token_file(folder: Path) -> Path:
    path = folder / "tokens.csv"
    path.write_text("".join(f'{token},{user},{user},"{groups}"\n' for token, (user, groups) in USERS.items()))
    return path


def start_apiserver(
    procs: Processes,
    binary: Path,
    name: str,
    etcd: Etcd,
    certs: StackPki,
    folder: Path,
    extra: tuple[str, ...] = (),
) -> ApiServer:
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    audit: list[str] = []
    if os.environ.get("FLINK_FAILOVER_E2E_AUDIT") == "1":  # who writes what, for a diagnosis (costs CPU)
        policy = folder / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        audit = [f"--audit-policy-file={policy}", f"--audit-log-path={procs.logs / f'{name}.audit.jsonl'}"]
    argv = [
        f"--etcd-servers={etcd.url}",
        f"--etcd-prefix=/{name}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={certs.serving_cert}",
        f"--tls-private-key-file={certs.serving_key}",
        f"--client-ca-file={certs.ca}",
        f"--token-auth-file={token_file(folder)}",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={certs.service_account_pub}",
        f"--service-account-signing-key-file={certs.service_account_key}",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--authorization-mode=RBAC",
        "--disable-admission-plugins=ServiceAccount",
        f"--requestheader-client-ca-file={certs.front_proxy_ca}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={certs.front_proxy_cert}",
        f"--proxy-client-key-file={certs.front_proxy_key}",
        # ValidatingAdmissionPolicy is beta in v1.28 (GA, v1, in 1.30): the chart's backstop needs it
        "--feature-gates=ValidatingAdmissionPolicy=true",
        "--runtime-config=admissionregistration.k8s.io/v1beta1=true",
        "--profiling=false",
        "--logging-format=text",
        "-v=1",
        *audit,
        *extra,
    ]
    process = procs.start(name, [str(binary), *argv])
    server = ApiServer(name, port, certs.ca, process, folder / "admin.kubeconfig")
    write_kubeconfig(server.kubeconfig, server.url, certs.ca, ADMIN_TOKEN, "e2e-admin")
    wait_until(f"{name} ready", lambda: _ok(server, "/readyz"), 120, [process])
    return server


def _ok(server: ApiServer, path: str) -> bool:
    request = urllib.request.Request(server.url + path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    with urllib.request.urlopen(request, context=_context(server.ca), timeout=5) as answer:
        return bool(answer.status == 200)


def _context(ca: Path | None) -> ssl.SSLContext | None:
    return ssl.create_default_context(cafile=str(ca)) if ca is not None else None


def _get(url: str, ca: Path | None, token: str | None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, context=_context(ca), timeout=10) as answer:
        return json.loads(answer.read())


def write_kubeconfig(path: Path, server: str, ca: Path, token: str, user: str) -> Path:
    """A kubeconfig (JSON is YAML) for one server and one user; the CA by file, as kubectl writes it."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "e2e",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=1))
    return path
