"""Build realistic control-plane inputs from the objects recorded on a real Karmada v1.18.2.

Every variant starts from a recorded ResourceBinding or Work and is changed the way Karmada changes
it (clusters, eviction tasks, aggregatedStatus); ``validate_*`` check the result against the CRDs.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonpatch
import jsonschema
import yaml

from tests.conftest import shared_data_dir
from webhook.common.admission import review
from webhook.controlplane.handler import WorkHandler, internal_error
from webhook.controlplane.offline import static_lookup
from webhook.policy.restore import RestorePolicy

JOB_A = "3c653dbe4c19bb72f8eb28445541bed6"  # recorded: orders on member1 (scenA)
JOB_B = "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b"
JOB_C = "0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c"
FIXED_NOW = datetime(2026, 11, 29, 15, 0, 0, tzinfo=UTC)
PREFIX = "flink-failover.io/"


def load(shared: Path, relative: str) -> Any:
    return json.loads((shared / "karmada-observed" / relative).read_text(encoding="utf-8"))


def binding(shared: Path, relative: str) -> dict[str, Any]:
    return copy.deepcopy(load(shared, relative))


def flink_work(shared: Path, relative: str, binding_name: str) -> dict[str, Any]:
    """The Work of ``binding_name`` among a recorded list of Works of one execution namespace."""
    for work in load(shared, relative)["items"]:
        if work["metadata"].get("annotations", {}).get("resourcebinding.karmada.io/name") == binding_name:
            return copy.deepcopy(work)
    raise AssertionError(f"no Work for {binding_name} in {relative}")


def other_works(shared: Path, relative: str) -> list[dict[str, Any]]:
    return [
        copy.deepcopy(w)
        for w in load(shared, relative)["items"]
        if not any(m.get("kind", "").startswith("Flink") for m in w["spec"]["workload"]["manifests"])
    ]


# --- variants of a ResourceBinding, as Karmada would write them ---


def set_clusters(rb: dict[str, Any], *names: str, scheduled: str = "") -> dict[str, Any]:
    """A new scheduling result; the scheduler also stamps status.lastScheduledTime."""
    rb["spec"]["clusters"] = [{"name": n, "replicas": 2} for n in names]
    if scheduled:
        rb["status"]["lastScheduledTime"] = scheduled
    return rb


def set_tasks(rb: dict[str, Any], *tasks: Mapping[str, Any]) -> dict[str, Any]:
    if tasks:
        rb["spec"]["gracefulEvictionTasks"] = [dict(t) for t in tasks]
    else:
        rb["spec"].pop("gracefulEvictionTasks", None)
    return rb


def task(
    from_cluster: str,
    created: str,
    *,
    reason: str = "TaintUntolerated",
    purge_mode: str = "Directly",
    preserved: Mapping[str, str] | None = None,
    before: Iterable[str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "creationTimestamp": created,
        "fromCluster": from_cluster,
        "producer": "TaintManager"
        if reason == "TaintUntolerated"
        else "resource-binding-application-failover-controller",
        "purgeMode": purge_mode,
        "reason": reason,
        "replicas": 2,
    }
    if preserved is not None:
        out["preservedLabelState"] = dict(preserved)
    if before is not None:
        out["clustersBeforeFailover"] = list(before)
    return out


def flink_status(job_id: str | None, state: str = "RUNNING", savepoint: str = "") -> dict[str, Any]:
    if job_id is None:
        return {}
    job: dict[str, Any] = {"jobId": job_id, "jobName": "orders", "startTime": "1795960902164", "state": state}
    if savepoint:
        job["savepointInfo"] = {"lastSavepoint": {"location": savepoint, "timeStamp": 1795960999000}}
    healthy = state == "RUNNING"
    return {
        "jobManagerDeploymentStatus": "READY" if healthy else "DEPLOYING",
        "jobStatus": job,
        "lifecycleState": "STABLE" if healthy else "DEPLOYED",
        "observedGeneration": 1,
    }


def set_statuses(rb: dict[str, Any], statuses: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    rb["status"]["aggregatedStatus"] = [
        {"applied": True, "clusterName": c, "health": "Healthy" if s else "Unhealthy", "status": dict(s)}
        for c, s in statuses.items()
    ]
    return rb


def set_record(rb: dict[str, Any], record_json: str | None) -> dict[str, Any]:
    annotations = rb["metadata"].setdefault("annotations", {})
    if record_json is None:
        annotations.pop(PREFIX + "last-known-state", None)
    else:
        annotations[PREFIX + "last-known-state"] = record_json
    return rb


def work_for(work: dict[str, Any], cluster: str) -> dict[str, Any]:
    """The same Work as Karmada would write it for another cluster's execution namespace."""
    work = copy.deepcopy(work)
    namespace = f"karmada-es-{cluster}"
    work["metadata"]["namespace"] = namespace
    for manifest in work["spec"]["workload"]["manifests"]:
        annotations = manifest.get("metadata", {}).get("annotations", {})
        if "work.karmada.io/namespace" in annotations:
            annotations["work.karmada.io/namespace"] = namespace
    return work


# --- schemas ---


@functools.cache
def crd_schema(path: str, version: str) -> dict[str, Any]:
    crd = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return dict(v["schema"]["openAPIV3Schema"])
    raise AssertionError(f"{path} has no version {version}")


FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _rfc3339(value: object) -> bool:
    """kube-apiserver's metav1.Time: RFC 3339 with a zone (jsonschema checks it only with extra packages)."""
    if not isinstance(value, str):
        return True
    if "T" not in value or not (value.endswith("Z") or value[-6] in "+-"):
        raise ValueError(f"{value!r} is not RFC 3339")
    datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


def validate(shared: Path, obj: Mapping[str, Any], crd_file: str, version: str) -> None:
    schema = crd_schema(str(shared / "crds" / "karmada" / crd_file), version)
    jsonschema.Draft7Validator(schema, format_checker=FORMATS).validate(obj)


def validate_binding(shared: Path, obj: Mapping[str, Any]) -> None:
    assert obj["apiVersion"] == "work.karmada.io/v1alpha2" and obj["kind"] == "ResourceBinding"
    validate(shared, obj, "work.karmada.io_resourcebindings.yaml", "v1alpha2")


def validate_work(shared: Path, obj: Mapping[str, Any]) -> None:
    assert obj["apiVersion"] == "work.karmada.io/v1alpha1" and obj["kind"] == "Work"
    validate(shared, obj, "work.karmada.io_works.yaml", "v1alpha1")


# --- admission ---


def admission_review(
    work: Mapping[str, Any],
    operation: str = "CREATE",
    old: Mapping[str, Any] | None = None,
    uid: str = "uid-1",
) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "work.karmada.io", "version": "v1alpha1", "kind": "Work"},
            "resource": {"group": "work.karmada.io", "version": "v1alpha1", "resource": "works"},
            "requestKind": {"group": "work.karmada.io", "version": "v1alpha1", "kind": "Work"},
            "namespace": work["metadata"]["namespace"],
            "name": work["metadata"].get("name", ""),
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:karmada-system:karmada-controller-manager"},
            "object": work,
            "oldObject": old,
            "dryRun": False,
        },
    }


def decode_patch(review_response: Mapping[str, Any]) -> list[dict[str, Any]]:
    response = review_response["response"]
    if "patch" not in response:
        return []
    assert response["patchType"] == "JSONPatch"
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch


def flink_metadata(work: Mapping[str, Any]) -> dict[str, Any]:
    for manifest in work["spec"]["workload"]["manifests"]:
        if str(manifest.get("apiVersion", "")).startswith("flink.apache.org/"):
            return dict(manifest.get("metadata", {}))
    raise AssertionError("no Flink manifest")


class Answer:
    """One answered Work: the wire answer, the patched Work and what it says about the Flink manifest."""

    def __init__(self, request_work: Mapping[str, Any], wire: Mapping[str, Any], decision: str) -> None:
        self.wire = wire
        self.decision = decision
        self.patch = decode_patch(wire)
        self.work = (
            jsonpatch.apply_patch(request_work, self.patch) if self.patch else copy.deepcopy(request_work)
        )
        meta = flink_metadata(self.work)
        self.labels: dict[str, str] = {
            k: v for k, v in meta.get("labels", {}).items() if k.startswith(PREFIX)
        }
        self.annotations: dict[str, str] = {
            k: v for k, v in meta.get("annotations", {}).items() if k.startswith(PREFIX)
        }

    @property
    def injected(self) -> bool:
        return bool(self.labels)


def answer(
    bindings: Iterable[Mapping[str, Any]],
    work: Mapping[str, Any],
    *,
    policy: RestorePolicy | None = None,
    operation: str = "CREATE",
    now: datetime = FIXED_NOW,
) -> Answer:
    policy = policy or RestorePolicy()
    bindings = list(bindings)
    shared = shared_data_dir()
    for obj in bindings:  # every derived variant must still be an object Karmada could store
        validate_binding(shared, obj)
    validate_work(shared, work)
    handler = WorkHandler(static_lookup(bindings, policy.contract), policy.contract, clock=lambda: now)
    request, response = review(admission_review(work, operation), handler, internal_error)
    wire = response.to_review(request.api_version)
    assert wire["response"]["allowed"] is True  # the Work webhook never denies
    return Answer(work, wire, response.decision)
