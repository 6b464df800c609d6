"""The member webhook's side of fencing: a failover admission writes its fence, and a restore is held
while an old copy still heartbeats.

Called by ``member/handler.py`` for a failover CREATE. The fence is written and the records listed on
the handler's pool *while* the checkpoint is resolved (``begin``), so fencing adds no storage round
trip to the admission; ``admit`` then waits for both under the admission deadline. Because the fence
is the newest record, the decision needs no storage time (``protocol.judge_admission``). A dry run
writes nothing and holds whenever another cluster heartbeats at all.
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
from webhook.member.fencing import copies, metrics
from webhook.member.fencing.protocol import HoldOutcome, judge_admission, next_epoch
from webhook.member.fencing.records import FencingStore, Listing, fence_body
from webhook.member.policy import FencingStorageError, RestorePolicy
from webhook.member.restore import RestoreDecision, StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Pending:
    """The fence being written and the records being listed, for one admission."""

    epoch: concurrent.futures.Future[int]  # the fence's epoch, once written (or chosen, on a dry run)
    listing: concurrent.futures.Future[Listing]
    dry_run: bool
    beat: Callable[[], concurrent.futures.Future[None]]  # write this cluster's heartbeat for the restore


class FencingGate:
    """``read_only`` (``review --cluster``): answers as the server would, writing neither fence nor
    heartbeat."""

    def __init__(
        self, cluster: str, policy: RestorePolicy, store: FencingStore, read_only: bool = False
    ) -> None:
        self.cluster = cluster
        self.policy = policy
        self.store = store
        self.read_only = read_only

    def begin(
        self, resource: FlinkResource, dry_run: bool, pool: concurrent.futures.Executor
    ) -> Pending | None:
        """Start writing the fence and listing the records; None when the job has no storage to fence in."""
        folder = copies.ownership_folder(resource, self.policy)
        if folder is None:
            return None
        counted = copies.epoch_of(resource, self.policy)
        me, workload = self.cluster, copies.workload_of(resource)

        def fence() -> int:
            # Without a failover count (Karmada's own jobId labels only) the epoch comes from the fences seen.
            epoch = counted or next_epoch(me, self.store.list(folder).ownership)
            if not dry_run and not self.read_only:
                body = fence_body(workload, me, epoch, copies.format_time(datetime.now(UTC)))
                self.store.fence(folder, epoch, body)
                metrics.FENCES.inc()
            return epoch

        def beat() -> concurrent.futures.Future[None]:
            body = {
                "cluster": me,
                "workload": str(workload),
                "written": copies.format_time(datetime.now(UTC)),
            }
            return pool.submit(self.store.beat, folder, body)

        return Pending(pool.submit(fence), pool.submit(self.store.list, folder), dry_run, beat)

    def admit(
        self, resource: FlinkResource, decision: RestoreDecision, pending: Pending, timeout: float
    ) -> RestoreDecision:
        """The restore as decided, held when an old copy may still run. A restore that starts at once
        heartbeats from its admission on: a failover that follows before the agent's first poll must
        wait for this copy too (without it, both would start)."""
        expires = time.monotonic() + timeout
        try:
            epoch = _result(pending.epoch, expires - time.monotonic())
            listing = _result(pending.listing, expires - time.monotonic())
            verdict = judge_admission(
                self.cluster, epoch, listing.ownership, self.policy.fencing.lease_seconds
            )
            if verdict.outcome is HoldOutcome.RELEASE and not pending.dry_run and not self.read_only:
                _result(pending.beat(), expires - time.monotonic())
        except StorageError as exc:
            metrics.STORAGE_ERRORS.labels("admission").inc()
            epoch = copies.epoch_of(resource, self.policy) or 1
            if self.policy.fencing.on_storage_error is FencingStorageError.PROCEED:
                log.warning("fencing records unusable, restoring without a hold: %s", exc)
                return copies.fenced_without_hold(decision, epoch, self.policy)
            metrics.HOLDS.inc()
            return copies.held(decision, copies.storage_text(epoch, str(exc)), epoch, self.policy)
        if verdict.outcome is HoldOutcome.RELEASE:
            return copies.fenced_without_hold(decision, epoch, self.policy)
        if verdict.outcome is HoldOutcome.SUPERSEDED and verdict.superseded_by is not None:
            newer = verdict.superseded_by
            text = f"epoch {epoch}: superseded by the restore on {newer.owner} at epoch {newer.epoch}"
        elif pending.dry_run:
            text = copies.unknown_age_text(tuple(w.cluster for w in verdict.waiting), epoch)
        else:
            text = copies.hold_text(verdict, epoch, datetime.now(UTC))
        if not pending.dry_run and not self.read_only:
            metrics.HOLDS.inc()
            log.warning(
                "restore held until the old copy stops",
                extra={"fields": {"object": f"{resource.namespace}/{resource.name}", "hold": text}},
            )
        return copies.held(decision, text, epoch, self.policy)


def _result(future: concurrent.futures.Future[T], timeout: float) -> T:
    try:
        return future.result(timeout=max(timeout, 0.001))
    except concurrent.futures.TimeoutError:
        raise StorageError("ownership records did not answer within the admission deadline") from None
    except StorageError:
        raise
    except Exception as exc:  # a backend failing in an unexpected way is still a storage error
        raise StorageError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
