"""docs/guide-flink-on-karmada.md: every manifest and values file it names is a file here, parsed and
validated (Flink and Karmada objects against the CRDs in ../shared/data, values against the chart's
schema and rendered by a real helm into objects Kubernetes accepts), and the guide's FlinkDeployment
converts through the shipped components customization as Karmada converts it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.chart.validate import kubernetes_version
from tests.chart.validate import validate as validate_rendered
from tests.conftest import REPO
from tests.controlplane.test_policies import check_cluster_taint_policy_shape
from tests.support.crds import crd_validator
from tests.support.karmada_lua import karmada_lua
from tests.support.karmada_results import convert

GUIDE = REPO / "docs" / "guide-flink-on-karmada.md"
FILES = re.compile(r"\b((?:docs/guide|policies/karmada|charts/flink-failover)/[\w./-]+\.ya?ml)\b")
CRDS = {
    "FlinkDeployment": ("flink/flinkdeployments.flink.apache.org-v1.yml", "v1beta1"),
    "FlinkSessionJob": ("flink/flinksessionjobs.flink.apache.org-v1.yml", "v1beta1"),
    "PropagationPolicy": ("karmada/policy.karmada.io_propagationpolicies.yaml", "v1alpha1"),
    "ResourceInterpreterCustomization": (
        "karmada/config.karmada.io_resourceinterpretercustomizations.yaml",
        "v1alpha1",
    ),
}


def named_files() -> list[str]:
    return sorted(set(FILES.findall(GUIDE.read_text(encoding="utf-8"))))


def test_the_guide_names_only_files_that_exist_and_every_guide_file() -> None:
    names = named_files()
    assert names, "the guide names its files"
    missing = [n for n in names if not (REPO / n).is_file()]
    assert missing == []
    own = sorted(str(p.relative_to(REPO)) for p in (REPO / "docs" / "guide").glob("*.yaml"))
    assert set(own) <= set(names), f"files under docs/guide the guide does not name: {set(own) - set(names)}"


def _manifests() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name in named_files():
        if Path(name).name.startswith("values") or name.startswith("charts/"):
            continue
        for doc in yaml.safe_load_all((REPO / name).read_text(encoding="utf-8")):
            if doc:
                out.append((name, doc))
    return out


@pytest.mark.shared
@pytest.mark.parametrize(("name", "doc"), _manifests(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_manifest_of_the_guide_validates(shared_data: Path, name: str, doc: dict[str, Any]) -> None:
    kind = doc["kind"]
    if kind in CRDS:
        crd, version = CRDS[kind]
        errors = [
            f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
            for e in crd_validator(shared_data / "crds" / crd, version).iter_errors(doc)
        ]
        assert errors == [], name
    elif kind == "MutatingWebhookConfiguration":
        kubernetes_validate.validate(doc, kubernetes_version(), strict=True)
    elif kind == "ClusterTaintPolicy":
        check_cluster_taint_policy_shape(doc)
    else:
        pytest.fail(f"{name}: no schema for {kind}")


def _values() -> list[str]:
    return [n for n in named_files() if Path(n).name.startswith("values") and n.startswith("docs/guide/")]


@pytest.mark.parametrize("name", _values())
def test_every_values_file_of_the_guide_renders(helm: str, name: str) -> None:
    values = yaml.safe_load((REPO / name).read_text(encoding="utf-8"))
    schema = json.loads(
        (REPO / "charts" / "flink-failover" / "values.schema.json").read_text(encoding="utf-8")
    )
    defaults = yaml.safe_load(
        (REPO / "charts" / "flink-failover" / "values.yaml").read_text(encoding="utf-8")
    )
    jsonschema.Draft7Validator(schema).validate(_merged(defaults, values))
    result = subprocess.run(
        [helm, "template", "flink-failover", str(REPO / "charts" / "flink-failover"), "-n", "karmada-system",
         "-f", str(REPO / name)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert docs
    for doc in docs:
        validate_rendered(doc)


def _merged(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        return {k: _merged(base.get(k), v) for k, v in override.items()} | {
            k: v for k, v in base.items() if k not in override
        }
    return override


def test_the_guides_flink_deployment_gets_its_components_as_karmada_converts_them() -> None:
    (obj,) = [doc for name, doc in _manifests() if doc["kind"] == "FlinkDeployment"]
    customization = yaml.safe_load(
        (REPO / "policies/karmada/resourceinterpretercustomization-flink-components.yaml").read_text()
    )
    sandbox = karmada_lua()
    sandbox.load(customization["spec"]["customizations"]["componentResource"]["luaScript"])
    jm, tm = convert(sandbox, "componentResource", obj)
    assert (jm["name"], jm["replicas"], tm["name"], tm["replicas"]) == ("jobmanager", 1, "taskmanager", 2)
    assert tm["replicaRequirements"]["resourceRequest"] == {"cpu": "2000m", "memory": "4Gi"}
    for comp in (jm, tm):
        claim = comp["replicaRequirements"]["nodeClaim"]
        assert claim["nodeSelector"] == {"pool": "flink"}
        assert claim["tolerations"][0]["key"] == "dedicated"
