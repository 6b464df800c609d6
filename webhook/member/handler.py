"""The member role's admission handler: request -> restore decision -> admission answer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from prometheus_client import Counter

from webhook.common.admission import (
    AdmissionRequest,
    AdmissionResponse,
    Audit,
    allowed,
    denied,
    errored,
    patched,
)
from webhook.common.contract import HOLD, RELEASE_REQUESTED_BY
from webhook.common.events import NORMAL, WARNING, EventSink, NoEvents, Occurrence, Regarding
from webhook.common.flink import GROUP, KINDS, FlinkResource, job_path, with_session_cluster
from webhook.common.patch import object_ops
from webhook.fencing.gate import AdmittedSink, FencingGate
from webhook.fencing.lanes import Lanes
from webhook.member.firstcopy import no_failover_part
from webhook.member.identity import AgentIdentity
from webhook.member.keeper import Admission, KeeperSetup, Keeping, keeper_part
from webhook.policy.restore import RestorePolicy
from webhook.restore.decide import Parent, ParentLookup, decide_restore
from webhook.restore.outcome import RestoreDecision, RestoreOutcome, triggered
from webhook.restore.storage.backends import Deadline
from webhook.restore.storage.pool import LookupPool
from webhook.restore.storage.search import CheckpointStorage
from webhook.restore.updates import RELEASE_IGNORED, keep_child_held

log = logging.getLogger(__name__)

STORAGE_ERRORS = Counter(
    "flink_failover_storage_errors_total", "Checkpoint storage lookups that failed or timed out"
)


@dataclass(frozen=True)
class RestoreAudit(Audit):
    """What the member role logs about one answer."""

    job_id: str = ""
    carried: bool = False  # replayed from oldObject on UPDATE, storage untouched
    storage_error: bool = False  # the state is unknown because storage failed
    held: bool = False  # the job was held suspended at this admission
    storage: str = ""  # what was looked up (job directory, savepoint): names the storage that failed
    checkpoint_dir_from: str = ""  # where the checkpoint directory setting was read
    lineage: str = ""  # restored from the state the old job started from: whose, from where
    storage_rounds: int = 0  # storage requests waited for one after another (round trips)
    storage_requests: int = 0
    keeper: str = ""  # the lease keeper's part (member/keeper.py Kept), when it had one

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.keeper:
            out["keeper"] = self.keeper
        if self.job_id:
            out["jobId"] = self.job_id
        if self.carried:
            out["carried"] = True
        if self.storage_error:
            out["storageError"] = True
        if self.storage:
            out["storage"] = self.storage
        if self.checkpoint_dir_from:
            out["checkpointDirFrom"] = self.checkpoint_dir_from
        if self.lineage:
            out["lineage"] = self.lineage
        if self.storage_requests:
            out["storageRoundTrips"] = self.storage_rounds
            out["storageRequests"] = self.storage_requests
        return out

    def warns(self) -> bool:
        return self.storage_error or self.held


# (namespace, name, seconds left) -> a parent (session cluster, FlinkBlueGreenDeployment); built at the edge.
ParentSource = Callable[[str, str, float], Parent]


@dataclass
class MemberHandler:
    policy: RestorePolicy
    storage: CheckpointStorage
    session_clusters: ParentSource | None = None  # without it: the session job's own settings
    # Offline (``review``): each lookup on a daemon thread (restore/storage/pool.py).
    daemon_lookups: bool = False
    fencing: FencingGate | None = None  # with --cluster: a failover admission fences, a restore may be held
    # Who may release a held job with the agent's markers (the member role's own identity); unknown:
    # nobody (fail closed).
    identity: AgentIdentity = field(default_factory=AgentIdentity)
    # Kubernetes Events of the decisions (with the member cluster's API; none offline).
    events: EventSink = field(default_factory=NoEvents)
    # (namespace, name, seconds left) -> a FlinkBlueGreenDeployment (its hold holds its children); with
    # fencing, read from the member cluster's API.
    blue_green_parents: ParentSource | None = None
    # With fencing: the product's image, this member's name and its Kubernetes version, for the lease
    # keeper each fenced FlinkDeployment gets (member/keeper.py); None: no keeper.
    keeper: Callable[[], KeeperSetup] | None = None

    def __post_init__(self) -> None:
        self._lookups = LookupPool(daemon=self.daemon_lookups)  # restore/storage/pool.py

    @classmethod
    def from_policy(
        cls,
        policy: RestorePolicy,
        session_clusters: ParentSource | None = None,
        daemon_lookups: bool = False,
        cluster: str = "",
        agent_users: frozenset[str] | AgentIdentity | None = None,
        events: EventSink | None = None,
        read_only: bool = False,
        vouch: Callable[[str], str | None] | None = None,
        lanes: Lanes | None = None,
        blue_green_parents: ParentSource | None = None,
        keeper: Callable[[], KeeperSetup] | None = None,
        admitted: AdmittedSink | None = None,
    ) -> MemberHandler:
        """``cluster``: this member's name in Karmada, when its fencing agent runs (else no fencing);
        ``agent_users``: the identities the agent's release markers are accepted from (none known: no
        one's); ``read_only`` (``review --cluster``): the records are read, never written, and the
        answer is the server's; ``vouch(kind)``: why this replica's agent cannot fence a restore of that
        kind now (None: it can); ``lanes``: the storage lanes shared with the agent;
        ``blue_green_parents``: reads a child's FlinkBlueGreenDeployment (its hold holds the child);
        ``keeper``: what the lease keeper's sidecar needs beside the policy (used with fencing only);
        ``admitted``: each heartbeat written at an admission, looked at again (``member/followup.py``)."""
        storage = CheckpointStorage(policy.storage_options)
        if not daemon_lookups:
            storage.warm(policy.allowed_schemes)  # each worker's clients before its first admission
        gate = None
        if cluster and policy.fencing.enabled:
            from webhook.fencing.records import FencingStore

            store = FencingStore(storage, cluster, lanes)
            if not daemon_lookups and policy.default_checkpoint_dir:
                store.warm(policy.default_checkpoint_dir)  # the heartbeats' own client, as the lookups'
            gate = FencingGate(cluster, policy, store, read_only, vouch, admitted)
        identity = agent_users if isinstance(agent_users, AgentIdentity) else AgentIdentity.fixed(agent_users)
        return cls(
            policy,
            storage,
            session_clusters,
            daemon_lookups,
            gate,
            identity,
            events or NoEvents(),
            blue_green_parents,
            keeper if gate is not None else None,
        )

    def __call__(self, request: AdmissionRequest) -> AdmissionResponse:
        deadline = Deadline(self.policy.deadline_seconds * 0.9)  # leave room to answer
        not_ours = _not_ours(request)
        if not_ours:
            return allowed(request, RestoreOutcome.SKIP, RestoreAudit(reason=not_ours))
        resource = FlinkResource.from_object(request.object)
        if not resource.namespace:  # the request names it when the object does not (yet)
            resource = replace(resource, namespace=request.namespace)
        old = FlinkResource.from_object(request.old_object) if request.old_object is not None else None
        clusters: ParentLookup | None = None
        source = self.session_clusters
        session: Parent | None = None
        if source is not None:
            read: dict[tuple[str, str], Parent] = {}

            def clusters(namespace: str, name: str) -> Parent:
                if (namespace, name) not in read:  # once per admission: the fence and the restore share it
                    read[(namespace, name)] = source(namespace, name, max(deadline.remaining(), 0.001))
                return read[(namespace, name)]

            if (
                resource.kind == "FlinkSessionJob"
                and resource.deployment_name
                and request.operation == "CREATE"
            ):
                session = clusters(resource.namespace, resource.deployment_name)

        known = self.identity.current()
        from_agent = known.accepts(request.user)
        # A child is judged by the parent it had (an UPDATE that drops its ownerReferences is one).
        child_of = (
            old.blue_green_parent if old is not None and old.blue_green_parent else resource.blue_green_parent
        )
        if child_of and not triggered(resource, self.policy):
            kept = self._child_held(request, resource, old, from_agent, deadline)
            if kept is not None:
                if not request.dry_run:
                    for occurrence in admission_events(request, kept, self.policy):
                        self.events.record(occurrence)
                return respond(request, kept)
            # The operator creates it from its parent's template, which this webhook restored: it
            # starts from the template's initialSavepointPath (docs/flink.md "FlinkBlueGreenDeployment").
            parent = resource.blue_green_parent
            reason = f"created by FlinkBlueGreenDeployment {parent}: restored through its template"
            audit = RestoreAudit(reason=reason, path=resource.initial_savepoint_path)
            return allowed(request, RestoreOutcome.SKIP, audit)
        pending = None
        # Fenced where its state lives: a session job's directories may be its session cluster's.
        fenced = with_session_cluster(resource, session.resource if session is not None else None)
        if self.fencing is not None and _fences(request, resource, self.policy):
            # beside the lookup, on the storage's lane
            pending = self.fencing.begin(
                fenced, request.dry_run, self._lookups.executor, deadline.remaining()
            )
        decision = decide_restore(
            request.operation,
            resource,
            old,
            self.policy,
            lambda q: self._lookups.lookup(self.storage.snapshots, q, deadline, self.policy.deadline_seconds),
            clusters,
            requester=request.user,
            from_agent=from_agent,
            agent_unknown="" if known.users is not None else known.source,
        )
        if decision.storage_error:
            STORAGE_ERRORS.inc()
        if self.fencing is not None and pending is not None and decision.outcome is RestoreOutcome.RESTORED:
            decision = self.fencing.admit(fenced, decision, pending, deadline.remaining())
        keeping = None
        if self.keeper is not None and self.fencing is not None:
            setup = self.keeper()
            admission = Admission(
                operation=request.operation,
                obj=request.object,
                resource=resource,
                old_obj=request.old_object,
                old=old,
                decision=decision,
                policy=self.policy,
                setup=setup,
            )
            # a restore's or a hold's keeper, else a first copy's or a session cluster's (the chart's
            # first-copy entry)
            keeping = keeper_part(admission) or no_failover_part(admission)
        if not request.dry_run:
            for occurrence in admission_events(request, decision, self.policy, keeping):
                self.events.record(occurrence)  # queued: never waits for the API server
        return respond(request, decision, keeping)

    def _child_held(
        self,
        request: AdmissionRequest,
        resource: FlinkResource,
        old: FlinkResource | None,
        from_agent: bool,
        deadline: Deadline,
    ) -> RestoreDecision | None:
        """A blue/green child started by anyone but the agent while its parent is held stays suspended
        (None: it is not held). Holds exist only with fencing; the parent is read from this cluster's
        API, and one that cannot be read holds the child (fail closed)."""
        if self.fencing is None or request.operation != "UPDATE" or old is None or from_agent:
            return None
        moved = bool(old.blue_green_parent) and resource.blue_green_parent != old.blue_green_parent
        if old.state != "suspended" or (resource.state == "suspended" and not moved):
            return None  # neither a start nor a move away from its parent: nothing to read
        name = old.blue_green_parent or resource.blue_green_parent
        if self.blue_green_parents is None:
            found = Parent(None, "this member role does not read its cluster's API")
        else:
            found = self.blue_green_parents(resource.namespace, name, max(deadline.remaining(), 0.001))
        return keep_child_held(
            resource, old, found.resource, found.error, self.policy, request.user, from_agent
        )

    def close(self) -> None:
        self._lookups.close()


def _fences(request: AdmissionRequest, resource: FlinkResource, policy: RestorePolicy) -> bool:
    """A failover CREATE of a job: its admission writes the fence (whatever the restore then finds, the
    workload now belongs here, and a stale copy elsewhere must stop)."""
    return (
        request.operation == "CREATE"
        and resource.job is not None  # a FlinkBlueGreenDeployment's: its template's (held there)
        and not resource.deleting
        and triggered(resource, policy)
    )


def _not_ours(request: AdmissionRequest) -> str:
    """Why this request is not one the member role changes ("" when it is)."""
    if not request.kind:
        return "request.kind missing"
    if request.group != GROUP or request.kind not in KINDS:
        return (
            "not a FlinkDeployment, FlinkSessionJob or FlinkBlueGreenDeployment "
            f"({request.group or 'core'}/{request.kind})"
        )
    if request.sub_resource:
        return f"subresource {request.sub_resource}"
    if request.operation not in ("CREATE", "UPDATE"):
        return f"operation {request.operation or '(missing)'} is never changed"
    return ""


def admission_events(
    request: AdmissionRequest,
    decision: RestoreDecision,
    policy: RestorePolicy,
    keeping: Keeping | None = None,
) -> list[Occurrence]:
    """The Events an admission's decision is worth (pure). A CREATE's object has no uid yet, so its
    Events show in ``kubectl get events`` but not in ``describe``; the agent's later Events on the
    same decision carry the uid."""
    obj = request.old_object if request.operation == "UPDATE" and request.old_object else request.object
    regarding = Regarding.of({**obj, "kind": request.kind}, request.kind)
    if not regarding.namespace:
        regarding = replace(regarding, namespace=request.namespace)
    found: list[Occurrence] = []
    outcome = decision.outcome
    if not decision.carried:
        if outcome is RestoreOutcome.RESTORED:
            found.append(
                Occurrence(regarding, NORMAL, "Restored", "Restore", f"restores from {decision.path}")
            )
            rewound = next((w for w in decision.warnings if w.startswith("rewound: ")), "")
            if rewound:  # policy onUnloadable: older: say how much newer state was left behind
                found.append(Occurrence(regarding, WARNING, "Rewound", "Restore", rewound))
        elif outcome is RestoreOutcome.HELD:
            hold = decision.annotations.get(policy.key(HOLD)) or decision.reason
            found.append(
                Occurrence(regarding, WARNING, "Held", "Hold", f"held until the old copy stops: {hold}")
            )
        elif outcome is RestoreOutcome.SUSPENDED:
            found.append(Occurrence(regarding, WARNING, "NothingToRestore", "Restore", decision.reason))
        elif outcome is RestoreOutcome.DENIED:
            found.append(Occurrence(regarding, WARNING, "RestoreRefused", "Restore", decision.reason))
    elif outcome in (RestoreOutcome.RESTORED, RestoreOutcome.STATELESS) and decision.reason.startswith(
        "started "
    ):
        # a person's way out of a hold for want of state (restore/updates.py _suspended), recorded
        found.append(Occurrence(regarding, NORMAL, "StartedByHand", "Release", decision.reason))
    for warning in decision.warnings:
        if RELEASE_IGNORED in warning:
            found.append(Occurrence(regarding, WARNING, "ReleaseIgnored", "Release", warning))
    asked = decision.annotations.get(policy.key(RELEASE_REQUESTED_BY), "")
    if asked:
        note = f"release asked by {asked}: the fencing agent starts the job at its next poll"
        found.append(Occurrence(regarding, NORMAL, "ReleaseRequested", "Release", note))
    for event in keeping.events if keeping is not None else ():
        found.append(Occurrence(regarding, event.type, event.reason, "Keeper", event.note))
    return found


def respond(
    request: AdmissionRequest, decision: RestoreDecision, keeping: Keeping | None = None
) -> AdmissionResponse:
    """Turn a decision, and the lease keeper's part of it, into the admission answer (the only place
    that does)."""
    audit = RestoreAudit(
        path=decision.path,
        reason=decision.reason,
        job_id=decision.job_id,
        carried=decision.carried,
        storage_error=decision.storage_error,
        # Held for want of state, or held for fencing until the old copy stops: both warn.
        held=decision.outcome in (RestoreOutcome.SUSPENDED, RestoreOutcome.HELD) and not decision.carried,
        storage=decision.storage,
        checkpoint_dir_from=decision.checkpoint_dir_from,
        lineage=decision.lineage,
        storage_rounds=decision.storage_rounds,
        storage_requests=decision.storage_requests,
        keeper=keeping.kept.value if keeping is not None else "",
    )
    if keeping is not None and keeping.refused:
        return denied(request, keeping.refused, RestoreOutcome.DENIED, audit)
    if decision.outcome is RestoreOutcome.DENIED:
        if decision.storage_error:
            # Not a permission problem: the state could not be read now; 503 says "try again".
            return errored(request, decision.reason, RestoreOutcome.DENIED, audit, code=503)
        return denied(request, decision.reason, RestoreOutcome.DENIED, audit)
    ops = object_ops(
        request.object, decision.spec_job, decision.annotations, decision.labels, job_path(request.kind)
    )
    warnings = decision.warnings
    if keeping is not None:
        ops += keeping.ops
        warnings += keeping.warnings
    answer = decision.outcome
    if decision.carried:
        answer = RestoreOutcome.CARRIED if ops else RestoreOutcome.UNCHANGED
    return patched(request, ops, answer, audit, warnings)


def internal_error(request: AdmissionRequest, exc: Exception) -> AdmissionResponse:
    """An unexpected failure denies, so a failed-over job never starts empty (Karmada retries)."""
    log.exception("internal error handling %s", request.uid)
    message = f"flink-failover internal error: {type(exc).__name__}; the request will be retried"
    return errored(request, message, RestoreOutcome.ERROR)
