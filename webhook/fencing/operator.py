"""Has the Flink operator stopped a job? Read from the status it writes. Pure.

A suspend is a request: the operator (1.15 source) keeps ``status.jobStatus.state: RUNNING`` while it
cancels the job or deletes the Flink cluster, which takes seconds to tens of seconds, and the old job
reads, writes and checkpoints all that time. When the stop has completed it writes, at once:
``jobStatus.state`` FINISHED (or CANCELED; the jobId kept), ``jobManagerDeploymentStatus: MISSING`` for
a FlinkDeployment, and ``reconciliationStatus.lastReconciledSpec`` holding ``job.state: suspended``
(``lifecycleState: SUSPENDED``). Only all of these together mean "stopped" here: an acknowledgement
written on anything less lets the new cluster start while the old job still runs. A status with nothing
in it (the operator has not reported yet, or the status was wiped) says nothing, so it is not a stop.

A deleted object with the operator's finalizer stays (``deletionTimestamp`` set) while the operator
cancels the job or deletes the Flink cluster, and its job runs all that time; the operator then
removes the finalizer and the object goes. Its cleanup reconciles no suspend, so for a copy being
deleted the job's state and the JobManager's say it, not the reconciled spec.

Only a job state Flink calls *globally terminal* (``JobStatus.isGloballyTerminalState``: FINISHED,
CANCELED, FAILED) is a stop: SUSPENDED is terminal only for the JobManager that wrote it (it lost its
leadership), and a new HA leader resumes the job from the HA store. The operator writes FINISHED itself
once it has deleted a Flink cluster whose job was in any other state. Every other state, an empty one or
one this code does not know, says the job may still run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.common.untyped import as_map

# Flink's globally terminal JobStatus values: the job is complete, no standby JobManager recovers it.
# Every other state (INITIALIZING, CREATED, RUNNING, FAILING, CANCELLING, RESTARTING, RECONCILING, and
# SUSPENDED, only locally terminal) is of a job that may still process records, or is about to again.
ENDED_JOB_STATES = frozenset({"FINISHED", "CANCELED", "FAILED"})


@dataclass(frozen=True)
class OperatorReport:
    stopped: bool
    detail: str  # what the status says, for the log and the hold text ("RUNNING, JobManager READY")
    active: bool = False  # its status shows a job that may process records (RUNNING, SUSPENDED, ...)
    empty: bool = False  # its status says nothing at all (not reported yet, or wiped)


def operator_report(obj: Mapping[str, Any]) -> OperatorReport:
    """What the operator reports about a copy whose spec says ``suspended``, or that is being deleted."""
    status = as_map(obj.get("status"))
    job_state = str(as_map(status.get("jobStatus")).get("state") or "").upper()
    jm = str(status.get("jobManagerDeploymentStatus") or "")
    reconciled = _reconciled_job_state(status)
    deleting = bool(as_map(obj.get("metadata")).get("deletionTimestamp"))
    parts = [f"job {job_state or 'without a state'}"]
    if job_state and job_state not in ENDED_JOB_STATES:  # SUSPENDED, or a state this code does not know
        return OperatorReport(False, ", ".join(parts), active=True)
    if not (job_state or jm or reconciled):
        return OperatorReport(False, "the operator has reported nothing yet (empty status)", empty=True)
    if not job_state:  # the JobManager or the reconciled spec alone do not say the job has ended
        return OperatorReport(False, ", ".join(parts))
    if obj.get("kind", "FlinkDeployment") == "FlinkDeployment":
        parts.append(f"JobManager {jm or 'unreported'}")
        if jm not in ("", "MISSING"):
            return OperatorReport(False, ", ".join(parts))
    if deleting:
        parts.append("being deleted")
    elif reconciled not in ("", "suspended"):
        parts.append(f"suspend not reconciled yet (last reconciled: {reconciled})")
        return OperatorReport(False, ", ".join(parts))
    return OperatorReport(True, ", ".join(parts))


def _reconciled_job_state(status: Mapping[str, Any]) -> str:
    """``job.state`` of the spec the operator last reconciled ("" when it reports none)."""
    raw = as_map(status.get("reconciliationStatus")).get("lastReconciledSpec")
    if not isinstance(raw, str) or not raw:
        return ""
    try:
        doc = as_map(json.loads(raw))
    except ValueError:
        return ""
    # The operator writes {"spec": {...}, "resource_metadata": {...}}; very old ones the bare spec.
    spec = as_map(doc.get("spec")) if "resource_metadata" in doc or "job" not in doc else doc
    return str(as_map(spec.get("job")).get("state") or "")
