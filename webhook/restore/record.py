"""The restore record: what the admission that restored (or held) a job saw, kept on the object.

Pure. Every later decision about the copy (the fencing agent's records folder and jobId, a release's and a
resume's lookup, the Flink version judged, who its parent or session cluster is) reads this record, never
the current spec: the spec is anyone's to edit, the record only the member webhook writes. An UPDATE
carries the old object's record over whatever the request says (``restore/updates.py``), and while a copy
is held an UPDATE that changes where its state lives or who owns it is refused (``guard_held``).

The record is one annotation (``<prefix>/restore-record``) holding compact JSON. An object restored
before records existed has none: the current object is read then, as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, fields, replace
from typing import Any

from webhook.common.contract import LAST_SAVEPOINT, RELEASE, RESTORE_RECORD, STARTED_FROM
from webhook.common.flink import CHECKPOINT_DIR_KEYS, CREATE_SUBDIR_KEYS, SAVEPOINT_DIR_KEYS, FlinkResource
from webhook.policy.restore import RestorePolicy

VERSION = 1
_CLAIM_KEYS = ("execution.state-recovery.claim-mode", "execution.savepoint-restore-mode")


@dataclass(frozen=True)
class RestoreRecord:
    """What a restore decided from, as the admission saw it (``""``: not known or not set)."""

    kind: str
    job_id: str = ""  # the jobId restored from (the job-id label at CREATE)
    checkpoint_dir: str = ""  # the job's checkpoint directory (own, session cluster's, or the policy's)
    savepoint_dir: str = ""
    job_subdir: bool = True  # checkpoints under <dir>/<jobId> (create-subdir)
    parent: str = ""  # a FlinkBlueGreenDeployment child's parent
    session_cluster: str = ""  # a FlinkSessionJob's spec.deploymentName
    flink_version: str = ""  # the restoring Flink (a session job's: its cluster's)
    image: str = ""
    claim: tuple[tuple[str, str], ...] = ()  # the claim-mode settings the restoring Flink reads
    started_from: str = ""
    last_savepoint: str = ""
    # The CREATE carried release: "true" (a template's, which Karmada re-applies: never a request when
    # re-applied by ``created_by``, the identity that created the object).
    template_release: bool = False
    created_by: str = ""

    def encode(self) -> str:
        body: dict[str, Any] = {"v": VERSION}
        for f in fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                body[_camel(f.name)] = [list(p) for p in value] if f.name == "claim" else value
        return json.dumps(body, separators=(",", ":"), sort_keys=True)

    def view(self, resource: FlinkResource, policy: RestorePolicy) -> FlinkResource:
        """``resource`` as the restore saw it: the recorded directories, jobId, snapshots named by the
        control plane and restoring Flink in place of whatever the object says now."""
        conf = {
            k: v
            for k, v in resource.configuration.items()
            if k not in CHECKPOINT_DIR_KEYS + SAVEPOINT_DIR_KEYS + CREATE_SUBDIR_KEYS + _CLAIM_KEYS
        }
        if self.checkpoint_dir:
            conf[CHECKPOINT_DIR_KEYS[0]] = self.checkpoint_dir
        if self.savepoint_dir:
            conf[SAVEPOINT_DIR_KEYS[0]] = self.savepoint_dir
        conf[CREATE_SUBDIR_KEYS[0]] = "true" if self.job_subdir else "false"
        conf.update(dict(self.claim))
        labels = {k: v for k, v in resource.labels.items() if k not in policy.job_id_labels}
        if self.job_id:
            labels[policy.job_id_labels[0]] = self.job_id
        annotations = dict(resource.annotations)
        for key, value in (
            (policy.key(STARTED_FROM), self.started_from),
            (policy.key(LAST_SAVEPOINT), self.last_savepoint),
        ):
            if value:
                annotations[key] = value
            else:
                annotations.pop(key, None)
        return replace(
            resource,
            configuration=conf,
            labels=labels,
            annotations=annotations,
            blue_green_parent=self.parent,
            deployment_name=self.session_cluster,
            flink_version=self.flink_version,
            image=self.image,
        )


class RestoreRecordError(ValueError):
    """A record annotation that cannot be read (edited by hand, or from a newer release)."""


def record_of(resource: FlinkResource, policy: RestorePolicy) -> RestoreRecord | RestoreRecordError | None:
    """The object's record; None when it has none (restored before records existed, or never)."""
    raw = resource.annotations.get(policy.key(RESTORE_RECORD), "").strip()
    if not raw:
        return None
    return decode(raw)


def decode(raw: str) -> RestoreRecord | RestoreRecordError:
    try:
        body = json.loads(raw)
    except ValueError as exc:
        return RestoreRecordError(f"not JSON: {exc}")
    if not isinstance(body, Mapping) or body.get("v") != VERSION:
        return RestoreRecordError(f"not a version {VERSION} restore record")
    known = {_camel(f.name): f for f in fields(RestoreRecord)}
    values: dict[str, Any] = {}
    for key, value in body.items():
        if key == "v":
            continue
        f = known.get(key)
        if f is None:
            return RestoreRecordError(f"unknown field {key[:40]!r}")
        if f.name == "claim":
            if not isinstance(value, list) or not all(
                isinstance(p, list) and len(p) == 2 and all(isinstance(s, str) for s in p) for p in value
            ):
                return RestoreRecordError("claim: not a list of [key, value] pairs")
            values[f.name] = tuple((p[0], p[1]) for p in value)
        elif not isinstance(value, _type_of(f)):
            return RestoreRecordError(f"{key}: not a {_type_of(f).__name__}")
        else:
            values[f.name] = value
    if not isinstance(values.get("kind"), str) or not values.get("kind"):
        return RestoreRecordError("kind missing")
    return RestoreRecord(**values)


def make_record(
    own: FlinkResource,
    view: FlinkResource,
    cluster: FlinkResource | None,
    job_id: str,
    policy: RestorePolicy,
    requester: str = "",
) -> RestoreRecord:
    """The record of a CREATE: ``own`` as requested, ``view`` with its session cluster's settings merged
    (the directories it resolved), ``cluster`` the session cluster read (None: none, or not read)."""
    flink = cluster if own.kind == "FlinkSessionJob" and cluster is not None else own
    return RestoreRecord(
        kind=own.kind,
        job_id=job_id,
        checkpoint_dir=view.checkpoint_dir or policy.default_checkpoint_dir,
        savepoint_dir=view.savepoint_dir or policy.default_savepoint_dir,
        job_subdir=view.checkpoints_in_job_subdir,
        parent=own.blue_green_parent,
        session_cluster=own.deployment_name if own.kind == "FlinkSessionJob" else "",
        flink_version=flink.flink_version,
        image=flink.image,
        claim=tuple((k, view.configuration[k]) for k in _CLAIM_KEYS if view.configuration.get(k, "").strip()),
        started_from=own.annotations.get(policy.key(STARTED_FROM), "").strip(),
        last_savepoint=own.annotations.get(policy.key(LAST_SAVEPOINT), "").strip(),
        template_release=own.annotations.get(policy.key(RELEASE), "").strip().lower() == "true",
        created_by=requester,
    )


def _type_of(f: Field[Any]) -> type:
    """A field's JSON type: that of its default (``kind``, the one without, is a string)."""
    return str if f.default is MISSING else type(f.default)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)
