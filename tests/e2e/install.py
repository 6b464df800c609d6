"""The product installed on the tier's API servers exactly as the chart configures it.

``helm template`` renders a release; its objects are applied to the API server the release is for, in
helm's order (pre-install hooks, the release, post-install hooks). The certificate Jobs run as pods
(``flink-failover certs generate`` into the Secret, ``certs inject`` into the webhook registration), so
the serving certificate and the caBundle are the chart's own. The Deployments' pods run as processes
(``tests/e2e/pods.py``), each Service becomes an ExternalName to localhost whose port is a balancer in
front of the replicas, and the webhook registrations keep their Service reference with that port: the API
server resolves it, dials the balancer and checks the certificate by the Service's name, as in a cluster.

Releases are rendered with the tier's own capabilities (kube-apiserver v1.28.4 serving
``ValidatingAdmissionPolicy`` as ``v1beta1``), as ``helm install`` would learn them from the API server.
"""

from __future__ import annotations

import copy
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.apiserver import ADMIN_TOKEN, ApiServer
from tests.e2e.assets import KUBERNETES
from tests.e2e.balancer import Balancer
from tests.e2e.karmada import apply
from tests.e2e.pods import Pod, run_pod
from tests.e2e.procs import Processes, wait_until
from tests.e2e.rest import Rest
from tests.support.repo import REPO

CHART = REPO / "charts" / "flink-failover"
# what discovery would tell helm about the tier's API servers
CAPABILITIES = (
    "--kube-version",
    KUBERNETES,
    "--api-versions",
    "admissionregistration.k8s.io/v1beta1/ValidatingAdmissionPolicy",
)
HOOK = "helm.sh/hook"
RUN_LATER = {"Deployment", "Job", "CronJob"}
NOT_SERVED = {"ServiceMonitor", "PrometheusRule"}  # their CRDs are not in the tier


@dataclass
class Release:
    name: str
    namespace: str
    api: ApiServer
    objects: list[dict[str, Any]]
    pods: dict[str, list[Pod]] = field(default_factory=dict)  # Deployment name -> its replicas
    services: dict[tuple[str, str], Balancer] = field(
        default_factory=dict
    )  # (service, port name) -> balancer

    def find(self, kind: str, name: str | None = None) -> dict[str, Any]:
        for obj in self.objects:
            if obj["kind"] == kind and (name is None or obj["metadata"]["name"] == name):
                return obj
        raise LookupError(f"release {self.name} renders no {kind} {name or ''}")

    def replicas(self) -> list[Pod]:
        return [pod for pods in self.pods.values() for pod in pods]


def render(helm: Path, name: str, namespace: str, values: dict[str, Any], work: Path) -> list[dict[str, Any]]:
    values_file = work / f"values-{name}.yaml"
    values_file.write_text(yaml.safe_dump(values))
    out = subprocess.run(
        [str(helm), "template", name, str(CHART), "-n", namespace, "-f", str(values_file), *CAPABILITIES],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"helm template {name} failed: {out.stderr}")
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def install(
    procs: Processes,
    helm: Path,
    kubectl_bin: Path,
    api: ApiServer,
    name: str,
    namespace: str,
    values: dict[str, Any],
    work: Path,
    balancers: dict[tuple[str, str], Balancer] | None = None,
) -> Release:
    """Render and install one release; ``balancers`` stand for Service ports whose number the values
    name before the release exists (a webhook URL)."""
    folder = work / f"release-{name}-on-{api.name}"  # one release name may live on several API servers
    folder.mkdir(parents=True, exist_ok=True)
    release = Release(name, namespace, api, render(helm, name, namespace, values, folder))
    release.services.update(balancers or {})
    rest = Rest(api.url, api.ca, ADMIN_TOKEN, name=api.name)
    if rest.get(f"/api/v1/namespaces/{namespace}", ok_missing=True) is None:
        rest.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    for phase in ("pre-install", "", "post-install"):
        objects = [o for o in release.objects if (phase in _phases(o) if phase else not _phases(o))]
        _apply_phase(procs, kubectl_bin, rest, release, objects, folder)
    start_pods(procs, rest, release, folder)
    return release


def _phases(obj: dict[str, Any]) -> list[str]:
    annotations = obj["metadata"].get("annotations") or {}
    return [p.strip() for p in str(annotations.get(HOOK, "")).split(",") if p.strip()]


def _weight(obj: dict[str, Any]) -> int:
    return int((obj["metadata"].get("annotations") or {}).get("helm.sh/hook-weight", "0"))


def _apply_phase(
    procs: Processes,
    kubectl_bin: Path,
    rest: Rest,
    release: Release,
    objects: list[dict[str, Any]],
    folder: Path,
) -> None:
    for weight in sorted({_weight(o) for o in objects}):
        batch = [o for o in objects if _weight(o) == weight]
        manifests = [_for_tier(release, o) for o in batch if o["kind"] not in RUN_LATER | NOT_SERVED]
        if manifests:
            apply(kubectl_bin, release.api.kubeconfig, [m for m in manifests if m is not None])
        for job in (o for o in batch if o["kind"] == "Job"):
            _run_job(procs, rest, release, job, folder)


def _for_tier(release: Release, obj: dict[str, Any]) -> dict[str, Any] | None:
    obj = copy.deepcopy(obj)
    if _namespaced(obj):
        obj["metadata"].setdefault("namespace", release.namespace)
    kind = obj["kind"]
    if kind == "Service" and obj["spec"].get("type", "ClusterIP") == "ClusterIP":
        obj["spec"] = _external_service(release, obj)
    elif kind == "MutatingWebhookConfiguration":
        for hook in obj["webhooks"]:
            service = hook["clientConfig"].get("service")
            if service is not None:
                service["port"] = _balancer(release, service["name"], int(service.get("port", 443))).port
    return obj


def _namespaced(obj: dict[str, Any]) -> bool:
    return obj["kind"] not in {
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "Namespace",
    }


def _service_ports(release: Release, service: str) -> list[dict[str, Any]]:
    obj = release.find("Service", service)
    return list(obj["spec"]["ports"])


def _balancer(release: Release, service: str, port: int) -> Balancer:
    """The balancer standing for a Service port (its ``port`` number as rendered)."""
    for spec_port in _service_ports(release, service):
        if int(spec_port["port"]) == port:
            key = (service, str(spec_port.get("name") or spec_port["port"]))
            if key not in release.services:
                release.services[key] = Balancer([])
            return release.services[key]
    raise LookupError(f"Service {service} has no port {port}")


def _external_service(release: Release, obj: dict[str, Any]) -> dict[str, Any]:
    """The Service as an ExternalName to localhost, each port at its balancer. A client that resolves a
    Service port to its target (karmada-scheduler, dialling the estimator's rendered port) finds it
    under the rendered number too; one that dials the port itself (kube-apiserver calling a webhook)
    is given the balancer's number (its registration is rewritten to it)."""
    name = obj["metadata"]["name"]
    ports = []
    for spec_port in obj["spec"]["ports"]:
        balancer = _balancer(release, name, int(spec_port["port"]))
        port_name = str(spec_port.get("name") or spec_port["port"])
        ports.append(
            {"name": port_name, "port": balancer.port, "targetPort": balancer.port, "protocol": "TCP"}
        )
        if int(spec_port["port"]) != balancer.port:
            ports.append(
                {
                    "name": f"{port_name[:13]}-r",
                    "port": int(spec_port["port"]),
                    "targetPort": balancer.port,
                    "protocol": "TCP",
                }
            )
    return {"type": "ExternalName", "externalName": "localhost", "ports": ports}


def _run_job(procs: Processes, rest: Rest, release: Release, job: dict[str, Any], folder: Path) -> None:
    name = job["metadata"]["name"]
    pod = run_pod(procs, rest, job["spec"]["template"], release.namespace, name, folder / name)
    wait_until(f"Job {name} done", lambda: not pod.process.alive(), 120)
    if pod.process.popen.returncode != 0:
        raise RuntimeError(f"Job {name} failed ({pod.process.popen.returncode}):\n{pod.process.tail()}")


def start_pods(procs: Processes, rest: Rest, release: Release, folder: Path) -> None:
    for deployment in (o for o in release.objects if o["kind"] == "Deployment"):
        name = deployment["metadata"]["name"]
        template = deployment["spec"]["template"]
        pods = [
            run_pod(procs, rest, template, release.namespace, f"{name}-{i}", folder / f"{name}-{i}")
            for i in range(int(deployment["spec"].get("replicas", 1)))
        ]
        release.pods[name] = pods
        _route(release, deployment, pods)


def restart_pod(procs: Processes, rest: Rest, release: Release, index: int) -> Pod:
    """Start replica ``index`` of the release's Deployment again (a pod its ReplicaSet replaced), in the
    same folder, and send the Service's connections to it."""
    deployment = release.find("Deployment")
    name = deployment["metadata"]["name"]
    old = release.pods[name][index]
    procs.stop(old.process, grace=0.5)  # (already dead when a test killed it)
    pod = run_pod(procs, rest, deployment["spec"]["template"], release.namespace, old.name, old.folder)
    release.pods[name][index] = pod
    _route(release, deployment, release.pods[name])
    return pod


def _route(release: Release, deployment: dict[str, Any], pods: list[Pod]) -> None:
    """Each Service selecting this Deployment's pods: its balancers send to their target ports."""
    labels = deployment["spec"]["template"]["metadata"].get("labels") or {}
    for service in (o for o in release.objects if o["kind"] == "Service"):
        selector = service["spec"].get("selector") or {}
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            continue
        for spec_port in service["spec"]["ports"]:
            target = str(spec_port.get("targetPort", spec_port["port"]))
            balancer = _balancer(release, service["metadata"]["name"], int(spec_port["port"]))
            balancer.backends = [pod.port(target) for pod in pods]


def dump(objects: list[dict[str, Any]]) -> str:
    return json.dumps(objects, indent=1)
