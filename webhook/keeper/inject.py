"""The keeper in a FlinkDeployment's JobManager pod: a pure function over the object, called by the member
webhook at admission (``member/keeper.py`` ``keeper_part``: when, with which epoch and directory).

``with_keeper`` adds to ``spec.jobManager.podTemplate`` (the JobManager's pod only: a TaskManager has
no JobManager to stop) a native sidecar (an init container with ``restartPolicy: Always``, Kubernetes
1.29+) running ``flink-failover keeper`` from the product's image, with a startup probe on ``/readyz``
so the JobManager starts only once the keeper holds the lease, and ``shareProcessNamespace: true`` so
the keeper sees the JobManager's JVM. The keeper runs as the Flink image's user (9999), so it may signal
the JobManager without any capability. Everything else of the user's podTemplates is kept as it was;
a container of the keeper's name is replaced (applying it twice changes nothing). Flink's
``heartbeat.timeout`` is kept within ``stopMarginSeconds`` (``_heartbeats``: the TaskManagers' tasks run
until it passes after the JobManager is killed). Its settings are
environment variables ``commands/keeper.py`` reads, the policy among them as inline JSON (a ConfigMap of
the webhook's namespace cannot be mounted in the job's): its fencing block and the storage options of
the job's scheme only, never the policy's credentials (the pod's own storage identity is used, and the
JobManager's storage environment the caller hands in ``extra_env``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.common.flink import KEEPER_COMMAND, KEEPER_CONTAINER
from webhook.fencing.layout import Workload

CONTAINER = KEEPER_CONTAINER
PORT = 8091
FLINK_USER = 9999  # the official Flink image's flink user and group
# Flink's defaults: a job that sets neither and whose stop margin is longer keeps them
FLINK_HEARTBEAT_TIMEOUT_MS, FLINK_HEARTBEAT_INTERVAL_MS = 50_000, 10_000


@dataclass(frozen=True)
class KeeperPod:
    image: str  # the product's own image
    cluster: str
    checkpoint_dir: str
    workload: Workload
    epoch: int
    fencing: Mapping[str, Any]  # the policy's fencing block, as its document writes it (leaseSeconds, ...)
    storage_options: Mapping[str, Any] = field(default_factory=dict)  # scheme -> non-secret options
    job_id: str = ""
    run_as_user: int = FLINK_USER
    startup_seconds: int = (
        600  # how long the startup probe waits for the lease before the kubelet restarts it
    )
    # Storage credentials the JobManager's container has (``member/keeper.py`` ``credential_env``): env
    # entries as written, values or secretKeyRefs.
    extra_env: tuple[Mapping[str, Any], ...] = ()
    # "session": the pod is a session cluster's, whose keeper keeps the leases of the fenced
    # FlinkSessionJobs it runs (``workload`` the session cluster; docs/keeper.md "FlinkSessionJobs").
    mode: str = "job"
    rest: str = ""  # session mode: the JobManager's REST endpoint, where its port is not Flink's 8081

    def policy_json(self) -> str:
        doc: dict[str, Any] = {"fencing": dict(self.fencing)}
        if self.storage_options:
            doc["storageOptions"] = {k: dict(v) for k, v in self.storage_options.items()}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def container(pod: KeeperPod) -> dict[str, Any]:
    """The keeper's native sidecar (an init container that keeps running)."""
    env = {
        "FLINK_FAILOVER_CLUSTER": pod.cluster,
        "FLINK_FAILOVER_KEEPER_CHECKPOINT_DIR": pod.checkpoint_dir,
        "FLINK_FAILOVER_KEEPER_WORKLOAD": f"{pod.workload.kind}/{pod.workload.namespace}/{pod.workload.name}",
        "FLINK_FAILOVER_KEEPER_EPOCH": str(pod.epoch),
        "FLINK_FAILOVER_KEEPER_JOB_ID": pod.job_id,
        "FLINK_FAILOVER_KEEPER_BIND": f"0.0.0.0:{PORT}",
        "FLINK_FAILOVER_KEEPER_POLICY": pod.policy_json(),
    }
    if pod.mode != "job":
        env["FLINK_FAILOVER_KEEPER_MODE"] = pod.mode
    if pod.rest:
        env["FLINK_FAILOVER_KEEPER_REST"] = pod.rest

    def probe(path: str, period: int, failures: int) -> dict[str, Any]:
        return {
            "httpGet": {"path": path, "port": PORT},
            "periodSeconds": period,
            "failureThreshold": failures,
            "timeoutSeconds": 1,
        }

    return {
        "name": CONTAINER,
        "image": pod.image,
        "command": list(KEEPER_COMMAND),
        "restartPolicy": "Always",
        "env": [
            *({"name": k, "value": v} for k, v in env.items()),
            *(dict(e) for e in pod.extra_env if e.get("name") not in env),
        ],
        "ports": [{"name": "keeper", "containerPort": PORT}],
        "startupProbe": probe("/readyz", 1, pod.startup_seconds),
        "readinessProbe": probe("/readyz", 5, 1),
        "livenessProbe": probe("/healthz", 10, 3),
        "resources": {"requests": {"cpu": "10m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": {
            "runAsUser": pod.run_as_user,
            "runAsGroup": pod.run_as_user,
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def with_keeper(deployment: Mapping[str, Any], pod: KeeperPod) -> tuple[dict[str, Any], list[str]]:
    """The FlinkDeployment with the keeper in its JobManager's podTemplate, and what was changed of the
    user's own settings (for the Event: ``shareProcessNamespace`` turned on where it was off)."""
    out = copy.deepcopy(dict(deployment))
    spec = _mapping(out, "spec")
    job_manager = _mapping(spec, "jobManager")
    template = _mapping(job_manager, "podTemplate")
    template.setdefault("apiVersion", "v1")
    template.setdefault("kind", "Pod")
    pod_spec = _mapping(template, "spec")
    notes = []
    if pod_spec.get("shareProcessNamespace") is False:
        notes.append(
            "shareProcessNamespace was false in the JobManager's podTemplate: turned on for the keeper"
        )
    pod_spec["shareProcessNamespace"] = True
    kept = [
        c
        for c in pod_spec.get("initContainers") or []
        if not (isinstance(c, Mapping) and c.get("name") == CONTAINER)
    ]
    pod_spec["initContainers"] = [*kept, container(pod)]
    notes += _heartbeats(spec, pod)
    return out, notes


def _heartbeats(spec: dict[str, Any], pod: KeeperPod) -> list[str]:
    """The keeper kills the JobManager; the TaskManagers' tasks run on until their heartbeat of it times
    out (measured on Flink 1.20, ``python -m bench keeper_flink``: 46.9 s after the kill with Flink's
    default ``heartbeat.timeout`` of 50 s, 9.4 s with 10 s). So the timeout is kept within the policy's
    ``stopMarginSeconds`` (how long stopping a job may take), and the interval well below it."""
    margin_ms = int(float(pod.fencing.get("stopMarginSeconds", 10)) * 1000)
    conf = spec.get("flinkConfiguration")
    if not isinstance(conf, dict):
        conf = spec["flinkConfiguration"] = {}
    notes = []
    given = conf.get("heartbeat.timeout")
    timeout = _millis(given) if given is not None else FLINK_HEARTBEAT_TIMEOUT_MS
    if timeout is None or timeout > margin_ms:
        before = "Flink's default 50000" if given is None else repr(given)
        conf["heartbeat.timeout"] = str(margin_ms)
        notes.append(
            f"heartbeat.timeout set to {margin_ms} ms (was {before}): the TaskManagers stop the job's tasks "
            "within stopMarginSeconds of the keeper killing the JobManager"
        )
        timeout = margin_ms
    given = conf.get("heartbeat.interval")
    interval = _millis(given) if given is not None else FLINK_HEARTBEAT_INTERVAL_MS
    if interval is None or interval * 2 > timeout:
        conf["heartbeat.interval"] = str(max(timeout // 4, 100))
        if given is not None:
            notes.append(f"heartbeat.interval set to {conf['heartbeat.interval']} ms (was {given!r})")
    return notes


def _millis(value: Any) -> int | None:
    """A plain number of milliseconds, as Flink reads one; None for anything else (one with a unit is not
    read here, and is replaced)."""
    text = str(value).strip() if value is not None else ""
    return int(text) if text.isdigit() else None


def _mapping(parent: dict[str, Any], key: str) -> dict[str, Any]:
    found = parent.get(key)
    if not isinstance(found, dict):
        found = parent[key] = {}
    return found
