"""``POST /mutate-work``: label the Flink workload inside a Work bound for a cluster it is relocating to.

The same handler serves the server and ``review --role control-plane`` (bindings from a file): only the
:class:`BindingLookup` differs. The server answers from the watch cache when the cached binding says
what no staleness can turn into an empty start (:data:`FROM_CACHE`), and reads the binding fresh from
the API server otherwise: a fresh GET is a quorum read, and during a fleet failover on real Karmada it
waited in etcd behind the write burst (73 ms on average, p99 over 500 ms) where the cache answers in
well under a millisecond.

A Work that holds no Flink workload is never denied. A Flink Work is denied, retriably, only when no
fresh binding can be had (API server unreachable, timeout, an internal error): admitting it without
labels could let the job start from empty state, and Karmada retries a refused Work with backoff.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter

from webhook.common import contract as keys
from webhook.common.admission import AdmissionRequest, AdmissionResponse, allowed, errored, patched
from webhook.common.contract import Contract
from webhook.common.patch import Op
from webhook.common.untyped import str_map
from webhook.controlplane.audit import ManifestAudit, WorkAudit, WorkDecision, overall
from webhook.controlplane.capture import observe
from webhook.controlplane.lookup import BindingLookup, Found, LookupFailed, NotFound
from webhook.controlplane.relocation import (
    Injection,
    Relocation,
    RelocationDecision,
    decide_relocation,
    injection_metadata,
)
from webhook.controlplane.work import WORK_GROUP, FlinkManifest, NotForUs, manifest_ops, parse_work

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
    "Flink Works refused (retriably) because no fresh binding could be read, or on an internal error",
    ["reason"],
)
RETRY_CODE = 503  # kube-apiserver passes the code on; Karmada's binding controller requeues with backoff

# What the watch cache may answer alone, by operation. A cache lags the API server by the watch's delay:
# a Work CREATE can reach us before the scheduler's write that caused it (recorded: 1-25 ms), so the
# cache may not place the workload on the Work's cluster yet (LEAVING), may not know the binding, or may
# hold an older stay on that cluster (a return A -> B -> A it has not seen: RUNNING_ON_TARGET). Each of
# those could let a failed-over job start empty: they are read fresh. An answer that labels the workload
# cannot; nor can RUNNING_ON_TARGET on an UPDATE, whose object already exists on the member (its
# initialSavepointPath no longer matters).
FROM_CACHE = {
    "CREATE": frozenset({Relocation.RELOCATING, Relocation.FAILOVER_NO_STATE}),
    "UPDATE": frozenset({Relocation.RELOCATING, Relocation.FAILOVER_NO_STATE, Relocation.RUNNING_ON_TARGET}),
}

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Decided:
    """What a manifest's binding says about it, and where that binding came from."""

    decision: RelocationDecision
    source: str


@dataclass
class WorkHandler:
    lookup: BindingLookup
    contract: Contract
    clock: Clock = utc_now

    def __call__(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.group != WORK_GROUP or request.kind != "Work" or request.sub_resource:
            return allowed(request, WorkDecision.NOT_A_WORK)
        if request.operation not in ("CREATE", "UPDATE"):
            return allowed(request, WorkDecision.IGNORED_OPERATION)
        if _being_deleted(request.object):
            return allowed(request, WorkDecision.DELETING)  # Karmada applies no manifest of a Work it deletes
        target = parse_work(request.object, request.namespace, request.old_object)
        if isinstance(target, NotForUs):
            return allowed(request, target.reason)
        now = self.clock()
        patch: list[Op] = []
        audits: list[ManifestAudit] = []
        for manifest in target.manifests:
            ref = manifest.binding
            name = f"{ref.namespace}/{ref.name}"
            started = time.perf_counter()
            cached = self._cached(ref.namespace, ref.name, request.operation, target.cluster, now)
            result = cached if cached is not None else self.lookup.lookup(ref.namespace, ref.name)
            lookup_ms = (time.perf_counter() - started) * 1000
            if isinstance(result, NotFound):
                LOOKUPS.labels("not-found").inc()
                audits.append(
                    ManifestAudit(name, WorkDecision.BINDING_NOT_FOUND, result.source, lookup_ms=lookup_ms)
                )
                continue
            if isinstance(result, Found):
                decided: Decided | LookupFailed = Decided(
                    relocation(result, target.cluster, self.contract, now), result.source
                )
            elif isinstance(result, LookupFailed):
                decided = _from_cache(result, request.operation, target.cluster, self.contract, now)
            else:
                decided = result  # the cache's own answer
            if isinstance(decided, LookupFailed):
                WORK_ERRORS.labels(WorkDecision.BINDING_UNAVAILABLE).inc()
                log.error(
                    "no fresh binding for Work %s/%s, refusing so that Karmada retries: %s",
                    target.work_namespace,
                    target.work_name,
                    decided.message,
                )
                return refused(request, target.cluster, name, decided.message)
            LOOKUPS.labels(decided.source).inc()
            ops = self._ops(manifest, decided.decision)
            patch += ops
            audits.append(_manifest_audit(name, decided.decision, ops, decided.source, lookup_ms))
        reason = next((m.explanation for m in reversed(audits) if m.explanation), "")
        audit = WorkAudit(reason=reason, cluster=target.cluster, manifests=tuple(audits))
        return patched(request, patch, overall([m.decision for m in audits]), audit)

    def _cached(
        self, namespace: str, name: str, operation: str, cluster: str, now: datetime
    ) -> Decided | None:
        """The cache's answer when it is one staleness cannot harm (:data:`FROM_CACHE`), else None."""
        found = self.lookup.cached(namespace, name)
        if found is None:
            return None
        decision = relocation(found, cluster, self.contract, now)
        if decision.outcome not in FROM_CACHE.get(operation, frozenset()):
            return None
        return Decided(decision, "cache")

    def _ops(self, manifest: FlinkManifest, decision: RelocationDecision) -> list[Op]:
        if decision.injection is None:
            return []
        injection = stable(decision.injection, manifest.old_metadata, self.contract)
        labels, annotations = injection_metadata(injection, self.contract)
        if decision.outcome is Relocation.RUNNING_ON_TARGET:
            labels = {}  # the restored job runs: the trigger labels go, the failover stays visible
        ops = manifest_ops(manifest, labels, annotations)
        if ops:
            INJECTIONS.labels(_injected_label(decision)).inc()
        return ops


def _injected_label(decision: RelocationDecision) -> str:
    if decision.outcome is Relocation.RUNNING_ON_TARGET:
        return "annotations-only"
    return "job-id" if decision.injection is not None and decision.injection.job_id else "failover-only"


def relocation(found: Found, cluster: str, contract: Contract, now: datetime) -> RelocationDecision:
    """The binding's news folded into its record, then the decision for a Work bound for ``cluster``."""
    record = observe(found.record, found.binding, now)
    return decide_relocation(record, found.binding, cluster, contract.job_id_labels, now)


def _from_cache(
    failed: LookupFailed, operation: str, cluster: str, contract: Contract, now: datetime
) -> Decided | LookupFailed:
    """Without a fresh binding, the cached one may answer only what staleness cannot turn into an empty
    start: an UPDATE (the object exists on the member, so initialSavepointPath no longer matters) of a
    Work whose job has run on that cluster since the workload arrived there."""
    cached = failed.cached
    if operation != "UPDATE" or cached is None:
        return failed
    decision = relocation(cached, cluster, contract, now)
    if decision.outcome is not Relocation.RUNNING_ON_TARGET:
        return failed
    return Decided(decision, "cache-fallback")


def _being_deleted(work: Mapping[str, Any]) -> bool:
    meta = work.get("metadata")
    return isinstance(meta, Mapping) and bool(meta.get("deletionTimestamp"))


def refused(request: AdmissionRequest, cluster: str, binding: str, problem: str) -> AdmissionResponse:
    message = (
        f"flink-failover cannot read ResourceBinding {binding} from the Karmada API server ({problem}); "
        f"refusing this Flink Work for {cluster} so that it is retried, rather than created without its "
        "failover labels"
    )
    audit = WorkAudit(reason=problem, cluster=cluster, binding=binding)
    return errored(request, message, WorkDecision.BINDING_UNAVAILABLE, audit, code=RETRY_CODE)


def stable(injection: Injection, old: Mapping[str, Any], contract: Contract) -> Injection:
    """A re-apply of the same failover keeps what the Work was first labelled with.

    The failover count names the failover. The first answer may come before Karmada stamped the
    eviction task, a later one after it; once the restored job runs, the job that ran before may be
    known only as the one it replaced on that cluster. The member object must show the same failover
    all along, so its source, time, reason and savepoint do not move until the count does.
    """
    annotations = str_map(old.get("annotations"))
    source = annotations.get(contract.key(keys.SOURCE_CLUSTER))
    if not source or annotations.get(contract.key(keys.FAILOVER_COUNT)) != str(injection.failover_count):
        return injection
    return replace(
        injection,
        source_cluster=source,
        failover_time=annotations.get(contract.key(keys.FAILOVER_TIME)) or injection.failover_time,
        reason=annotations.get(contract.key(keys.REASON)) or injection.reason,
        last_savepoint=annotations.get(contract.key(keys.LAST_SAVEPOINT), ""),
        started_from=annotations.get(contract.key(keys.STARTED_FROM), ""),
    )


def _manifest_audit(
    name: str, decision: RelocationDecision, ops: list[Op], source: str, lookup_ms: float
) -> ManifestAudit:
    injection = decision.injection
    return ManifestAudit(
        binding=name,
        decision=_manifest_decision(decision, ops),
        binding_from=source,
        patch_ops=len(ops),
        explanation=decision.explanation,
        job_id=injection.job_id if injection is not None else "",
        source_cluster=injection.source_cluster if injection is not None else "",
        failover_count=injection.failover_count if injection is not None else 0,
        lookup_ms=lookup_ms,
    )


def _manifest_decision(decision: RelocationDecision, ops: list[Op]) -> WorkDecision:
    if decision.injection is None or decision.outcome is Relocation.RUNNING_ON_TARGET:
        return WorkDecision(decision.outcome.value)
    if not ops:
        return WorkDecision.UNCHANGED  # already labelled (an idempotent UPDATE)
    return WorkDecision.INJECTED if decision.outcome is Relocation.RELOCATING else WorkDecision.FAILOVER_ONLY


def internal_error(request: AdmissionRequest, exc: Exception) -> AdmissionResponse:
    """An unexpected failure: a Flink Work is refused (Karmada retries it), any other Work is allowed."""
    problem = f"{type(exc).__name__}: {exc}"
    WORK_ERRORS.labels(WorkDecision.ERROR).inc()
    try:
        target = parse_work(request.object, request.namespace)
    except Exception:  # the failure may be in parsing itself: then it is not known to be a Flink Work
        target = NotForUs(WorkDecision.NO_MANIFESTS)
    flink = request.kind == "Work" and not isinstance(target, NotForUs)
    log.exception(
        "control-plane webhook failed on %s; %s",
        request.uid,
        "refusing" if flink else "allowing",
        exc_info=exc,
    )
    if request.kind != "Work" or isinstance(target, NotForUs):
        return allowed(request, WorkDecision.ERROR, WorkAudit(reason=problem))
    message = f"flink-failover could not decide on this Flink Work ({problem}); refused so it is retried"
    return errored(
        request, message, WorkDecision.ERROR, WorkAudit(reason=problem, cluster=target.cluster), RETRY_CODE
    )
