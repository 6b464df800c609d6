"""The member webhook's side of fencing: a failover admission writes its fence, and a restore is held
while an old copy still heartbeats.

Called by ``member/handler.py`` for a failover CREATE. The fence is written and the records listed on
their storage's lane (the agent's lanes: one hung bucket is refused at once once it has filled its lane)
*while* the checkpoint is resolved (``begin``), so fencing adds no storage round trip to the admission;
``admit`` then waits for both under the admission deadline. Because the fence is the newest record, the
decision needs no storage time (``protocol.judge_admission``). The fence's epoch is the control plane's
failover count (else the next one after the fences seen), never an ``epoch`` annotation the created object
carries (a template may hold one copied from an earlier object); the object is given the fence's. A dry
run writes nothing and holds whenever another cluster heartbeats at all. A restore the fencing agent
cannot vouch for (``vouch``: it is not polling, or cannot watch the kind) is admitted held with the
reason: nothing on this cluster could release it when safe, nor stop it once another cluster restores
the workload.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from webhook.common.flink import FlinkResource
from webhook.common.paths import StoragePath
from webhook.fencing import copies, directories, holdtexts, metrics, patches
from webhook.fencing.admitted import Admitted
from webhook.fencing.lanes import Call
from webhook.fencing.layout import format_time
from webhook.fencing.protocol import HoldOutcome, judge_admission, next_epoch
from webhook.fencing.records import FencingStore, Listing, fence_body, heartbeat_body
from webhook.policy.restore import FencingStorageError, RestorePolicy
from webhook.restore.outcome import RestoreDecision
from webhook.restore.snapshots import StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")


# Told of each heartbeat written at an admission (``member/followup.py`` looks at it again).
AdmittedSink = Callable[[FencingStore, Admitted], None]


@dataclass(frozen=True)
class Pending:
    """The fence being written and the records being listed, for one admission."""

    epoch: concurrent.futures.Future[int]  # the fence's epoch, once written (or chosen, on a dry run)
    listing: concurrent.futures.Future[Listing]
    dry_run: bool
    beat: Callable[[int], dict[str, object]]  # this cluster's heartbeat body at that epoch
    folder: StoragePath  # where the records are


class FencingGate:
    """``read_only`` (``review --cluster``): answers as the server would, writing neither fence nor
    heartbeat."""

    def __init__(
        self,
        cluster: str,
        policy: RestorePolicy,
        store: FencingStore,
        read_only: bool = False,
        vouch: Callable[[str], str | None] | None = None,
        admitted: AdmittedSink | None = None,
    ) -> None:
        """``vouch(kind)``: None when this replica's agent fences that kind now, else why not;
        ``admitted``: told of each heartbeat written at an admission (queued: looked at once the CREATE
        is persisted or refused, ``member/followup.py``)."""
        self.cluster = cluster
        self.policy = policy
        self.store = store
        self.read_only = read_only
        self.vouch = vouch
        self.admitted = admitted

    def begin(
        self, resource: FlinkResource, dry_run: bool, pool: concurrent.futures.Executor, timeout: float
    ) -> Pending | None:
        """Start writing the fence and listing the records; None when the job has no storage to fence in."""
        folder = directories.ownership_folder(resource, self.policy)
        if folder is None:
            return None
        counted = copies.counted_epoch(resource, self.policy)  # never the request's epoch
        me, workload, store = self.cluster, directories.workload_of(resource), self.store
        writes = not dry_run and not self.read_only

        def fence_body_now(epoch: int) -> dict[str, object]:
            return fence_body(workload, me, epoch, format_time(datetime.now(UTC)))

        def fence(left: float) -> int:
            # Without a failover count (Karmada's own jobId labels only) the epoch comes from the fences seen.
            epoch = counted or next_epoch(me, store.list(folder, left).ownership)
            if writes:
                store.fence(folder, epoch, fence_body_now(epoch), left)
                metrics.FENCES.inc()
            return epoch

        def beat(epoch: int) -> dict[str, object]:
            return heartbeat_body(workload, me, epoch, "", format_time(datetime.now(UTC)))

        if counted:
            epoch: concurrent.futures.Future[int] = store.lanes.submit(
                Call(
                    folder,
                    f"writing the fence in {folder}",
                    lambda left: _fenced(store, folder, counted, fence_body_now, writes, left),
                ),
                timeout,
            )
        else:
            epoch = pool.submit(fence, timeout)
        listing = store.lanes.submit(store.list_call(folder), timeout)
        return Pending(epoch, listing, dry_run, beat, folder)

    def admit(
        self, resource: FlinkResource, decision: RestoreDecision, pending: Pending, timeout: float
    ) -> RestoreDecision:
        """The restore as decided, held when an old copy may still run. A restore that starts at once
        heartbeats from its admission on: a failover that follows before the agent's first poll must
        wait for this copy too (without it, both would start)."""
        expires = time.monotonic() + timeout
        unvouched = None if self.read_only or self.vouch is None else self.vouch(resource.kind)
        try:
            epoch = _result(pending.epoch, expires - time.monotonic())
            listing = _result(pending.listing, expires - time.monotonic())
            judgement = judge_admission(
                self.cluster, epoch, listing.ownership, self.policy.fencing.lease_seconds
            )
            starts = judgement.outcome is HoldOutcome.RELEASE and unvouched is None
            if starts and not pending.dry_run and not self.read_only:
                left, body = expires - time.monotonic(), pending.beat(epoch)
                _result(self.store.lanes.submit(self.store.beat_call(pending.folder, body), left), left)
                if self.admitted is not None and not resource.blue_green_parent:  # a child's is its parent's
                    self.admitted(self.store, _admitted(resource, pending.folder, body))
        except StorageError as exc:
            metrics.STORAGE_ERRORS.labels("admission").inc()
            epoch = copies.counted_epoch(resource, self.policy) or 1
            if self.policy.fencing.on_storage_error is FencingStorageError.PROCEED:
                log.warning("fencing records unusable, restoring without a hold: %s", exc)
                return patches.fenced_without_hold(decision, epoch, self.policy)
            metrics.HOLDS.inc()
            text = holdtexts.storage_text(epoch, str(exc))
            return patches.held(decision, text, epoch, self.policy, resource)
        if unvouched is not None and judgement.outcome is not HoldOutcome.SUPERSEDED:
            text = holdtexts.unvouched_text(epoch, unvouched)
            if not pending.dry_run:
                metrics.HOLDS.inc()
                log.error(
                    "restore held: the fencing agent cannot vouch for it",
                    extra={"fields": {"object": f"{resource.namespace}/{resource.name}", "hold": text}},
                )
            return patches.held(decision, text, epoch, self.policy, resource)
        if judgement.outcome is HoldOutcome.RELEASE:
            return patches.fenced_without_hold(decision, epoch, self.policy)
        if judgement.outcome is HoldOutcome.SUPERSEDED and judgement.superseded_by is not None:
            newer = judgement.superseded_by
            text = f"epoch {epoch}: superseded by the restore on {newer.owner} at epoch {newer.epoch}"
        elif pending.dry_run:
            text = holdtexts.unknown_age_text(tuple(w.cluster for w in judgement.waiting), epoch)
        else:
            text = holdtexts.hold_text(judgement, epoch, datetime.now(UTC))
        if not pending.dry_run and not self.read_only:
            metrics.HOLDS.inc()
            log.warning(
                "restore held until the old copy stops",
                extra={"fields": {"object": f"{resource.namespace}/{resource.name}", "hold": text}},
            )
        return patches.held(decision, text, epoch, self.policy, resource)


def _fenced(
    store: FencingStore,
    folder: StoragePath,
    epoch: int,
    body: Callable[[int], dict[str, object]],
    writes: bool,
    left: float,
) -> int:
    """The fence of a restore whose failover count is known (the usual case): one write on its lane."""
    if writes:
        store.fence_call(folder, epoch, body(epoch)).fn(left)
        metrics.FENCES.inc()
    return epoch


def _admitted(resource: FlinkResource, folder: StoragePath, body: dict[str, object]) -> Admitted:
    return Admitted(resource.kind, resource.namespace, resource.name, folder, body)


def _result(future: concurrent.futures.Future[T], timeout: float) -> T:
    try:
        return future.result(timeout=max(timeout, 0.001))
    except concurrent.futures.TimeoutError:
        raise StorageError("ownership records did not answer within the admission deadline") from None
    except StorageError:
        raise
    except Exception as exc:  # a backend failing in an unexpected way is still a storage error
        raise StorageError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
