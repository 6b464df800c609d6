"""The fencing agent: one loop per member cluster, beside the webhook. It decides nothing itself.

Every poll it lists each Flink kind of the cluster on its own, reads each copy's ownership records
(under a deadline, on its storage's own lane) and hands copy, records and times to ``decide.decide``,
which returns a plan of effects; the agent executes them. A copy whose storage has not answered the
previous poll's calls yet is decided without records, so a hung bucket never delays another bucket's
heartbeats, and a holder that cannot renew still steps down on time (the step-down is an API call).

After every poll it reports its health (``Health``): the member role is not ready while the agent
cannot reach its API server, cannot list any Flink kind, or has not completed a poll within a lease.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from webhook.common.events import NORMAL, WARNING, EventSink, NoEvents, Occurrence, Regarding
from webhook.common.flink import BLUE_GREEN
from webhook.common.kubeclient import ApiFailure
from webhook.common.paths import StoragePath
from webhook.member.fencing import copies, metrics
from webhook.member.fencing.copies import Copy, CopyState
from webhook.member.fencing.decide import (
    Acknowledge,
    Beat,
    Effect,
    MarkStopping,
    Plan,
    Release,
    Resume,
    RewriteHold,
    StepDown,
    Stop,
    StorageHold,
    Supersede,
    Times,
    Unreadable,
    WriteFence,
    decide,
)
from webhook.member.fencing.flinkapi import OPTIONAL_KINDS, PLURALS
from webhook.member.fencing.lanes import Lanes
from webhook.member.fencing.protocol import Ownership, ReleaseCause
from webhook.member.fencing.records import FencingStore, Workload, fence_body
from webhook.member.policy import RestorePolicy
from webhook.member.restore import (
    RestoreOutcome,
    SnapshotQuery,
    Snapshots,
    StorageError,
    checked_as,
    choose,
    decide_restore,
    newest,
)
from webhook.member.storage import CheckpointStorage, Deadline

log = logging.getLogger(__name__)

KINDS = tuple(PLURALS)


class MemberApi(Protocol):
    def list_kind(self, kind: str) -> list[Mapping[str, Any]] | ApiFailure: ...

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | ApiFailure | None: ...

    def patch(
        self, kind: str, namespace: str, name: str, body: Mapping[str, Any]
    ) -> Mapping[str, Any] | ApiFailure: ...


@dataclass(frozen=True)
class Step:
    """What the agent did with one object in one poll (the log line, and what tests read)."""

    workload: Workload
    action: str  # a Plan's action, or error | pending
    detail: str = ""


@dataclass(frozen=True)
class Health:
    """The agent's state, for ``/readyz`` and the metrics; written after every poll."""

    ready: bool
    reason: str  # why not ready ("" when ready)
    polled_at: float  # wall time of the last poll that listed at least one kind (0: none yet)
    kinds: Mapping[str, str] = field(default_factory=dict)  # kind -> "ok", or why it cannot be listed


class FencingAgent:
    def __init__(
        self,
        cluster: str,
        policy: RestorePolicy,
        api: MemberApi,
        storage: CheckpointStorage,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        workers: int = 8,
        on_health: Callable[[Health], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        events: EventSink | None = None,
    ) -> None:
        self.cluster = cluster
        self.policy = policy
        self.api = api
        self.storage = storage
        self.lanes = Lanes(policy.fencing.call_timeout)
        self.store = FencingStore(storage, cluster, self.lanes)
        self.clock = clock
        self.monotonic = monotonic
        self.on_health = on_health
        self.events: EventSink = events or NoEvents()
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="fencing")
        self._lock = threading.Lock()  # the maps below are shared by the poll's worker threads
        self._beating: dict[Workload, StoragePath] = {}
        self._renewed: dict[Workload, float] = {}  # monotonic start of the last successful renewal
        self._hold_written: dict[Workload, float] = {}
        self._held_since: dict[Workload, float] = {}
        self._clocks: dict[StoragePath, datetime] = {}  # storage time per storage, once per poll
        self._inflight: dict[Workload, concurrent.futures.Future[Step]] = {}
        self._urgent: set[Workload] = set()  # stopping or held at the last poll: looked at between polls
        self._kinds: dict[str, str] = {}
        self._polled_at = 0.0

    def run(self, stop: threading.Event) -> None:
        """A full poll every ``pollSeconds``; between two, the copies a failover waits on (stale copies
        whose operator has not reported them stopped, held restores) are looked at again every fifth of
        a poll, so a new job starts within about one poll of the old job's reported stop, not two."""
        log.info("fencing agent started", extra={"fields": {"cluster": self.cluster}})
        poll = self.policy.fencing.poll_seconds
        quick = max(0.2, poll / 5)
        try:
            while not stop.is_set():
                started = self.monotonic()
                try:
                    self.tick()
                except Exception:  # one bad poll must not end fencing for the cluster
                    log.exception("fencing poll failed")
                while not stop.wait(max(0.0, min(quick, started + poll - self.monotonic()))):
                    if self.monotonic() - started >= poll:
                        break
                    try:
                        self.recheck()
                    except Exception:
                        log.exception("fencing recheck failed")
        finally:
            self.close()

    def recheck(self) -> list[Step]:
        """Look again at the copies the last poll found stopping or held (a GET each, then their step)."""
        with self._lock:
            urgent = list(self._urgent)
        steps = []
        for workload in urgent:
            found = self.api.get(workload.kind, workload.namespace, workload.name)
            if found is None or isinstance(found, ApiFailure):
                continue
            copy = copies.read_copy({**found, "kind": workload.kind}, self.policy)
            if copy.workload.kind == BLUE_GREEN and copy.target is None:
                continue  # a held parent needs its children's listing: the next poll
            if copy.state not in _URGENT and copy.state is not CopyState.FENCED:
                continue
            previous = self._inflight.get(workload)
            if previous is not None and not previous.done():
                continue
            started = self.monotonic()
            self._remember(copy, started)
            future = self._pool.submit(self._step, copy, started)
            self._inflight[workload] = future
            try:
                step = future.result(timeout=self.policy.fencing.poll_seconds)
            except concurrent.futures.TimeoutError:
                continue
            steps.append(step)
            if step.action not in ("stopping", "held", "waiting-for-operator", "error", "pending"):
                with self._lock:
                    self._urgent.discard(workload)  # done waiting: the next poll looks again
        self._log([s for s in steps if s.action not in ("held", "waiting-for-operator")])  # said at the poll
        return steps

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.lanes.close()

    # --- one poll ------------------------------------------------------------------------------------
    def tick(self) -> list[Step]:
        started = self.monotonic()
        found = self._list()
        if found is None:
            self._report(started)
            return []
        with self._lock:
            self._clocks.clear()
        steps: list[Step] = []
        submitted: dict[Workload, concurrent.futures.Future[Step]] = {}
        for copy in found:
            self._remember(copy, started)
            previous = self._inflight.get(copy.patched)
            if previous is not None and not previous.done():
                # Its storage has not answered last poll's calls: decide without records (a step-down
                # needs only the API), and leave the storage alone.
                steps.append(
                    self._execute(
                        copy,
                        self._plan(
                            copy, Unreadable("storage calls of the last poll still unanswered"), started
                        ),
                    )
                )
                continue
            future = self._pool.submit(self._step, copy, started)
            self._inflight[copy.patched] = submitted[copy.patched] = future
        concurrent.futures.wait(submitted.values(), timeout=self.policy.fencing.poll_seconds)
        for workload, future in submitted.items():
            steps.append(
                future.result()
                if future.done()
                else Step(workload, "pending", "storage calls still unanswered")
            )
        present = {c.patched for c in found}
        self._inflight = {w: f for w, f in self._inflight.items() if w in present and not f.done()}
        self._forget_gone({c.workload for c in found if c.state in _HEARTBEATING})
        self._observe(found, steps)
        self._report(started)
        with self._lock:
            self._urgent = {c.patched for c in found if c.state in _URGENT} | {
                s.workload for s in steps if s.action in ("stopping", "held")
            }
        return steps

    def _list(self) -> list[Copy] | None:
        """Each kind on its own; None when no kind could be listed."""
        objects: list[Mapping[str, Any]] = []
        kinds: dict[str, str] = {}
        for kind in KINDS:
            listed = self.api.list_kind(kind)
            if isinstance(listed, ApiFailure):
                metrics.API_ERRORS.labels("list").inc()
                kinds[kind] = _list_problem(kind, listed)
                continue
            kinds[kind] = "ok"
            objects += listed
        for kind, state in kinds.items():
            if self._kinds.get(kind) != state:  # said once, when it changes
                if state == "ok":
                    log.info("fencing watches %s", kind, extra={"fields": {"cluster": self.cluster}})
                else:
                    level = logging.INFO if kind in OPTIONAL_KINDS and "404" in state else logging.ERROR
                    log.log(
                        level, "fencing cannot watch %s: %s", kind, state, extra={"fields": {"kind": kind}}
                    )
            metrics.KIND_LISTED.labels(kind).set(1 if state == "ok" else 0)
        self._kinds = kinds
        if not any(state == "ok" for state in kinds.values()):
            return None
        found = [copies.read_copy(obj, self.policy) for obj in objects]
        return with_children(found)

    def _remember(self, copy: Copy, now: float) -> None:
        with self._lock:
            if copy.state in (CopyState.RUNNING, CopyState.STEPPED_DOWN):
                self._renewed.setdefault(copy.patched, now)  # first seen: a whole deadline from here
            else:
                self._renewed.pop(copy.patched, None)
            if copy.state is CopyState.HELD:
                self._held_since.setdefault(copy.patched, now)
            else:
                self._held_since.pop(copy.patched, None)
                self._hold_written.pop(copy.patched, None)

    def _step(self, copy: Copy, started: float) -> Step:
        if copy.folder is None or copy.clock is None or copy.state is CopyState.IDLE:
            return Step(copy.patched, "skipped", "no checkpoint directory" if copy.folder is None else "")
        records: Ownership | Unreadable
        storage_now = None
        try:
            if copy.state is CopyState.HELD:
                storage_now = self._storage_now(copy.clock)
            records = self.store.list(copy.folder).ownership
        except StorageError as exc:
            metrics.STORAGE_ERRORS.labels("agent").inc()
            records = Unreadable(str(exc))
        return self._execute(copy, self._plan(copy, records, started, storage_now))

    def _plan(
        self, copy: Copy, records: Ownership | Unreadable, started: float, storage_now: datetime | None = None
    ) -> Plan:
        with self._lock:
            renewed = self._renewed.get(copy.patched, started)
            written = self._hold_written.get(copy.patched)
        times = Times(self.monotonic(), renewed, storage_now, written)
        return decide(self.cluster, copy, records, times, self.policy.fencing)

    # --- executing a plan --------------------------------------------------------------------------
    def _execute(self, copy: Copy, plan: Plan) -> Step:
        problems = []
        for chain in plan.chains:
            for effect in chain:
                problem = self._apply(copy, effect)
                if problem is not None:
                    problems.append(problem)
                    break  # the rest of this chain depends on it; other chains do not
        if problems:
            return Step(copy.patched, "error", f"{plan.action}: {'; '.join(problems)}")
        return Step(copy.patched, plan.action, plan.detail)

    def _apply(self, copy: Copy, effect: Effect) -> str | None:
        """Carry out one effect; None on success, else what went wrong."""
        folder = copy.folder
        try:
            if isinstance(effect, StepDown):
                patch = copies.step_down_patch(copy, effect.reason, self.policy, self._now())
                note = (
                    f"{effect.reason}: suspended without a savepoint; resumed from its newest checkpoint "
                    "if nobody takes over meanwhile"
                )
                problem = self._patched(copy, patch, _step_down_done)
                return self._told(problem, copy, WARNING, "SteppedDown", "StepDown", note)
            if isinstance(effect, Stop):
                fence = effect.fence
                problem = self._patched(
                    copy, copies.stop_patch(copy, fence, self.policy, self._now()), _stop_done
                )
                note = (
                    f"stale copy: the workload was restored on {fence.owner} at epoch {fence.epoch}; asked "
                    "the operator to stop it without a savepoint; acknowledged once it reports it stopped"
                )
                return self._told(problem, copy, WARNING, "Stopping", "Fence", note)
            if isinstance(effect, Supersede):
                fence = effect.fence
                patch = copies.superseded_patch(fence, self.policy, self._now())
                problem = self._patched(copy, patch, _superseded_done)
                note = f"superseded by the restore on {fence.owner} at epoch {fence.epoch}: stays suspended"
                return self._told(problem, copy, WARNING, "Superseded", "Fence", note)
            if isinstance(effect, RewriteHold):
                text = copies.hold_text(effect.verdict, copy.epoch, self.clock())
                problem = self._patched(copy, copies.hold_patch(text, self.policy))
                if problem is None:
                    with self._lock:
                        self._hold_written[copy.patched] = self.monotonic()
                return self._told(
                    problem, copy, WARNING, "Held", "Hold", f"held until the old copy stops: {text}"
                )
            if isinstance(effect, StorageHold):
                text = copies.storage_text(copy.epoch, effect.problem)
                if text == copy.hold:
                    return None
                problem = self._patched(copy, copies.hold_patch(text, self.policy))
                return self._told(problem, copy, WARNING, "StorageTrouble", "Hold", f"held: {text}")
            if isinstance(effect, Release):
                return self._release(copy, effect.cause)
            if isinstance(effect, Resume):
                return self._resume(copy)
            if folder is None:
                return "no checkpoint directory"
            if isinstance(effect, Beat):
                self._beat(copy, folder)
                return None
            if isinstance(effect, WriteFence):
                self.store.fence(
                    folder, effect.epoch, fence_body(copy.workload, self.cluster, effect.epoch, self._now())
                )
                metrics.FENCES.inc()
                return None
            if isinstance(effect, MarkStopping):
                self.store.stopping(folder, effect.epoch, copy.operator.detail)
                return None
            if isinstance(effect, Acknowledge):
                self.store.ack(folder, effect.epoch, copy.operator.detail)
                with self._lock:
                    self._beating.pop(copy.workload, None)
                metrics.ACKS.inc()
                status = copy.operator.detail
                note = (
                    f"the operator reports the job stopped ({status}); acknowledged for epoch {effect.epoch}"
                )
                self._event(copy, NORMAL, "Stopped", "Fence", note)
                log.warning(
                    "stale copy stopped by its operator; acknowledged",
                    extra={
                        "fields": {
                            "object": str(copy.workload),
                            "epoch": effect.epoch,
                            "status": copy.operator.detail,
                        }
                    },
                )
                return None
        except StorageError as exc:
            metrics.STORAGE_ERRORS.labels("agent").inc()
            return f"storage: {exc}"
        raise TypeError(f"unknown effect {effect!r}")  # pragma: no cover - decide() returns only the above

    def _beat(self, copy: Copy, folder: StoragePath) -> None:
        start = self.monotonic()
        body = {
            "cluster": self.cluster,
            "epoch": copy.epoch,
            "jobId": copy.job_id,
            "workload": str(copy.workload),
            "written": self._now(),
        }
        self.store.beat(folder, body)
        with self._lock:
            self._beating[copy.workload] = folder
            self._renewed[copy.patched] = start  # the renewal counts from when it started

    def _forget_gone(self, heartbeating: set[Workload]) -> None:
        """A copy that no longer runs here (deleted, suspended by hand) stops heartbeating at once."""
        with self._lock:
            gone = [(w, f) for w, f in self._beating.items() if w not in heartbeating]
            for workload, _ in gone:
                self._beating.pop(workload, None)
        for workload, folder in gone:
            try:
                self.store.forget(folder)
            except StorageError as exc:
                log.warning(
                    "cannot remove heartbeat", extra={"fields": {"object": str(workload), "error": str(exc)}}
                )

    def _storage_now(self, clock: StoragePath) -> datetime:
        """The storage's time, learnt once per poll per storage before any listing of this poll: ages
        measured from it are never longer than they are (a later "now" could only release sooner)."""
        with self._lock:
            known = self._clocks.get(clock)
        if known is None:
            known = self.store.clock(clock)
            with self._lock:
                known = self._clocks.setdefault(clock, known)
        return known

    def _release(self, copy: Copy, cause: ReleaseCause) -> str | None:
        try:
            path = self._newest_path(copy)
        except StorageError as exc:
            if cause is not ReleaseCause.STORAGE_ERROR:
                metrics.STORAGE_ERRORS.labels("agent").inc()
                text = copies.storage_text(copy.epoch, f"resolving the newest checkpoint: {exc}")
                self._patched(copy, copies.hold_patch(text, self.policy))
                return f"storage: {exc}"
            path = ""
        asked_by = copies.release_asked_by(copy, self.policy) if cause is ReleaseCause.MANUAL else ""
        patch = copies.release_patch(path, cause, self.policy, self._now(), asked_by)
        if copy.workload.kind == BLUE_GREEN:
            for child in copy.children:  # the job runs in them; the template stays as it is
                target = replace(copy, target=Workload("FlinkDeployment", copy.workload.namespace, child))
                problem = self._patched(target, copies.child_release_patch(path))
                if problem is not None:
                    return problem
            patch = {"metadata": patch["metadata"]}
        problem = self._patched(copy, patch)
        if problem is None:
            metrics.RELEASES.labels(cause.value).inc()
            by = f", asked by {asked_by or 'unknown'}" if cause is ReleaseCause.MANUAL else ""
            note = f"released ({cause.value}{by}): starts from {path or 'the path it was admitted with'}"
            self._event(copy, NORMAL, "Released", "Release", note)
            fields = {"object": str(copy.workload), "cause": cause.value, "path": path}
            if cause is ReleaseCause.MANUAL:
                fields["asked-by"] = asked_by or "unknown"
            log.warning("held restore released", extra={"fields": fields})
        return problem

    def _newest_path(self, copy: Copy) -> str:
        """Resolve again: the stale copy may have completed newer checkpoints while it ran. "" keeps
        the path the webhook chose (nothing restorable now, or no failover label left to resolve by)."""
        deadline = Deadline(self.policy.fencing.call_timeout)

        def lookup(query: SnapshotQuery) -> Snapshots:
            return self._snapshots(query, deadline)

        decision = decide_restore("CREATE", copy.resource, None, self.policy, lookup)
        if decision.storage_error:
            raise StorageError(decision.reason)
        return decision.path if decision.outcome is RestoreOutcome.RESTORED else ""

    def _snapshots(self, query: SnapshotQuery, deadline: Deadline) -> Snapshots:
        where = query.job_dir or query.savepoint or query.checkpoint_dir
        if where is None:
            return self.storage.snapshots(query, deadline)
        return self.lanes.call(where, f"resolving {where}", lambda: self.storage.snapshots(query, deadline))

    def _resume(self, copy: Copy) -> str | None:
        """A stepped-down copy starts again from its own job's newest restorable snapshot (its newest
        complete checkpoint, or its own newer savepoint, ordered as a restore orders them)."""
        root = copies.checkpoint_dir_of(copy.resource, self.policy)
        path = skipped = ""
        if root is not None and copy.job_id:
            savepoints = copies.savepoint_dir_of(copy.resource, self.policy)
            query = SnapshotQuery(root.child(copy.job_id), None, root, savepoints, copy.job_id)
            found = self._snapshots(
                checked_as(query, self.policy), Deadline(self.policy.fencing.call_timeout)
            )
            chosen = choose(found.checkpoint, newest(found.listed), self.policy.prefer)
            path = str(chosen.path) if chosen is not None else ""
            skipped = "".join(f"; skipped {why}" for why in (*found.rejected, found.unchecked) if why)
        problem = self._patched(copy, copies.resume_patch(copy, path, self.policy, self._now()))
        if problem is None:
            metrics.RESUMES.inc()
            source = path or "its own HA data or last savepoint"
            note = f"the storage answers again and nobody took over: resumed from {source}{skipped}"
            self._event(copy, NORMAL, "Resumed", "Resume", note)
            log.warning(
                "stepped-down copy resumed",
                extra={
                    "fields": {
                        "object": str(copy.workload),
                        "path": path or "(operator's own state)",
                        "skipped": skipped.removeprefix("; skipped "),
                    }
                },
            )
        return problem

    def _event(self, copy: Copy, kind: str, reason: str, action: str, note: str) -> None:
        w = copy.patched
        regarding = Regarding(copy.api_version, w.kind, w.namespace, w.name, copy.uid)
        self.events.record(Occurrence(regarding, kind, reason, action, note))

    def _told(
        self, problem: str | None, copy: Copy, kind: str, reason: str, action: str, note: str
    ) -> str | None:
        """An effect's outcome; when it succeeded, also an Event on the object."""
        if problem is None:
            self._event(copy, kind, reason, action, note)
        return problem

    def _patched(
        self,
        copy: Copy,
        body: Mapping[str, Any],
        done: Callable[[Copy, Mapping[str, Any]], None] | None = None,
    ) -> str | None:
        """None on success, else the error (counted)."""
        w = copy.patched
        answer = self.api.patch(w.kind, w.namespace, w.name, body)
        if isinstance(answer, ApiFailure):
            metrics.API_ERRORS.labels("patch").inc()
            return answer.message
        if done is not None:
            done(copy, body)
        return None

    # --- what the poll shows -------------------------------------------------------------------------
    def _observe(self, found: list[Copy], steps: list[Step]) -> None:
        now = self.monotonic()
        with self._lock:
            oldest = max((now - since for since in self._held_since.values()), default=0.0)
        metrics.HELD.set(sum(1 for s in steps if s.action == "held"))
        metrics.OLDEST_HOLD.set(oldest)
        metrics.WAITING_FOR_OPERATOR.set(sum(1 for c in found if c.state is CopyState.STOPPING))
        self._tell(found, steps)
        self._log(steps)

    def _tell(self, found: list[Copy], steps: list[Step]) -> None:
        """Events for the states a poll finds rather than causes (aggregated into one series each)."""
        by_workload = {c.patched: c for c in found}
        for step in steps:
            copy = by_workload.get(step.workload)
            if copy is None:
                continue
            if step.action == "waiting-for-operator":
                self._event(copy, NORMAL, "WaitingForOperator", "Fence", step.detail)
            elif step.action in ("error", "pending") and "storage" in step.detail:
                self._event(copy, WARNING, "StorageTrouble", "Heartbeat", step.detail[:300])

    def _log(self, steps: list[Step]) -> None:
        for step in steps:
            if step.action not in ("heartbeat", "skipped", "fenced"):
                level = (
                    logging.WARNING if step.action in ("error", "pending", "stepped-down") else logging.INFO
                )
                log.log(
                    level,
                    "fencing %s",
                    step.action,
                    extra={"fields": {"object": str(step.workload), "detail": step.detail}},
                )

    def _report(self, started: float) -> None:
        listed = any(state == "ok" for state in self._kinds.values())
        if listed:
            self._polled_at = self.clock().timestamp()
            metrics.LAST_POLL.set(self._polled_at)
        metrics.POLL_SECONDS.observe(self.monotonic() - started)
        if listed:
            reason = ""
        else:
            reason = "cannot list any Flink kind: " + "; ".join(f"{k}: {v}" for k, v in self._kinds.items())
        metrics.AGENT_READY.set(0 if reason else 1)
        if self.on_health is not None:
            self.on_health(Health(not reason, reason, self._polled_at, dict(self._kinds)))

    def _now(self) -> str:
        return copies.format_time(self.clock())


def with_children(found: list[Copy]) -> list[Copy]:
    """A held FlinkBlueGreenDeployment knows the children the operator created for it (its release
    starts them)."""
    children: dict[Workload, list[str]] = {}
    for copy in found:
        if copy.target is not None:
            children.setdefault(copy.workload, []).append(copy.target.name)
    return [
        replace(c, children=tuple(sorted(children.get(c.workload, ()))))
        if c.workload.kind == BLUE_GREEN and c.target is None
        else c
        for c in found
    ]


_HEARTBEATING = (CopyState.RUNNING, CopyState.STOPPING, CopyState.STEPPED_DOWN)
_URGENT = (CopyState.STOPPING, CopyState.HELD)


def _list_problem(kind: str, failure: ApiFailure) -> str:
    if failure.status == 404:
        return f"{kind} is not served here (404: is its CRD installed?); its jobs are not fenced"
    if failure.status in (401, 403):
        return f"not allowed to list {PLURALS[kind]} ({failure.status}: RBAC?); its jobs are not fenced"
    return f"listing {PLURALS[kind]} failed: {failure.message}"


def _stop_done(copy: Copy, body: Mapping[str, Any]) -> None:
    metrics.STOPPED.inc()
    log.warning(
        "stale copy asked to stop; it is acknowledged once its operator reports it stopped",
        extra={"fields": {"object": str(copy.workload), "fenced-by": _annotation(body, "fenced-by")}},
    )


def _step_down_done(copy: Copy, body: Mapping[str, Any]) -> None:
    metrics.STEP_DOWNS.inc()
    log.error(
        "copy stepped down: its heartbeat could not be renewed in time",
        extra={"fields": {"object": str(copy.workload), "reason": _annotation(body, "stepped-down")}},
    )


def _superseded_done(copy: Copy, body: Mapping[str, Any]) -> None:
    metrics.SUPERSEDED.inc()


def _annotation(body: Mapping[str, Any], suffix: str) -> str:
    annotations = body.get("metadata", {}).get("annotations", {})
    return next((str(v) for k, v in annotations.items() if k.endswith("/" + suffix)), "")
