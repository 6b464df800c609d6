"""The label and annotation contract between the roles: the control plane writes these keys on the
workload inside a Karmada Work, the member role reads them and records what it did.

Every key is ``<prefix>/<name>``; the prefix is configurable (the restore policy's ``prefix``), the names
are fixed here. The README's "Label and annotation contract" table lists the same keys.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "flink-failover.io"

# Written by the control plane on the member object (through the Work).
FAILOVER = "failover"  # label, "true" on every workload being restored after a failover
JOB_ID = "job-id"  # label, the jobId of the last job that ran
SOURCE_CLUSTER = "source-cluster"  # annotation
FAILOVER_TIME = "failover-time"  # annotation, RFC 3339 UTC
FAILOVER_COUNT = "failover-count"  # annotation, >= 1
REASON = "reason"  # annotation, Karmada's eviction reason
LAST_SAVEPOINT = "last-savepoint"  # annotation, optional
STARTED_FROM = "started-from"  # annotation, optional: the snapshot the job named by job-id started from

# Written by the member role on the object it restored.
RESTORE_DECISION = "restore-decision"  # restored | held | suspended | stateless
RESTORED_FROM = "restored-from"
RESTORED_JOB_ID = "restored-job-id"
# What the restore decided from (jobId, directories, parent, session cluster, Flink): the only source later
# decisions read (restore/record.py); carried over from the old object on every UPDATE.
RESTORE_RECORD = "restore-record"

# One running copy (the member role's fencing agent, docs/failover.md).
HOLD = "hold"  # annotation on a restored object held suspended: whom it waits for, until when
EPOCH = "epoch"  # annotation: the failover count (epoch) the restore fenced under
RELEASE = "release"  # annotation an engineer sets to "true" to release a hold by hand
RELEASE_REQUESTED_BY = "release-requested-by"  # annotation the webhook adds: who set release, and when
RELEASED = "released"  # annotation: why and when a hold was released (ack | lease-expiry | ...)
FENCED = "fenced"  # label on a stale copy the agent stopped: the epoch of the fence that stopped it
FENCED_BY = "fenced-by"  # annotation on that copy: the cluster that owns the workload now
FENCED_UPGRADE_MODE = "fenced-upgrade-mode"  # annotation on that copy: its upgradeMode before the stop
STEPPED_DOWN = (
    "stepped-down"  # annotation on a copy its own agent suspended: it could not renew its heartbeat
)
RESUMED = "resumed"  # annotation: when and from where a stepped-down copy was resumed by its agent

# Kept by the control plane on the ResourceBinding.
LAST_KNOWN_STATE = "last-known-state"

# Labels that carry the old jobId, first match wins: ours, then the ones Karmada's own state
# preservation is usually configured to write.
DEFAULT_JOB_ID_LABELS: tuple[str, ...] = (
    f"{DEFAULT_PREFIX}/{JOB_ID}",
    "application.karmada.io/failover-jobid",
    "application.karmada.io/cluster-failover-jobid",
    "resourcebinding.karmada.io/failover-jobid",
)


@dataclass(frozen=True)
class Contract:
    """The keys under one prefix, and the labels that may carry the old jobId."""

    prefix: str = DEFAULT_PREFIX
    job_id_labels: tuple[str, ...] = DEFAULT_JOB_ID_LABELS

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    @property
    def failover_label(self) -> str:
        return self.key(FAILOVER)
