"""The lease keeper's part of a member admission (issue 47, docs/keeper.md): pure, over the request's
object and the restore decision.

Every FlinkDeployment this webhook restores or holds under a fence (its decision carries an epoch) gets
the keeper's native sidecar in its JobManager's pod (``keeper/inject.py`` ``with_keeper``), at CREATE
and at every UPDATE after it: Karmada re-applies its template without the sidecar, and the webhook puts
it back. The sidecar's epoch and checkpoint directory are the restore's (the decision's epoch and
restore record, themselves carried from ``oldObject`` on UPDATE), never the edited spec's. It is left
out, with an Event saying why and what that costs, where the policy turns it off
(``fencing.keeper``) or the member's Kubernetes serves no native sidecars (before 1.29, or not known,
unless ``serve --native-sidecars`` declares it);
an admission whose pod template makes it impossible (``blockers``) is refused.

A job's first copy (no failover made it) gets it through ``member/firstcopy.py``, by ``keeping`` here.

A FlinkBlueGreenDeployment gets it in its template (``spec.template.spec``), which the operator copies
into each child it creates, keeping the parent's lease (the workload its records are kept for); its
children are not touched here. A FlinkSessionJob runs in its session cluster's JobManager: that
session cluster (a FlinkDeployment without a job) gets the keeper in session mode through
``member/firstcopy.py``, and it keeps the leases of the fenced session jobs it runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from webhook.common.contract import EPOCH, RESTORE_RECORD
from webhook.common.flink import (
    JOBMANAGER_KINDS,
    KEEPER_COMMAND,
    FlinkResource,
    deployment_spec,
    deployment_spec_path,
    runs_keeper,
)
from webhook.common.patch import Op, set_fields
from webhook.common.paths import StoragePath, StoragePathError
from webhook.common.untyped import as_map
from webhook.fencing.layout import Workload
from webhook.keeper.inject import CONTAINER, FLINK_USER, PORT, KeeperPod, with_keeper
from webhook.policy.fencing import FENCING
from webhook.policy.restore import RestorePolicy
from webhook.restore.outcome import RestoreDecision, RestoreOutcome
from webhook.restore.record import RestoreRecord, decode

NATIVE_SIDECARS = (1, 29)  # restartPolicy: Always on an init container, on by default from 1.29


class Sidecars(StrEnum):
    """Whether the member's Kubernetes serves native sidecars (``serve --native-sidecars``)."""

    AUTO = "auto"  # from its /version: 1.29+
    ON = "on"  # declared served, whatever /version says (1.28 with the SidecarContainers feature gate)
    OFF = "off"  # declared not served: no keeper anywhere on this cluster


COMMAND = list(KEEPER_COMMAND)
MAIN_CONTAINER = "flink-main-container"  # the operator's name for the JobManager's container
_HEARTBEAT_KEYS = ("heartbeat.timeout", "heartbeat.interval")
# What a job without its keeper is exposed to (docs/failover.md "What fencing cannot do"), for the Event.
OFF_COST = (
    "this job is stopped only by this cluster's fencing agent: two copies can run while every replica of "
    "the member role is down past leaseSeconds - stopMarginSeconds - 2 x pollSeconds, while this "
    "cluster's API server is down and its Flink pods run on, when this cluster comes back after an outage "
    "(its operator resumes the job before the agent's first poll) and when its operator is slower than "
    'stopMarginSeconds while it cannot reach the storage (docs/failover.md "What fencing cannot do")'
)
# Where a job's pod has S3 keys in Flink's configuration only: the keeper's s3fs reads the environment.
_S3_KEYS = (
    (("s3.access-key", "s3.access.key", "fs.s3a.access.key"), "AWS_ACCESS_KEY_ID"),
    (("s3.secret-key", "s3.secret.key", "fs.s3a.secret.key"), "AWS_SECRET_ACCESS_KEY"),
)
_S3_SCHEMES = ("s3", "s3a", "s3p")
# The main container's environment the keeper takes as it is written (values or secretKeyRefs): the
# storage clients' own variables.
_CREDENTIAL_ENV = re.compile(r"^(AWS_|AZURE_|AZURE_STORAGE_)[A-Z0-9_]*$")
# Storage options of the policy that may go into a job's pod: never a credential (the policy's are the
# webhook's own).
_SHAREABLE_OPTIONS = frozenset(
    {
        "endpoint_url", "use_ssl", "anon", "requester_pays", "config_kwargs", "s3_additional_kwargs",
        "version_aware", "project", "consistency", "account_name", "account_host", "location_mode",
        "endpoint", "default_block_size", "default_cache_type", "block_size", "blocksize",
    }
)  # fmt: skip
_SHAREABLE_CLIENT_KWARGS = frozenset({"region_name", "endpoint_url", "verify"})


class Kept(StrEnum):
    """What the keeper's part of an admission did (the audit's ``keeper``)."""

    INJECTED = "injected"  # added, or put back, or already there
    OFF = "off"  # the policy turns it off for this job
    UNSUPPORTED = "unsupported"  # the member's Kubernetes serves no native sidecars, or is not known
    REFUSED = "refused"  # the pod template makes it impossible: the admission is refused


@dataclass(frozen=True)
class KeeperSetup:
    """What the webhook knows beside the policy: the product's image, this member's name in Karmada, and
    its Kubernetes version ((major, minor); None: not known yet, ``problem`` says why), unless
    ``sidecars`` declares whether native sidecars are served."""

    image: str
    cluster: str
    version: tuple[int, int] | None
    problem: str = ""
    sidecars: Sidecars = Sidecars.AUTO

    def unserved(self, running: bool) -> str:
        """Why this cluster cannot run the keeper's native sidecar ("" when it can). ``running``: the
        copy runs its keeper already, and keeps it while the version is not known (a worker just
        started): dropping it from a re-applied template would restart the JobManager without it."""
        if self.sidecars is Sidecars.ON:
            return ""
        if self.sidecars is Sidecars.OFF:
            return "native sidecars are declared not served on this member cluster (--native-sidecars off)"
        if self.version is None:
            if running:
                return ""
            return f"this member cluster's Kubernetes version is not known ({self.problem or 'not read yet'})"
        if self.version < NATIVE_SIDECARS:
            return (
                f"this member cluster runs Kubernetes {self.version[0]}.{self.version[1]}, which serves no "
                "native sidecars (1.29+; 1.28 with the SidecarContainers feature gate: --native-sidecars on)"
            )
        return ""


@dataclass(frozen=True)
class KeeperEvent:
    type: str  # Normal | Warning
    reason: str
    note: str


@dataclass(frozen=True)
class Keeping:
    """The keeper's part of one admission's answer (``member/handler.py`` ``respond`` turns it into
    patch operations and warnings, or a refusal)."""

    kept: Kept
    ops: tuple[Op, ...] = ()
    warnings: tuple[str, ...] = ()
    events: tuple[KeeperEvent, ...] = ()
    refused: str = ""


def version_of(doc: Mapping[str, Any]) -> tuple[int, int] | str:
    """(major, minor) from an API server's ``/version`` answer (``gitVersion`` "v1.29.3-eks-1", else
    ``major`` and ``minor``, "29+" on some providers); a text saying why not otherwise."""
    found = re.match(r"^v?(\d+)\.(\d+)", str(doc.get("gitVersion") or ""))
    if found:
        return int(found.group(1)), int(found.group(2))
    major, minor = str(doc.get("major") or ""), str(doc.get("minor") or "").rstrip("+")
    if major.isdigit() and minor.isdigit():
        return int(major), int(minor)
    return f"no version in the API server's /version answer ({str(dict(doc))[:120]})"


@dataclass(frozen=True, kw_only=True)
class Admission:
    """One admission as the keeper's part reads it (a restore's, ``keeper_part``; a copy no failover made,
    ``member/firstcopy.py``): the request's operation,
    its object and old object (as sent, and as read), the restore decision, the policy, and what the
    keeper's sidecar needs beside it."""

    operation: str
    obj: Mapping[str, Any]
    resource: FlinkResource
    old_obj: Mapping[str, Any] | None
    old: FlinkResource | None
    decision: RestoreDecision
    policy: RestorePolicy
    setup: KeeperSetup


def keeper_part(admission: Admission) -> Keeping | None:
    """The keeper's part of admitting the object (an UPDATE's old object beside it) as its decision
    says; None where no keeper belongs (not a fenced FlinkDeployment's restore or hold)."""
    obj, resource, old, old_obj = admission.obj, admission.resource, admission.old, admission.old_obj
    decision, policy, setup = admission.decision, admission.policy, admission.setup
    if resource.kind not in JOBMANAGER_KINDS or resource.job is None or resource.deleting:
        return None
    if decision.outcome not in (RestoreOutcome.RESTORED, RestoreOutcome.HELD):
        return None
    epoch_text = str(decision.annotations.get(policy.key(EPOCH), "")).strip()
    if not epoch_text.isdigit() or int(epoch_text) == 0:
        return None  # not fenced: no lease to keep
    checkpoint_dir = _checkpoint_dir(decision, resource, old, policy)
    if checkpoint_dir is None:
        return None
    said = not decision.carried  # Events and warnings once, at the admission that restored it
    running = old_obj is not None and runs_keeper(old_obj)
    lease = KeptLease(int(epoch_text), checkpoint_dir, "from the restore")
    return keeping(obj, resource, policy, setup, lease, Saying(said, said), running)


@dataclass(frozen=True)
class KeptLease:
    """The lease a keeper keeps: its epoch and checkpoint directory, and where they were read (for the
    warning when an UPDATE puts the keeper back)."""

    epoch: int
    checkpoint_dir: StoragePath
    origin: str
    session: bool = False  # a session cluster's: the keeper keeps its fenced FlinkSessionJobs' leases


@dataclass(frozen=True)
class Saying:
    """Whether this admission's Events and warnings are worth giving: where the keeper is left out, and
    where it is added (a keeper put back by an UPDATE gets a warning only)."""

    left_out: bool
    added: bool


def keeping(
    obj: Mapping[str, Any],
    resource: FlinkResource,
    policy: RestorePolicy,
    setup: KeeperSetup,
    lease: KeptLease,
    saying: Saying,
    running: bool,
) -> Keeping:
    """The keeper of ``lease`` in ``obj``'s JobManager pod, or why not. ``running``: the object as it
    was (an UPDATE's) runs its keeper."""
    where = f"{resource.namespace}/{resource.name}"
    off = policy.fencing.keeper.off_for(resource.namespace, resource.name)
    if off:
        note = f"no lease keeper in {where}'s JobManager pod ({off}): {OFF_COST}"
        return Keeping(
            Kept.OFF, events=(KeeperEvent("Warning", "KeeperOff", note),) if saying.left_out else ()
        )
    why = setup.unserved(running)
    if why:
        said = saying.left_out
        note = f"no lease keeper in {where}'s JobManager pod: {why}; {OFF_COST}"
        events = (KeeperEvent("Warning", "KeeperNotInjected", note),) if said else ()
        return Keeping(Kept.UNSUPPORTED, warnings=(note,) if said else (), events=events)
    at = deployment_spec_path(resource.kind)
    spec = deployment_spec(obj)
    blocked = blockers(spec, ".".join(at))
    if blocked:
        message = (
            f"flink-failover cannot add the lease keeper to {where}'s JobManager pod: {'; '.join(blocked)}. "
            "A fenced job runs with its keeper (docs/keeper.md); fix the pod template, or ask the platform "
            "team to turn the keeper off for this job (restore policy fencing.keeper.offJobs)"
        )
        return Keeping(
            Kept.REFUSED, refused=message, events=(KeeperEvent("Warning", "KeeperRefused", message),)
        )
    pod = KeeperPod(
        image=setup.image,
        cluster=setup.cluster,
        checkpoint_dir=str(lease.checkpoint_dir),
        workload=Workload(resource.kind, resource.namespace, resource.name),
        epoch=lease.epoch,
        fencing=_fencing_document(policy),
        storage_options=_shareable(policy, lease.checkpoint_dir.scheme),
        run_as_user=_jobmanager_user(spec),
        extra_env=credential_env(spec, resource, lease.checkpoint_dir.scheme),
        mode="session" if lease.session else "job",
        rest=_rest(resource) if lease.session else "",
    )
    after, notes = with_keeper({"spec": spec}, pod)  # a blue/green template is a FlinkDeployment's spec
    ops = _ops(obj, at, spec, as_map(after["spec"]))
    what = f"epoch {pod.epoch}, checkpoint directory {pod.checkpoint_dir}, image {pod.image}"
    if saying.added:
        text = f"lease keeper added to {where}'s JobManager pod ({what})"
        shown = (text, *notes)
        events = (KeeperEvent("Normal", "KeeperInjected", "; ".join(shown)),)
        return Keeping(Kept.INJECTED, tuple(ops), shown, events)
    if ops:
        text = f"lease keeper put back in {where}'s JobManager pod, {lease.origin} ({what})"
        return Keeping(Kept.INJECTED, tuple(ops), (text,))
    return Keeping(Kept.INJECTED)


def _rest(resource: FlinkResource) -> str:
    """The session JobManager's REST endpoint in its own pod, where ``rest.port`` moves it from Flink's
    8081 ("": the keeper's default)."""
    port = resource.configuration.get("rest.port", "").strip()
    return f"http://127.0.0.1:{port}" if port.isdigit() and port != "8081" else ""


def blockers(deployment: Mapping[str, Any], at: str = "spec") -> list[str]:
    """What in the pod templates that make the JobManager's pod (its own, and the common one the
    operator merges under it) keeps the keeper out: the API server or the keeper itself would fail.
    ``deployment``: a FlinkDeployment's spec, found at ``at`` in the object (for the messages)."""
    found: list[str] = []
    for where, spec in _pod_specs(deployment, at):
        if spec.get("hostPID") is True:
            found.append(
                f"{where}.hostPID is true: Kubernetes refuses a pod with both hostPID and the "
                "shareProcessNamespace the keeper needs to see the JobManager"
            )
        for key in ("containers", "initContainers"):
            listed = spec.get(key)
            if listed is not None and not isinstance(listed, list):
                found.append(f"{where}.{key} is not a list")
                continue
            for container in listed or []:
                if not isinstance(container, Mapping):
                    continue
                name = container.get("name")
                if name == CONTAINER and (key == "containers" or container.get("command") != COMMAND):
                    found.append(
                        f"{where}.{key} has a container named {CONTAINER} that is not the keeper "
                        f"(command {COMMAND}): rename it"
                    )
                elif name != CONTAINER and any(
                    isinstance(p, Mapping) and p.get("containerPort") == PORT
                    for p in container.get("ports") or []
                ):
                    found.append(
                        f"{where}.{key} {name!r} declares port {PORT}, the keeper's (the pod's containers "
                        "share one network namespace)"
                    )
    return found


def credential_env(
    deployment: Mapping[str, Any], resource: FlinkResource, scheme: str
) -> tuple[dict[str, Any], ...]:
    """The storage credentials the JobManager has that the keeper would not: the main container's own
    AWS_* and AZURE_* variables as written (values or secretKeyRefs), and S3 keys set only in Flink's
    configuration (``s3.access-key``, ``s3.secret-key``: Flink's S3 filesystems read them, s3fs reads the
    environment) as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY. The pod's own identity (IRSA, workload
    identity) needs nothing: every container of the pod has it."""
    env: dict[str, dict[str, Any]] = {}
    for _, spec in reversed(_pod_specs(deployment)):  # the common template's, the JobManager's over it
        for container in spec.get("containers") or []:
            if isinstance(container, Mapping) and container.get("name") == MAIN_CONTAINER:
                for item in container.get("env") or []:
                    name = item.get("name") if isinstance(item, Mapping) else None
                    if isinstance(name, str) and _CREDENTIAL_ENV.match(name):
                        env[name] = dict(item)
    if scheme in _S3_SCHEMES:
        for keys, variable in _S3_KEYS:
            value = next((resource.configuration[k] for k in keys if resource.configuration.get(k)), "")
            if value:
                env[variable] = {"name": variable, "value": value}
    return tuple(env.values())


def _pod_specs(spec: Mapping[str, Any], at: str = "spec") -> list[tuple[str, Mapping[str, Any]]]:
    """(where, pod spec) of the JobManager's own pod template, then the common one, in a FlinkDeployment's
    ``spec`` (found at ``at``)."""
    out = []
    for where, template in (
        (f"{at}.jobManager.podTemplate.spec", as_map(as_map(spec.get("jobManager")).get("podTemplate"))),
        (f"{at}.podTemplate.spec", as_map(spec.get("podTemplate"))),
    ):
        pod = template.get("spec")
        if isinstance(pod, Mapping):
            out.append((where, pod))
    return out


def _jobmanager_user(deployment: Mapping[str, Any]) -> int:
    """The user the JobManager's JVM runs as, which the keeper runs as to signal it without a capability:
    the main container's runAsUser, else the pod's (the JobManager's template over the common one); the
    Flink image's user where none is set, or root is (its entrypoint drops to that user)."""
    for _, spec in _pod_specs(deployment):
        for container in spec.get("containers") or []:
            if isinstance(container, Mapping) and container.get("name") == MAIN_CONTAINER:
                user = as_map(container.get("securityContext")).get("runAsUser")
                if isinstance(user, int) and not isinstance(user, bool) and user > 0:
                    return user
    for _, spec in _pod_specs(deployment):
        user = as_map(spec.get("securityContext")).get("runAsUser")
        if isinstance(user, int) and not isinstance(user, bool) and user > 0:
            return user
    return FLINK_USER


def _checkpoint_dir(
    decision: RestoreDecision, resource: FlinkResource, old: FlinkResource | None, policy: RestorePolicy
) -> StoragePath | None:
    """The restore's checkpoint directory: its record's (carried from ``oldObject`` on UPDATE), else (a
    restore from before records) the old object's, else the requested one's."""
    raw = str(decision.annotations.get(policy.key(RESTORE_RECORD), "")).strip()
    record = decode(raw) if raw else None
    if isinstance(record, RestoreRecord) and record.checkpoint_dir:
        text = record.checkpoint_dir
    else:
        text = (old or resource).checkpoint_dir or policy.default_checkpoint_dir
    try:
        return StoragePath.parse(text) if text else None
    except StoragePathError:
        return None


def _fencing_document(policy: RestorePolicy) -> dict[str, Any]:
    """The policy's fencing block as a document writes it, for the keeper (its own switch left out)."""
    out: dict[str, Any] = {}
    for f in FENCING.fields:
        if f.key == "keeper":
            continue
        value = getattr(policy.fencing, f.attr)
        out[f.key] = value.value if isinstance(value, StrEnum) else value
    return out


def _shareable(policy: RestorePolicy, scheme: str) -> dict[str, dict[str, Any]]:
    """The policy's storage options of the job's scheme that are no credential."""
    given = policy.storage_options.get(scheme) or {}
    kept = {k: v for k, v in given.items() if k in _SHAREABLE_OPTIONS}
    client = given.get("client_kwargs")
    if isinstance(client, Mapping):
        shared = {k: v for k, v in client.items() if k in _SHAREABLE_CLIENT_KWARGS}
        if shared:
            kept["client_kwargs"] = shared
    extra = kept.get("s3_additional_kwargs")
    if isinstance(extra, Mapping):  # SSE-KMS key ids are names; an SSE-C key is a secret
        kept["s3_additional_kwargs"] = {k: v for k, v in extra.items() if not k.startswith("SSECustomer")}
    return {scheme: kept} if kept else {}


def _ops(
    obj: Mapping[str, Any], at: tuple[str, ...], before: Mapping[str, Any], after: Mapping[str, Any]
) -> list[Op]:
    """The patch from the request's object to the one with the keeper (``before`` and ``after``: the
    FlinkDeployment spec found at ``at``): the JobManager's pod template (whole, when it differs) and
    the heartbeat keys of Flink's configuration."""
    template = as_map(after.get("jobManager")).get("podTemplate")
    conf_after, conf_before = (
        as_map(after.get("flinkConfiguration")),
        as_map(before.get("flinkConfiguration")),
    )
    changed = {
        k: conf_after[k] for k in _HEARTBEAT_KEYS if k in conf_after and conf_after[k] != conf_before.get(k)
    }
    return set_fields(obj, (*at, "jobManager"), {"podTemplate": template}) + set_fields(
        obj, (*at, "flinkConfiguration"), changed
    )
