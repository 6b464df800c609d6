"""What a FlinkDeployment / FlinkSessionJob says about its job and its state storage."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from webhook.common.checkpoints import checkpoint_number
from webhook.common.paths import StoragePath
from webhook.common.untyped import as_map, str_map

GROUP = "flink.apache.org"
BLUE_GREEN = "FlinkBlueGreenDeployment"  # operator 1.14+: a FlinkDeployment template, children blue/green
KINDS = ("FlinkDeployment", "FlinkSessionJob", BLUE_GREEN)


# The lease keeper's native sidecar in a JobManager's pod (docs/keeper.md): its container's name and
# command, by which the member webhook (``member/keeper.py``) and the fencing agent tell a copy it guards.
KEEPER_CONTAINER = "flink-failover-keeper"
KEEPER_COMMAND = ("flink-failover", "keeper")


# The kinds whose spec makes a JobManager of their own (a blue/green's: its children's); a FlinkSessionJob
# runs in its session cluster's.
JOBMANAGER_KINDS = ("FlinkDeployment", BLUE_GREEN)


def deployment_spec_path(kind: str) -> tuple[str, ...]:
    """Where a kind keeps the FlinkDeployment spec that makes its JobManager: a FlinkBlueGreenDeployment
    in its template, which the operator copies into each child it creates."""
    return ("spec", "template", "spec") if kind == BLUE_GREEN else ("spec",)


def deployment_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The FlinkDeployment spec that makes the object's JobManager (``deployment_spec_path``)."""
    node: Mapping[str, Any] = obj
    for key in deployment_spec_path(str(obj.get("kind") or "")):
        node = as_map(node.get(key))
    return node


def runs_keeper(obj: Mapping[str, Any]) -> bool:
    """The object's JobManager pod template runs the lease keeper (the sidecar the member webhook adds
    to a fenced FlinkDeployment or FlinkBlueGreenDeployment: the copy is guarded in its own pod; to a
    session cluster, whose keeper guards its fenced FlinkSessionJobs). A FlinkSessionJob's own object
    never does: it has no JobManager of its own (its guard is its session cluster's, ``session_keeper``
    in ``FlinkResource``)."""
    if str(obj.get("kind") or "FlinkDeployment") not in JOBMANAGER_KINDS:
        return False
    spec = deployment_spec(obj)
    pod = as_map(as_map(as_map(spec.get("jobManager")).get("podTemplate")).get("spec"))
    containers = pod.get("initContainers")
    return isinstance(containers, list) and any(
        isinstance(c, Mapping)
        and c.get("name") == KEEPER_CONTAINER
        and list(c.get("command") or []) == list(KEEPER_COMMAND)
        for c in containers
    )


def job_path(kind: str) -> tuple[str, ...]:
    """Where a kind keeps its ``job`` (and ``flinkConfiguration`` beside it): a FlinkBlueGreenDeployment
    in its FlinkDeployment template, which the operator copies into the child it creates."""
    return ("spec", "template", "spec", "job") if kind == BLUE_GREEN else ("spec", "job")


ENTROPY_KEY = "s3.entropy.key"
CHECKPOINT_DIR_KEYS = (
    "execution.checkpointing.dir",
    "state.checkpoints.dir",
    "state.backend.fs.checkpointdir",
)
SAVEPOINT_DIR_KEYS = (
    "execution.checkpointing.savepoint-dir",
    "state.savepoints.dir",
    "savepoints.state.backend.fs.dir",
)
HA_KEYS = ("high-availability.type", "high-availability")  # the newer spelling first (Flink 1.17+)
CREATE_SUBDIR_KEYS = ("execution.checkpointing.create-subdir", "state.checkpoints.create-subdir")

JOB_ID_RE = re.compile(r"^[0-9a-f]{32}$")


def is_job_id(value: object) -> bool:
    return isinstance(value, str) and bool(JOB_ID_RE.fullmatch(value))  # `$` would allow a final "\n"


# Flink names a savepoint directory ``savepoint-<first 6 hex of the jobId>-<12 random hex>``.
SAVEPOINT_NAME_RE = re.compile(r"savepoint-([0-9a-f]{6})-[0-9a-f]{12}")


def savepoint_prefix(name: str) -> str:
    """The 6-hex jobId prefix a savepoint directory name carries ("" when it is not Flink's naming)."""
    m = SAVEPOINT_NAME_RE.fullmatch(name)
    return m.group(1) if m else ""


def is_savepoint_of(name: str, job_id: str) -> bool:
    """Is ``name`` a savepoint directory Flink names after ``job_id``? The prefix is 6 hex of 32, so
    another job's savepoint can carry it too: a name alone never proves whose it is."""
    prefix = savepoint_prefix(name)
    return bool(prefix) and prefix == job_id[:6]


def flatten_configuration(conf: Any) -> dict[str, str]:
    """Flink configuration as flat ``a.b.c -> str``; accepts the flat map (<= 1.12) and nested YAML (1.13+).

    Where both spellings name one key, the flat one wins: it is what older operators read.
    """
    flat: dict[str, str] = {}
    nested: dict[str, str] = {}

    def walk(prefix: str, value: Any, into: dict[str, str]) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v, into)
        elif value is None:
            return
        elif isinstance(value, bool):
            into[prefix] = "true" if value else "false"
        elif isinstance(value, list):
            into[prefix] = ";".join(str(v) for v in value)
        else:
            into[prefix] = str(value)

    if not isinstance(conf, Mapping):
        return {}
    for key, value in conf.items():
        if isinstance(value, Mapping):
            walk(str(key), value, nested)
        else:
            walk(str(key), value, flat)
    return {**nested, **flat}


def snapshot_job(path: str) -> str:
    """Whose snapshot a path names: the jobId of ``.../<jobId>/chk-N``, the 6-hex prefix of a
    ``savepoint-<6 hex>-<12 hex>`` ("" when the path says neither)."""
    parts = path.removesuffix("/").rsplit("/", 2)
    if len(parts) == 3 and is_job_id(parts[1]) and checkpoint_number(parts[2]) is not None:
        return parts[1]
    return savepoint_prefix(path.rstrip("/").rsplit("/", 1)[-1])


def started_from(kind: str, status: Mapping[str, Any]) -> str:
    """The snapshot the job a Flink resource's status shows was started from, as the operator reports
    it ("" when the status does not tell): after an upgrade, ``jobStatus.upgradeSavepointPath`` when it
    is not the job's own snapshot; else the ``initialSavepointPath`` of the last reconciled spec while
    the resource was deployed once only (``resource_metadata.firstDeployment``: a later stateless
    upgrade started the job from nothing, whatever the spec still says). A FlinkBlueGreenDeployment's
    children after the first are started from a savepoint the status does not name: only the first
    child (blue, while it is the active one) counts."""
    job = as_map(status.get("jobStatus"))
    job_id = str(job.get("jobId") or "")
    if not is_job_id(job_id):
        return ""
    upgrade = str(job.get("upgradeSavepointPath") or "").strip()
    if upgrade:
        owner = snapshot_job(upgrade)
        return "" if owner and job_id.startswith(owner) else upgrade
    if kind == BLUE_GREEN:
        if status.get("blueGreenState") not in ("INITIALIZING_BLUE", "ACTIVE_BLUE"):
            return ""
        raw = status.get("lastReconciledSpec")
    else:
        raw = as_map(status.get("reconciliationStatus")).get("lastReconciledSpec")
    if not isinstance(raw, str) or not raw:
        return ""
    try:
        doc = json.loads(raw)
    except ValueError:
        return ""
    doc = as_map(doc)
    meta = as_map(doc.get("resource_metadata"))
    if kind != BLUE_GREEN and meta.get("firstDeployment") is not True:
        return ""
    spec = as_map(doc.get("spec"))
    if kind == BLUE_GREEN:
        spec = as_map(as_map(spec.get("template")).get("spec"))
    path = as_map(spec.get("job")).get("initialSavepointPath")
    return path.strip() if isinstance(path, str) else ""


def _blue_green_owner(refs: Any) -> str:
    if not isinstance(refs, list):
        return ""
    for ref in refs:
        if (
            isinstance(ref, Mapping)
            and ref.get("kind") == BLUE_GREEN
            and str(ref.get("apiVersion", "")).partition("/")[0] == GROUP
        ):
            return str(ref.get("name") or "")
    return ""


def _first(conf: Mapping[str, str], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = conf.get(key, "").strip()
        if value:
            return value
    return ""


@dataclass(frozen=True)
class FlinkResource:
    """The parts of a Flink custom resource the restore logic needs, read once."""

    kind: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    job: Mapping[str, Any] | None
    configuration: Mapping[str, str]
    deleting: bool = False  # metadata.deletionTimestamp set: the operator is removing its finalizer
    deployment_name: str = ""  # a FlinkSessionJob's spec.deploymentName: the session cluster it runs on
    # A FlinkDeployment the operator created for a FlinkBlueGreenDeployment (its ownerReference): the
    # parent's name. Such a child carries none of the parent's labels (FLINK-41403).
    blue_green_parent: str = ""
    # The Flink it runs (spec.flinkVersion, "v1_20") and its image: which snapshots it can load
    # (common/flink_reads.py). A FlinkSessionJob has neither: its session cluster's count.
    flink_version: str = ""
    image: str = ""
    # A session cluster (a FlinkDeployment without a job) whose JobManager's pod runs the lease keeper:
    # that keeper guards the fenced FlinkSessionJobs it runs (docs/keeper.md).
    session_keeper: bool = False

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> FlinkResource:
        meta, spec = as_map(obj.get("metadata")), as_map(obj.get("spec"))
        kind = str(obj.get("kind", ""))
        if kind == BLUE_GREEN:
            spec = as_map(as_map(spec.get("template")).get("spec"))
        job = spec.get("job")
        return cls(
            kind=kind,
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or meta.get("generateName") or ""),
            labels=str_map(meta.get("labels")),
            annotations=str_map(meta.get("annotations")),
            job=job if isinstance(job, Mapping) else None,
            configuration=flatten_configuration(spec.get("flinkConfiguration")),
            deleting=bool(meta.get("deletionTimestamp")),
            deployment_name=str(spec.get("deploymentName") or ""),
            blue_green_parent=_blue_green_owner(meta.get("ownerReferences")),
            flink_version=_text(spec.get("flinkVersion")),
            image=_text(spec.get("image")),
            session_keeper=kind == "FlinkDeployment" and job is None and runs_keeper(obj),
        )

    @property
    def job_path(self) -> tuple[str, ...]:
        return job_path(self.kind)

    @property
    def checkpoint_dir(self) -> str:
        """Where the ``_metadata`` of its checkpoints lie: with S3 entropy injection (``s3.entropy.key``)
        Flink writes each state file where the key is replaced by random characters, and the
        ``_metadata`` where it is removed (``EntropyInjector.removeEntropyMarkerIfPresent``)."""
        found = _first(self.configuration, CHECKPOINT_DIR_KEYS)
        key = self.configuration.get(ENTROPY_KEY, "").strip()
        if key and "://" in found:
            scheme, _, rest = found.partition("://")
            authority, slash, path = rest.partition("/")
            if key in path:
                return f"{scheme}://{authority}{slash}{path.replace(key, '', 1)}"
        return found

    def setting_key(self, keys: tuple[str, ...]) -> str:
        """The first of ``keys`` this resource sets (what an error about its value should name)."""
        return next((k for k in keys if self.configuration.get(k, "").strip()), "")

    @property
    def savepoint_dir(self) -> str:
        return _first(self.configuration, SAVEPOINT_DIR_KEYS)

    @property
    def high_availability(self) -> bool:
        """HA configured (``kubernetes``, ``zookeeper`` or a factory class): what last-state needs on
        operators before 1.10."""
        return _first(self.configuration, HA_KEYS).lower() not in ("", "none")

    @property
    def checkpoints_in_job_subdir(self) -> bool:
        value = _first(self.configuration, CREATE_SUBDIR_KEYS)
        return value.lower() != "false"

    def job_checkpoints(self, checkpoint_dir: StoragePath, job_id: str) -> StoragePath:
        """Where job ``job_id`` writes its ``chk-<N>``: ``<dir>/<jobId>``, or ``<dir>`` itself with
        ``create-subdir: false``. The one reading of it: the restore and the agent's resume both ask here."""
        return checkpoint_dir.child(job_id) if self.checkpoints_in_job_subdir else checkpoint_dir

    def job_field(self, name: str) -> Any:
        return self.job.get(name) if self.job is not None else None

    @property
    def upgrade_mode(self) -> str:
        value = self.job_field("upgradeMode")
        return value if isinstance(value, str) and value else "stateless"

    @property
    def state(self) -> str:
        value = self.job_field("state")
        return value if isinstance(value, str) and value else "running"

    @property
    def initial_savepoint_path(self) -> str:
        value = self.job_field("initialSavepointPath")
        return value if isinstance(value, str) else ""


def with_session_cluster(job: FlinkResource, cluster: FlinkResource | None) -> FlinkResource:
    """A FlinkSessionJob as its session cluster runs it: the cluster's configuration under the job's own
    (the job's settings win, as the operator submits it). Any other kind, or no cluster, as it is."""
    if cluster is None or job.kind != "FlinkSessionJob":
        return job
    return replace(job, configuration={**cluster.configuration, **job.configuration})


def _text(value: Any) -> str:
    """A string field of the spec ("" when absent or not a string)."""
    return value.strip() if isinstance(value, str) else ""
