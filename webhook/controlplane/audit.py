"""What the Work webhook answered and why: the decision (also the metrics label) and the audit record.

Never sent to the API server; the server logs the audit beside the request, tests read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from webhook.common.admission import Audit


class WorkDecision(StrEnum):
    # Not ours to judge (allowed untouched).
    NOT_A_WORK = "not-a-work"
    IGNORED_OPERATION = "ignored-operation"
    NOT_EXECUTION_NAMESPACE = "not-execution-namespace"
    NO_MANIFESTS = "no-manifests"
    NO_FLINK_MANIFEST = "no-flink-manifest"
    DELETING = "deleting"  # a Work being deleted: Karmada applies none of its manifests
    # A Flink manifest, per the relocation decision.
    INJECTED = "injected"  # trigger labels with the jobId, and the annotations
    FAILOVER_ONLY = "failover-only"  # the failover label without a jobId, and the annotations
    UNCHANGED = "unchanged"  # already carried what it needs (an idempotent re-apply)
    RUNNING_ON_TARGET = "running-on-target"  # the restored job runs there: annotations only, if any
    LEAVING = "leaving"
    NO_FAILOVER = "no-failover"
    BINDING_NOT_FOUND = "binding-not-found"
    # Refused, so that Karmada retries.
    BINDING_UNAVAILABLE = "binding-unavailable"
    ERROR = "error"


# When a Work holds several Flink manifests, the answer's decision is the most telling of theirs.
PRIORITY = (
    WorkDecision.INJECTED,
    WorkDecision.FAILOVER_ONLY,
    WorkDecision.UNCHANGED,
    WorkDecision.BINDING_NOT_FOUND,
)


def overall(decisions: list[WorkDecision]) -> WorkDecision:
    for candidate in PRIORITY:
        if candidate in decisions:
            return candidate
    return decisions[0] if decisions else WorkDecision.NO_FLINK_MANIFEST


@dataclass(frozen=True)
class ManifestAudit:
    """One Flink manifest of the Work: which binding decided it, from where, and what came of it."""

    binding: str  # namespace/name
    decision: WorkDecision
    binding_from: str = ""  # api, cache-fallback, file
    patch_ops: int = 0
    explanation: str = ""
    job_id: str = ""
    source_cluster: str = ""
    failover_count: int = 0
    lookup_ms: float = 0.0  # how long reading the binding took (the fresh GET, or its failure)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "binding": self.binding,
            "decision": self.decision.value,
            "bindingFrom": self.binding_from,
            "patchOps": self.patch_ops,
            "lookupMs": round(self.lookup_ms, 3),
        }
        if self.explanation:
            out["explanation"] = self.explanation
        if self.source_cluster:
            out.update(
                jobId=self.job_id, sourceCluster=self.source_cluster, failoverCount=self.failover_count
            )
        return out


@dataclass(frozen=True)
class WorkAudit(Audit):
    """What the control plane logs about one Work answer."""

    cluster: str = ""
    binding: str = ""  # the binding that could not be read, on a refusal
    manifests: tuple[ManifestAudit, ...] = ()

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cluster": self.cluster} if self.cluster else {}
        if self.binding:
            out["binding"] = self.binding
        if self.manifests:
            out["manifests"] = [m.to_json() for m in self.manifests]
        return out
