"""``POST /mutate-work``: label the Flink workload inside a Work bound for a cluster it is relocating to.

The same handler serves the server (watch cache, GET fallback) and ``review --role control-plane``
(bindings from a file): only the :class:`BindingLookup` differs. It never denies a Work: anything
unexpected answers allowed without a patch (see :func:`internal_error`), logged and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from prometheus_client import Counter

from webhook.common.admission import AdmissionRequest, AdmissionResponse
from webhook.common.patch import Op
from webhook.controlplane.binding import Binding
from webhook.controlplane.capture import observe
from webhook.controlplane.record import ANNOTATION_NAME, Record, read_annotation
from webhook.controlplane.relocation import Decision, Outcome, decide
from webhook.controlplane.work import WORK_GROUP, NotForUs, injection_metadata, manifest_ops, parse_work
from webhook.member.policy import RestorePolicy

log = logging.getLogger(__name__)

INJECTIONS = Counter(
    "flink_failover_work_injections_total",
    "Flink manifests in Works that got failover labels, by what was injected",
    ["injected"],
)
LOOKUPS = Counter(
    "flink_failover_binding_lookups_total",
    "ResourceBinding look-ups made for a Work, by where the answer came from",
    ["source"],
)
WORK_ERRORS = Counter(
    "flink_failover_work_errors_total",
    "Works answered allowed without a patch because of an internal problem",
    ["reason"],
)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Found:
    binding: Binding
    record: Record
    source: str  # "cache", "api" or "file"


@dataclass(frozen=True)
class NotFound:
    source: str


@dataclass(frozen=True)
class LookupFailed:
    message: str


LookupResult = Found | NotFound | LookupFailed


class BindingLookup(Protocol):
    def lookup(self, namespace: str, name: str) -> LookupResult: ...


def annotation_key(policy: RestorePolicy) -> str:
    return policy.key(ANNOTATION_NAME)


def found_from_object(obj: Any, policy: RestorePolicy, source: str) -> Found:
    binding = Binding.from_object(obj)
    stored = read_annotation(obj.get("metadata", {}).get("annotations"), annotation_key(policy))
    if stored.error:
        log.warning("ignoring unreadable record on %s/%s: %s", binding.namespace, binding.name, stored.error)
    return Found(binding, stored.record, source)


@dataclass
class WorkHandler:
    lookup: BindingLookup
    policy: RestorePolicy
    clock: Clock = utc_now

    def __call__(self, request: AdmissionRequest) -> AdmissionResponse:
        allowed = _allowed(request.uid)
        if request.group != WORK_GROUP or request.kind != "Work" or request.sub_resource:
            return allowed("not-a-work")
        if request.operation not in ("CREATE", "UPDATE"):
            return allowed("ignored-operation")
        target = parse_work(request.object, request.namespace)
        if isinstance(target, NotForUs):
            return allowed(target.reason)
        now = self.clock()
        patch: list[Op] = []
        decisions: list[dict[str, Any]] = []
        outcomes: list[str] = []
        for manifest in target.manifests:
            ref = manifest.binding
            result = self.lookup.lookup(ref.namespace, ref.name)
            if isinstance(result, LookupFailed):
                WORK_ERRORS.labels("binding-unavailable").inc()
                log.error(
                    "no binding for Work %s/%s: %s", target.work_namespace, target.work_name, result.message
                )
                return allowed("binding-unavailable", {"reason": result.message, "cluster": target.cluster})
            if isinstance(result, NotFound):
                LOOKUPS.labels("not-found").inc()
                outcomes.append("binding-not-found")
                decisions.append({"binding": f"{ref.namespace}/{ref.name}", "outcome": "binding-not-found"})
                continue
            LOOKUPS.labels(result.source).inc()
            record = observe(result.record, result.binding, now)
            decision = decide(record, result.binding, target.cluster, self.policy.job_id_labels, now)
            ops = self._ops(request.object, manifest.index, decision)
            patch += ops
            outcomes.append(_manifest_outcome(decision, ops))
            decisions.append(_detail(ref.namespace, ref.name, decision, len(ops)))
        detail: dict[str, Any] = {"cluster": target.cluster, "manifests": decisions}
        if decisions and decisions[-1].get("explanation"):
            detail["reason"] = decisions[-1]["explanation"]
        return AdmissionResponse(
            uid=request.uid, allowed=True, patch=patch, decision=_overall(outcomes), detail=detail
        )

    def _ops(self, work: Any, index: int, decision: Decision) -> list[Op]:
        if decision.injection is None:
            return []
        labels, annotations = injection_metadata(decision.injection, self.policy)
        ops = manifest_ops(work, index, labels, annotations)
        if ops:
            INJECTIONS.labels("job-id" if decision.injection.job_id else "failover-only").inc()
        return ops


# When a Work holds several Flink manifests, the answer's decision is the most telling of theirs.
_PRIORITY = ("injected", "failover-only", "unchanged", "binding-not-found")


def _manifest_outcome(decision: Decision, ops: list[Op]) -> str:
    if decision.injection is None:
        return decision.outcome.value
    if not ops:
        return "unchanged"  # already labelled (an idempotent UPDATE)
    return "injected" if decision.outcome is Outcome.RELOCATING else "failover-only"


def _overall(outcomes: list[str]) -> str:
    for candidate in _PRIORITY:
        if candidate in outcomes:
            return candidate
    return outcomes[0] if outcomes else "no-flink-manifest"


def _detail(namespace: str, name: str, decision: Decision, ops: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "binding": f"{namespace}/{name}",
        "outcome": decision.outcome.value,
        "patchOps": ops,
        "explanation": decision.explanation,
    }
    if decision.injection is not None:
        out["jobId"] = decision.injection.job_id
        out["sourceCluster"] = decision.injection.source_cluster
        out["failoverCount"] = decision.injection.failover_count
    return out


def _allowed(uid: str) -> Callable[..., AdmissionResponse]:
    def answer(decision: str, detail: dict[str, Any] | None = None) -> AdmissionResponse:
        return AdmissionResponse(uid=uid, allowed=True, decision=decision, detail=detail or {})

    return answer


def internal_error(request: AdmissionRequest, exc: Exception) -> AdmissionResponse:
    """The Work webhook never denies: an unexpected failure answers allowed, without a patch."""
    WORK_ERRORS.labels("internal").inc()
    log.exception("control-plane webhook failed on %s; allowing without patch", request.uid, exc_info=exc)
    return AdmissionResponse(
        uid=request.uid, allowed=True, decision="error", detail={"reason": f"{type(exc).__name__}: {exc}"}
    )
