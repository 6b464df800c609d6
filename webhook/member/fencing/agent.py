"""The fencing agent: one loop per member cluster, beside the webhook.

Every poll it lists the cluster's FlinkDeployments and FlinkSessionJobs and, for each, reads its
ownership records before doing anything else (so a cluster back from an outage stops a stale copy
before it renews a heartbeat for it):

- a running copy: stopped when a newer fence names another cluster, else its heartbeat is renewed;
- a held restore: released once nobody else runs a copy, from the newest restorable state then;
- a fenced copy: kept stopped, its acknowledgement written.

Each step is one log line; errors of one object never stop the others or the loop.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from webhook.common.contract import FENCED
from webhook.common.kubeclient import ApiFailure
from webhook.common.paths import StoragePath
from webhook.member.fencing import copies, metrics
from webhook.member.fencing.copies import Copy, CopyState
from webhook.member.fencing.protocol import HoldOutcome, ReleaseCause, judge_copy, judge_hold
from webhook.member.fencing.records import (
    FencingStore,
    Listing,
    Workload,
    ack_name,
    fence_body,
    fence_name,
    heartbeat_name,
)
from webhook.member.policy import FencingStorageError, RestorePolicy
from webhook.member.restore import (
    RestoreOutcome,
    SnapshotQuery,
    Snapshots,
    StorageError,
    decide_restore,
)
from webhook.member.storage import CheckpointStorage, Deadline

log = logging.getLogger(__name__)


class MemberApi(Protocol):
    def list_all(self) -> list[Mapping[str, Any]] | ApiFailure: ...

    def patch(
        self, kind: str, namespace: str, name: str, body: Mapping[str, Any]
    ) -> Mapping[str, Any] | ApiFailure: ...


@dataclass(frozen=True)
class Step:
    """What the agent did with one object in one poll (the log line, and what tests read)."""

    workload: Workload
    action: str  # heartbeat | stopped | held | released | superseded | fenced | skipped | error
    detail: str = ""


class FencingAgent:
    def __init__(
        self,
        cluster: str,
        policy: RestorePolicy,
        api: MemberApi,
        storage: CheckpointStorage,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        workers: int = 8,
    ) -> None:
        self.cluster = cluster
        self.policy = policy
        self.api = api
        self.storage = storage
        self.store = FencingStore(storage)
        self.clock = clock
        self.workers = workers
        self._beating: dict[Workload, StoragePath] = {}
        self._clocks: dict[StoragePath, datetime] = {}  # storage time per storage, once per poll
        self._lock = threading.Lock()  # both maps are shared by the poll's worker threads

    def run(self, stop: threading.Event) -> None:
        log.info("fencing agent started", extra={"fields": {"cluster": self.cluster}})
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # one bad poll must not end fencing for the cluster
                log.exception("fencing poll failed")
            stop.wait(self.policy.fencing.poll_seconds)

    def tick(self) -> list[Step]:
        listed = self.api.list_all()
        if isinstance(listed, ApiFailure):
            metrics.API_ERRORS.labels("list").inc()
            log.warning(
                "fencing agent cannot list Flink objects; heartbeats lapse until it can",
                extra={"fields": {"error": listed.message}},
            )
            return []
        found = [copies.read_copy(obj, self.policy) for obj in listed]
        with self._lock:
            self._clocks.clear()
        with concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="fencing") as pool:
            steps = list(pool.map(self._step, found))
        self._forget_stopped({c.workload for c in found if c.state is CopyState.RUNNING})
        metrics.HELD.set(sum(1 for s in steps if s.action == "held"))
        metrics.LAST_POLL.set(self.clock().timestamp())
        for step in steps:
            if step.action not in ("heartbeat", "skipped"):
                log.info(
                    "fencing %s",
                    step.action,
                    extra={"fields": {"object": str(step.workload), "detail": step.detail}},
                )
        return steps

    def _step(self, copy: Copy) -> Step:
        if copy.folder is None or copy.clock is None or copy.state is CopyState.IDLE:
            return Step(copy.workload, "skipped", "no checkpoint directory" if copy.folder is None else "")
        try:
            if copy.state is CopyState.RUNNING:
                return self._running(copy, copy.folder)
            if copy.state is CopyState.HELD:
                return self._held(copy, copy.folder, copy.clock)
            return self._fenced(copy, copy.folder)
        except StorageError as exc:
            metrics.STORAGE_ERRORS.labels("agent").inc()
            if copy.state is CopyState.HELD:
                return self._held_storage_error(copy, str(exc))
            return Step(copy.workload, "error", f"storage: {exc}")

    # --- a running copy ----------------------------------------------------------------------------
    def _running(self, copy: Copy, folder: StoragePath) -> Step:
        listing = self.store.read(folder)
        verdict = judge_copy(self.cluster, copy.epoch, listing.ownership)
        if verdict.stop and verdict.fence is not None:
            fence = verdict.fence
            answer = self._patch(copy, copies.stop_patch(copy, fence, self.policy, self._now()))
            if answer is not None:
                self._beat(copy, folder)  # it still runs: say so, the new copy keeps waiting
                return Step(copy.workload, "error", f"cannot stop stale copy: {answer}")
            self._acknowledge(copy.workload, folder, fence.epoch)
            metrics.STOPPED.inc()
            log.warning(
                "stale copy stopped",
                extra={"fields": {"object": str(copy.workload), "owner": fence.owner, "epoch": fence.epoch}},
            )
            return Step(copy.workload, "stopped", f"fence of {fence.owner} at epoch {fence.epoch}")
        if copy.epoch and copies.restored(copy.resource, self.policy):
            self._ensure_fence(copy, folder, listing)
        self._beat(copy, folder)
        return Step(copy.workload, "heartbeat")

    def _beat(self, copy: Copy, folder: StoragePath) -> None:
        body = {
            "cluster": self.cluster,
            "epoch": copy.epoch,
            "jobId": copy.job_id,
            "workload": str(copy.workload),
            "written": self._now(),
        }
        self.store.write(folder, heartbeat_name(self.cluster), body)
        with self._lock:
            self._beating[copy.workload] = folder

    def _acknowledge(self, workload: Workload, folder: StoragePath, epoch: int) -> None:
        self.store.write(folder, ack_name(epoch, self.cluster), {"cluster": self.cluster, "epoch": epoch})
        self.store.remove(folder, heartbeat_name(self.cluster))
        with self._lock:
            self._beating.pop(workload, None)

    def _ensure_fence(self, copy: Copy, folder: StoragePath, listing: Listing) -> Listing:
        """The fence of this copy's restore, written if the webhook could not (storage was down then)."""
        if listing.ownership.fence(self.cluster, copy.epoch) is not None:
            return listing
        body = fence_body(copy.workload, self.cluster, copy.epoch, self._now())
        self.store.write(folder, fence_name(copy.epoch, self.cluster), body)
        metrics.FENCES.inc()
        return self.store.read(folder)

    def _forget_stopped(self, running: set[Workload]) -> None:
        """A copy that no longer runs here (deleted, suspended by hand) stops heartbeating at once."""
        for workload in [w for w in self._beating if w not in running]:
            folder = self._beating.pop(workload)
            try:
                self.store.remove(folder, heartbeat_name(self.cluster))
            except StorageError as exc:
                log.warning(
                    "cannot remove heartbeat", extra={"fields": {"object": str(workload), "error": str(exc)}}
                )

    # --- a held restore ----------------------------------------------------------------------------
    def _storage_now(self, clock: StoragePath) -> datetime:
        """The storage's time, learnt once per poll per storage before any listing of this poll: ages
        measured from it are never longer than they are (a later "now" could only release sooner)."""
        with self._lock:
            known = self._clocks.get(clock)
        if known is None:
            known = self.store.clock(clock, self.cluster)
            with self._lock:
                known = self._clocks.setdefault(clock, known)
        return known

    def _held(self, copy: Copy, folder: StoragePath, clock: StoragePath) -> Step:
        now = self._storage_now(clock)
        listing = self._ensure_fence(copy, folder, self.store.read(folder))
        lease = self.policy.fencing.lease_seconds
        verdict = judge_hold(self.cluster, copy.epoch, listing.ownership, now, lease, copy.manual_release)
        if verdict.outcome is HoldOutcome.SUPERSEDED and verdict.superseded_by is not None:
            newer = verdict.superseded_by
            answer = self._patch(copy, copies.superseded_patch(newer, self.policy, self._now()))
            if answer is not None:
                return Step(copy.workload, "error", answer)
            metrics.SUPERSEDED.inc()
            return Step(copy.workload, "superseded", f"restore on {newer.owner} at epoch {newer.epoch}")
        if verdict.outcome is HoldOutcome.HOLD:
            text = copies.hold_text(verdict, copy.epoch, self.clock())
            subject = copies.hold_subject(tuple(w.cluster for w in verdict.waiting), copy.epoch)
            if not copy.hold.startswith(subject + ";"):
                answer = self._patch(copy, copies.hold_patch(text, self.policy))
                if answer is not None:
                    return Step(copy.workload, "error", answer)
            return Step(copy.workload, "held", text)
        return self._release(copy, verdict.cause or ReleaseCause.NO_HEARTBEAT)

    def _held_storage_error(self, copy: Copy, problem: str) -> Step:
        if self.policy.fencing.on_storage_error is FencingStorageError.PROCEED:
            return self._release(copy, ReleaseCause.STORAGE_ERROR)
        text = copies.storage_text(copy.epoch, problem)
        if text != copy.hold:
            self._patch(copy, copies.hold_patch(text, self.policy))
        return Step(copy.workload, "held", text)

    def _release(self, copy: Copy, cause: ReleaseCause) -> Step:
        try:
            path = self._newest_path(copy)
        except StorageError as exc:
            if cause is not ReleaseCause.STORAGE_ERROR:
                metrics.STORAGE_ERRORS.labels("agent").inc()
                return self._held_storage_error(copy, f"resolving the newest checkpoint: {exc}")
            path = ""
        answer = self._patch(copy, copies.release_patch(path, cause, self.policy, self._now()))
        if answer is not None:
            return Step(copy.workload, "error", answer)
        metrics.RELEASES.labels(cause.value).inc()
        log.warning(
            "held restore released",
            extra={"fields": {"object": str(copy.workload), "cause": cause.value, "path": path}},
        )
        return Step(copy.workload, "released", f"{cause.value} {path}".strip())

    def _newest_path(self, copy: Copy) -> str:
        """Resolve again: the stale copy may have completed newer checkpoints while it ran. "" keeps
        the path the webhook chose (nothing restorable now, or no failover label left to resolve by)."""
        deadline = Deadline(max(self.policy.deadline_seconds, 10.0))

        def lookup(query: SnapshotQuery) -> Snapshots:
            return self.storage.snapshots(query, deadline)

        decision = decide_restore("CREATE", copy.resource, None, self.policy, lookup)
        if decision.storage_error:
            raise StorageError(decision.reason)
        return decision.path if decision.outcome is RestoreOutcome.RESTORED else ""

    # --- a fenced copy -------------------------------------------------------------------------------
    def _fenced(self, copy: Copy, folder: StoragePath) -> Step:
        listing = self.store.read(folder)
        fence = listing.ownership.newest_fence()
        if copy.resource.state == "running" and fence is not None:  # re-applied by someone: stop it again
            answer = self._patch(copy, copies.stop_patch(copy, fence, self.policy, self._now()))
            if answer is not None:
                return Step(copy.workload, "error", answer)
            metrics.STOPPED.inc()
            return Step(copy.workload, "stopped", "fenced copy was running again")
        raw = copy.resource.labels.get(self.policy.key(FENCED), "")
        epoch = int(raw) if raw.isdigit() else 0
        beating = any(b.cluster == self.cluster for b in listing.ownership.heartbeats)
        if beating or listing.ownership.acked(self.cluster, epoch) is None:
            self._acknowledge(copy.workload, folder, epoch)  # a stop whose ack or clean-up failed
        return Step(copy.workload, "fenced")

    def _patch(self, copy: Copy, body: Mapping[str, Any]) -> str | None:
        """None on success, else the error (counted)."""
        w = copy.workload
        answer = self.api.patch(w.kind, w.namespace, w.name, body)
        if isinstance(answer, ApiFailure):
            metrics.API_ERRORS.labels("patch").inc()
            return answer.message
        return None

    def _now(self) -> str:
        return copies.format_time(self.clock())
