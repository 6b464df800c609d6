"""The chart's checks against what is already in the cluster (``lookup``), rendered with
``helm template --dry-run=server`` against the in-memory API server (tests/certs/fake_kube.py).

Issue 17 item 12: Karmada's own ``karmada-scheduler-estimator-<cluster>`` Service is detected and the
switch-over named (before: Helm's bare ownership error at install, or with ``template`` nothing);
item 11: a kubeconfig Secret without the configured key is refused.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.certs.fake_kube import FakeKube
from tests.chart.test_chart import CHART, IMAGE

NS = "karmada-system"
SERVICE = "karmada-scheduler-estimator-member1"


# What the chart renders, per group/version: enough discovery for Helm to map each kind.
KINDS = {
    "v1": ["Service", "Secret", "ServiceAccount", "ConfigMap"],
    "apps/v1": ["Deployment"],
    "batch/v1": ["Job", "CronJob"],
    "policy/v1": ["PodDisruptionBudget"],
    "networking.k8s.io/v1": ["NetworkPolicy"],
    "rbac.authorization.k8s.io/v1": ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"],
    "admissionregistration.k8s.io/v1": [
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ],
}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration"}
CLUSTER_SCOPED |= {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    with FakeKube() as fake:
        fake.objects["/version"] = {"major": "1", "minor": "31", "gitVersion": "v1.31.0"}
        fake.objects["/api"] = {"kind": "APIVersions", "versions": ["v1"]}
        groups = []
        for group_version, kinds in KINDS.items():
            resources = [
                {
                    "name": k.lower() + ("es" if k.endswith("s") else "s"),
                    "singularName": k.lower(),
                    "namespaced": k not in CLUSTER_SCOPED,
                    "kind": k,
                    "verbs": ["get", "list", "create"],
                }
                for k in kinds
            ]
            doc = {"kind": "APIResourceList", "groupVersion": group_version, "resources": resources}
            fake.objects["/api/v1" if group_version == "v1" else f"/apis/{group_version}"] = doc
            if group_version != "v1":
                group, version = group_version.split("/")
                gv = {"groupVersion": group_version, "version": version}
                groups.append({"name": group, "versions": [gv], "preferredVersion": gv})
        fake.objects["/apis"] = {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        yield fake


def template(helm: str, kube: FakeKube, tmp_path: Path, *sets: str) -> subprocess.CompletedProcess[str]:
    args = [helm, "template", "ff", str(CHART), "--dry-run=server", "--disable-openapi-validation", "-n", NS]
    args += ["--kubeconfig", str(kube.kubeconfig(tmp_path)), "--set", f"image.repository={IMAGE}"]
    for value in sets:
        args += ["--set", value]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


ESTIMATOR = ("role=estimator", "estimator.cluster=member1")


def test_karmadas_own_estimator_service_is_detected(helm: str, kube: FakeKube, tmp_path: Path) -> None:
    assert template(helm, kube, tmp_path, *ESTIMATOR).returncode == 0  # nothing there yet
    path = f"/api/v1/namespaces/{NS}/services/{SERVICE}"
    kube.objects[path] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": NS},
    }
    refused = template(helm, kube, tmp_path, *ESTIMATOR)
    assert refused.returncode != 0
    assert f"Service {NS}/{SERVICE} already exists and is not this release's" in refused.stderr
    assert "Replacing Karmada's estimator" in refused.stderr
    ours = {"meta.helm.sh/release-name": "ff", "meta.helm.sh/release-namespace": NS}
    kube.objects[path]["metadata"]["annotations"] = ours  # an upgrade of this release
    kube.objects[path]["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "Helm"}
    assert template(helm, kube, tmp_path, *ESTIMATOR).returncode == 0
    docs = (Path(__file__).parents[2] / "docs" / "placement.md").read_text()
    assert "### Replacing Karmada's estimator" in docs


def test_a_kubeconfig_secret_without_its_key_is_refused(helm: str, kube: FakeKube, tmp_path: Path) -> None:
    sets = ("role=control-plane", "controlPlane.part=workload", "controlPlane.kubeconfigSecret=karmada-kc")
    path = f"/api/v1/namespaces/{NS}/secrets/karmada-kc"
    kube.objects[path] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "karmada-kc", "namespace": NS},
        "data": {"config": base64.b64encode(b"apiVersion: v1").decode()},
    }
    refused = template(helm, kube, tmp_path, *sets)
    assert refused.returncode != 0 and "Secret karmada-kc has no key kubeconfig" in refused.stderr
    assert template(helm, kube, tmp_path, *sets, "controlPlane.kubeconfigKey=config").returncode == 0
