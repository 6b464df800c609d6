"""The member webhook's side of fencing: a restore writes its fence and is held while an old copy runs.

Called by ``member/handler.py`` for a CREATE that restores; storage I/O runs under the admission
deadline (``run``). A dry run writes nothing: it holds whenever another cluster heartbeats at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from webhook.common.flink import FlinkResource
from webhook.member.fencing import copies, metrics
from webhook.member.fencing.protocol import HoldOutcome, judge_hold, next_epoch, others_heartbeating
from webhook.member.fencing.records import FencingStore, Listing, fence_name
from webhook.member.policy import FencingStorageError, RestorePolicy
from webhook.member.restore import RestoreDecision, StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")
Bounded = Callable[[Callable[[], T]], T]  # runs storage work under the deadline; raises StorageError


class FencingGate:
    def __init__(self, cluster: str, policy: RestorePolicy, store: FencingStore) -> None:
        self.cluster = cluster
        self.policy = policy
        self.store = store

    def admit(
        self,
        resource: FlinkResource,
        decision: RestoreDecision,
        dry_run: bool,
        run: Bounded[tuple[int, Listing]],
    ) -> RestoreDecision:
        folder = copies.ownership_folder(resource, self.policy)
        if folder is None:
            return decision  # no checkpoint directory of its own: nothing both clusters could share
        counted = copies.epoch_of(resource, self.policy)
        me, lease = self.cluster, self.policy.fencing.lease_seconds

        def fence_and_list() -> tuple[int, Listing]:
            epoch = counted or next_epoch(me, self.store.read(folder).ownership)
            if not dry_run:
                self.store.write(folder, fence_name(epoch, me), _fence_body(resource, decision, me, epoch))
            return epoch, self.store.read(folder)

        try:
            epoch, listing = run(fence_and_list)
        except StorageError as exc:
            metrics.STORAGE_ERRORS.labels("admission").inc()
            epoch = counted or 1
            if self.policy.fencing.on_storage_error is FencingStorageError.PROCEED:
                log.warning("fencing records unreadable, restoring without a hold: %s", exc)
                return copies.fenced_without_hold(decision, epoch, self.policy)
            metrics.HOLDS.inc()
            return copies.held(decision, copies.storage_text(epoch, str(exc)), epoch, self.policy)
        if dry_run:
            others = others_heartbeating(me, listing.ownership, epoch)
            if not others:
                return copies.fenced_without_hold(decision, epoch, self.policy)
            return copies.held(decision, copies.unknown_age_text(others, epoch), epoch, self.policy)
        metrics.FENCES.inc()
        written = listing.ownership.fence(me, epoch)
        if (
            written is None
        ):  # written but not listed: an eventually consistent listing; hold, the agent retries
            metrics.HOLDS.inc()
            text = copies.storage_text(epoch, f"fence {fence_name(epoch, me)} not listed yet")
            return copies.held(decision, text, epoch, self.policy)
        verdict = judge_hold(me, epoch, listing.ownership, written.modified, lease)
        if verdict.outcome is HoldOutcome.RELEASE:
            return copies.fenced_without_hold(decision, epoch, self.policy)
        metrics.HOLDS.inc()
        if verdict.outcome is HoldOutcome.SUPERSEDED and verdict.superseded_by is not None:
            newer = verdict.superseded_by
            text = f"epoch {epoch}: superseded by the restore on {newer.owner} at epoch {newer.epoch}"
        else:
            text = copies.hold_text(verdict, epoch, datetime.now(UTC))
        log.warning(
            "restore held until the old copy stops",
            extra={"fields": {"object": f"{resource.namespace}/{resource.name}", "hold": text}},
        )
        return copies.held(decision, text, epoch, self.policy)


def _fence_body(resource: FlinkResource, decision: RestoreDecision, me: str, epoch: int) -> dict[str, object]:
    return {
        "owner": me,
        "epoch": epoch,
        "oldJobId": decision.job_id,
        "restoredFrom": decision.path,
        "workload": f"{resource.kind}/{resource.namespace}/{resource.name}",
        "written": copies.format_time(datetime.now(UTC)),  # this machine's clock: for people only
    }
