"""A running Flink object as the failover CREATE the control plane would send for it.

Used by ``review --as-failover``.

Pure: the documented pre-install check reviews a job that runs today; without this its answer is only
"no failover label". The jobId and the last savepoint come from the object's status, as the control
plane records them, and the status goes, as it does when Karmada creates the object on a new cluster.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from webhook.common.contract import JOB_ID, LAST_SAVEPOINT, STARTED_FROM, Contract
from webhook.common.flink import GROUP, KINDS, is_job_id, started_from
from webhook.common.untyped import as_map, as_str

# Server-set metadata a new object never carries.
_SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")


class NotRunning(ValueError):
    """Not a Flink job, or its status holds no jobId: there is no job a failover would restore."""


def failover_create(obj: Mapping[str, Any], contract: Contract) -> dict[str, Any]:
    """``obj`` with the trigger labels, last savepoint and started-from the control plane adds, status
    and server fields removed."""
    kind, group = as_str(obj.get("kind")), as_str(obj.get("apiVersion")).rpartition("/")[0]
    if group != GROUP or kind not in KINDS:
        raise NotRunning(
            f"--as-failover reviews a Flink job ({', '.join(KINDS)} of {GROUP}): {kind or 'an object'} "
            f"of {group or 'the core API'} is not a Flink kind"
        )
    status = as_map(obj.get("status"))
    job_status = as_map(status.get("jobStatus"))
    job_id = as_str(job_status.get("jobId"))
    if not is_job_id(job_id):
        shown = f"{job_id[:64]!r} is not a Flink jobId" if job_id else "no status.jobStatus.jobId"
        raise NotRunning(f"--as-failover needs a job that ran: {shown}")
    out = copy.deepcopy(dict(obj))
    out.pop("status", None)
    meta = dict(as_map(out.get("metadata")))
    for key in _SERVER_FIELDS:
        meta.pop(key, None)
    meta["labels"] = {
        **as_map(meta.get("labels")),
        contract.failover_label: "true",
        contract.key(JOB_ID): job_id,
    }
    added = {
        contract.key(LAST_SAVEPOINT): _last_savepoint(job_status),
        contract.key(STARTED_FROM): started_from(as_str(obj.get("kind")), status),
    }
    added = {k: v for k, v in added.items() if v}
    if added:
        meta["annotations"] = {**as_map(meta.get("annotations")), **added}
    out["metadata"] = meta
    return out


def _last_savepoint(job_status: Mapping[str, Any]) -> str:
    last = as_map(as_map(job_status.get("savepointInfo")).get("lastSavepoint"))
    return as_str(last.get("location")).strip() or as_str(job_status.get("upgradeSavepointPath")).strip()
