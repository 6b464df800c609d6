"""Builders for Flink objects, AdmissionReviews and checkpoint trees used across the tests."""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import uuid
from pathlib import Path
from typing import Any

import jsonpatch

from tests.support.repo import REPO

JOB_ID = "3c653dbe4c19bb72f8eb28445541bed6"
OTHER_JOB_ID = "0123456789abcdef0123456789abcdef"

# A complete Flink metadata file (format version 3, no state) whose checkpoint id is that of no chk-N
# a test writes: for savepoints, and cut to test what a header check refuses.
FLINK_METADATA = bytes.fromhex("4960672d00000003") + (10**6).to_bytes(8, "big") + bytes(8)


def flink_version(release: str) -> str:
    """The operator's ``spec.flinkVersion`` of a Flink release ("2.3.0" -> "v2_3"): what an object
    restoring a tree that release wrote says."""
    major, minor = release.split(".")[:2]
    return f"v{major}_{minor}"


def flink_metadata(checkpoint_id: int, version: int = 4) -> bytes:
    """A complete _metadata as Flink writes it for a job without state: magic, format version, the
    checkpoint id (8 bytes), no master and no operator states, and from version 4 on the checkpoint
    properties (the Java-serialized object real Flink 1.20.5 wrote, tests/fixtures/flink)."""
    body = bytes(8)  # no master states, no operator states
    return (
        bytes.fromhex("4960672d")
        + version.to_bytes(4, "big")
        + checkpoint_id.to_bytes(8, "big")
        + body
        + (_properties() if version >= 4 else b"")
    )


@functools.cache
def _properties() -> bytes:
    real = next((REPO / "tests" / "fixtures" / "flink" / "1.20.5-hashmap-files").rglob("chk-*/_metadata"))
    data = real.read_bytes()
    return data[data.index(bytes.fromhex("aced0005")) :]


def flink_deployment(
    *,
    name: str = "orders",
    namespace: str = "analytics",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    checkpoint_dir: str | None = None,
    savepoint_dir: str | None = None,
    nested_config: bool = False,
    job: dict[str, Any] | bool | None = True,
    kind: str = "FlinkDeployment",
) -> dict[str, Any]:
    conf: dict[str, Any] = {"taskmanager.numberOfTaskSlots": "2"}
    if checkpoint_dir is not None:
        conf["execution.checkpointing.dir"] = checkpoint_dir
    if savepoint_dir is not None:
        conf["execution.checkpointing.savepoint-dir"] = savepoint_dir
    if nested_config:
        nested: dict[str, Any] = {}
        for key, value in conf.items():
            node = nested
            parts = key.split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = value
        conf = nested
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"flinkConfiguration": conf}
    if kind == "FlinkDeployment":
        spec.update(
            {
                "image": "flink:1.20",
                "flinkVersion": "v1_20",
                "serviceAccount": "flink",
                "jobManager": {"resource": {"cpu": 1, "memory": "2048m"}},
                "taskManager": {"resource": {"cpu": 1, "memory": "2048m"}},
            }
        )
    else:
        spec["deploymentName"] = "session"
    if job is True:
        spec["job"] = {
            "jarURI": "local:///opt/flink/examples/streaming/StateMachineExample.jar",
            "parallelism": 2,
        }
        if kind == "FlinkSessionJob":
            spec["job"]["jarURI"] = "https://jars.example/job.jar"
    elif isinstance(job, dict):
        spec["job"] = job
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": kind, "metadata": meta, "spec": spec}


def running_deployment(job_id: str = JOB_ID, **kwargs: Any) -> dict[str, Any]:
    """A FlinkDeployment whose job runs: ``state: running``, its status reporting ``job_id`` RUNNING
    (a copy the fencing agent heartbeats, and stops when a newer fence elsewhere owns it)."""
    obj = flink_deployment(**kwargs)
    obj["spec"]["job"]["state"] = "running"
    obj["status"] = {"jobStatus": {"jobId": job_id, "state": "RUNNING"}}
    return obj


def review(
    obj: dict[str, Any],
    *,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    dry_run: bool = False,
    uid: str | None = None,
    user: str = "system:serviceaccount:karmada-system:karmada-agent",
) -> dict[str, Any]:
    kind = obj.get("kind", "FlinkDeployment")
    plural = {
        "FlinkDeployment": "flinkdeployments",
        "FlinkSessionJob": "flinksessionjobs",
        "FlinkBlueGreenDeployment": "flinkbluegreendeployments",
    }.get(kind, "things")
    group = obj.get("apiVersion", "flink.apache.org/v1beta1").rpartition("/")[0]
    meta = obj.get("metadata", {})
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": {"group": group, "version": "v1beta1", "kind": kind},
            "resource": {"group": group, "version": "v1beta1", "resource": plural},
            "requestKind": {"group": group, "version": "v1beta1", "kind": kind},
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "operation": operation,
            "userInfo": {"username": user},
            "object": obj,
            "oldObject": old,
            "dryRun": dry_run,
        },
    }


def make_checkpoints(
    job_dir: Path, ids: list[int], *, without_metadata: tuple[int, ...] = (), mtime: float | None = None
) -> None:
    for n in ids:
        chk = job_dir / f"chk-{n}"
        chk.mkdir(parents=True, exist_ok=True)
        (chk / "state-file").write_bytes(b"x")
        if n not in without_metadata:
            meta = chk / "_metadata"
            meta.write_bytes(flink_metadata(n))
            if mtime is not None:
                os.utime(meta, (mtime, mtime))


def make_savepoint(
    root: Path,
    job_id: str,
    suffix: str = "a1b2c3d4e5f6",
    mtime: float | None = None,
    checkpoint_id: int | None = None,
) -> Path:
    """A savepoint directory with a complete _metadata (of ``checkpoint_id``: the same id as a
    checkpoint's makes the times decide which is newer)."""
    sp = root / f"savepoint-{job_id[:6]}-{suffix}"
    sp.mkdir(parents=True, exist_ok=True)
    meta = sp / "_metadata"
    meta.write_bytes(FLINK_METADATA if checkpoint_id is None else flink_metadata(checkpoint_id))
    if mtime is not None:
        os.utime(meta, (mtime, mtime))
    return sp


def decode_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    if "patch" not in response:
        return []
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


def apply(obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    return jsonpatch.apply_patch(copy.deepcopy(obj), patch)


def json_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and list indexes) into a JSON value, the root included: where a fuzzer may strike."""
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += json_paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += json_paths(v, (*prefix, i))
    return out
