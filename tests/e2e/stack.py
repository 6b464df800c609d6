"""The whole end-to-end stack for one Karmada version, started and stopped by the tests.

etcd; the Karmada control plane with two members (``tests/e2e/karmada.py``); moto's S3 for checkpoints and
fencing records, and beside it Google Cloud Storage (gcp-storage-emulator) and Azure Blob (Azurite), each
with a bucket (container) ``BUCKET``, for the scenarios run on those backends (tests/support/backends.py;
one whose program is missing is left out, and a scenario asking for it skips or, in CI, fails); the
product as the chart installs it (``tests/e2e/install.py``): the control-plane role on
the Karmada API server, the member role (two replicas, fencing on) and the estimator on each member, the
estimator's ExternalName release on the Karmada API server; the shipped Karmada customizations and the
ClusterTaintPolicy applied; an operator double per member (``tests/e2e/operator.py``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.apiserver import ADMIN_TOKEN, start_etcd
from tests.e2e.assets import Assets
from tests.e2e.balancer import Balancer
from tests.e2e.install import Release, install
from tests.e2e.karmada import MEMBERS, Karmada, apply, start_karmada
from tests.e2e.pki import write_pki
from tests.e2e.procs import Processes, wait_until
from tests.e2e.rest import Rest
from tests.support.backends import MissingServer, Running, by_name
from tests.support.repo import REPO, shared_data_required
from tests.support.s3 import CREDENTIALS, moto_binary, moto_server
from tests.support.s3router import s3_router
from tests.support.server import free_port
from tests.support.tcpproxy import TcpProxy, tcp_proxy

RELEASE = "ff"
NAMESPACE = "flink-failover"
BUCKET = "flink-state"
ESTIMATOR_PORT = 10352
POLICIES = REPO / "policies" / "karmada"
IMAGE = "registry.example/flink-failover"  # required by the chart; nothing pulls it here
# Fencing timings: short, and within the rules the chart and the server enforce (renew deadline at least two
# polls; renew deadline + poll + stop margin + one poll of slack within the lease). A 3 s poll, not 2: the
# fleet's 50 jobs times two agent replicas renew a heartbeat each per poll, and moto on the shared two
# cores answers 60-90 requests a second at most (at 2 s, with a listing per job per poll, heartbeats
# missed their deadline and healthy jobs stepped down, as they should on a storage that slow).
FENCING = {"leaseSeconds": 16, "pollSeconds": 3, "renewDeadlineSeconds": 6, "stopMarginSeconds": 4}
# The lease keeper (docs/keeper.md) on, as by default, but off in the namespace of the scenarios that
# judge the fencing agent alone (tests/e2e/scenario.py NAMESPACE): the keeper's scenarios run in their own
# (tests/e2e/flows_keeper.py GUARDED), where the operator double runs each injected keeper as a kubelet
# would (tests/e2e/kubelet.py).
KEEPER = {"enabled": True, "offNamespaces": ["analytics"]}


@dataclass
class Tools:
    helm: Path
    kubectl: Path


@dataclass
class Stack:
    version: str
    folder: Path
    procs: Processes
    karmada: Karmada
    s3_endpoint: str
    tools: Tools
    # member2 reaches the s3a:// scheme (the same bucket) through this proxy, member1 directly: a test
    # hangs one storage for one member
    s3a_proxy: TcpProxy | None = None
    releases: dict[str, Release] = field(default_factory=dict)
    # every storage server of the stack by its backend's name (s3, gcs, azure), each with BUCKET made
    storages: dict[str, Running] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)  # backend name -> why its server is not here
    # the member role's fencing timings (FENCING unless a run at scale asks for slower polls: bench/)
    fencing_values: dict[str, float] = field(default_factory=lambda: dict(FENCING))
    # the S3 buckets the jobs' checkpoints may be spread over: BUCKET alone (the tier), or at scale
    # (bench/) K buckets each on its own moto server behind one router (tests/support/s3router.py)
    s3_buckets: list[str] = field(default_factory=lambda: [BUCKET])
    # storage processes beside ``procs`` (moto servers and the router at scale): name -> pid, for RSS
    side_pids: dict[str, int] = field(default_factory=dict)

    @property
    def fencing(self) -> dict[str, float]:
        return dict(self.fencing_values)

    def storage(self, backend: str) -> Running:
        """The running server of ``backend`` (s3, gcs, azure); a missing one skips the test that asks
        (fails it under REQUIRE_SHARED_DATA=1, as CI runs), with the reason."""
        if backend in self.missing:
            import pytest

            if shared_data_required():
                pytest.fail(self.missing[backend], pytrace=False)
            pytest.skip(self.missing[backend])
        return self.storages[backend]

    def storage_for(self, url: str) -> Running:
        """The server that holds ``url`` (a Flink path: s3://, s3a://, gs://, abfs://)."""
        from webhook.common.paths import StoragePath

        protocol = StoragePath.parse(url).protocol
        return next(r for r in self.storages.values() if r.backend.protocol == protocol)

    def other_storage_options(self) -> dict[str, dict[str, Any]]:
        """The policy's storageOptions for the backends beside S3, as a user writes them."""
        return {r.backend.scheme: r.options() for name, r in sorted(self.storages.items()) if name != "s3"}

    def karmada_api(self) -> Rest:
        return Rest(self.karmada.api.url, self.karmada.api.ca, ADMIN_TOKEN, name="karmada")

    def member_api(self, name: str) -> Rest:
        api = self.karmada.members[name].api
        return Rest(api.url, api.ca, ADMIN_TOKEN, name=name)

    def apply_karmada(self, documents: list[dict[str, Any]] | str | Path) -> str:
        return apply(self.tools.kubectl, self.karmada.kubeconfig, documents)

    def apply_member(self, name: str, documents: list[dict[str, Any]] | str | Path) -> str:
        return apply(self.tools.kubectl, self.karmada.members[name].kubeconfig, documents)


def storage_values(
    endpoint: str,
    s3a_endpoint: str = "",
    others: dict[str, dict[str, Any]] | None = None,
    fencing: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The policy and the member pods' credentials for the tier's S3, as docs/install.md shows them, and
    ``others``' storageOptions (scheme -> options: the tier's GCS and Azure Blob) beside them."""
    options = {"s3": {"endpoint_url": endpoint}, "s3a": {"endpoint_url": s3a_endpoint or endpoint}}
    options.update(others or {})
    return {
        "image": {"repository": IMAGE},
        "policy": {"storageOptions": options, "fencing": {**(fencing or FENCING), "keeper": KEEPER}},
        "member": {
            # the tier's kube-apiserver is v1.28.4: native sidecars as where the SidecarContainers gate is on
            "keeper": {"nativeSidecars": "on"},
            "extraEnv": [
                {
                    "name": "AWS_ACCESS_KEY_ID",
                    "valueFrom": {"secretKeyRef": {"name": "s3-credentials", "key": "key"}},
                },
                {
                    "name": "AWS_SECRET_ACCESS_KEY",
                    "valueFrom": {"secretKeyRef": {"name": "s3-credentials", "key": "secret"}},
                },
                {"name": "AWS_DEFAULT_REGION", "value": "us-east-1"},
            ],
        },
    }


def _credentials_secret() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s3-credentials", "namespace": NAMESPACE},
        "stringData": dict(CREDENTIALS),
    }


@contextlib.contextmanager
def stack(
    assets: Assets,
    version: str,
    folder: Path,
    tools: Tools,
    product: bool = True,
    fencing: dict[str, float] | None = None,
    buckets: int = 1,
) -> Iterator[Stack]:
    """The stack; without ``product`` Karmada, the members, S3 and the nodes only (the guide installs it);
    ``fencing``: the member role's timings instead of FENCING; ``buckets``: more than one spreads S3 over
    that many moto servers, a bucket ``BUCKET-<i>`` each, behind one endpoint (a run at scale)."""
    procs = Processes(folder / "logs")
    with contextlib.ExitStack() as exits:
        exits.callback(procs.stop_all)
        certs = write_pki(folder / "pki")
        etcd = start_etcd(procs, assets.etcd, folder / "etcd")
        karmada = start_karmada(
            procs, assets, assets.karmada[version], etcd, certs, folder, tools.kubectl, ESTIMATOR_PORT
        )
        for member in karmada.members.values():
            exits.callback(member.proxy.close)
        side: dict[str, int] = {}
        if buckets <= 1:
            endpoint = exits.enter_context(moto_server(folder / "logs" / "moto.log"))
            names = [BUCKET]
        else:
            endpoint, names = _spread_s3(exits, folder / "logs", buckets, side)
        for name in names:
            _make_bucket(endpoint, name)
        port = int(endpoint.rsplit(":", 1)[1])
        st = Stack(version, folder, procs, karmada, endpoint, tools, exits.enter_context(tcp_proxy(port)))
        st.fencing_values = dict(fencing or FENCING)
        st.s3_buckets = names
        st.side_pids = side
        st.storages["s3"] = Running(by_name("s3"), endpoint)
        for name in ("gcs", "azure"):
            try:
                running = exits.enter_context(by_name(name).start(folder / "logs" / name))
            except MissingServer as exc:
                st.missing[name] = str(exc)
                continue
            running.fs.mkdir(BUCKET)
            st.storages[name] = running
        _nodes(st)
        _users(st)
        if product:
            _karmada_policies(st)
            _install_product(st)
        yield st


# Each member's nodes and load (nothing runs on them: the Node and Pod objects are what Karmada and the
# estimators read; a load pod is bound to its node as a kubelet-run pod is, and holds its requests there).
# Room for every ordinary job of the scenarios (a job manager and a task manager of 1 cpu) on both; for
# the placement scenario (flows.placed_job: a job manager of 1 cpu, two task managers of 2 cpu) the
# packing trap on member2: uniform 4-cpu nodes under uneven load leave 2, 2 and 1 cpu free, so one set
# fits (the job manager on m2-c, a task manager on each of the others), but Karmada's first fit puts
# the job manager on m2-a, the first node it fits, and then finds room for one task manager only: 0
# sets. On member1 no set fits at all, though Karmada's totals and resource models count one: its large
# nodes have one pod slot left each (maxPods used up by a node agent, as a DaemonSet's pod uses it) and
# m1-c has half a cpu left. Each node's free capacity sits at the bottom of one of Karmada's default
# resource-model grades (cpu 1 / 4Gi, 2 / 16Gi, 8 / 64Gi; m1-c below grade 1), so the general estimator's
# model nodes are the free capacity (a node above its grade's minimum is modelled smaller, and the
# general estimator then refuses sets that fit). Node names sort in creation order: Karmada's estimator
# walks one zone's nodes in the order its informer added them (listed by name).
NODES = {
    "member1": [("m1-a", "8", "64Gi", "2"), ("m1-b", "8", "64Gi", "2"), ("m1-c", "1", "4Gi", "110")],
    "member2": [("m2-a", "4", "32Gi", "110"), ("m2-b", "4", "32Gi", "110"), ("m2-c", "4", "32Gi", "110")],
}
# node -> the requests of the one pod bound to it (empty: a pod without requests, holding a pod slot)
LOAD = {
    "member1": {"m1-a": {}, "m1-b": {}, "m1-c": {"cpu": "500m", "memory": "2Gi"}},
    "member2": {
        "m2-a": {"cpu": "2", "memory": "16Gi"},
        "m2-b": {"cpu": "2", "memory": "16Gi"},
        "m2-c": {"cpu": "3", "memory": "28Gi"},
    },
}
LOAD_NAMESPACE = "kube-system"


def _nodes(st: Stack) -> None:
    for cluster, nodes in NODES.items():
        api = st.member_api(cluster)
        for name, cpu, memory, pods in nodes:
            resources = {"cpu": cpu, "memory": memory, "pods": pods}
            created = api.create(
                "/api/v1/nodes", {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}
            )
            created["status"] = {
                "capacity": dict(resources),
                "allocatable": dict(resources),
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}
                ],
            }
            updated = api.replace(f"/api/v1/nodes/{name}/status", created)
            # kube-apiserver's TaintNodesByCondition taints a new node not-ready; the node lifecycle
            # controller (not run here) lifts it once the kubelet reports Ready
            updated["spec"]["taints"] = [
                t for t in updated["spec"].get("taints") or [] if t["key"] != "node.kubernetes.io/not-ready"
            ]
            api.replace(f"/api/v1/nodes/{name}", updated)
        for node, requests in LOAD[cluster].items():
            _load_pod(api, node, requests)


def _load_pod(api: Rest, node: str, requests: dict[str, str]) -> None:
    """A running pod bound to ``node`` (as the scheduler binds one and the kubelet reports it)."""
    container: dict[str, Any] = {"name": "load", "image": "registry.k8s.io/pause:3.9"}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    name = f"load-{node}"
    created = api.create(
        f"/api/v1/namespaces/{LOAD_NAMESPACE}/pods",
        {"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [container]}},
    )
    created["status"] = {"phase": "Running"}
    api.replace(f"/api/v1/namespaces/{LOAD_NAMESPACE}/pods/{name}/status", created)


def _users(st: Stack) -> None:
    """Ordinary users (``apiserver.USERS``: alice, in group flink-users) may edit Flink jobs on the
    members, as a platform team lets its Flink users; nothing else."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "flink-users"},
        "rules": [
            {
                "apiGroups": ["flink.apache.org"],
                "resources": ["flinkdeployments", "flinksessionjobs"],
                "verbs": ["get", "list", "watch", "patch", "update"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "flink-users"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "flink-users"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "flink-users"}],
    }
    for name in MEMBERS:
        st.apply_member(name, [role, binding])


def _make_bucket(endpoint: str, name: str = BUCKET) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=endpoint, key=CREDENTIALS["key"], secret=CREDENTIALS["secret"])
    fs.mkdir(name)


def _spread_s3(
    exits: contextlib.ExitStack, logs: Path, count: int, side: dict[str, int]
) -> tuple[str, list[str]]:
    """``count`` moto servers, bucket ``BUCKET-<i>`` on the i-th, behind one router: its endpoint and the
    buckets. ``side`` gets each process's pid."""
    from tests.support.storage_process import storage_process, url_answers

    routes: dict[str, str] = {}
    for i in range(count):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [moto_binary(), "-H", "127.0.0.1", "-p", str(port)]
        process = exits.enter_context(
            storage_process(f"moto server {i}", argv, logs / f"moto-{i}.log", url_answers(f"{url}/moto-api/"))
        )
        routes[f"{BUCKET}-{i}"] = url
        side[f"moto-{i}"] = process.pid
    endpoint, pid = exits.enter_context(s3_router(routes, logs / "s3router.log"))
    side["s3router"] = pid
    return endpoint, list(routes)


def _karmada_policies(st: Stack) -> None:
    """The shipped customizations and the ClusterTaintPolicy (PropagationPolicies are per scenario)."""
    for path in sorted(POLICIES.glob("resourceinterpretercustomization-*.yaml")):
        st.apply_karmada(path)
    st.apply_karmada(POLICIES / "clustertaintpolicy-not-ready.yaml")


def _install_product(st: Stack) -> None:
    values = storage_values(st.s3_endpoint, others=st.other_storage_options(), fencing=st.fencing)
    work = st.folder / "product"
    helm, kubectl = st.tools.helm, st.tools.kubectl
    karmada_api = st.karmada.api
    # The Karmada API server reaches the Work webhook by URL (controlPlane.webhookURL), here a balancer
    # in front of the control plane's replicas; the chart adds the URL's host to the certificate.
    work_webhook = Balancer([])
    st.releases["control-plane"] = install(
        st.procs,
        helm,
        kubectl,
        karmada_api,
        RELEASE,
        NAMESPACE,
        {
            **values,
            "role": "control-plane",
            "controlPlane": {"webhookURL": f"https://localhost:{work_webhook.port}/mutate-work"},
        },
        work,
        balancers={(f"{RELEASE}-flink-failover", "https"): work_webhook},
    )
    for name in MEMBERS:
        api = st.karmada.members[name].api
        apply(
            kubectl,
            api.kubeconfig,
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}],
        )
        apply(kubectl, api.kubeconfig, [_credentials_secret()])
        through = st.s3a_proxy.endpoint if name == "member2" and st.s3a_proxy is not None else ""
        chosen = storage_values(st.s3_endpoint, through, st.other_storage_options(), st.fencing)
        member_values = yaml.safe_load(yaml.safe_dump(chosen))
        member_values["role"] = "member"
        member_values["member"]["fencing"] = {"cluster": name}
        st.releases[f"member-{name}"] = install(
            st.procs, helm, kubectl, api, RELEASE, NAMESPACE, member_values, work / name
        )
        estimator = install(
            st.procs,
            helm,
            kubectl,
            api,
            f"{RELEASE}-estimator",
            "karmada-system",
            {
                "image": {"repository": IMAGE},
                "role": "estimator",
                "estimator": {"cluster": name, "port": ESTIMATOR_PORT},
            },
            work / f"estimator-{name}",
        )
        st.releases[f"estimator-{name}"] = estimator
        grpc = estimator.services[(f"karmada-scheduler-estimator-{name}", "grpc")]
        install(
            st.procs,
            helm,
            kubectl,
            karmada_api,
            f"{RELEASE}-estimator-{name}",
            "karmada-system",
            {
                "image": {"repository": IMAGE},
                "role": "estimator",
                "estimator": {
                    "cluster": name,
                    "port": ESTIMATOR_PORT,
                    "externalName": "localhost",
                    "externalPort": grpc.port,
                },
            },
            work / f"estimator-{name}-karmada",
        )
    for release in st.releases.values():
        wait_ready(release)


def wait_ready(release: Release) -> None:
    for pod in release.replicas():
        probe = pod.ports.get("probes") or pod.ports.get("http-metrics")
        if probe is None:
            continue
        tls = "probes" in pod.ports
        ca = pod.folder / "volumes" / "certs" / "ca.crt" if tls else None
        wait_until(f"{pod.name} ready", functools.partial(_ready, probe, ca), 90, [pod.process])


def _ready(port: int, ca: Path | None) -> bool:
    import ssl
    import urllib.request

    scheme = "https" if ca is not None else "http"
    context = None
    if ca is not None:
        context = ssl.create_default_context(cafile=str(ca))
        context.check_hostname = False
    with urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}/readyz", context=context, timeout=3) as answer:
        return bool(answer.status == 200)


__all__ = ["Stack", "Tools", "free_port", "stack", "wait_ready"]
